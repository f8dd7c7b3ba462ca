/*
** sched.c -- continuous batching over the sequences of one state (sm_sched.h).
**
** A request waits in the queue (an entry: its tokens, settings and stops),
** then holds a slot: in the group (its prompt, or what the prefix cache did
** not have of it, prefilled with the others' in this step's call) or
** decoding. Every decoding slot advances one token per step (or, after
** tokens its grammar forces, by a prefill of them alone); results are
** each request's own, as sm_state_decode and sm_state_forward_many give
** every sequence exactly what it gets alone and sm_prefix reuses only rows
** computed exactly as the prompt's own prefill computes them.
*/
#include "sm_sched.h"

#include <math.h>
#include <string.h>

#include "sm_grammar.h"

#define NONE ((size_t)-1)

typedef struct entry {
    bool used;
    bool admitted;      /* in a slot, its tokens still needed (the group's prefill) */
    void *tag;
    int32_t *tokens;    /* (n_ctx) */
    size_t np, n_truncated, max_tokens, n_stop;
    sm_sampler_params sampling;
    char stop[SM_STOP_MAX][SM_STOP_MAX_BYTES + 1];
    uint64_t arrival;
    double t_submit;    /* sm_time_now() at submit */
    sm_gbind *grammar;  /* the grammar its text keeps to, or NULL */
    bool logprobs, echo;
    int top_logprobs;
    size_t passed;      /* later requests that took a slot before it */
} entry;

typedef struct slot {
    sm_sched *owner;
    bool busy;          /* holds a request: in the group, or decoding */
    void *tag;
    size_t np;          /* prompt tokens */
    size_t n_truncated;
    double t_queue;     /* seconds it waited for the slot */
    sm_gmatch *gm;      /* a matcher of gm_bind's grammar, kept for the next request with it */
    sm_gbind *gm_bind;
    entry *w;           /* while in the group: the entry with its tokens */
    sm_sampler smp;
    char stop[SM_STOP_MAX][SM_STOP_MAX_BYTES + 1];
    const char *stops[SM_STOP_MAX];
    sm_gen_params gp;
    sm_seq q;
    char *text; /* (text_cap) what the request generated */
    size_t len;
    /* the prompt whose rows the slot's cache holds, kept after the request ends; [0, n_held)
       are rows as the prefix cache holds them (sm_prefix.h), in the slot's own cache or in the
       part it reads from another slot's (sm_state_kv_shared: only from one that shares nothing) */
    int32_t *held; /* (n_ctx) */
    size_t n_held;
} slot;

struct sm_sched {
    sm_state *state;
    sm_sched_params p;
    size_t n_slots, n_wait, n_ctx, max_batch, text_cap;
    size_t n_vocab; /* the model's: the length of a logits row (the tokenizer may have fewer) */
    slot *slots;     /* (n_slots) */
    entry *wait;     /* (n_wait) */
    uint64_t arrivals;
    /* the rows of the next model call: the group's prompts, then a decode step */
    int32_t *ct;     /* (call_rows) */
    size_t *cs, *cp; /* (call_rows) sequence and position of each row */
    size_t rows;     /* rows the group holds */
    size_t group[SM_MAX_SEQ], ng;
    entry *started[SM_MAX_SEQ]; /* prompts started in this step that the cache lacked */
    size_t n_started;
    bool share; /* slots may read a prefix from another's cache (no sliding-window rings) */
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
    if (q->owner->p.piece) q->owner->p.piece(q->owner->p.user, q->tag, text, len);
    return cancelled(q->owner);
}

/* The on_token callback of every slot: to the scheduler's token callback with the request's tag. */
static void token_of(void *user, const sm_token_info *t) {
    slot *q = user;
    if (q->owner->p.token) q->owner->p.token(q->owner->p.user, q->tag, t);
}

