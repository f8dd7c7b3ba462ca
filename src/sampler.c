/*
** sampler.c -- greedy, temperature, top-k, top-p; own selection and sort
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
    s->work = sm_arena_alloc(arena, n_vocab, sizeof *s->work);
    s->count = sm_arena_alloc(arena, n_vocab, sizeof *s->count);
    s->recent = sm_arena_alloc(arena, SM_SAMPLER_MAX_LAST_N, sizeof *s->recent);
    if (arena->overflow) return SM_ERR_NOMEM;
    if (s->count) memset(s->count, 0, n_vocab * sizeof *s->count);
    return SM_OK;
}

static size_t last_n(const sm_sampler *s) {
    int n = s->p.repeat_last_n;
    return n <= 0 ? 0 : n > SM_SAMPLER_MAX_LAST_N ? SM_SAMPLER_MAX_LAST_N : (size_t)n;
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
    size_t cap = last_n(s);
    for (size_t k = 0; k < s->n_recent; k++) s->count[s->recent[(s->recent_at + k) % cap]] = 0;
    s->n_recent = s->recent_at = 0;
    for (size_t i = n > cap ? n - cap : 0; i < n; i++) sm_sampler_accept(s, ids[i]);
}

static bool penalized(const sm_sampler *s) {
    const sm_sampler_params *p = &s->p;
    return s->n_recent && ((p->repeat_penalty > 0 && p->repeat_penalty != 1.0f) ||
                           p->presence_penalty != 0 || p->frequency_penalty != 0);
}

/* The logits with llama.cpp's penalties applied once to each id in the window. */
static const float *penalize(sm_sampler *s, const float *logits) {
    memcpy(s->work, logits, s->n_vocab * sizeof *logits);
    size_t cap = last_n(s);
    float rp = s->p.repeat_penalty > 0 ? s->p.repeat_penalty : 1.0f;
    for (size_t k = 0; k < s->n_recent; k++) {
        int32_t id = s->recent[(s->recent_at + k) % cap];
        int32_t c = s->count[id];
        if (c <= 0) continue; /* done (marked negative) */
        float *l = &s->work[id];
        *l = *l <= 0 ? *l * rp : *l / rp;
        *l -= (float)c * s->p.frequency_penalty + s->p.presence_penalty;
        s->count[id] = -c;
    }
    for (size_t k = 0; k < s->n_recent; k++) {
        int32_t id = s->recent[(s->recent_at + k) % cap];
        if (s->count[id] < 0) s->count[id] = -s->count[id];
    }
    return s->work;
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

/*
** The k best of logits[0..V) into c[0..k), in heap order: one pass keeping
** a heap of the best so far with the worst at its root, which a logit must
** beat to get in. Past the first few hundred logits almost none does, so
** the cost is about one comparison per logit (no copy of the vocabulary).
*/
static size_t select_top(sm_candidate *c, const float *logits, size_t V, size_t k) {
    for (size_t i = 0; i < k; i++) c[i] = (sm_candidate){logits[i], (int32_t)i};
    for (size_t i = k / 2; i-- > 0;) sift_down(c, i, k);
    for (size_t i = k; i < V; i++) {
        if (logits[i] < c[0].logit) continue; /* the common case */
        sm_candidate x = {logits[i], (int32_t)i};
        if (!before(x, c[0])) continue;
        c[0] = x;
        sift_down(c, 0, k);
    }
    return k;
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

sm_status sm_sampler_dist(sm_sampler *s, const float *logits, const sm_candidate **out,
                          size_t *n_out) {
    size_t V = s->n_vocab;
    for (size_t i = 0; i < V; i++)
        if (!isfinite(logits[i])) return SM_ERR_RUNTIME;
    if (penalized(s)) logits = penalize(s, logits);
    size_t best = 0;
    for (size_t i = 1; i < V; i++)
        if (logits[i] > logits[best]) best = i;
    sm_candidate *c = s->cand;
    *out = c;
    /* greedy, also for a temperature so small that 1/T overflows (its limit) */
    if (s->p.temperature <= 0.0f || !isfinite(1.0f / s->p.temperature)) {
        c[0] = (sm_candidate){1.0f, (int32_t)best};
        *n_out = 1;
        return SM_OK;
    }
    float mx = logits[best], inv_t = 1.0f / s->p.temperature;
    size_t n = V;
    bool sorted = false;
    if (s->p.top_k > 0 && (size_t)s->p.top_k < V) {
        n = select_top(c, logits, V, (size_t)s->p.top_k);
        sort_best_first(c, n); /* the k best in one order whatever found them */
        sorted = true;
    } else {
        for (size_t i = 0; i < V; i++) c[i] = (sm_candidate){logits[i], (int32_t)i};
        if (s->p.top_p < 1.0f) {
            sort_best_first(c, n);
            sorted = true;
        }
    }
    /* probabilities (unnormalised, the best 1) in place of logits */
    double total = 0.0;
    for (size_t i = 0; i < n; i++) {
        c[i].logit = expf((c[i].logit - mx) * inv_t);
        total += c[i].logit;
    }
    if (sorted && s->p.top_p < 1.0f) { /* nucleus: the shortest best-first prefix with mass >= top_p */
        double cum = 0.0, want = (double)s->p.top_p * total;
        size_t keep = n;
        for (size_t i = 0; i < n; i++) {
            cum += c[i].logit;
            if (cum >= want) {
                keep = i + 1;
                break;
            }
        }
        n = keep;
    }
    if (s->p.min_p > 0.0f) { /* the best token's weight is 1: keep weights >= min_p, in order */
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (c[i].logit >= s->p.min_p) c[k++] = c[i];
        n = k; /* never 0: the best has weight 1 */
    }
    *n_out = n;
    return SM_OK;
}

sm_status sm_sampler_sample(sm_sampler *s, const float *logits, int32_t *out) {
    const sm_candidate *c;
    size_t n;
    sm_status st = sm_sampler_dist(s, logits, &c, &n);
    if (st) return st;
    if (n == 1) {
        *out = c[0].id;
        return SM_OK;
    }
    double total = 0.0;
    for (size_t i = 0; i < n; i++) total += c[i].logit;
    double r = (double)next_f32(&s->rng) * total, acc = 0.0;
    for (size_t i = 0; i < n; i++) {
        acc += c[i].logit;
        if (r < acc) {
            *out = c[i].id;
            return SM_OK;
        }
    }
    *out = c[n - 1].id; /* rounding left r at the very top */
    return SM_OK;
}

void sm_sampler_reset(sm_sampler *s, const sm_sampler_params *p) {
    size_t cap = last_n(s);
    for (size_t k = 0; k < s->n_recent; k++) s->count[s->recent[(s->recent_at + k) % cap]] = 0;
    s->n_recent = s->recent_at = 0;
    s->p = *p;
    s->rng = p->seed;
}
