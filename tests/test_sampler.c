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
    sm_arena_free(&arena);
}