/* Carves everything from a; on a measuring arena only sizes add up. */
static sm_sched *carve(sm_arena *a, const sm_state_params *sp, const sm_sched_params *p) {
    sm_sched *s = sm_arena_alloc(a, 1, sizeof *s);
    size_t n_slots = sp->n_seq ? sp->n_seq : 1, n_wait = 2 * n_slots;
    size_t call_rows = sp->max_batch > n_slots ? sp->max_batch : n_slots;
    size_t text_cap = (sp->n_ctx + 8) * 64;
    slot *slots = sm_arena_alloc(a, n_slots, sizeof *slots);
    entry *wait = sm_arena_alloc(a, n_wait, sizeof *wait);
    int32_t *ct = sm_arena_alloc(a, call_rows, sizeof *ct);
    size_t *cs = sm_arena_alloc(a, call_rows, sizeof *cs);
    size_t *cp = sm_arena_alloc(a, call_rows, sizeof *cp);
    sm_sampler_params sampling = {.top_p = 1}; /* each request sets its own */
    for (size_t i = 0; i < n_slots; i++) {
        sm_sampler scratch;
        sm_sampler_init(slots ? &slots[i].smp : &scratch, &sampling, (size_t)p->tok->n_vocab, a);
        char *text = sm_arena_alloc(a, text_cap, 1);
        int32_t *held = sm_arena_alloc(a, sp->n_ctx, sizeof *held);
        if (slots) slots[i].text = text, slots[i].held = held;
    }
    for (size_t i = 0; i < n_wait; i++) {
        int32_t *t = sm_arena_alloc(a, sp->n_ctx, sizeof *t);
        if (wait) wait[i] = (entry){.tokens = t};
    }
    if (!s || !slots || !wait || !ct || !cs || !cp || a->overflow) return NULL;
    *s = (sm_sched){.p = *p, .n_slots = n_slots, .n_wait = n_wait, .n_ctx = sp->n_ctx,
                    .max_batch = sp->max_batch, .text_cap = text_cap, .slots = slots, .wait = wait,
                    .ct = ct, .cs = cs, .cp = cp};
    for (size_t i = 0; i < n_slots; i++) {
        char *text = slots[i].text;
        int32_t *held = slots[i].held;
        sm_sampler smp = slots[i].smp;
        slots[i] = (slot){.owner = s, .smp = smp, .text = text, .held = held};
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
    s->share = sm_model_kv_window(sm_state_model(st), sp) == 0;
    for (size_t i = 0; i < s->n_slots; i++) sm_state_kv_share(st, i, i, 0); /* nothing shared yet */
    s->n_vocab = (size_t)sm_model_config(sm_state_model(st))->n_vocab; /* a logits row */
    *out = s;
    return SM_OK;
}

size_t sm_sched_waiting(const sm_sched *s) {
    size_t n = 0;
    for (size_t i = 0; i < s->n_wait; i++) n += s->wait[i].used && !s->wait[i].admitted;
    return n;
}

size_t sm_sched_busy(const sm_sched *s) {
    size_t n = sm_sched_waiting(s);
    for (size_t i = 0; i < s->n_slots; i++) n += s->slots[i].busy;
    return n;
}

size_t sm_sched_room(const sm_sched *s) {
    size_t n = 0;
    for (size_t i = 0; i < s->n_wait; i++) n += !s->wait[i].used;
    return n;
}

/* Hands a request to done: q's (an error if msg is set: st says its kind), freeing its slot. */
static sm_status finish(sm_sched *s, slot *q, sm_status st, const char *msg, sm_error *err) {
    q->busy = false;
    sm_sched_result r = {.tag = q->tag, .error = msg, .status = msg ? st : SM_OK, .text = q->text,
                         .len = msg ? 0 : q->len, .stats = q->q.stats, .n_truncated = q->n_truncated,
                         .t_queue = q->t_queue};
    return s->p.done(s->p.user, &r, err);
}

/*
** After q's sequence took logits (msg: why it failed): a finished request
** goes to done; otherwise the slot stays busy.
*/
static sm_status settle(sm_sched *s, slot *q, sm_status st, const char *msg, sm_error *err) {
    q->busy = !msg && !q->q.done;
    return q->busy ? SM_OK : finish(s, q, st, msg, err);
}

/* Tokenizes and checks r into entry e. */
static sm_status enqueue(sm_sched *s, entry *e, const sm_sched_request *r, sm_error *err) {
    sm_status st = SM_OK;
    if (r->ids) { /* already tokens (a templated conversation) */
        if (r->n_ids < 1 || r->n_ids > s->n_ctx)
            return sm_error_set(err, SM_ERR_INPUT, "prompt is %zu tokens, context is %zu", r->n_ids,
                                s->n_ctx);
        memcpy(e->tokens, r->ids, r->n_ids * sizeof *r->ids);
        e->np = r->n_ids;
    } else
        st = sm_prompt_encode(s->p.tok, r->prompt, r->prompt_len, s->n_ctx, r->max_tokens,
                              r->truncate, e->tokens, &e->np, &e->n_truncated, err);
    if (st) return st;
    if (r->n_stop > SM_STOP_MAX)
        return sm_error_set(err, SM_ERR_INPUT, "at most %d stop strings", SM_STOP_MAX);
    for (size_t i = 0; i < r->n_stop; i++) {
        size_t m = strlen(r->stop[i]);
        if (m < 1 || m > SM_STOP_MAX_BYTES)
            return sm_error_set(err, SM_ERR_INPUT, "a stop string has %zu bytes; 1 to %d allowed",
                                m, SM_STOP_MAX_BYTES);
        memcpy(e->stop[i], r->stop[i], m + 1);
    }
    e->n_stop = r->n_stop;
    if ((st = sm_sampler_check(&r->sampling, (size_t)s->p.tok->n_vocab, err))) return st;
    e->grammar = r->grammar;
    e->logprobs = r->logprobs, e->top_logprobs = r->top_logprobs, e->echo = r->logprobs && r->echo;
    e->max_tokens = r->max_tokens;
    e->sampling = r->sampling;
    return SM_OK;
}

sm_status sm_sched_submit(sm_sched *s, const sm_sched_request *r, sm_error *err) {
    entry *e = NULL;
    for (size_t i = 0; i < s->n_wait && !e; i++)
        if (!s->wait[i].used) e = &s->wait[i];
    if (!e) return sm_error_set(err, SM_ERR_INPUT, "scheduler: the queue is full");
    int32_t *tokens = e->tokens;
    *e = (entry){.tokens = tokens, .tag = r->tag, .arrival = s->arrivals++, .t_submit = sm_time_now()};
    sm_error rerr = {{0}};
    sm_status est = enqueue(s, e, r, &rerr);
    if (est == SM_OK) {
        e->used = true;
        return SM_OK;
    }
    if (cancelled(s)) return SM_OK; /* never half a request */
    sm_sched_result res = {.tag = r->tag, .error = rerr.msg, .status = est, .text = "",
                           .n_truncated = e->n_truncated};
    return s->p.done(s->p.user, &res, err);
}

/* Tokens a and b (na, nb of them) agree on from the start, in whole cache blocks. */
static size_t shared_blocks(const entry *a, const entry *b) {
    size_t n = a->np < b->np ? a->np : b->np, k = 0;
    while (k < n && a->tokens[k] == b->tokens[k]) k++;
    return k / SM_PREFIX_BLOCK * SM_PREFIX_BLOCK;
}

/* Whole blocks of e's prompt that a request still waiting shares: the prefix cache stores those
   whatever else it holds back (sm_prefix_insert's keep). */
static size_t wanted_blocks(const sm_sched *s, const entry *e) {
    size_t best = 0;
    for (size_t i = 0; i < s->n_wait; i++) {
        const entry *w = &s->wait[i];
        if (w == e || !w->used || w->admitted) continue;
        size_t k = shared_blocks(w, e);
        if (k > best) best = k;
    }
    return best / SM_PREFIX_BLOCK;
}

/*
** The waiting request to start next, or NONE: those passed over n_slots
** times first (oldest first), then the longest cached prefix (then the
** oldest); a request sharing more uncached blocks with a prompt started
** in this step than the cache gives it waits (unless passed over).
*/
static size_t choose(sm_sched *s) {
    size_t best = NONE, best_reuse = 0;
    bool best_old = false;
    for (size_t i = 0; i < s->n_wait; i++) {
        entry *e = &s->wait[i];
        if (!e->used || e->admitted) continue;
        bool old = e->passed >= s->n_slots;
        size_t reuse = s->p.prefix ? sm_prefix_match(s->p.prefix, e->tokens, e->np).n_reused : 0;
        bool wait = false;
        for (size_t k = 0; k < s->n_started && !old && !wait; k++)
            wait = shared_blocks(e, s->started[k]) > reuse;
        if (wait) continue;
        bool better = best == NONE ||
                      (old != best_old ? old
                                       : old || reuse == best_reuse
                                             ? e->arrival < s->wait[best].arrival
                                             : reuse > best_reuse);
        if (better) best = i, best_reuse = reuse, best_old = old;
    }
    return best;
}

/* How many of a's first na tokens b's first nb agree with, in whole key blocks (the unit a
   slot shares). */
static size_t agree_blocks(const int32_t *a, size_t na, const int32_t *b, size_t nb) {
    size_t n = na < nb ? na : nb, k = 0;
    while (k < n && a[k] == b[k]) k++;
    return k / SM_ATTN_KBLOCK * SM_ATTN_KBLOCK;
}

/* Positions of slot j's held prompt whose rows are still in place: none that another caller
   of the state wrote over since the slot's last write (sm_state_kv_low). */
static size_t held(const sm_sched *s, size_t j) {
    size_t low = sm_state_kv_low(s->state, j);
    return s->slots[j].n_held < low ? s->slots[j].n_held : low;
}

/* How many positions slot r reads from slot i's cache (0 when none). */
static size_t reads_from(const sm_sched *s, size_t r, size_t i) {
    size_t src, n = sm_state_kv_shared(s->state, r, &src);
    return r != i && src == i ? n : 0;
}

/* Whether slot j reads part of its prefix from another slot's cache. */
static bool sharer(const sm_sched *s, size_t j) {
    size_t src;
    return sm_state_kv_shared(s->state, j, &src) > 0;
}

/*
** Slot i's cache is about to be rewritten from position keep on: the busy
** slots sharing more than that from it move to one of them, which first
** copies the prefix into its own cache (the one that shares the most;
** the others then share from it); idle ones just stop sharing.
*/
static void hand_over(sm_sched *s, size_t i, size_t keep) {
    size_t to = NONE, most = 0;
    for (size_t r = 0; r < s->n_slots; r++) {
        size_t n = reads_from(s, r, i);
        if (n <= keep) continue;
        if (!s->slots[r].busy) {
            sm_state_kv_share(s->state, r, r, 0);
            s->slots[r].n_held = 0; /* its own cache lacks the prefix */
        } else if (n > most)
            to = r, most = n;
    }
    if (to == NONE) return;
    sm_state_kv_copy(s->state, to, i, most);
    sm_state_kv_share(s->state, to, to, 0);
    for (size_t r = 0; r < s->n_slots; r++) {
        size_t n = reads_from(s, r, i);
        if (n > keep) sm_state_kv_share(s->state, r, to, n);
    }
}

/*
** Where slot i's cache gets the first P tokens of request e, which the
** prefix cache has: returns how many of them need no copy. Those its cache
** keeps from its last prompt (the same tokens, rows as the cache holds them),
** or more that another slot holds and shares (one that shares nothing
** itself); only the rest are copied in from the prefix cache. Rows in the
** same place as in a copy, so nothing changes but the copying and the
** memory a decode step reads.
*/
static size_t place_prefix(sm_sched *s, size_t i, const entry *e, size_t P) {
    slot *q = &s->slots[i];
    if (!s->share) return 0;
    size_t keep = sharer(s, i) ? 0 : agree_blocks(q->held, held(s, i), e->tokens, P);
    size_t from = NONE, n = keep;
    for (size_t j = 0; j < s->n_slots; j++) {
        if (j == i || sharer(s, j)) continue;
        size_t a = agree_blocks(s->slots[j].held, held(s, j), e->tokens, P);
        if (a > n) from = j, n = a;
    }
    if (from != NONE) keep = 0; /* its own cache keeps nothing others need */
    hand_over(s, i, keep);
    sm_state_kv_share(s->state, i, i, 0);
    return from != NONE && sm_state_kv_share(s->state, i, from, n) ? n : keep;
}

/* Whether a prompt of n tokens reusing P prefills exactly in one call with others: the call
   its own prefill makes from P, or two whose second has 4 or more rows (sm_prefix.h). */
static bool group_exact(const sm_sched *s, size_t P, size_t n) {
    size_t last = (n - 1) / s->max_batch * s->max_batch; /* where its last own call starts */
    return n - P >= 4 && n - P <= s->max_batch - s->rows && (last <= P || n - last >= 4);
}

/* The memory of the positions e may fill in slot i's cache, now rather than a block at a time as it
   decodes. */
static void kv_reserve(sm_sched *s, size_t i, const entry *e) {
    size_t room = e->np < s->n_ctx ? s->n_ctx - e->np : 0;
    sm_state_kv_reserve(s->state, i, e->np + (e->max_tokens < room ? e->max_tokens : room));
}

/*
** Prefills e's prompt in slot i (whose cache nobody else reads any more) for
** its own log-probabilities: calls of up to sm_state_row_logits tokens, from
** position 0, each token's log-probability from the row before it to the
** token callback; then, unless max_tokens is 0, the first token is sampled.
*/
static sm_status echo_prefill(sm_sched *s, slot *q, size_t i, const entry *e, sm_error *err) {
    place_prefix(s, i, e, 0); /* nothing reused: readers of its cache move, it reads none */
    q->n_held = 0;
    sm_state_kv_mark(s->state, i);
    kv_reserve(s, i, e);
    size_t L = sm_state_row_logits(s->state), V = (size_t)s->p.tok->n_vocab, n = 0;
    sm_token_info t = {.id = e->tokens[0], .logprob = NAN};
    token_of(q, &t);
    const float *lg = NULL;
    double tp = sm_time_now();
    for (size_t done = 0; done < e->np; done += n) {
        n = e->np - done < L ? e->np - done : L;
        sm_status st = sm_state_forward_rows(s->state, i, e->tokens + done, n, done, &lg, err);
        if (st) return st;
        for (size_t r = 0; r < n && done + r + 1 < e->np && !cancelled(s); r++) {
            sm_token_logprob(lg + r * s->n_vocab, V, e->tokens[done + r + 1], (size_t)e->top_logprobs, &t);
            token_of(q, &t);
        }
    }
    sm_state_kv_mark(s->state, i);
    if (q->q.done) { /* max_tokens 0 */
        q->q.stats.t_prefill = sm_time_now() - tp;
        return SM_OK;
    }
    return sm_seq_begin(&q->q, lg + (n - 1) * s->n_vocab, sm_time_now() - tp, err);
}

/* Starts waiting request e in free slot i: its cached prefix loaded, the rest prefilled (in
   the group, or alone now). */
static sm_status admit(sm_sched *s, entry *e, size_t i, sm_error *err) {
    slot *q = &s->slots[i];
    for (size_t k = 0; k < s->n_wait; k++) /* the earlier requests it overtakes */
        s->wait[k].passed += s->wait[k].used && !s->wait[k].admitted && s->wait[k].arrival < e->arrival;
    q->tag = e->tag, q->np = e->np, q->n_truncated = e->n_truncated, q->w = NULL, q->len = 0;
    q->t_queue = sm_time_now() - e->t_submit;
    for (size_t k = 0; k < e->n_stop; k++) {
        memcpy(q->stop[k], e->stop[k], sizeof q->stop[k]);
        q->stops[k] = q->stop[k];
    }
    sm_sampler_reset(&q->smp, &e->sampling);
    q->gp = (sm_gen_params){.max_tokens = e->max_tokens, .cancel = s->p.cancel, .stop = q->stops,
                            .n_stop = e->n_stop, .logprobs = e->logprobs, .top_logprobs = e->top_logprobs,
                            .on_token = token_of,
                            .token_user = q};
    memset(&q->q, 0, sizeof q->q);
    q->q.done = true;
    sm_error rerr = {{0}};
    sm_status rst = SM_OK;
    if (e->grammar && q->gm_bind == e->grammar) { /* the slot's matcher fits: back to its start */
        sm_gmatch_reset(q->gm);
    } else if (e->grammar) { /* once per slot and grammar, not per token */
        sm_gmatch_free(q->gm);
        q->gm = NULL, q->gm_bind = NULL;
        if (!(rst = sm_gmatch_new(&q->gm, e->grammar, &rerr))) q->gm_bind = e->grammar;
    }
    q->gp.grammar = e->grammar ? q->gm : NULL;
    if (!rst)
        rst = sm_seq_init(&q->q, s->n_ctx, s->p.tok, &q->smp, e->tokens, e->np, &q->gp, collect, q, &rerr);
    bool ok = rst == SM_OK;
    size_t P = 0;
    if (ok && e->echo) {
        rst = echo_prefill(s, q, i, e, &rerr);
        e->used = false;
        if (cancelled(s)) return SM_OK; /* never half a request */
        return settle(s, q, rst, rst ? rerr.msg : NULL, err);
    }
    if (ok && !q->q.done) { /* its cache gets the prompt: the cached prefix, then the rest */
        sm_prefix_hit h = {0};
        if (s->p.prefix) h = sm_prefix_match(s->p.prefix, e->tokens, e->np);
        size_t from = place_prefix(s, i, e, h.n_reused);
        if (s->p.prefix) sm_prefix_load(s->p.prefix, s->state, i, h, from);
        P = h.n_reused;
        memcpy(q->held, e->tokens, e->np * sizeof *e->tokens);
        q->n_held = P;
        sm_state_kv_mark(s->state, i); /* what it holds now: later writes below P are others' */
        kv_reserve(s, i, e);
    }
    q->q.stats.n_reused = P;
    if (ok && !q->q.done && s->p.prefix && e->np / SM_PREFIX_BLOCK * SM_PREFIX_BLOCK > P &&
        s->n_started < SM_MAX_SEQ)
        s->started[s->n_started++] = e; /* it computes blocks the cache lacks */
    if (ok && !q->q.done && group_exact(s, P, e->np)) {
        memcpy(s->ct + s->rows, e->tokens + P, (e->np - P) * sizeof *s->ct);
        for (size_t j = P; j < e->np; j++) s->cs[s->rows] = i, s->cp[s->rows++] = j;
        s->group[s->ng++] = i;
        e->admitted = true;
        q->w = e;
        q->busy = true;
        return SM_OK;
    }
    if (ok && !q->q.done) {
        const float *lg;
        double tp = sm_time_now();
        rst = sm_state_prefill_seq(s->state, i, e->tokens + P, e->np - P, P, &lg, &rerr);
        if (!rst) q->n_held = e->np / SM_PREFIX_BLOCK * SM_PREFIX_BLOCK; /* the blocks insert takes */
        sm_state_kv_mark(s->state, i);
        if (!rst && s->p.prefix)
            sm_prefix_insert(s->p.prefix, s->state, i, e->tokens, e->np, wanted_blocks(s, e));
        if (!rst) rst = sm_seq_begin(&q->q, lg, sm_time_now() - tp, &rerr);
        ok = rst == SM_OK;
    }
    e->used = false;
    if (cancelled(s)) return SM_OK; /* never half a request: the one in flight is dropped */
    return settle(s, q, rst, ok ? NULL : rerr.msg, err);
}

/* Fills free slots from the queue. */
static sm_status admit_all(sm_sched *s, sm_error *err) {
    s->n_started = 0;
    for (size_t i = 0; i < s->n_slots && !cancelled(s); i++) {
        if (s->slots[i].busy) continue;
        size_t k = choose(s);
        if (k == NONE) break;
        sm_status st = admit(s, &s->wait[k], i, err);
        if (st) return st;
    }
    return SM_OK;
}

/*
** After the call that prefilled the group (status st, logits lg: row g for the group's
** prompt g, tp seconds): caches its blocks and samples each prompt's first token.
*/
static sm_status group_done(sm_sched *s, sm_status st, const float *lg, double tp, sm_error *err) {
    size_t ng = s->ng;
    s->rows = s->ng = 0;
    for (size_t g = 0; g < ng; g++) {
        slot *q = &s->slots[s->group[g]];
        if (!st) q->n_held = q->np / SM_PREFIX_BLOCK * SM_PREFIX_BLOCK;
        sm_state_kv_mark(s->state, s->group[g]);
        if (!st && s->p.prefix)
            sm_prefix_insert(s->p.prefix, s->state, s->group[g], q->w->tokens, q->np,
                             wanted_blocks(s, q->w));
        q->w->used = q->w->admitted = false;
        q->w = NULL;
    }
    if (st == SM_ERR_CANCELLED && cancelled(s)) return SM_OK;
    if (st) return st;
    for (size_t g = 0; g < ng && !cancelled(s); g++) {
        slot *q = &s->slots[s->group[g]];
        sm_error rerr = {{0}};
        sm_status qst = sm_seq_begin(&q->q, lg + g * s->n_vocab, tp, &rerr);
        if (!cancelled(s) && (st = settle(s, q, qst, qst ? rerr.msg : NULL, err))) return st;
    }
    return SM_OK;
}

/* Prefills the group in one call of its own. */
static sm_status step_group(sm_sched *s, sm_error *err) {
    const float *lg = NULL;
    double tp = sm_time_now();
    sm_status st = sm_state_forward_many(s->state, s->ct, s->cs, s->cp, s->rows, &lg, err);
    return group_done(s, st, lg, sm_time_now() - tp, err);
}

/*
** One step: the waiting requests that fit take free slots; then one call prefills the group
** (the prompts that started) and advances every other decoding slot by a token, so the
** weights are read once for both (the one-row runs after the group's rows, each computed as
** alone: sm_state_forward_many). A slot whose grammar forced tokens prefills them alone
** first. When the rows do not fit one call, the group goes in a call of its own.
*/
sm_status sm_sched_step(sm_sched *s, sm_error *err) {
    sm_status st;
    if (!cancelled(s) && (st = admit_all(s, err))) return st;
    size_t cap = s->max_batch > s->n_slots ? s->max_batch : s->n_slots, busy = 0;
    for (size_t i = 0; i < s->n_slots; i++) busy += s->slots[i].busy && !s->slots[i].w;
    if (s->ng && s->rows + busy > cap && !cancelled(s) && (st = step_group(s, err))) return st;
    size_t base = s->rows, m = base;
    for (size_t i = 0; i < s->n_slots && !cancelled(s); i++) {
        slot *q = &s->slots[i];
        if (!q->busy || q->w) continue;
        if (q->q.n_next > 1) { /* a sampled token and those its grammar forces: prefilled as alone */
            const float *lg;
            sm_error rerr = {{0}};
            st = sm_state_prefill_seq(s->state, i, q->q.next, q->q.n_next, sm_seq_pos(&q->q), &lg, err);
            if (st) return st == SM_ERR_CANCELLED && cancelled(s) ? SM_OK : st;
            sm_status qst = sm_seq_accept(&q->q, lg, &rerr);
            if (!cancelled(s) && (st = settle(s, q, qst, qst ? rerr.msg : NULL, err))) return st;
            continue;
        }
        s->ct[m] = q->q.next[0], s->cs[m] = i, s->cp[m] = sm_seq_pos(&q->q);
        m++;
    }
    if (cancelled(s) || m == 0) return SM_OK;
    const float *logits = NULL;
    size_t ng = s->ng;
    double tp = sm_time_now();
    sm_status cst = sm_state_forward_many(s->state, s->ct, s->cs, s->cp, m, &logits, err);
    if (ng && (st = group_done(s, cst, logits, sm_time_now() - tp, err))) return st;
    if (cst) return cst == SM_ERR_CANCELLED && cancelled(s) ? SM_OK : cst;
    for (size_t j = base; j < m && !cancelled(s); j++) {
        slot *q = &s->slots[s->cs[j]];
        sm_error rerr = {{0}};
        sm_status qst = sm_seq_accept(&q->q, logits + (ng + j - base) * s->n_vocab, &rerr);
        if (!cancelled(s) && (st = settle(s, q, qst, qst ? rerr.msg : NULL, err))) return st;
    }
    return SM_OK;
}

void sm_sched_release(sm_sched *s) {
    for (size_t i = 0; s && i < s->n_slots; i++) {
        sm_gmatch_free(s->slots[i].gm);
        s->slots[i].gm = NULL, s->slots[i].gm_bind = NULL;
    }
}

void sm_sched_forget_grammar(sm_sched *s, const sm_gbind *b) {
    for (size_t i = 0; s && b && i < s->n_slots; i++)
        if (s->slots[i].gm_bind == b) {
            sm_gmatch_free(s->slots[i].gm);
            s->slots[i].gm = NULL, s->slots[i].gm_bind = NULL;
        }
}

bool sm_sched_cancel(sm_sched *s, void *tag, sm_error *err) {
    sm_sched_result r = {.tag = tag, .error = "cancelled", .status = SM_ERR_CANCELLED, .text = ""};
    for (size_t i = 0; i < s->n_wait; i++) {
        entry *e = &s->wait[i];
        if (!e->used || e->admitted || e->tag != tag) continue;
        e->used = false;
        s->p.done(s->p.user, &r, err);
        return true;
    }
    for (size_t i = 0; i < s->n_slots; i++) {
        slot *q = &s->slots[i];
        if (!q->busy || q->tag != tag) continue;
        if (q->w) return false; /* in the group being prefilled this step: ended after it */
        r.stats = q->q.stats;
        q->busy = false;
        s->p.done(s->p.user, &r, err);
        return true;
    }
    return false;
}
