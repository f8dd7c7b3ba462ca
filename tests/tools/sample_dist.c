/*
** sample_dist.c -- test tool: the sampler's distribution and draws for one
** vector of logits, for a NumPy reference (tests/test_sampling.py).
**
**   sample_dist TEMP TOP_K TOP_P MIN_P REPEAT_PENALTY LAST_N PRESENCE FREQUENCY HISTORY DRAWS SEED [BIAS]
**     HISTORY  comma-separated ids the penalties look at ("-": none)
**     BIAS     logit_bias as comma-separated id:bias pairs
**     logits   raw little-endian float32 on stdin (n_vocab of them)
**
** Prints "id probability" (normalised, the sampler's order) for each
** candidate sm_sampler_dist leaves, then "draws" and the count of each id
** drawn by DRAWS calls of sm_sampler_sample (history fixed: nothing accepted).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sm_sampler.h"

#define MAX_VOCAB (1 << 20)

int main(int argc, char **argv) {
    if (argc != 12 && argc != 13) {
        fprintf(stderr, "usage: sample_dist TEMP TOP_K TOP_P MIN_P REPEAT_PENALTY LAST_N PRESENCE "
                        "FREQUENCY HISTORY DRAWS SEED [ID:BIAS,...] < logits.f32\n");
        return 2;
    }
    sm_sampler_params p = {.temperature = strtof(argv[1], NULL), .top_k = atoi(argv[2]),
                           .top_p = strtof(argv[3], NULL), .min_p = strtof(argv[4], NULL),
                           .repeat_penalty = strtof(argv[5], NULL), .repeat_last_n = atoi(argv[6]),
                           .presence_penalty = strtof(argv[7], NULL),
                           .frequency_penalty = strtof(argv[8], NULL),
                           .seed = strtoull(argv[11], NULL, 10)};
    for (char *b = argc == 13 ? argv[12] : ""; *b;) {
        int32_t id = (int32_t)strtol(b, &b, 10);
        if (*b == ':') b++;
        if (!sm_sampler_add_bias(&p.bias, id, strtof(b, &b))) return 2;
        if (*b == ',') b++;
    }
    long draws = atol(argv[10]);
    float *logits = malloc(MAX_VOCAB * sizeof *logits);
    int32_t *hist = malloc(SM_SAMPLER_MAX_LAST_N * 4 * sizeof *hist);
    long *count = calloc(MAX_VOCAB, sizeof *count);
    if (!logits || !hist || !count) return 1;
    size_t V = fread(logits, sizeof *logits, MAX_VOCAB, stdin), nh = 0;
    if (!V) {
        fprintf(stderr, "no logits on stdin\n");
        return 2;
    }
    for (char *s = argv[9]; *s && *s != '-' && nh < SM_SAMPLER_MAX_LAST_N * 4;) {
        hist[nh++] = (int32_t)strtol(s, &s, 10);
        if (*s == ',') s++;
    }
    sm_arena arena, meas;
    sm_sampler smp;
    sm_arena_measure(&meas); /* the sampler's scratch, measured as the runner plans it */
    sm_sampler_init(&smp, &p, V, &meas);
    if (sm_arena_init(&arena, meas.used) || sm_sampler_init(&smp, &p, V, &arena)) {
        fprintf(stderr, "sampler setup failed\n");
        return 1;
    }
    sm_sampler_history(&smp, hist, nh);
    const sm_candidate *c;
    size_t n;
    if (sm_sampler_dist(&smp, logits, &c, &n)) {
        fprintf(stderr, "sm_sampler_dist: non-finite logits\n");
        return 1;
    }
    double total = 0;
    for (size_t i = 0; i < n; i++) total += c[i].logit;
    for (size_t i = 0; i < n; i++) printf("%d %.9g\n", c[i].id, c[i].logit / total);
    printf("draws\n");
    for (long d = 0; d < draws; d++) {
        int32_t id;
        if (sm_sampler_sample(&smp, logits, &id)) return 1;
        count[id]++;
    }
    for (size_t i = 0; i < V; i++)
        if (count[i]) printf("%zu %ld\n", i, count[i]);
    sm_arena_free(&arena);
    free(logits);
    free(hist);
    free(count);
    return 0;
}
