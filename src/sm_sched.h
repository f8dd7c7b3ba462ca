/*
** sm_sched.h -- continuous batching: many requests decoded together on one state.
**
** The scheduler owns the sequences of a state (sm_state_params.n_seq of
** them) as slots, and a queue of requests waiting for one (twice as many
** entries as slots). Each slot has its KV-cache sequence, a sampler, its
** stop strings, an sm_seq and the text generated so far. A caller submits
** requests while the queue has room and calls sm_sched_step until nothing
** is left:
**
**   sm_sched_init(&s, state, &params, &arena, &err);
**   while (more input || sm_sched_busy(s)) {
**       while (more input && sm_sched_room(s)) sm_sched_submit(s, &req, &err);
**       sm_sched_step(s, &err);
**   }
**
** A step first moves waiting requests into free slots. With a prefix cache
** (params.prefix, sm_prefix.h) a request starts from the longest prefix
** of its prompt that the cache holds, and requests go in the order that
** computes shared prefixes once: those that reuse most first, and a request
** that shares uncached blocks with a prompt started in this step waits for
** the next, when they are cached (unless it has been passed over by as
** many later requests as there are slots: nobody starves). What is left of
** a prompt (4 to the room left in the call, not ending 1 to 3 tokens past a
** multiple of max_batch) is prefilled with the other prompts of the step in
** one call; any other prompt is prefilled alone. The same call decodes one
** token for every other busy slot (sm_state_forward_many: the group's rows,
** then one row each), so the step reads the weights once; a slot that
** started in it decodes from the next step.
** A request that finishes or fails goes to the done callback with its text,
** counts (stats.n_reused: its tokens served from the cache), finish reason
** and timing (or its error), and its slot is free at once. Every request's
** text is byte for byte what sm_generate gives its prompt alone, cache or no
** cache.
**
** Memory is carved from the caller's arena at init (a measuring arena plans
** it); submit allocates only to cut an over-long prompt with truncate, step
** never. Never prints.
*/
#ifndef SM_SCHED_H
#define SM_SCHED_H

#include "sm_arena.h"
#include "sm_generate.h"
#include "sm_model.h"
#include "sm_prefix.h"
#include "sm_sampler.h"
#include "sm_tokenizer.h"

typedef struct sm_sched sm_sched;

/* The state's row_logits a scheduler's session plans (sm_state_params): the calls of an echo
   prompt (32 rows of logits: 4 MB at a vocabulary of 32,000, 19 MB at 152,000). */
#define SM_SCHED_ROW_LOGITS 32

typedef struct sm_sched_request {
    const char *prompt; /* text, tokenized at submit (not kept) */
    size_t prompt_len;
    const int32_t *ids; /* if not NULL: the prompt's tokens instead (n_ids; copied at submit) */
    size_t n_ids;
    size_t max_tokens;           /* tokens to generate at most */
    sm_sampler_params sampling;
    const char *const *stop;     /* 0..SM_STOP_MAX strings of 1..SM_STOP_MAX_BYTES bytes; copied */
    size_t n_stop;
    bool truncate; /* a prompt longer than the context keeps its last tokens (see sm_prompt_encode) */
    struct sm_gbind *grammar; /* a grammar bound to the tokenizer (sm_grammar.h) its text keeps to, or
                                 NULL; the caller's, until the request is reported */
    bool logprobs;    /* each token's log-probability (and top_logprobs alternatives) to params.token */
    int top_logprobs;
    bool echo;        /* with logprobs: the prompt's tokens go to params.token first, each with its
                         log-probability after the ones before it (the first: NAN, no alternatives;
                         OpenAI's "echo"). Such a prompt is prefilled alone in calls of up to
                         sm_state_row_logits tokens; its rows are neither taken from the prefix cache
                         nor given to it. Even with max_tokens 0. */
    void *tag;     /* the caller's; comes back with the result */
} sm_sched_request;

typedef struct sm_sched_result {
    void *tag;
    const char *error;  /* NULL, or why the request could not run (text is then empty) */
    sm_status status;   /* with error: its kind (SM_ERR_INPUT: the request's own fault) */
    const char *text;   /* generated text, valid during the callback */
    size_t len;
    sm_gen_stats stats;
    size_t n_truncated; /* prompt tokens truncate dropped */
    double t_queue;     /* seconds from submit to its slot */
} sm_sched_result;

/* Receives a finished request. A status other than SM_OK (with err set) stops
   the scheduler: submit or step returns it. */
typedef sm_status (*sm_sched_done_fn)(void *user, const sm_sched_result *r, sm_error *err);
/* Receives a request's text as it is generated (stop strings held back until they cannot match). */
typedef void (*sm_sched_piece_fn)(void *user, void *tag, const char *text, size_t len);
/* Receives a request's sampled tokens with their log-probabilities (top_logprobs >= 0). */
typedef void (*sm_sched_token_fn)(void *user, void *tag, const sm_token_info *t);

typedef struct sm_sched_params {
    sm_tokenizer *tok;
    sm_prefix *prefix;          /* a prefix cache for this state's sequences; may be NULL */
    const volatile int *cancel; /* polled between tokens and requests; may be NULL */
    sm_sched_done_fn done;
    sm_sched_piece_fn piece; /* may be NULL */
    sm_sched_token_fn token; /* may be NULL */
    void *user;
} sm_sched_params;

/*
** Carves a scheduler for state s (built with sp) from arena a. On a
** measuring arena only the size is added (s may be NULL, *out stays NULL).
** SM_ERR_NOMEM if the arena is too small.
*/
sm_status sm_sched_init(sm_sched **out, sm_state *s, const sm_state_params *sp,
                        const sm_sched_params *p, sm_arena *a, sm_error *err);

/* Requests that submit takes now (free queue entries), requests not yet reported, and of
** those the ones still waiting for a slot. */
size_t sm_sched_room(const sm_sched *s);
size_t sm_sched_busy(const sm_sched *s);
size_t sm_sched_waiting(const sm_sched *s);

/*
** Queues request r (SM_ERR_INPUT if the queue is full), tokenized and
** checked: one that cannot run (an empty or over-long prompt, bad stop
** strings) goes to done before submit returns. Returns an error only when
** the run cannot go on: done failed. Once *cancel is set, the request is
** dropped unreported.
*/
sm_status sm_sched_submit(sm_sched *s, const sm_sched_request *r, sm_error *err);

/*
** Moves waiting requests into free slots (see above) and prefills them,
** then decodes one token for every busy slot in one call. Finished
** requests (a request that ends at once too) go to done. A failed model call is returned (the run cannot go on). Once
** *cancel is set, requests in flight are left unreported: the caller stops.
*/
sm_status sm_sched_step(sm_sched *s, sm_error *err);

/*
** Ends the request whose tag is tag at once (a client went away): waiting,
** it is dropped; running, its slot is freed. Either way it goes to done
** with the error "cancelled" (status SM_ERR_CANCELLED). false if no request
** has that tag.
*/
bool sm_sched_cancel(sm_sched *s, void *tag, sm_error *err);

/* Frees what the slots made for grammars (before the arena goes); s may be NULL. */
void sm_sched_release(sm_sched *s);
/* Frees the slots' matchers of binding b (before b is freed; no request may hold it). */
void sm_sched_forget_grammar(sm_sched *s, const struct sm_gbind *b);

#endif
