/*
** sched.c -- continuous batching over the sequences of one state (sm_sched.h).
**
** A slot is free, waiting in the group (its prompt prefilled with the
** others' at the next step), or decoding. Every decoding slot advances one
** token per step; results are each request's own, as sm_state_decode and
** sm_state_forward_many give every sequence exactly what it gets alone.
*/
#include "sm_sched.h"

#include <string.h>

typedef struct slot {
    sm_sched *owner;
    bool busy;          /* holds a request: in the group, or decoding */
    void *tag;
    size_t np;          /* prompt tokens */
    size_t n_truncated;
    sm_sampler smp;
    char stop[SM_STOP_MAX][SM_STOP_MAX_BYTES + 1];
    const char *stops[SM_STOP_MAX];
    sm_gen_params gp;
    sm_seq q;
    char *text; /* (text_cap) what the request generated */
    size_t len;
} slot;

struct sm_sched {
    sm_state *state;
    sm_sched_params p;
    size_t n_slots, n_ctx, max_batch, text_cap;
    size_t n_vocab; /* the model's: the length of a logits row (the tokenizer may have fewer) */
    slot *slots;     /* (n_slots) */
    int32_t *tokens; /* (n_ctx) the prompt being submitted */
    /* the rows of the next model call: the group's prompts, then a decode step */
    int32_t *ct;     /* (call_rows) */
    size_t *cs, *cp; /* (call_rows) sequence and position of each row */
    size_t rows;     /* rows the group holds */
    size_t group[SM_MAX_SEQ], ng;
};

static bool cancelled(const sm_sched *s) {
    return s->p.cancel && *s->p.cancel;
}

/* The emit callback of every slot: text is collected (a piece is at most 64 bytes, and the
   buffer holds 64 per context position, so nothing is ever cut). */
static int collect(void *user, const char *text, size_t len) {
    slot *q = user;
    size_t cap = q->owner->text_cap, take = len < cap - q->len ? len : cap - q->len;
    memcpy(q->text + q->len, text, take);
    q->len += take;
    return cancelled(q->owner);
}

/* Carves everything from a; on a measuring arena only sizes add up. */
static sm_sched *carve(sm_arena *a, const sm_state_params *sp, const sm_sched_params *p) {
    sm_sched *s = sm_arena_alloc(a, 1, sizeof *s);
    size_t n_slots = sp->n_seq ? sp->n_seq : 1;
    size_t call_rows = sp->max_batch > n_slots ? sp->max_batch : n_slots;
    size_t text_cap = (sp->n_ctx + 8) * 64;
    slot *slots = sm_arena_alloc(a, n_slots, sizeof *slots);
    int32_t *tokens = sm_arena_alloc(a, sp->n_ctx, sizeof *tokens);
    int32_t *ct = sm_arena_alloc(a, call_rows, sizeof *ct);
    size_t *cs = sm_arena_alloc(a, call_rows, sizeof *cs);
    size_t *cp = sm_arena_alloc(a, call_rows, sizeof *cp);
    sm_sampler_params sampling = {.top_p = 1}; /* each request sets its own */
    for (size_t i = 0; i < n_slots; i++) {
        sm_sampler scratch;
        sm_sampler_init(slots ? &slots[i].smp : &scratch, &sampling, (size_t)p->tok->n_vocab, a);
        char *text = sm_arena_alloc(a, text_cap, 1);
        if (slots) slots[i].text = text;
    }
    if (!s || !slots || !tokens || !ct || !cs || !cp || a->overflow) return NULL;
    *s = (sm_sched){.p = *p, .n_slots = n_slots, .n_ctx = sp->n_ctx, .max_batch = sp->max_batch,
                    .text_cap = text_cap, .slots = slots,
                    .tokens = tokens, .ct = ct, .cs = cs, .cp = cp};
    for (size_t i = 0; i < n_slots; i++) {
        char *text = slots[i].text;
        sm_sampler smp = slots[i].smp;
        slots[i] = (slot){.owner = s, .smp = smp, .text = text};
    }
    return s;
}

