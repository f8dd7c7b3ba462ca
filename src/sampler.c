/*
** sampler.c -- penalties, greedy, temperature, top-k, top-p, min-p; own selection and sort
** (no qsort: the order of equal logits is fixed by id, so results are
** reproducible across C libraries).
*/
#include "sm_sampler.h"

#include <math.h>
#include <string.h>

static uint64_t next_u64(uint64_t *state) {
    /* splitmix64 */
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static float next_f32(uint64_t *state) {
    return (float)(next_u64(state) >> 40) * (1.0f / 16777216.0f);
}

sm_status sm_sampler_init(sm_sampler *s, const sm_sampler_params *p, size_t n_vocab,
                          sm_arena *arena) {
    memset(s, 0, sizeof *s);
    s->p = *p;
    s->rng = p->seed;
    s->n_vocab = n_vocab;
    s->cand = sm_arena_alloc(arena, n_vocab, sizeof *s->cand);
    s->count = sm_arena_alloc(arena, n_vocab, sizeof *s->count);
    s->recent = sm_arena_alloc(arena, SM_SAMPLER_MAX_LAST_N, sizeof *s->recent);
    s->pen = sm_arena_alloc(arena, SM_SAMPLER_MAX_LAST_N + SM_SAMPLER_MAX_BIAS, sizeof *s->pen);
    s->masked = sm_arena_alloc(arena, n_vocab, sizeof *s->masked);
    if (arena->overflow) return SM_ERR_NOMEM;
    if (s->count) memset(s->count, 0, n_vocab * sizeof *s->count);
    return SM_OK;
}

static size_t last_n(const sm_sampler *s) {
    int n = s->p.repeat_last_n;
    return n <= 0 ? 0 : n > SM_SAMPLER_MAX_LAST_N ? SM_SAMPLER_MAX_LAST_N : (size_t)n;
}

/* The window's k-th oldest id. */
static int32_t recent_at(const sm_sampler *s, size_t k) {
    return s->recent[(s->recent_at + k) % last_n(s)];
}

/* Empties the window. */
static void forget(sm_sampler *s) {
    for (size_t k = 0; k < s->n_recent; k++) s->count[recent_at(s, k)] = 0;
    s->n_recent = s->recent_at = 0;
}

void sm_sampler_accept(sm_sampler *s, int32_t id) {
    size_t cap = last_n(s);
    if (!cap || id < 0 || (size_t)id >= s->n_vocab) return;
    if (s->n_recent == cap) { /* the oldest leaves the window */
        s->count[s->recent[s->recent_at]]--;
        s->recent[s->recent_at] = id;
        s->recent_at = (s->recent_at + 1) % cap;
    } else
        s->recent[(s->recent_at + s->n_recent++) % cap] = id;
    s->count[id]++;
}

void sm_sampler_history(sm_sampler *s, const int32_t *ids, size_t n) {
    forget(s);
    size_t cap = last_n(s);
    for (size_t i = n > cap ? n - cap : 0; i < n; i++) sm_sampler_accept(s, ids[i]);
}

static bool penalized(const sm_sampler *s) {
    const sm_sampler_params *p = &s->p;
    return s->n_recent && ((p->repeat_penalty > 0 && p->repeat_penalty != 1.0f) ||
                           p->presence_penalty != 0 || p->frequency_penalty != 0);
}

#define BIAS_ONLY INT32_MIN /* s->count's mark of a logit_bias id outside the window, while scanning */

/* Logit l (logit_bias added) with llama.cpp's penalty for an id seen c times, when pen. */
static float changed(const sm_sampler *s, float l, int32_t c, bool pen) {
    if (!pen || c <= 0) return l;
    float rp = s->p.repeat_penalty > 0 ? s->p.repeat_penalty : 1.0f;
    l = l <= 0 ? l * rp : l / rp;
    return l - ((float)c * s->p.frequency_penalty + s->p.presence_penalty);
}

/*
** The logits logit_bias and the penalties change, once for each distinct id,
** into s->pen (returned count): bias first, then the penalty of an id in the
** window. The logits themselves are not copied: the scans skip the ids
** s->count marks (the window's: their counts; a biased id outside it:
** BIAS_ONLY until unmark) and take these instead.
*/
static size_t overrides(sm_sampler *s, const float *logits) {
    const bool pen = penalized(s);
    size_t n = 0;
    for (int i = 0; i < s->p.bias.n; i++) {
        const int32_t id = s->p.bias.e[i].id, c = id >= 0 && (size_t)id < s->n_vocab ? s->count[id] : -1;
        if (c < 0) continue; /* outside the vocabulary, or given twice (marked) */
        s->pen[n++] = (sm_candidate){changed(s, logits[id] + s->p.bias.e[i].bias, c, pen), id};
        s->count[id] = c ? -c : BIAS_ONLY;
    }
    for (size_t k = 0; k < s->n_recent; k++) { /* the window's other ids: penalized, or as they are */
        int32_t id = recent_at(s, k), c = s->count[id];
        if (c <= 0) continue; /* done (marked negative) */
        s->pen[n++] = (sm_candidate){changed(s, logits[id], c, pen), id};
        s->count[id] = -c;
    }
    for (size_t k = 0; k < s->n_recent; k++) {
        int32_t id = recent_at(s, k);
        if (s->count[id] < 0) s->count[id] = -s->count[id];
    }
    return n;
}

/* Clears overrides' BIAS_ONLY marks. */
static void unmark(sm_sampler *s) {
    for (int i = 0; i < s->p.bias.n; i++) {
        const int32_t id = s->p.bias.e[i].id;
        if (id >= 0 && (size_t)id < s->n_vocab && s->count[id] == BIAS_ONLY) s->count[id] = 0;
    }
}

/* a ranks before b: higher logit, then lower id. */
static inline int before(sm_candidate a, sm_candidate b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

static void sift_down(sm_candidate *c, size_t root, size_t n) {
    for (;;) {
        size_t child = 2 * root + 1;
        if (child >= n) return;
        /* min-heap by rank: the worst candidate at the root */
        if (child + 1 < n && before(c[child], c[child + 1])) child++;
        if (!before(c[root], c[child])) return;
        sm_candidate t = c[root];
        c[root] = c[child];
        c[child] = t;
        root = child;
    }
}

/* x into the heap c[0..*n) of the k best so far (the worst at its root). */
static void offer(sm_candidate *c, size_t *n, size_t k, sm_candidate x) {
    if (*n < k) {
        c[(*n)++] = x;
        if (*n == k)
            for (size_t i = k / 2; i-- > 0;) sift_down(c, i, k);
        return;
    }
    if (!before(x, c[0])) return;
    c[0] = x;
    sift_down(c, 0, k);
}

/*
** The k best of logits[0..V) (but the ids skip marks, if any) and of
** extra[0..n_extra) into c, in heap order: one pass keeping a heap of the
** best so far with the worst at its root, which a logit must beat to get
** in. Past the first few hundred logits almost none does, so the cost is
** about one comparison per logit (no copy of the vocabulary).
*/
static size_t select_top(sm_candidate *c, const float *logits, size_t V, size_t k,
                         const int32_t *skip, const sm_candidate *extra, size_t n_extra) {
    size_t n = 0;
    for (size_t i = 0; i < V; i++) {
        if (n == k && logits[i] < c[0].logit) continue; /* the common case */
        if (skip && skip[i]) continue;
        offer(c, &n, k, (sm_candidate){logits[i], (int32_t)i});
    }
    for (size_t j = 0; j < n_extra; j++) offer(c, &n, k, extra[j]);
    return n;
}

/* Heapsort c[0..n) best first: the heap keeps the worst candidate at the root,
   which each round moves to the end of the shrinking heap. */
static void sort_best_first(sm_candidate *c, size_t n) {
    for (size_t i = n / 2; i-- > 0;) sift_down(c, i, n);
    for (size_t end = n; end > 1; end--) {
        sm_candidate t = c[0];
        c[0] = c[end - 1];
        c[end - 1] = t;
        sift_down(c, 0, end - 1);
    }
}

/*
** Top-p over the whole vocabulary without sorting it: one pass weighs every
** logit into half-nat bins below the best (NUCLEUS_BINS of them, the last
** open-ended) and sums the whole mass; the nucleus ends in the first bin at
** which the bins' running mass reaches top_p of it, so only the candidates
** of that bin and better are gathered into s->cand (returned count) and
** sorted. The vocabulary's mass goes to *whole: the prefix is cut against
** it. In practice a few hundred candidates, not n_vocab.
*/
#define NUCLEUS_BINS 64

static inline int bin_of(float l, float mx, float inv_t) {
    float d = (mx - l) * inv_t; /* >= 0 nats below the best */
    return d < NUCLEUS_BINS / 2 ? (int)(d * 2.0f) : NUCLEUS_BINS - 1;
}

static size_t nucleus_candidates(sm_sampler *s, const float *logits, const int32_t *skip,
                                 size_t n_pen, float mx, float inv_t, double *whole) {
    double mass[NUCLEUS_BINS] = {0};
    size_t V = s->n_vocab;
    for (size_t i = 0; i < V; i++)
        if (!(skip && skip[i])) mass[bin_of(logits[i], mx, inv_t)] += expf((logits[i] - mx) * inv_t);
    for (size_t j = 0; j < n_pen; j++)
        mass[bin_of(s->pen[j].logit, mx, inv_t)] += expf((s->pen[j].logit - mx) * inv_t);
    double total = 0.0, cum = 0.0;
    for (int b = 0; b < NUCLEUS_BINS; b++) total += mass[b];
    int cut = NUCLEUS_BINS - 1;
    for (int b = 0; b < NUCLEUS_BINS; b++) {
        cum += mass[b];
        if (cum >= (double)s->p.top_p * total) {
            cut = b < NUCLEUS_BINS - 1 ? b + 1 : b; /* one bin more: rounding never cuts short */
            break;
        }
    }
    *whole = total;
    size_t n = 0;
    for (size_t i = 0; i < V; i++)
        if (!(skip && skip[i]) && bin_of(logits[i], mx, inv_t) <= cut)
            s->cand[n++] = (sm_candidate){logits[i], (int32_t)i};
    for (size_t j = 0; j < n_pen; j++)
        if (bin_of(s->pen[j].logit, mx, inv_t) <= cut) s->cand[n++] = s->pen[j];
    return n;
}

#define NINF_BITS 0xff800000u /* -inf */

/* The largest key of x (n of them); flags |= 1 for a NaN or +inf, 2 for a -inf. No branch in
   the loop: the compiler vectorizes it. */
static int32_t chunk_max(const float *x, size_t n, uint32_t *flags) {
    int32_t m = INT32_MIN;
    uint32_t nonfinite = 0, minus_inf = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, &x[i], sizeof b);
        b = b == 0x80000000u ? 0 : b;
        int32_t k = (int32_t)(b ^ ((uint32_t)((int32_t)b >> 31) & 0x7fffffffu));
        m = k > m ? k : m;
        nonfinite |= (uint32_t)((b & 0x7fffffffu) >= 0x7f800000u) & (uint32_t)(b != NINF_BITS);
        minus_inf |= (uint32_t)(b == NINF_BITS);
    }
    *flags |= nonfinite | minus_inf << 1;
    return m;
}

