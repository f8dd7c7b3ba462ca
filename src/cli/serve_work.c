/*
** serve_work.c -- the server's worker: the one thread that owns the model
** and its scheduler (sm_sched.h), and the OpenAI shapes of what it makes
** (serve.h).
**
** The worker takes requests from the inbox while the scheduler has room,
** renders a chat's template, compiles its grammar (once per text), submits
** it, and steps; the scheduler's callbacks put each request's pieces, its
** tokens' log-probabilities and then its result into the request under its
** lock and wake its connection. A request whose client went away is ended
** in the scheduler between steps. With nothing to do the worker sleeps on
** the server's condition.
*/
#include "serve.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sm_grammar.h"
#include "json_internal.h"
#include "sm_oai.h"

typedef struct {
    server *s;
    sm_chat chat;
    int32_t *ids;       /* (n_ctx) a templated conversation's tokens */
    cli_gcache *grammars;
} worker;

static worker W; /* the one worker */

sreq *sreq_new(void) {
    sreq *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    q->refs = 1;
    return q;
}

void sreq_release(sreq *q) {
    if (!q) return;
    pthread_mutex_lock(&q->mu);
    bool last = --q->refs == 0;
    pthread_mutex_unlock(&q->mu);
    if (!last) return;
    sm_batch_record_free(&q->rec);
    for (size_t i = 0; q->ch && i < q->n_ch; i++) free(q->ch[i].text), free(q->ch[i].tokens), free(q->ch[i].pre);
    free(q->ch), free(q->ids), free(q->prompt_buf);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
    free(q);
}

int serve_choices(const server *s, sreq *q, char *msg, size_t cap) {
    sm_oai_choice *c;
    sm_error err = {{0}};
    sm_status st = sm_oai_choices(&q->rec, s->r.lm->tok.n_vocab, &c, &q->n_ch, &q->n, &q->ids, &err);
    if (!st && !(q->ch = calloc(q->n_ch, sizeof *q->ch))) st = sm_error_set(&err, SM_ERR_NOMEM, "out of memory");
    for (size_t i = 0; !st && i < q->n_ch; i++) q->ch[i] = (schoice){.q = q, .in = c[i]};
    free(c);
    if (!st) return 0;
    snprintf(msg, cap, "%s", err.msg);
    snprintf(q->param, sizeof q->param, "%s", q->rec.param);
    return st == SM_ERR_INPUT ? 400 : 500;
}

/* ---- the scheduler's callbacks (the worker's thread) */

/* Appends text to c's (q->mu held). */
static void text_add(schoice *c, const char *text, size_t len) {
    if (c->len + len + 1 > c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 1024;
        while (cap < c->len + len + 1) cap *= 2;
        char *t = realloc(c->text, cap);
        if (t) c->text = t, c->cap = cap;
    }
    if (c->len + len + 1 <= c->cap) {
        memcpy(c->text + c->len, text, len);
        c->len += len;
        c->text[c->len] = '\0';
    }
}