sm_status sm_sched_init(sm_sched **out, sm_state *st, const sm_state_params *sp,
                        const sm_sched_params *p, sm_arena *a, sm_error *err) {
    *out = NULL;
    if (!p->tok || !p->done || (sp->n_seq ? sp->n_seq : 1) > SM_MAX_SEQ)
        return sm_error_set(err, SM_ERR_INPUT, "scheduler: no tokenizer or callback, or too many sequences");
    if (!a->base) {
        carve(a, sp, p);
        return a->overflow ? sm_error_set(err, SM_ERR_NOMEM, "the scheduler's size overflows")
                           : SM_OK;
    }
    sm_sched *s = carve(a, sp, p);
    if (!s) return sm_error_set(err, SM_ERR_NOMEM, "arena too small for the scheduler");
    s->state = st;
    s->n_vocab = (size_t)sm_model_config(sm_state_model(st))->n_vocab; /* a logits row */
    *out = s;
    return SM_OK;
}

size_t sm_sched_busy(const sm_sched *s) {
    size_t n = 0;
    for (size_t i = 0; i < s->n_slots; i++) n += s->slots[i].busy;
    return n;
}

size_t sm_sched_free_slots(const sm_sched *s) {
    return s->n_slots - sm_sched_busy(s);
}

/* Hands q's request to done (an error if msg is set) and frees the slot. */
static sm_status finish(sm_sched *s, slot *q, const char *msg, sm_error *err) {
    q->busy = false;
    sm_sched_result r = {.tag = q->tag, .error = msg, .text = q->text, .len = msg ? 0 : q->len,
                         .stats = q->q.stats, .n_truncated = q->n_truncated};
    return s->p.done(s->p.user, &r, err);
}

/*
** After q's sequence took logits (msg: why it failed): a finished request
** goes to done; otherwise the slot stays busy.
*/
static sm_status settle(sm_sched *s, slot *q, const char *msg, sm_error *err) {
    q->busy = !msg && !q->q.done;
    return q->busy ? SM_OK : finish(s, q, msg, err);
}

/* Readies q for r: the prompt in s->tokens (q->np of them), sampler and stops. */
static sm_status start(sm_sched *s, slot *q, const sm_sched_request *r, sm_error *err) {
    sm_status st = SM_OK;
    if (r->ids) { /* already tokens (a templated conversation) */
        if (r->n_ids < 1 || r->n_ids > s->n_ctx)
            return sm_error_set(err, SM_ERR_INPUT, "prompt is %zu tokens, context is %zu", r->n_ids,
                                s->n_ctx);
        memcpy(s->tokens, r->ids, r->n_ids * sizeof *r->ids);
        q->np = r->n_ids, q->n_truncated = 0;
    } else
        st = sm_prompt_encode(s->p.tok, r->prompt, r->prompt_len, s->n_ctx, r->max_tokens,
                              r->truncate, s->tokens, &q->np, &q->n_truncated, err);
    if (st) return st;
    if (r->n_stop > SM_STOP_MAX)
        return sm_error_set(err, SM_ERR_INPUT, "at most %d stop strings", SM_STOP_MAX);
    for (size_t i = 0; i < r->n_stop; i++) {
        size_t m = strlen(r->stop[i]);
        if (m < 1 || m > SM_STOP_MAX_BYTES)
            return sm_error_set(err, SM_ERR_INPUT, "a stop string has %zu bytes; 1 to %d allowed",
                                m, SM_STOP_MAX_BYTES);
        memcpy(q->stop[i], r->stop[i], m + 1);
        q->stops[i] = q->stop[i];
    }
    sm_sampler_reset(&q->smp, &r->sampling);
    q->gp = (sm_gen_params){r->max_tokens, s->p.cancel, q->stops, r->n_stop, NULL, 0};
    q->len = 0;
    return sm_seq_init(&q->q, s->n_ctx, s->p.tok, &q->smp, s->tokens, q->np, &q->gp, collect, q,
                       err);
}