/*
** The best of n logits (the highest, the lowest id among equals; id -1 when all are -inf)
** through integer keys in the values' order (the bits, the magnitude's flipped for a negative;
** -0 as +0), whose maximum a compiler vectorizes where a float one (NaN's order) it does not:
** chunk by chunk, the chunk whose maximum first beats the others' then searched for its first
** equal value. *bad when a logit is NaN or +inf, or -inf where !masked.
*/
static sm_candidate best_of(const float *x, size_t n, bool masked, bool *bad) {
    enum { CHUNK = 1024 };
    int32_t best = INT32_MIN;
    size_t at = 0;
    uint32_t flags = 0;
    for (size_t c0 = 0; c0 < n; c0 += CHUNK) {
        int32_t m = chunk_max(x + c0, n - c0 < CHUNK ? n - c0 : CHUNK, &flags);
        if (m > best) best = m, at = c0;
    }
    *bad = (flags & 1u) || ((flags & 2u) && !masked);
    uint32_t bb = (uint32_t)best ^ ((uint32_t)(best >> 31) & 0x7fffffffu);
    if (*bad || n == 0 || bb == NINF_BITS) return (sm_candidate){-INFINITY, -1};
    float v;
    memcpy(&v, &bb, sizeof v);
    size_t i = at;
    while (x[i] != v) i++; /* in this chunk: its maximum is v */
    return (sm_candidate){x[i], (int32_t)i};
}

