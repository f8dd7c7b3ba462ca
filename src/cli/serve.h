/*
** serve.h -- what the server's two files share (private to src/cli/):
** serve.c is HTTP (libmicrohttpd, a thread per connection: routing, limits,
** the API key, bodies, responses and event streams); serve_work.c is the
** one thread that owns the model and its scheduler, and the OpenAI shapes
** of results.
**
** A request is an sreq: the connection's thread parses and checks it and
** puts it in the inbox; the worker templates and tokenizes it and submits
** its choices (each prompt's "n" completions, each its own scheduler
** entry, as many at a time as the scheduler has room for), steps the
** scheduler, and fills each choice's output (pieces as they come, then its
** result) under the sreq's lock, signalling its condition; the
** connection's thread waits on that condition and writes. A client that
** goes away marks its sreq cancelled; the worker ends its choices in the
** scheduler at once (their slots free for the next request). An sreq is
** freed by whichever side lets go of it last.
*/
#ifndef SM_SERVE_H
#define SM_SERVE_H

#include <pthread.h>

#include "cli.h"
#include "sm_batch.h"
#include "sm_oai.h"

#define SERVE_MAX_BODY ((size_t)4 << 20)   /* bytes of a request body at most */
#define SERVE_MAX_MESSAGES 2048

typedef struct sreq sreq;

/* One completion of a request (of a prompt; "n" of each): a scheduler entry, its tag. */
typedef struct {
    sreq *q;               /* its request */
    sm_oai_choice in;      /* its prompt (in the request's record or ids) and seed */
    /* what the worker gives back (under q->mu) */
    char *text;            /* the generated text so far (streamed: pieces not yet sent start at sent) */
    size_t len, cap, sent;
    sm_token_info *tokens; /* logprobs: the sampled tokens so far (n_tok, cap_tok), n_tok_sent sent */
    size_t n_tok, cap_tok, n_tok_sent;
    char *pre;             /* "echo" with logprobs: the prompt's text, added when its first token comes */
    size_t pre_len;
    bool done, started, finish_sent; /* streamed: the role (chat) and the finish sent */
    bool in_sched;         /* submitted, not yet done (the worker's own) */
    sm_gen_stats stats;
} schoice;

struct sreq {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;              /* the connection's thread and the worker */
    sreq *next;            /* in the inbox */
    /* the request (set by the connection's thread, read-only afterwards) */
    sm_batch_record rec;   /* kind: SM_REC_OAI_CHAT or SM_REC_OAI_COMPLETION */
    char *prompt_buf;
    bool stream, include_usage, logprobs;
    int top_logprobs;
    char id[48];           /* chatcmpl-... / cmpl-... */
    long long created;
    schoice *ch;           /* (n_ch) prompt p's choice j is ch[p * n + j], its index in the response */
    size_t n_ch, n;
    int32_t *ids;          /* the token prompts' ids, or the templated conversation's (the worker sets it) */
    /* the worker's */
    size_t n_submitted;
    bool prepared;
    /* what the worker gives back (under mu) */
    size_t n_done;
    bool done;             /* every choice done */
    char error[600];       /* done with an error: why, and its HTTP status (the first choice's to fail) */
    int status;
    const char *code;
    char param[64];
    bool cancelled;        /* the client went away (or a choice failed: the others end) */
    bool listed;           /* on the server's cancel list (once) */
    struct sm_gbind *grammar;
};

/* The server: the model, the worker, the inbox, counters. */
typedef struct server {
    const cli_opts *o;
    cli_runner r;
    pthread_mutex_t mu;    /* inbox, cancels, counters, stopping */
    pthread_mutex_t tok_mu; /* encoding with the tokenizer (its work buffers are shared) */
    pthread_cond_t cv;     /* the worker waits on it for work */
    sreq *head, *tail;     /* inbox */
    size_t n_inbox, queue_max;
    size_t n_open;         /* taken by serve_submit, not yet finished (a 503 past slots + queue_max) */
    sreq **cancel;         /* (cap_cancel) requests whose client went away */
    size_t n_cancel, cap_cancel;
    size_t n_running;      /* choices submitted to the scheduler, not yet done: running[0 .. n_running) */
    size_t n_sched_wait;   /* of those, still waiting in the scheduler for a slot (the worker sets it) */
    schoice **running;
    bool stopping;
    pthread_t worker;
    char model_name[SM_REC_MODEL_MAX];
    bool has_template;
    sm_sampler_params defaults;
    bool random_seed;      /* no -s: each request without a seed gets a fresh one */
    const char *api_key;   /* --api-key, else $SMALLMIND_API_KEY, else NULL */
    /* counters for /metrics */
    unsigned long long n_requests, n_failed, n_rejected, prompt_tokens, cached_tokens, gen_tokens;
    double t_prompt, t_gen;
} server;

/* ---- serve_work.c */

/* The scheduler's callbacks (the worker's thread). */
sm_status serve_on_done(void *user, const sm_sched_result *r, sm_error *err);
void serve_on_piece(void *user, void *tag, const char *text, size_t len);
void serve_on_token(void *user, void *tag, const sm_token_info *t);

/* Starts the worker on s (its runner ready). 0, or an exit code. */
int serve_work_start(server *s);
/* Stops it: requests in flight are cancelled; returns once it has ended. */
void serve_work_stop(server *s);
/* Queues q for the worker; false when the queue is full (a 503). */
bool serve_submit(server *s, sreq *q);
/* The client of q went away: the worker ends it. */
void serve_cancel(server *s, sreq *q);
/* Sets up q's choices from its record (the connection's thread, before serve_submit): 0, or an HTTP
   status with msg (q->param names the field). */
int serve_choices(const server *s, sreq *q, char *msg, size_t cap);
/* Lets go of q (the last side frees it). */
void sreq_release(sreq *q);
sreq *sreq_new(void);

/* The response body of a finished q (non-streamed): a completion, or an error object. malloc'd. */
char *serve_body(const server *s, sreq *q, size_t *len);
/* Whether q has something not yet streamed (q->mu held); whether any choice has begun streaming. */
bool serve_has_more(const sreq *q);
bool serve_has_sent(const sreq *q);
/* The event-stream bytes for what q has that was not sent yet (q->mu held); *end when the stream is
   complete ([DONE] included). malloc'd, NULL when there is nothing new. */
char *serve_chunks(const server *s, sreq *q, size_t *len, bool *end);
/* {"error": {...}} for an HTTP error. malloc'd. */
char *serve_error_json(const char *msg, const char *type, const char *param, const char *code, size_t *len);
/* GET /metrics: Prometheus text. malloc'd. */
char *serve_metrics(server *s, size_t *len);
/* POST /tokenize and /detokenize (llama-server's shapes): a body, or NULL with *status and *err set. */
char *serve_tokenize(server *s, const char *body, size_t n, bool detok, size_t *len, int *status, char *err,
                     size_t cap);

#endif
