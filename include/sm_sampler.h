/*
** sm_sampler.h -- choosing the next token from logits.
**
** Greedy (temperature 0), or temperature scaling with optional top-k and
** top-p (nucleus) filtering, driven by an explicit, seeded RNG state: the
** same seed and logits give the same tokens. Scratch comes from the arena at
** init; sampling never allocates and does not modify the logits.
*/
#ifndef SM_SAMPLER_H
#define SM_SAMPLER_H

#include "sm_arena.h"

typedef struct sm_sampler_params {
    float temperature; /* 0 = greedy; > 0 */
    int top_k;         /* 0 = off */
    float top_p;       /* (0, 1]; 1 = off */
    uint64_t seed;
} sm_sampler_params;

typedef struct sm_candidate {
    float logit;
    int32_t id;
} sm_candidate;

typedef struct sm_sampler {
    sm_sampler_params p;
    uint64_t rng;
    size_t n_vocab;        /* ids considered: 0..n_vocab-1 */
    sm_candidate *cand;    /* (n_vocab) scratch */
} sm_sampler;

/* Carves scratch for n_vocab candidates from arena (measuring arenas work too). */
sm_status sm_sampler_init(sm_sampler *s, const sm_sampler_params *p, size_t n_vocab,
                          sm_arena *arena);

/* New parameters and seed for the next sequence; keeps the scratch. */
void sm_sampler_reset(sm_sampler *s, const sm_sampler_params *p);

/*
** Picks a token from logits (n_vocab). SM_ERR_RUNTIME if a logit is NaN or
** infinite (the model produced garbage: stop rather than emit it).
*/
sm_status sm_sampler_sample(sm_sampler *s, const float *logits, int32_t *out);

#endif