/*
** sm_sampler_dist, with the candidates' total weight (what a draw scales by).
** masked: logits of -infinity are tokens a grammar does not allow (the
** caller checked the others are finite); SM_ERR_INPUT if none is allowed.
*/
static sm_status candidates(sm_sampler *s, const float *logits, bool masked, size_t *n_out, double *total_out) {
    size_t V = s->n_vocab, n_pen = 0;
    const int32_t *skip = NULL;
    if (penalized(s) || s->p.bias.n) {
        n_pen = overrides(s, logits);
        skip = s->count;
    }
    /* the best: the highest logit, the lowest id among equals; one pass that checks them all */
    sm_candidate top = {-INFINITY, -1};
    if (!skip) {
        bool bad;
        top = best_of(logits, V, masked, &bad);
        if (bad) return SM_ERR_RUNTIME;
    } else {
        for (size_t i = 0; i < V; i++) {
            if (!isfinite(logits[i]) && !(masked && logits[i] == -INFINITY)) return SM_ERR_RUNTIME;
            if ((top.id < 0 || logits[i] > top.logit) && !skip[i] && logits[i] != -INFINITY)
                top = (sm_candidate){logits[i], (int32_t)i};
        }
    }
    for (size_t j = 0; j < n_pen; j++)
        if (s->pen[j].logit != -INFINITY && (top.id < 0 || before(s->pen[j], top))) top = s->pen[j];
    if (top.id < 0) return SM_ERR_INPUT; /* a grammar allows nothing here */
    sm_candidate *c = s->cand;
    /* greedy, also for a temperature so small that 1/T overflows (its limit) */
    if (s->p.temperature <= 0.0f || !isfinite(1.0f / s->p.temperature)) {
        c[0] = (sm_candidate){1.0f, top.id};
        *n_out = 1;
        *total_out = 1.0;
        return SM_OK;
    }
    float mx = top.logit, inv_t = 1.0f / s->p.temperature;
    size_t n = V;
    double whole = -1.0; /* top-p's reference mass when not all candidates are weighed */
    if (s->p.top_k > 0 && (size_t)s->p.top_k < V) {
        n = select_top(c, logits, V, (size_t)s->p.top_k, skip, s->pen, n_pen);
        sort_best_first(c, n); /* the k best in one order whatever found them */
    } else if (s->p.top_p < 1.0f) {
        n = nucleus_candidates(s, logits, skip, n_pen, mx, inv_t, &whole);
        sort_best_first(c, n);
    } else {
        for (size_t i = 0; i < V; i++) c[i] = (sm_candidate){logits[i], (int32_t)i};
        for (size_t j = 0; j < n_pen; j++) c[s->pen[j].id] = s->pen[j];
    }
    /* probabilities (unnormalised, the best 1) in place of logits */
    double total = 0.0;
    for (size_t i = 0; i < n; i++) {
        c[i].logit = expf((c[i].logit - mx) * inv_t);
        total += c[i].logit;
    }
    if (s->p.top_p < 1.0f) { /* nucleus (both paths above sorted): the shortest best-first
                                  prefix with mass >= top_p */
        double cum = 0.0, want = (double)s->p.top_p * (whole >= 0 ? whole : total);
        size_t keep = n;
        for (size_t i = 0; i < n; i++) {
            cum += c[i].logit;
            if (cum >= want) {
                keep = i + 1;
                break;
            }
        }
        n = keep;
        total = cum;
    }
    if (s->p.min_p > 0.0f) { /* the best token's weight is 1: keep weights >= min_p, in order */
        size_t k = 0;
        total = 0.0;
        for (size_t i = 0; i < n; i++)
            if (c[i].logit >= s->p.min_p) total += c[i].logit, c[k++] = c[i];
        n = k; /* never 0: the best has weight 1 */
    }
    *n_out = n;
    *total_out = total;
    return SM_OK;
}

