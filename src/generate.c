/*
** generate.c -- prefill, sample, decode, stop; UTF-8-whole emission.
*/
#include "sm_generate.h"

#include "sm_grammar.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *sm_finish_str(sm_finish f) {
    switch (f) {
    case SM_FINISH_LENGTH: return "length";
    case SM_FINISH_EOS: return "eos";
    case SM_FINISH_STOP: return "stop";
    case SM_FINISH_ABORTED: return "aborted";
    case SM_FINISH_INTERRUPTED: return "interrupted";
    }
    return "?";
}

/*
** Index of the earliest stop string in the held bytes, or -1. Bytes before
** `fresh` were searched already, so a match must end at or after it.
*/
static long find_stop(const sm_pending *pd, size_t fresh) {
    long best = -1;
    for (size_t i = 0; i < pd->gp->n_stop; i++) {
        const char *st = pd->gp->stop[i];
        size_t m = strlen(st);
        for (size_t at = fresh >= m ? fresh - m + 1 : 0; m <= pd->n && at <= pd->n - m; at++)
            if (memcmp(pd->buf + at, st, m) == 0) {
                if (best < 0 || (long)at < best) best = (long)at;
                break;
            }
    }
    return best;
}

/* Emits n bytes from the front of the buffer; returns emit's verdict. */
static int drain(sm_pending *pd, size_t n) {
    if (n == 0) return 0;
    int stop = pd->emit(pd->user, (const char *)pd->buf, n);
    memmove(pd->buf, pd->buf + n, pd->n - n);
    pd->n -= n;
    return stop;
}

/*
** Appends a piece; emits what can no longer be part of a stop string, in
** whole characters. Returns 1 at a stop string, 2 if emit asked to stop.
*/
static int push(sm_pending *pd, const char *piece, size_t len) {
    while (len > 0) {
        size_t room = sizeof pd->buf - pd->n, take = len < room ? len : room, fresh = pd->n;
        memcpy(pd->buf + pd->n, piece, take);
        pd->n += take;
        piece += take;
        len -= take;
        long at = find_stop(pd, fresh);
        if (at >= 0) {
            pd->n = (size_t)at; /* drop the stop string and what follows */
            return drain(pd, pd->n) ? 2 : 1;
        }
        size_t free_ = pd->n > pd->hold ? pd->n - pd->hold : 0;
        size_t ready = sm_utf8_complete(pd->buf, free_);
        if (ready == 0 && pd->n == sizeof pd->buf) ready = free_; /* not UTF-8: pass it on */
        if (drain(pd, ready)) return 2;
    }
    return 0;
}

/* Ends q: what is held back could not become a stop string after all, so it goes out. */
static void seq_end(sm_seq *q, sm_finish f) {
    q->stats.finish = f;
    q->stats.valid = q->pd.gp->grammar && f != SM_FINISH_STOP && sm_gmatch_complete(q->pd.gp->grammar);
    q->done = true;
    if (q->pd.n && f != SM_FINISH_STOP && f != SM_FINISH_ABORTED) drain(&q->pd, q->pd.n);
    q->stats.t_decode = sm_time_now() - q->t_decode0;
}

void sm_token_logprob(const float *logits, size_t V, int32_t id, size_t k, sm_token_info *t) {
    if (k > SM_TOP_LOGPROBS_MAX) k = SM_TOP_LOGPROBS_MAX;
    *t = (sm_token_info){.id = id};
    float mx = logits[0];
    for (size_t i = 1; i < V; i++)
        if (logits[i] > mx) mx = logits[i];
    double sum = 0;
    for (size_t i = 0; i < V; i++) {
        sum += exp((double)(logits[i] - mx));
        /* the k best, kept sorted (ties: the lower id first) */
        if (k && (t->n_top < k || logits[i] > t->top_logprob[t->n_top - 1])) {
            size_t j = t->n_top < k ? t->n_top++ : k - 1;
            while (j > 0 && logits[i] > t->top_logprob[j - 1]) {
                t->top_logprob[j] = t->top_logprob[j - 1], t->top_id[j] = t->top_id[j - 1];
                j--;
            }
            t->top_logprob[j] = logits[i], t->top_id[j] = (int32_t)i;
        }
    }
    float lse = mx + (float)log(sum);
    t->logprob = logits[id] - lse;
    for (size_t j = 0; j < t->n_top; j++) t->top_logprob[j] -= lse;
}

/* The log-probability of next under logits (the tokenizer's ids) and the best alternatives, to on_token. */
static void token_info(const sm_seq *q, const float *logits, int32_t next) {
    const sm_gen_params *gp = q->pd.gp;
    sm_token_info t;
    sm_token_logprob(logits, (size_t)q->tok->n_vocab, next, (size_t)gp->top_logprobs, &t);
    gp->on_token(gp->token_user, &t);
}

