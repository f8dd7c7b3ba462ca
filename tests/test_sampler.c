/* The sampler: greedy, the distribution it draws from, top-k, top-p, seeds, NaN. */
#include <math.h>
#include <string.h>

#include "sm_sampler.h"
#include "test.h"

static sm_arena arena;

static void make(sm_sampler *s, float temp, int k, float p, unsigned long long seed, size_t V) {
    sm_arena_free(&arena);
    sm_sampler_params sp = {.temperature = temp, .top_k = k, .top_p = p, .seed = seed};
    sm_arena meas;
    sm_arena_measure(&meas);
    sm_sampler_init(s, &sp, V, &meas);
    sm_arena_init(&arena, meas.used);
    CHECK(sm_sampler_init(s, &sp, V, &arena) == SM_OK);
}

void test_sampler_greedy_and_topk1(void) {
    float logits[1000];
    unsigned long long st = 11;
    for (int i = 0; i < 1000; i++) logits[i] = test_rand(&st);
    logits[617] = 3.0f;
    sm_sampler s;
    int32_t id;
    make(&s, 0, 0, 1, 1, 1000);
    CHECK(sm_sampler_sample(&s, logits, &id) == SM_OK && id == 617);
    make(&s, 1.5f, 1, 1, 1, 1000); /* top-k 1 is greedy at any temperature */
    for (int i = 0; i < 50; i++) CHECK(sm_sampler_sample(&s, logits, &id) == SM_OK && id == 617);
    logits[3] = 3.0f; /* a tie goes to the lower id */
    make(&s, 0, 0, 1, 1, 1000);
    CHECK(sm_sampler_sample(&s, logits, &id) == SM_OK && id == 3);
    sm_arena_free(&arena);
}

/* Draws many samples and compares frequencies with the expected distribution. */
static void check_freq(float temp, int k, float p, const float *logits, size_t V, const double *want) {
    sm_sampler s;
    make(&s, temp, k, p, 99, V);
    int counts[16] = {0};
    const int n = 40000;
    for (int i = 0; i < n; i++) {
        int32_t id;
        CHECK(sm_sampler_sample(&s, logits, &id) == SM_OK && id >= 0 && (size_t)id < V);
        counts[id]++;
    }
    for (size_t i = 0; i < V; i++) {
        double f = (double)counts[i] / n, sd = sqrt(want[i] * (1 - want[i]) / n);
        CHECKF(fabs(f - want[i]) <= 5 * sd + 1e-9, "temp %g k %d p %g: id %zu freq %g want %g", temp, k,
               p, i, f, want[i]);
    }
}

void test_sampler_distribution(void) {
    const float logits[6] = {1.0f, 0.5f, -1.0f, 2.0f, 0.0f, 1.5f};
    for (int variant = 0; variant < 3; variant++) {
        float temp = variant == 0 ? 1.0f : variant == 1 ? 0.5f : 2.0f;
        int k = variant == 2 ? 3 : 0;
        double w[6], z = 0;
        /* top-3 by logit: ids 3, 5, 0 */
        for (int i = 0; i < 6; i++) {
            bool kept = k == 0 || i == 3 || i == 5 || i == 0;
            w[i] = kept ? exp(logits[i] / temp) : 0;
            z += w[i];
        }
        for (int i = 0; i < 6; i++) w[i] /= z;
        check_freq(temp, k, 1.0f, logits, 6, w);
        if (test_failed()) return;
    }
    sm_arena_free(&arena);
}

void test_sampler_top_p_nucleus(void) {
    /* probabilities 0.5, 0.25, 0.125, 0.0625, 0.0625 at temperature 1 */
    const float logits[5] = {logf(0.0625f), logf(0.25f), logf(0.5f), logf(0.0625f), logf(0.125f)};
    /* top-p 0.7: the best-first prefix reaching 0.7 is {2, 1} (0.75) */
    double w[5] = {0, 0.25 / 0.75, 0.5 / 0.75, 0, 0};
    check_freq(1.0f, 0, 0.7f, logits, 5, w);
    /* top-p 0.8: {2, 1, 4} (0.875) */
    double w2[5] = {0, 0.25 / 0.875, 0.5 / 0.875, 0, 0.125 / 0.875};
    check_freq(1.0f, 0, 0.8f, logits, 5, w2);
    sm_arena_free(&arena);
}