/* candidates, then the marks of overrides cleared. */
static sm_status dist(sm_sampler *s, const float *logits, bool masked, size_t *n_out, double *total_out) {
    sm_status st = candidates(s, logits, masked, n_out, total_out);
    unmark(s);
    return st;
}

bool sm_sampler_add_bias(sm_bias_list *l, int32_t id, float bias) {
    int i = 0;
    while (i < l->n && l->e[i].id != id) i++;
    if (i == SM_SAMPLER_MAX_BIAS) return false;
    if (i == l->n) l->e[l->n++] = (sm_logit_bias){id, 0.0f};
    l->e[i].bias += bias;
    return true;
}

sm_status sm_sampler_check(const sm_sampler_params *p, size_t n_vocab, sm_error *err) {
    for (int i = 0; i < p->bias.n; i++)
        if (p->bias.e[i].id < 0 || (size_t)p->bias.e[i].id >= n_vocab)
            return sm_error_set(err, SM_ERR_INPUT, "logit_bias: token %d is not in the vocabulary (0 to %zu)",
                                (int)p->bias.e[i].id, n_vocab - 1);
    return SM_OK;
}

sm_status sm_sampler_dist(sm_sampler *s, const float *logits, const sm_candidate **c, size_t *n) {
    double total;
    *c = s->cand;
    return dist(s, logits, false, n, &total);
}