/*
** Takes token id as generated (sampled, or forced by the grammar): the
** grammar's state, the sampler's history, the ids and the text. Returns
** true when q ended with it (a stop string, the grammar's end, max_tokens,
** the context).
*/
static bool take(sm_seq *q, int32_t id) {
    const sm_gen_params *gp = q->pd.gp;
    q->stats.n_unfed = q->n_next + 1; /* if it ends here: id and those taken with it */
    sm_sampler_accept(q->smp, id);
    if (gp->ids && q->stats.n_generated < gp->ids_cap) gp->ids[q->stats.n_generated] = id;
    q->stats.n_generated++;
    size_t len;
    const char *piece = sm_tokenizer_piece_after(q->tok, q->prev, id, &len);
    q->prev = id;
    int verdict = push(&q->pd, piece, len);
    if (verdict) {
        seq_end(q, verdict == 1 ? SM_FINISH_STOP : SM_FINISH_ABORTED);
        return true;
    }
    if (gp->grammar && !sm_gmatch_can_continue(gp->grammar)) { /* the sentence is whole and can go no further */
        seq_end(q, SM_FINISH_EOS);
        return true;
    }
    if (q->stats.n_generated == gp->max_tokens) {
        seq_end(q, SM_FINISH_LENGTH);
        return true;
    }
    if (q->stats.n_prompt + q->stats.n_generated - 1 == q->n_ctx) { /* no position for it */
        q->stats.context_full = true;
        seq_end(q, SM_FINISH_LENGTH);
        return true;
    }
    return false;
}

sm_status sm_seq_accept(sm_seq *q, const float *logits, sm_error *err) {
    const sm_gen_params *gp = q->pd.gp;
    q->stats.n_unfed = 0; /* these logits came from the last tokens taken */
    if (gp->cancel && *gp->cancel) {
        seq_end(q, SM_FINISH_INTERRUPTED);
        return SM_OK;
    }
    int32_t next;
    sm_gmatch *gm = gp->grammar;
    const uint64_t *allow = gm ? sm_gmatch_mask(gm, q->prev) : NULL;
    sm_status sst = sm_sampler_sample_masked(q->smp, logits, allow, &next);
    if (sst == SM_ERR_INPUT) { /* the grammar allows no token: it is complete (and no end token), or stuck */
        if (sm_gmatch_complete(gm)) {
            seq_end(q, SM_FINISH_EOS);
            q->stats.valid = true;
            return SM_OK;
        }
        q->done = true;
        q->stats.t_decode = sm_time_now() - q->t_decode0;
        return sm_error_set(err, SM_ERR_INPUT,
                            "the grammar allows no token of this vocabulary after %zu generated tokens",
                            q->stats.n_generated);
    }
    if (sst != SM_OK) {
        q->done = true;
        q->stats.t_decode = sm_time_now() - q->t_decode0;
        return sm_error_set(err, SM_ERR_RUNTIME,
                            "the model produced NaN or infinite logits at position %zu; "
                            "stopping (check the weights)",
                            q->stats.n_prompt + q->stats.n_generated);
    }
    if (sm_tokenizer_is_end(q->tok, next) || next == q->tok->bos) {
        seq_end(q, SM_FINISH_EOS);
        return SM_OK;
    }
    if (gp->on_token && gp->logprobs) token_info(q, logits, next);
    if (gm && sm_gmatch_accept(gm, q->prev, next, err)) { /* cannot be: the mask allowed it */
        q->done = true;
        return SM_ERR_RUNTIME;
    }
    q->n_next = 0;
    if (take(q, next)) return SM_OK;
    q->next[q->n_next++] = next;
    if (!gm || gp->logprobs) return SM_OK; /* (a forced token has no log-probability to report) */
    /* the tokens the grammar forces after it, into next[1..]: fed with it in one call, none sampled */
    size_t pos = sm_seq_pos(q), cap = SM_SEQ_RUN - 1;
    if (cap > gp->max_tokens - q->stats.n_generated) cap = gp->max_tokens - q->stats.n_generated;
    if (cap > q->n_ctx - 1 - pos) cap = q->n_ctx - 1 - pos;
    for (size_t n = sm_gmatch_forced(gm, next, q->next + 1, cap); q->n_next <= n; q->n_next++) {
        int32_t id = q->next[q->n_next];
        if (sm_gmatch_accept(gm, q->prev, id, err)) { /* cannot be: the grammar forced it */
            q->done = true;
            return SM_ERR_RUNTIME;
        }
        q->stats.n_forced++;
        if (take(q, id)) return SM_OK;
    }
    return SM_OK;
}

