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
    if (arena->overflow) return SM_ERR_NOMEM;
    return SM_OK;
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

sm_status sm_sampler_sample(sm_sampler *s, const float *logits, int32_t *out) {
    size_t V = s->n_vocab;
    size_t best = 0;
    for (size_t i = 0; i < V; i++) {
        if (!isfinite(logits[i])) return SM_ERR_RUNTIME;
        if (logits[i] > logits[best]) best = i;
    }
    /* greedy, also for a temperature so small that 1/T overflows (its limit) */
    if (s->p.temperature <= 0.0f || !isfinite(1.0f / s->p.temperature)) {
        *out = (int32_t)best;
        return SM_OK;
    }
    float mx = logits[best], inv_t = 1.0f / s->p.temperature;
    sm_candidate *c = s->cand;
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
    /* probabilities (unnormalised) in place of logits */
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
        total = cum;
    }
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
    s->p = *p;
    s->rng = p->seed;
}