void test_sampler_seeded_and_nan(void) {
    float logits[300];
    unsigned long long st = 5;
    for (int i = 0; i < 300; i++) logits[i] = 3 * test_rand(&st);
    int32_t a[64], b[64], c[64];
    sm_sampler s;
    make(&s, 0.9f, 40, 0.9f, 1234, 300);
    for (int i = 0; i < 64; i++) sm_sampler_sample(&s, logits, &a[i]);
    make(&s, 0.9f, 40, 0.9f, 1234, 300);
    for (int i = 0; i < 64; i++) sm_sampler_sample(&s, logits, &b[i]);
    make(&s, 0.9f, 40, 0.9f, 1235, 300);
    for (int i = 0; i < 64; i++) sm_sampler_sample(&s, logits, &c[i]);
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK(memcmp(a, c, sizeof a) != 0);
    logits[100] = NAN;
    int32_t id;
    CHECK(sm_sampler_sample(&s, logits, &id) == SM_ERR_RUNTIME);
    logits[100] = INFINITY;
    make(&s, 0, 0, 1, 1, 300);
    CHECK(sm_sampler_sample(&s, logits, &id) == SM_ERR_RUNTIME);
    logits[100] = NAN; /* greedy too: neither a NaN nor an unmasked -inf is a logit */
    CHECK(sm_sampler_sample(&s, logits, &id) == SM_ERR_RUNTIME);
    logits[100] = -INFINITY;
    CHECK(sm_sampler_sample(&s, logits, &id) == SM_ERR_RUNTIME);
    sm_arena_free(&arena);
}

/*
** Penalties: the distribution sm_sampler_dist gives with a window of past
** tokens equals the one a penalty-free sampler gives on logits penalized by
** hand with llama.cpp's formula (each id once: / or * repeat_penalty by
** sign, minus count * frequency + presence), for greedy, top-k, top-p and
** the whole vocabulary; ties keep the lower id.
*/
void test_sampler_penalties(void) {
    enum { V = 300, H = 40 };
    float logits[V], ref[V];
    unsigned long long st = 5;
    for (int i = 0; i < V; i++) logits[i] = 4.0f * test_rand(&st) - 2.0f;
    int32_t hist[H + 10];
    for (int i = 0; i < H + 10; i++) hist[i] = (int32_t)((i * 37 + i / 3) % 23) * 13 % V;
    hist[H + 9] = 7;   /* the last: a token that is also the best */
    logits[7] = 5.0f;  /* so the penalties must move the argmax */
    logits[8] = -0.5f; /* a negative logit the repeat penalty multiplies */
    hist[H + 8] = 8;
    const float rp = 1.7f, fp = 0.4f, pp = 0.9f;
    /* the window is the last H ids of hist */
    int count[V] = {0};
    for (int i = 10; i < H + 10; i++) count[hist[i]]++;
    for (int i = 0; i < V; i++) {
        ref[i] = logits[i];
        if (!count[i]) continue;
        ref[i] = ref[i] <= 0 ? ref[i] * rp : ref[i] / rp;
        ref[i] -= (float)count[i] * fp + pp;
    }
    const struct { float t; int k; float p; } modes[] = {{0, 0, 1}, {0.8f, 20, 1}, {1.2f, 0, 0.9f},
                                                           {1.0f, 0, 1}};
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        sm_sampler_params pen = {.temperature = modes[m].t, .top_k = modes[m].k, .top_p = modes[m].p,
                                 .seed = 1, .repeat_penalty = rp, .repeat_last_n = H,
                                 .presence_penalty = pp, .frequency_penalty = fp};
        sm_sampler_params plain = {.temperature = modes[m].t, .top_k = modes[m].k,
                                   .top_p = modes[m].p, .seed = 1};
        sm_arena meas, a, b;
        sm_sampler s, r;
        sm_arena_measure(&meas);
        sm_sampler_init(&s, &pen, V, &meas);
        CHECK(sm_arena_init(&a, meas.used) == 0 && sm_arena_init(&b, meas.used) == 0);
        CHECK(sm_sampler_init(&s, &pen, V, &a) == SM_OK && sm_sampler_init(&r, &plain, V, &b) == SM_OK);
        sm_sampler_history(&s, hist, H + 10);
        const sm_candidate *cs, *cr;
        size_t ns, nr;
        CHECK(sm_sampler_dist(&s, logits, &cs, &ns) == SM_OK && sm_sampler_dist(&r, ref, &cr, &nr) == SM_OK);
        bool same = ns == nr;
        if (modes[m].k || modes[m].p < 1 || modes[m].t == 0) /* sorted, or the argmax */
            for (size_t i = 0; same && i < ns; i++) same = cs[i].id == cr[i].id && cs[i].logit == cr[i].logit;
        else /* indexed by id */
            for (size_t i = 0; same && i < ns; i++) same = cs[i].id == cr[i].id && fabsf(cs[i].logit - cr[i].logit) <= 1e-6f * cr[i].logit;
        CHECKF(same, "mode %zu: %zu candidates, want %zu; first %d (%g) want %d (%g)", m, ns, nr,
               ns ? cs[0].id : -1, ns ? cs[0].logit : 0.0, nr ? cr[0].id : -1, nr ? cr[0].logit : 0.0);
        if (modes[m].t == 0) CHECK(ns == 1 && cs[0].id != 7); /* the repeated best lost */
        sm_arena_free(&a);
        sm_arena_free(&b);
    }
}