/* Draws from logits (masked: see dist). */
static sm_status draw(sm_sampler *s, const float *logits, bool masked, int32_t *out) {
    const sm_candidate *c = s->cand;
    size_t n;
    double total;
    sm_status st = dist(s, logits, masked, &n, &total);
    if (st) return st;
    /* a draw even from one candidate, as before min-p: the RNG stream does not depend on how
       many survive (greedy's draw picks its argmax and changes nothing it decides) */
    double r = (double)next_f32(&s->rng) * total, acc = 0.0;
    for (size_t i = 0; i < n; i++) {
        acc += c[i].logit;
        if (r < acc) {
            *out = c[i].id;
            return SM_OK;
        }
    }
    while (n > 1 && c[n - 1].logit == 0) n--; /* rounding left r at the very top: the last one that has weight */
    *out = c[n - 1].id;
    return SM_OK;
}

sm_status sm_sampler_sample(sm_sampler *s, const float *logits, int32_t *out) {
    return draw(s, logits, false, out);
}

sm_status sm_sampler_sample_masked(sm_sampler *s, const float *logits, const uint64_t *allow, int32_t *out) {
    if (!allow) return draw(s, logits, false, out);
    size_t V = s->n_vocab;
    float *m = s->masked;
    for (size_t w = 0; w * 64 < V; w++) { /* the allowed logits as they are, the others -infinity */
        uint64_t bits = allow[w];
        size_t end = w * 64 + 64 < V ? w * 64 + 64 : V;
        for (size_t i = w * 64; i < end; i++) {
            bool ok = (bits >> (i - w * 64)) & 1;
            if (ok && !isfinite(logits[i])) return SM_ERR_RUNTIME;
            m[i] = ok ? logits[i] : -INFINITY;
        }
    }
    return draw(s, m, true, out);
}

void sm_sampler_reset(sm_sampler *s, const sm_sampler_params *p) {
    forget(s);
    s->p = *p;
    s->rng = p->seed;
}