sm_status sm_sched_submit(sm_sched *s, const sm_sched_request *r, sm_error *err) {
    size_t i = 0;
    while (i < s->n_slots && s->slots[i].busy) i++;
    if (i == s->n_slots) return sm_error_set(err, SM_ERR_INPUT, "scheduler: no free slot");
    slot *q = &s->slots[i];
    q->tag = r->tag;
    q->n_truncated = 0;
    memset(&q->q, 0, sizeof q->q);
    q->q.done = true;
    sm_error rerr = {{0}};
    bool ok = start(s, q, r, &rerr) == SM_OK;
    if (ok && !q->q.done && q->np >= 4 && q->np <= s->max_batch - s->rows) {
        /* joins the group: prefilled with the others at the next step */
        memcpy(s->ct + s->rows, s->tokens, q->np * sizeof *s->ct);
        for (size_t j = 0; j < q->np; j++) s->cs[s->rows + j] = i, s->cp[s->rows + j] = j;
        s->rows += q->np;
        s->group[s->ng++] = i;
        q->busy = true;
        return SM_OK;
    }
    if (ok && !q->q.done) {
        const float *lg;
        double tp = sm_time_now();
        ok = sm_state_prefill_seq(s->state, i, s->tokens, q->np, 0, &lg, &rerr) == SM_OK &&
             sm_seq_begin(&q->q, lg, sm_time_now() - tp, &rerr) == SM_OK;
    }
    if (cancelled(s)) return SM_OK; /* never half a request: the one in flight is dropped */
    return settle(s, q, ok ? NULL : rerr.msg, err);
}

/* Prefills the group in one call and samples each prompt's first token. */
static sm_status step_group(sm_sched *s, sm_error *err) {
    const float *lg;
    double tp = sm_time_now();
    sm_status st = sm_state_forward_many(s->state, s->ct, s->cs, s->cp, s->rows, &lg, err);
    size_t ng = s->ng;
    s->rows = s->ng = 0;
    if (st == SM_ERR_CANCELLED && cancelled(s)) return SM_OK;
    if (st) return st;
    tp = sm_time_now() - tp;
    for (size_t g = 0; g < ng && !cancelled(s); g++) {
        slot *q = &s->slots[s->group[g]];
        sm_error rerr = {{0}};
        const char *msg = sm_seq_begin(&q->q, lg + g * s->n_vocab, tp, &rerr) ? rerr.msg : NULL;
        if (!cancelled(s) && (st = settle(s, q, msg, err))) return st;
    }
    return SM_OK;
}

sm_status sm_sched_step(sm_sched *s, sm_error *err) {
    sm_status st;
    if (s->ng && !cancelled(s) && (st = step_group(s, err))) return st;
    size_t m = 0;
    for (size_t i = 0; i < s->n_slots; i++) {
        const slot *q = &s->slots[i];
        if (!q->busy) continue;
        s->ct[m] = q->q.next, s->cs[m] = i, s->cp[m] = sm_seq_pos(&q->q);
        m++;
    }
    if (m == 0 || cancelled(s)) return SM_OK;
    const float *logits;
    if ((st = sm_state_decode(s->state, s->ct, s->cs, s->cp, m, &logits, err)))
        return st == SM_ERR_CANCELLED && cancelled(s) ? SM_OK : st;
    for (size_t j = 0; j < m && !cancelled(s); j++) {
        slot *q = &s->slots[s->cs[j]];
        sm_error rerr = {{0}};
        const char *msg = sm_seq_accept(&q->q, logits + j * s->n_vocab, &rerr) ? rerr.msg : NULL;
        if (!cancelled(s) && (st = settle(s, q, msg, err))) return st;
    }
    return SM_OK;
}