/*
** Every sample takes one draw from the RNG, however few candidates are
** left: a step that min-p cuts to one candidate leaves the stream where a
** step with many does, so the next pick is the same.
*/
void test_sampler_one_draw_per_sample(void) {
    enum { V = 500 };
    float peaked[V], flat[V];
    for (int i = 0; i < V; i++) peaked[i] = i == 42 ? 20.0f : 0.0f, flat[i] = 0.0f;
    sm_sampler_params cut = {.temperature = 1, .top_p = 1, .seed = 9, .min_p = 0.5f};
    sm_sampler_params all = {.temperature = 1, .top_p = 1, .seed = 9};
    sm_arena meas, a, b;
    sm_sampler s, r;
    sm_arena_measure(&meas);
    sm_sampler_init(&s, &cut, V, &meas);
    CHECK(sm_arena_init(&a, meas.used) == 0 && sm_arena_init(&b, meas.used) == 0);
    CHECK(sm_sampler_init(&s, &cut, V, &a) == SM_OK && sm_sampler_init(&r, &all, V, &b) == SM_OK);
    const sm_candidate *c;
    size_t n;
    CHECK(sm_sampler_dist(&s, peaked, &c, &n) == SM_OK && n == 1 && c[0].id == 42);
    for (int step = 0; step < 20; step++) {
        int32_t x, y;
        CHECK(sm_sampler_sample(&s, step % 2 ? flat : peaked, &x) == SM_OK);
        CHECK(sm_sampler_sample(&r, step % 2 ? flat : peaked, &y) == SM_OK);
        CHECKF(step % 2 == 0 || x == y, "step %d: %d after a one-candidate step, %d after a full one",
               step, x, y);
    }
    sm_arena_free(&a);
    sm_arena_free(&b);
}

/*
** Greedy over a vocabulary of several scan chunks (5,000 logits): the id a
** plain loop finds (the highest, the lowest id among equals) for maxima in
** every chunk, the last partial one included, ties within and across
** chunks, -0 before +0 as the best (equal: the lower id), a tokens mask
** (allowing one, none: SM_ERR_INPUT), and +inf or NaN anywhere refused.
*/
void test_sampler_greedy_chunks(void) {
    enum { V = 5000 };
    static float logits[V];
    static uint64_t allow[(V + 63) / 64];
    unsigned long long st = 77;
    sm_sampler s;
    int32_t id;
    make(&s, 0, 0, 1, 1, V);
    for (int round = 0; round < 60; round++) {
        for (int i = 0; i < V; i++) logits[i] = test_rand(&st) * 4 - 6;
        int a = (int)((test_rand(&st) + 1) * (V / 2)) % V, b = (int)((test_rand(&st) + 1) * (V / 2)) % V;
        logits[a] = 5.0f;
        if (round % 3 == 0) logits[b] = 5.0f; /* a tie, maybe in another chunk */
        if (round == 1) logits[V - 1] = 9.0f; /* in the last, partial chunk */
        int want = 0;
        for (int i = 1; i < V; i++)
            if (logits[i] > logits[want]) want = i;
        CHECKF(sm_sampler_sample(&s, logits, &id) == SM_OK && id == want, "round %d: %d, want %d", round,
               (int)id, want);
    }
    for (int i = 0; i < V; i++) logits[i] = -1.0f - test_rand(&st);
    logits[3100] = 0.0f, logits[40] = -0.0f; /* equal: the lower id */
    CHECK(sm_sampler_sample(&s, logits, &id) == SM_OK && id == 40);
    memset(allow, 0, sizeof allow);
    allow[4321 / 64] |= 1ull << (4321 % 64);
    CHECK(sm_sampler_sample_masked(&s, logits, allow, &id) == SM_OK && id == 4321);
    memset(allow, 0, sizeof allow);
    CHECK(sm_sampler_sample_masked(&s, logits, allow, &id) == SM_ERR_INPUT);
    logits[4999] = INFINITY;
    CHECK(sm_sampler_sample(&s, logits, &id) == SM_ERR_RUNTIME);
    logits[4999] = NAN;
    CHECK(sm_sampler_sample(&s, logits, &id) == SM_ERR_RUNTIME);
    sm_arena_free(&arena);
}