sm_status sm_seq_init(sm_seq *q, size_t n_ctx, const sm_tokenizer *tok, sm_sampler *smp,
                      const int32_t *prompt, size_t n_prompt, const sm_gen_params *gp,
                      sm_emit_fn emit, void *user, sm_error *err) {
    memset(q, 0, sizeof *q);
    q->prev = n_prompt ? prompt[n_prompt - 1] : -1;
    q->tok = tok;
    q->smp = smp;
    q->n_ctx = n_ctx;
    q->stats.n_prompt = n_prompt;
    q->done = true; /* until sm_seq_begin */
    q->pd = (sm_pending){.n = 0, .hold = 0, .gp = gp, .emit = emit, .user = user};
    if (n_prompt < 1 || n_prompt > n_ctx)
        return sm_error_set(err, SM_ERR_INPUT, "prompt is %zu tokens, context is %zu", n_prompt,
                            n_ctx);
    if (gp->n_stop > SM_STOP_MAX)
        return sm_error_set(err, SM_ERR_INPUT, "at most %d stop strings", SM_STOP_MAX);
    for (size_t i = 0; i < gp->n_stop; i++) {
        size_t m = strlen(gp->stop[i]);
        if (m < 1 || m > SM_STOP_MAX_BYTES)
            return sm_error_set(err, SM_ERR_INPUT, "a stop string has %zu bytes; 1 to %d allowed",
                                m, SM_STOP_MAX_BYTES);
        if (m - 1 > q->pd.hold) q->pd.hold = m - 1;
    }
    q->done = gp->max_tokens == 0;
    sm_sampler_history(smp, prompt, n_prompt);
    return SM_OK;
}

sm_status sm_seq_begin(sm_seq *q, const float *logits, double t_prefill, sm_error *err) {
    q->t_decode0 = sm_time_now();
    q->stats.t_prefill = t_prefill;
    return sm_seq_accept(q, logits, err);
}

sm_status sm_generate(sm_state *s, const sm_tokenizer *tok, sm_sampler *smp,
                      const int32_t *prompt, size_t n_prompt, const sm_gen_params *gp,
                      sm_emit_fn emit, void *user, sm_gen_stats *stats, sm_error *err) {
    return sm_generate_from(s, tok, smp, prompt, n_prompt, 0, gp, emit, user, stats, err);
}

sm_status sm_generate_from(sm_state *s, const sm_tokenizer *tok, sm_sampler *smp,
                           const int32_t *prompt, size_t n_prompt, size_t n_cached,
                           const sm_gen_params *gp, sm_emit_fn emit, void *user,
                           sm_gen_stats *stats, sm_error *err) {
    sm_seq q;
    sm_status st = sm_seq_init(&q, sm_state_params_of(s)->n_ctx, tok, smp, prompt, n_prompt, gp,
                               emit, user, err);
    const float *logits = NULL;
    double t0 = sm_time_now();
    if (!st && n_cached >= n_prompt)
        st = sm_error_set(err, SM_ERR_INPUT, "nothing to prefill: %zu of %zu prompt tokens cached",
                          n_cached, n_prompt);
    q.stats.n_reused = n_cached;
    if (!st && !q.done) {
        if ((st = sm_state_prefill(s, prompt + n_cached, n_prompt - n_cached, n_cached, &logits,
                                   err)))
            q.done = true;
        else st = sm_seq_begin(&q, logits, sm_time_now() - t0, err);
    }
    while (!st && !q.done) {
        st = sm_state_prefill(s, q.next, q.n_next, sm_seq_pos(&q), &logits, err); /* one token: one call */
        if (!st) st = sm_seq_accept(&q, logits, err);
    }
    if (st == SM_ERR_CANCELLED) { /* a forward call stopped at the caller's cancel flag */
        if (q.t_decode0 > 0) q.stats.t_decode = sm_time_now() - q.t_decode0;
        q.stats.finish = SM_FINISH_INTERRUPTED;
        q.done = true;
        st = SM_OK;
    }
    if (st && !q.done) q.stats.t_decode = sm_time_now() - q.t_decode0;
    *stats = q.stats;
    return st;
}

sm_status sm_prompt_encode(sm_tokenizer *tok, const char *text, size_t len, size_t n_ctx,
                           size_t max_tokens, bool truncate, int32_t *out, size_t *n,
                           size_t *dropped, sm_error *err) {
    *dropped = 0;
    *n = sm_tokenizer_encode(tok, text, len, out, n_ctx);
    if (*n == 0 && tok->bos >= 0 && n_ctx > 0) { /* an empty prompt starts a new document */
        out[0] = tok->bos;
        *n = 1;
    }
    if (*n == 0)
        return sm_error_set(err, SM_ERR_INPUT, "empty prompt: this model has no BOS token, so "
                                               "the prompt needs at least one token");
    if (*n <= n_ctx) return SM_OK;
    if (!truncate)
        return sm_error_set(err, SM_ERR_INPUT,
                            "prompt is %zu tokens, context is %zu", *n,
                            n_ctx);
    size_t room = max_tokens < n_ctx / 2 ? max_tokens : n_ctx / 2;
    size_t keep = n_ctx - room > 0 ? n_ctx - room : 1;
    int32_t *all = malloc(*n * sizeof *all);
    if (!all)
        return sm_error_set(err, SM_ERR_NOMEM, "out of memory for a prompt of %zu tokens", *n);
    sm_tokenizer_encode(tok, text, len, all, *n);
    memcpy(out, all + *n - keep, keep * sizeof *all);
    free(all);
    *dropped = *n - keep;
    *n = keep;
    return SM_OK;
}