void serve_on_piece(void *user, void *tag, const char *text, size_t len) {
    (void)user;
    schoice *c = tag;
    sreq *q = c->q;
    pthread_mutex_lock(&q->mu);
    text_add(c, text, len);
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

void serve_on_token(void *user, void *tag, const sm_token_info *t) {
    (void)user;
    schoice *c = tag;
    sreq *q = c->q;
    pthread_mutex_lock(&q->mu);
    if (c->pre && isnan(t->logprob)) { /* an echoed prompt's first token: its text goes out with its tokens */
        text_add(c, c->pre, c->pre_len);
        free(c->pre);
        c->pre = NULL;
    }
    (void)cli_toks_push(&c->tokens, &c->n_tok, &c->cap_tok, t); /* (out of memory: the token's entry is left out) */
    pthread_mutex_unlock(&q->mu);
}

/* q goes on the list of requests whose choices the worker ends (unless it is done or listed). */
static void cancel_list(server *s, sreq *q) {
    pthread_mutex_lock(&q->mu);
    bool skip = q->done || q->listed;
    q->cancelled = true;
    if (!skip) q->refs++, q->listed = true; /* the cancel list's */
    pthread_mutex_unlock(&q->mu);
    if (skip) return;
    pthread_mutex_lock(&s->mu);
    if (s->n_cancel == s->cap_cancel) {
        size_t cap = s->cap_cancel ? 2 * s->cap_cancel : 16;
        sreq **c = realloc(s->cancel, cap * sizeof *c);
        if (c) s->cancel = c, s->cap_cancel = cap;
    }
    if (s->n_cancel < s->cap_cancel) s->cancel[s->n_cancel++] = q;
    else sreq_release(q);
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/*
** Choice c is done (msg: an error of status; the request's error is its
** first choice's to fail, and the others are ended then). The last choice
** done finishes the request and lets go of the worker's hold on it.
*/
static void choice_done(server *s, schoice *c, const char *msg, int status, const sm_sched_result *r) {
    sreq *q = c->q;
    if (r && !msg) {
        pthread_mutex_lock(&s->mu);
        s->prompt_tokens += r->stats.n_prompt, s->cached_tokens += r->stats.n_reused;
        s->gen_tokens += r->stats.n_generated, s->t_prompt += r->stats.t_prefill, s->t_gen += r->stats.t_decode;
        pthread_mutex_unlock(&s->mu);
    }
    pthread_mutex_lock(&q->mu);
    if (msg && !q->error[0]) {
        snprintf(q->error, sizeof q->error, "%s", msg);
        q->status = status;
        if (strstr(msg, "context is")) q->code = "context_length_exceeded";
    }
    if (r) c->stats = r->stats;
    bool last = q->n_done + 1 == q->n_ch, failed = q->error[0] != '\0'; /* (n_done: only this thread writes it) */
    pthread_mutex_unlock(&q->mu);
    if (last) { /* counted before its answer can go out, so /metrics never lags a response */
        pthread_mutex_lock(&s->mu);
        s->n_requests++, s->n_open--;
        if (failed) s->n_failed++;
        pthread_mutex_unlock(&s->mu);
        cli_gcache_put(W.grammars, q->grammar);
        q->grammar = NULL;
    }
    pthread_mutex_lock(&q->mu);
    c->done = true;
    q->n_done++;
    if (last) q->done = true;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    if (msg && !last) cancel_list(s, q);
    if (last) sreq_release(q); /* the worker's */
}

/* q's choices not yet submitted end with msg (q may be freed by the last). */
static void end_rest(server *s, sreq *q, const char *msg, int status) {
    size_t from = q->n_submitted, to = q->n_ch;
    schoice *ch = q->ch;
    q->n_submitted = to;
    for (size_t i = from; i < to; i++) choice_done(s, &ch[i], msg, status, NULL);
}

/* c leaves the choices the scheduler has (s->mu held). */
static void unlist(server *s, schoice *c) {
    c->in_sched = false;
    for (size_t i = 0; i < s->n_running; i++)
        if (s->running[i] == c) {
            s->running[i] = s->running[--s->n_running];
            return;
        }
}

sm_status serve_on_done(void *user, const sm_sched_result *r, sm_error *err) {
    (void)err;
    server *s = user;
    schoice *c = r->tag;
    pthread_mutex_lock(&s->mu);
    unlist(s, c);
    pthread_mutex_unlock(&s->mu);
    int status = !r->error ? 200 : r->status == SM_ERR_INPUT ? 400 : r->status == SM_ERR_CANCELLED ? 499 : 500;
    choice_done(s, c, r->error, status, r);
    return SM_OK;
}

/* Templates q's conversation and compiles its grammar (the worker's thread); false: q failed (ended). */
static bool prepare(server *s, sreq *q) {
    cli_runner *r = &s->r;
    sm_error err = {{0}};
    size_t n_ids = 0;
    const sm_batch_record *rec = &q->rec;
    q->prepared = true;
    if (rec->messages) {
        if (!s->has_template) {
            end_rest(s, q, "the model has no chat template (start the server with --chat-template FILE)", 400);
            return false;
        }
        pthread_mutex_lock(&s->tok_mu);
        sm_status st = sm_chat_tokens(&W.chat, &r->lm->tok, rec->messages, W.ids, r->ls->sp.n_ctx, &n_ids, NULL,
                                      NULL, &err);
        pthread_mutex_unlock(&s->tok_mu);
        if (!st && n_ids > r->ls->sp.n_ctx) {
            snprintf(err.msg, sizeof err.msg, "the templated conversation is %zu tokens, context is %zu", n_ids,
                     r->ls->sp.n_ctx);
            st = SM_ERR_INPUT;
        }
        if (!st && !(q->ids = malloc(n_ids * sizeof *q->ids))) st = sm_error_set(&err, SM_ERR_NOMEM, "out of memory");
        if (st) {
            end_rest(s, q, err.msg, st == SM_ERR_NOMEM ? 500 : 400);
            return false;
        }
        memcpy(q->ids, W.ids, n_ids * sizeof *q->ids);
        for (size_t i = 0; i < q->n_ch; i++) q->ch[i].in.ids = q->ids, q->ch[i].in.n_ids = n_ids;
    }
    if (rec->gkind && cli_gcache_get(W.grammars, rec->gkind, rec->gtext, &q->grammar, &err)) {
        pthread_mutex_lock(&q->mu);
        snprintf(q->param, sizeof q->param, "response_format");
        pthread_mutex_unlock(&q->mu);
        end_rest(s, q, err.msg, 400);
        return false;
    }
    return true;
}

/* Submits q's next choice (the worker's thread; the scheduler has room). */
static void submit(server *s, sreq *q) {
    cli_runner *r = &s->r;
    sm_error err = {{0}};
    const sm_batch_record *rec = &q->rec;
    schoice *c = &q->ch[q->n_submitted++];
    size_t room = r->ls->sp.n_ctx; /* max_tokens is bounded by the context (the text ends there) */
    size_t max = rec->set & SM_REC_MAX_TOKENS ? (size_t)rec->max_tokens : room;
    sm_sched_request req = {.prompt = c->in.prompt, .prompt_len = c->in.prompt_len, .ids = c->in.ids,
                            .n_ids = c->in.n_ids,
                            .max_tokens = max < room ? max : room, .sampling = rec->sampling,
                            .grammar = q->grammar, .logprobs = q->logprobs, .top_logprobs = q->top_logprobs,
                            .tag = c};
    req.sampling.seed = c->in.seed;
    if (q->logprobs) /* (out of memory: serve_on_token tries again as tokens come) */
        (void)cli_toks_reserve(&c->tokens, &c->cap_tok, cli_toks_room(&c->in, rec->echo, req.max_tokens, room));
    if (rec->echo) { /* the prompt's text first: now, or with its tokens (logprobs) */
        size_t n;
        char *pre = cli_oai_echo_text(&r->lm->tok, &c->in, &n);
        if (!pre) {
            choice_done(s, c, "out of memory", 500, NULL);
            return;
        }
        pthread_mutex_lock(&q->mu);
        if (q->logprobs) c->pre = pre, c->pre_len = n;
        else text_add(c, pre, n);
        pthread_mutex_unlock(&q->mu);
        if (!q->logprobs) free(pre);
        req.echo = true;
    }
    const char *stops[SM_STOP_MAX];
    req.n_stop = rec->set & SM_REC_STOP ? rec->n_stop : s->o->n_stop;
    for (size_t i = 0; i < req.n_stop; i++) stops[i] = rec->set & SM_REC_STOP ? rec->stop[i] : s->o->stop[i];
    if (rec->messages) req.n_stop = sm_chat_add_stop(&W.chat, stops, req.n_stop);
    req.stop = stops;
    pthread_mutex_lock(&s->mu);
    s->running[s->n_running++] = c; /* (room: at most the scheduler's slots and queue) */
    c->in_sched = true;
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_lock(&s->tok_mu);
    sm_status st = sm_sched_submit(r->ls->sched, &req, &err); /* a bad prompt goes to on_done at once */
    pthread_mutex_unlock(&s->tok_mu);
    if (st) { /* the scheduler cannot take it: cannot happen with room checked */
        pthread_mutex_lock(&s->mu);
        unlist(s, c);
        pthread_mutex_unlock(&s->mu);
        choice_done(s, c, err.msg, 500, NULL);
    }
}

static void *work(void *arg) {
    server *s = arg;
    sm_sched *sc = s->r.ls->sched;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        /* clients gone (or a choice failed): their choices end now (one being prefilled in this step's
           group: after it) */
        size_t keep = 0;
        while (s->n_cancel > keep) {
            sreq *q = s->cancel[keep];
            pthread_mutex_unlock(&s->mu);
            bool again = false;
            for (size_t i = 0; i < q->n_submitted; i++) {
                sm_error err = {{0}};
                schoice *c = &q->ch[i];
                if (c->in_sched && !sm_sched_cancel(sc, c, &err) && c->in_sched) again = true; /* try after the step */
            }
            pthread_mutex_lock(&s->mu);
            if (again) {
                keep++;
                continue;
            }
            s->cancel[keep] = s->cancel[--s->n_cancel];
            pthread_mutex_unlock(&s->mu);
            sreq_release(q); /* the cancel list's */
            pthread_mutex_lock(&s->mu);
        }
        if (s->stopping) { /* everything in flight and waiting is cancelled */
            while (s->head) {
                sreq *q = s->head;
                s->head = q->next, s->n_inbox--;
                if (!s->head) s->tail = NULL;
                pthread_mutex_unlock(&s->mu);
                end_rest(s, q, "the server is stopping", 503);
                pthread_mutex_lock(&s->mu);
            }
            if (s->n_running == 0) break;
        }
        /* the inbox: its first request's choices go in while the scheduler has room */
        while (s->head && !s->stopping) {
            sreq *q = s->head;
            pthread_mutex_unlock(&s->mu);
            pthread_mutex_lock(&q->mu);
            bool gone = q->cancelled;
            q->refs++; /* held here: its last choice may end below */
            pthread_mutex_unlock(&q->mu);
            bool more = false;
            if (gone) end_rest(s, q, "cancelled", 499);
            else if (q->prepared || prepare(s, q)) {
                while (q->n_submitted < q->n_ch && sm_sched_room(sc)) submit(s, q);
                more = q->n_submitted < q->n_ch;
            }
            pthread_mutex_lock(&s->mu);
            if (!more) { /* all its choices are in the scheduler, or ended */
                s->head = q->next, s->n_inbox--;
                if (!s->head) s->tail = NULL;
            }
            pthread_mutex_unlock(&s->mu);
            sreq_release(q);
            pthread_mutex_lock(&s->mu);
            if (more) break; /* the rest after a step */
        }
        s->n_sched_wait = sm_sched_waiting(sc); /* for /metrics, which cannot look into the scheduler */
        if (s->stopping && s->n_running) { /* cancel what runs, then stop */
            schoice *q = s->running[0];
            pthread_mutex_unlock(&s->mu);
            sm_error err = {{0}};
            if (!sm_sched_cancel(sc, q, &err)) sm_sched_step(sc, &err); /* (in this step's group: after it) */
            pthread_mutex_lock(&s->mu);
            continue;
        }
        if (!sm_sched_busy(sc)) {
            if (!s->head && !s->n_cancel && !s->stopping) pthread_cond_wait(&s->cv, &s->mu);
            continue;
        }
        pthread_mutex_unlock(&s->mu);
        sm_error err = {{0}};
        sm_status st = sm_sched_step(sc, &err);
        if (st && !s->stopping) fprintf(stderr, "smallmind: serve: %s\n", err.msg);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int serve_work_start(server *s) {
    W = (worker){.s = s};
    cli_runner *r = &s->r;
    sm_error err = {{0}};
    if (!cli_chat_load(s->o, sm_model_config(r->lm->model), &r->lm->tok, &W.chat, &err)) s->has_template = true;
    W.ids = malloc(r->ls->sp.n_ctx * sizeof *W.ids);
    W.grammars = cli_gcache_new(&r->lm->tok, r->ls->sched);
    s->running = calloc(3 * r->ls->sp.n_seq + 4, sizeof *s->running);
    if (!W.ids || !W.grammars || !s->running) return cli_data_error("out of memory for the server");
    if (pthread_create(&s->worker, NULL, work, s)) return cli_data_error("cannot start the server's worker");
    return 0;
}

void serve_work_stop(server *s) {
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->worker, NULL);
    sm_chat_free(&W.chat);
    cli_gcache_free(W.grammars);
    free(W.ids);
    free(s->running);
    free(s->cancel);
}

bool serve_submit(server *s, sreq *q) {
    pthread_mutex_lock(&s->mu);
    /* those not yet done, beyond the slots, wait (in the inbox or in the scheduler) */
    bool ok = !s->stopping && s->n_open < s->queue_max + s->r.ls->sp.n_seq;
    if (ok) {
        q->refs++; /* the worker's */
        q->next = NULL;
        if (s->tail) s->tail->next = q;
        else s->head = q;
        s->tail = q, s->n_inbox++, s->n_open++;
        pthread_cond_signal(&s->cv);
    } else {
        s->n_rejected++;
    }
    pthread_mutex_unlock(&s->mu);
    return ok;
}

void serve_cancel(server *s, sreq *q) {
    cancel_list(s, q);
}

/* ---- the OpenAI shapes */

static void json_str(FILE *f, const char *s, size_t n) {
    fputc('"', f);
    cli_json_string(f, (const unsigned char *)s, n);
    fputc('"', f);
}

char *serve_error_json(const char *msg, const char *type, const char *param, const char *code, size_t *len) {
    char *out = NULL;
    FILE *f = open_memstream(&out, len);
    if (!f) return NULL;
    cli_oai_error(f, msg, type, param, code);
    fputc('\n', f);
    fclose(f);
    return out;
}

/* The request's "usage" object. */
static void usage_json(FILE *f, const sreq *q) {
    sm_gen_stats sum = {0};
    for (size_t i = 0; i < q->n_ch; i++) cli_oai_usage_add(&sum, &q->ch[i].stats, i % q->n == 0);
    cli_oai_usage(f, &sum);
}

char *serve_body(const server *s, sreq *q, size_t *len) {
    if (q->error[0]) {
        const char *type = q->status >= 500 ? "server_error" : "invalid_request_error";
        return serve_error_json(q->error, type, q->param[0] ? q->param : NULL, q->code, len);
    }
    char *out = NULL;
    FILE *f = open_memstream(&out, len);
    if (!f) return NULL;
    bool chat = q->rec.kind == SM_REC_OAI_CHAT;
    fprintf(f, "{\"id\": \"%s\", \"object\": \"%s\", \"created\": %lld, \"model\": ", q->id,
            chat ? "chat.completion" : "text_completion", q->created);
    json_str(f, s->model_name, strlen(s->model_name));
    fputs(", \"choices\": [", f);
    for (size_t i = 0; i < q->n_ch; i++) {
        const schoice *c = &q->ch[i];
        fprintf(f, "%s{\"index\": %zu, ", i ? ", " : "", i);
        if (chat) fputs("\"message\": {\"role\": \"assistant\", \"content\": ", f);
        else fputs("\"text\": ", f);
        json_str(f, c->text ? c->text : "", c->len);
        if (chat) fputs(", \"refusal\": null}", f);
        fputs(", \"logprobs\": ", f);
        if (q->logprobs) cli_oai_logprobs(f, &s->r.lm->tok, chat, c->tokens, 0, c->n_tok);
        else fputs("null", f);
        fprintf(f, ", \"finish_reason\": \"%s\"}", sm_oai_finish(c->stats.finish));
    }
    fputs("], ", f);
    usage_json(f, q);
    fprintf(f, ", \"system_fingerprint\": \"smallmind-%s\"}\n", SM_VERSION);
    fclose(f);
    return out;
}

/* One "data: {chunk}\n\n" event of choice i: a delta of text (and its tokens' logprobs), or its finish. */
static void chunk(const server *s, FILE *f, sreq *q, size_t i, const char *text, size_t n, const char *finish,
                  size_t tok_from, size_t tok_to) {
    schoice *c = &q->ch[i];
    bool chat = q->rec.kind == SM_REC_OAI_CHAT;
    fprintf(f, "data: {\"id\": \"%s\", \"object\": \"%s\", \"created\": %lld, \"model\": ", q->id,
            chat ? "chat.completion.chunk" : "text_completion", q->created);
    json_str(f, s->model_name, strlen(s->model_name));
    fprintf(f, ", \"system_fingerprint\": \"smallmind-%s\", \"choices\": [{\"index\": %zu, ", SM_VERSION, i);
    if (chat) {
        fputs("\"delta\": {", f);
        if (!c->started) fputs("\"role\": \"assistant\", ", f);
        if (!finish || n) {
            fputs("\"content\": ", f);
            json_str(f, text, n);
        }
        fputs("}", f);
    } else {
        fputs("\"text\": ", f);
        json_str(f, text, n);
    }
    c->started = true;
    fputs(", \"logprobs\": ", f);
    if (q->logprobs && tok_to > tok_from) cli_oai_logprobs(f, &s->r.lm->tok, q->rec.kind == SM_REC_OAI_CHAT, c->tokens, tok_from, tok_to);
    else fputs("null", f);
    if (finish) fprintf(f, ", \"finish_reason\": \"%s\"}]", finish);
    else fputs(", \"finish_reason\": null}]", f);
    if (q->include_usage) fputs(", \"usage\": null", f);
    fputs("}\n\n", f);
}

bool serve_has_more(const sreq *q) {
    if (q->done || q->error[0]) return q->done; /* (a choice failed: the error once the others have ended) */
    for (size_t i = 0; i < q->n_ch; i++) {
        const schoice *c = &q->ch[i];
        if (c->done ? !c->finish_sent : sm_utf8_complete((const unsigned char *)c->text, c->len) > c->sent)
            return true; /* (what serve_chunks would send: whole characters, then the finish) */
    }
    return false;
}

bool serve_has_sent(const sreq *q) {
    for (size_t i = 0; i < q->n_ch; i++)
        if (q->ch[i].started) return true;
    return false;
}

char *serve_chunks(const server *s, sreq *q, size_t *len, bool *end) {
    *end = false;
    char *out = NULL;
    FILE *f = open_memstream(&out, len);
    if (!f) return NULL;
    if (q->done && q->error[0]) { /* an error in the stream: OpenAI's error object as an event */
        fputs("data: ", f);
        cli_oai_error(f, q->error, q->status >= 500 ? "server_error" : "invalid_request_error",
                      q->param[0] ? q->param : NULL, q->code);
        fputs("\n\ndata: [DONE]\n\n", f);
        *end = true;
    } else if (!q->error[0]) { /* (a choice failed: nothing more until the others have ended) */
        for (size_t i = 0; i < q->n_ch; i++) {
            schoice *c = &q->ch[i];
            size_t whole = c->len;
            if (!c->done) whole = sm_utf8_complete((const unsigned char *)c->text, c->len); /* no split character */
            if (whole > c->sent) {
                chunk(s, f, q, i, c->text + c->sent, whole - c->sent, NULL, c->n_tok_sent, c->n_tok);
                c->sent = whole, c->n_tok_sent = c->n_tok;
            }
            if (c->done && !c->finish_sent) {
                chunk(s, f, q, i, "", 0, sm_oai_finish(c->stats.finish), c->n_tok_sent, c->n_tok);
                c->n_tok_sent = c->n_tok, c->finish_sent = true;
            }
        }
        if (q->done) {
            if (q->include_usage) {
                bool chat = q->rec.kind == SM_REC_OAI_CHAT;
                fprintf(f, "data: {\"id\": \"%s\", \"object\": \"%s\", \"created\": %lld, \"model\": ", q->id,
                        chat ? "chat.completion.chunk" : "text_completion", q->created);
                json_str(f, s->model_name, strlen(s->model_name));
                fputs(", \"choices\": [], ", f);
                usage_json(f, q);
                fputs("}\n\n", f);
            }
            fputs("data: [DONE]\n\n", f);
            *end = true;
        }
    }
    fclose(f);
    if (*len == 0) {
        free(out);
        return NULL;
    }
    return out;
}

char *serve_metrics(server *s, size_t *len) {
    char *out = NULL;
    FILE *f = open_memstream(&out, len);
    if (!f) return NULL;
    pthread_mutex_lock(&s->mu);
    size_t busy = s->n_running > s->n_sched_wait ? s->n_running - s->n_sched_wait : 0, waiting = s->n_inbox + s->n_sched_wait;
    fprintf(f,
            "# HELP smallmind_requests_total Completions finished (successful or not).\n"
            "# TYPE smallmind_requests_total counter\nsmallmind_requests_total %llu\n"
            "# HELP smallmind_requests_failed_total Completions that ended with an error.\n"
            "# TYPE smallmind_requests_failed_total counter\nsmallmind_requests_failed_total %llu\n"
            "# HELP smallmind_requests_rejected_total Completions refused with 503 (the queue was full).\n"
            "# TYPE smallmind_requests_rejected_total counter\nsmallmind_requests_rejected_total %llu\n"
            "# HELP smallmind_prompt_tokens_total Prompt tokens of finished completions.\n"
            "# TYPE smallmind_prompt_tokens_total counter\nsmallmind_prompt_tokens_total %llu\n"
            "# HELP smallmind_prompt_tokens_cached_total Of those, served from the prefix cache (hits).\n"
            "# TYPE smallmind_prompt_tokens_cached_total counter\nsmallmind_prompt_tokens_cached_total %llu\n"
            "# HELP smallmind_tokens_generated_total Tokens generated.\n"
            "# TYPE smallmind_tokens_generated_total counter\nsmallmind_tokens_generated_total %llu\n"
            "# HELP smallmind_prompt_seconds_total Seconds spent prefilling.\n"
            "# TYPE smallmind_prompt_seconds_total counter\nsmallmind_prompt_seconds_total %.3f\n"
            "# HELP smallmind_generation_seconds_total Seconds spent generating.\n"
            "# TYPE smallmind_generation_seconds_total counter\nsmallmind_generation_seconds_total %.3f\n"
            "# HELP smallmind_requests_processing Completions in the scheduler now.\n"
            "# TYPE smallmind_requests_processing gauge\nsmallmind_requests_processing %zu\n"
            "# HELP smallmind_requests_waiting Completions waiting in the queue now.\n"
            "# TYPE smallmind_requests_waiting gauge\nsmallmind_requests_waiting %zu\n",
            s->n_requests, s->n_failed, s->n_rejected, s->prompt_tokens, s->cached_tokens, s->gen_tokens,
            s->t_prompt, s->t_gen, busy, waiting);
    pthread_mutex_unlock(&s->mu);
    fclose(f);
    return out;
}

char *serve_tokenize(server *s, const char *body, size_t n, bool detok, size_t *len, int *status, char *err,
                     size_t cap) {
    sm_tokenizer *tok = &s->r.lm->tok;
    cJSON *root = NULL;
    sm_error e = {{0}};
    *status = 400;
    if (sm_json_parse_strict(body, n, NULL, &root, &e) || !cJSON_IsObject(root)) {
        snprintf(err, cap, "%s", e.msg[0] ? e.msg : "the request body must be a JSON object");
        cJSON_Delete(root);
        return NULL;
    }
    char *out = NULL;
    FILE *f = open_memstream(&out, len);
    if (!f) {
        cJSON_Delete(root);
        snprintf(err, cap, "out of memory");
        *status = 500;
        return NULL;
    }
    bool ok = true;
    if (detok) {
        int32_t *ids = NULL;
        char *text = NULL;
        size_t n_ids = 0, ids_cap = 0, text_cap = 0, tl = 0;
        ok = cli_json_ids(cJSON_GetObjectItemCaseSensitive(root, "tokens"), "tokens", tok->n_vocab, &ids, &ids_cap,
                          &n_ids, err, cap);
        if (ok && !(ok = cli_decode(tok, -1, ids, n_ids, &text, &text_cap, &tl))) {
            snprintf(err, cap, "out of memory");
            *status = 500;
        }
        if (ok) { /* the text whole: a character's bytes may span tokens */
            fputs("{\"content\": \"", f);
            cli_json_string(f, (const unsigned char *)text, tl);
            fputs("\"}\n", f);
        }
        free(ids), free(text);
    } else {
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(root, "content");
        const cJSON *add = cJSON_GetObjectItemCaseSensitive(root, "add_special");
        const cJSON *parse = cJSON_GetObjectItemCaseSensitive(root, "parse_special");
        const cJSON *pieces = cJSON_GetObjectItemCaseSensitive(root, "with_pieces");
        if (!cJSON_IsString(content)) ok = false, snprintf(err, cap, "\"content\" must be a string");
        if (ok && ((add && !cJSON_IsBool(add)) || (parse && !cJSON_IsBool(parse)) || (pieces && !cJSON_IsBool(pieces))))
            ok = false, snprintf(err, cap, "add_special, parse_special and with_pieces must be true or false");
        if (ok) {
            size_t tl = strlen(content->valuestring);
            unsigned how = (cJSON_IsTrue(add) ? SM_ENCODE_BOS : 0) | (!parse || cJSON_IsTrue(parse) ? SM_ENCODE_SPECIAL : 0);
            pthread_mutex_lock(&s->tok_mu);
            size_t need = sm_tokenizer_encode_as(tok, content->valuestring, tl, NULL, 0, how);
            int32_t *ids = malloc((need + 1) * sizeof *ids);
            if (ids) sm_tokenizer_encode_as(tok, content->valuestring, tl, ids, need, how);
            pthread_mutex_unlock(&s->tok_mu);
            if (!ids) {
                ok = false, snprintf(err, cap, "out of memory"), *status = 500;
            } else {
                fputs("{\"tokens\": [", f);
                for (size_t i = 0; i < need; i++) {
                    if (cJSON_IsTrue(pieces)) {
                        size_t pl;
                        const char *p = sm_tokenizer_piece(tok, ids[i], &pl);
                        fprintf(f, "%s{\"id\": %d, \"piece\": \"", i ? ", " : "", (int)ids[i]);
                        cli_json_string(f, (const unsigned char *)p, pl);
                        fputs("\"}", f);
                    } else {
                        fprintf(f, "%s%d", i ? ", " : "", (int)ids[i]);
                    }
                }
                fputs("]}\n", f);
                free(ids);
            }
        }
    }
    fclose(f);
    cJSON_Delete(root);
    if (!ok) {
        free(out);
        return NULL;
    }
    return out;
}
