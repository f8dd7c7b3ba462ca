/*
** sm_sampler.h -- choosing the next token from logits.
**
** In this order: logit_bias (a number added to chosen ids' logits, as
** OpenAI's and llama.cpp's logit_bias; -100 all but bans a token, +100 all
** but forces it), repetition penalties over the last repeat_last_n tokens
** (llama.cpp's: a token seen c times has its logit divided by
** repeat_penalty if positive, multiplied if not, then lowered by
** c * frequency_penalty + presence_penalty), then greedy (temperature 0:
** the argmax), or top-k, temperature, top-p (nucleus) and min-p (tokens
** whose probability is below min_p times the top token's go), and a draw
** from an explicit, seeded RNG state: the same seed, history and logits
** give the same tokens (the order of transformers' logits processors;
** llama.cpp applies its temperature after top-p and min-p). Top-k is one
** heap pass and top-p over the whole vocabulary sorts only the candidates
** near its nucleus, so neither sorts n_vocab logits. Scratch comes from the
** arena at init; sampling never allocates and does not modify the logits.
*/
#ifndef SM_SAMPLER_H
#define SM_SAMPLER_H

#include "sm_arena.h"

#define SM_SAMPLER_MAX_LAST_N 4096 /* repeat_last_n at most */
#define SM_SAMPLER_MAX_BIAS 1024   /* logit_bias entries at most */

typedef struct sm_logit_bias {
    int32_t id;
    float bias; /* finite */
} sm_logit_bias;

/* logit_bias: e[i].bias added to logit e[i].id first (an id once: sm_sampler_add_bias). */
typedef struct sm_bias_list {
    int n;
    sm_logit_bias e[SM_SAMPLER_MAX_BIAS];
} sm_bias_list;

typedef struct sm_sampler_params {
    float temperature; /* 0 = greedy; > 0 */
    int top_k;         /* 0 = off */
    float top_p;       /* (0, 1]; 1 = off */
    uint64_t seed;
    float min_p;             /* [0, 1]; 0 = off */
    float repeat_penalty;    /* > 0; 1 (or 0, as zeroed) = off */
    int repeat_last_n;       /* tokens the penalties look back over, 0..SM_SAMPLER_MAX_LAST_N */
    float presence_penalty;  /* 0 = off */
    float frequency_penalty; /* 0 = off */
    sm_bias_list bias;       /* logit_bias */
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
    int32_t *count;        /* (n_vocab) times each id is in recent */
    int32_t *recent;       /* (SM_SAMPLER_MAX_LAST_N) ring of the last tokens */
    sm_candidate *pen;     /* (SM_SAMPLER_MAX_LAST_N) the window's ids with their penalized logits */
    float *masked;         /* (n_vocab) logits a grammar's mask left (sm_sampler_sample_masked) */
    size_t n_recent, recent_at;
} sm_sampler;

/* Carves scratch for n_vocab candidates from arena (measuring arenas work too). */
sm_status sm_sampler_init(sm_sampler *s, const sm_sampler_params *p, size_t n_vocab,
                          sm_arena *arena);

/* Adds bias to id's entry of l (an id given again: the sum, as llama.cpp applies both); false
   when l already holds SM_SAMPLER_MAX_BIAS ids. */
bool sm_sampler_add_bias(sm_bias_list *l, int32_t id, float bias);

/* SM_ERR_INPUT naming logit_bias when an id of p's logit_bias is outside 0..n_vocab-1. */
sm_status sm_sampler_check(const sm_sampler_params *p, size_t n_vocab, sm_error *err);

/* New parameters and seed for the next sequence (the history is cleared); keeps the scratch. */
void sm_sampler_reset(sm_sampler *s, const sm_sampler_params *p);

/* The history becomes the last repeat_last_n of ids[0..n) (a sequence's prompt). */
void sm_sampler_history(sm_sampler *s, const int32_t *ids, size_t n);

/* Adds token id to the history the penalties look at (prompt tokens too, as llama.cpp does). */
void sm_sampler_accept(sm_sampler *s, int32_t id);

/*
** The distribution sample draws from: *c points at the n candidates left
** (returned), each with its unnormalised weight in .logit, best first when
** top-k, top-p or min-p sorted them. Greedy gives the argmax alone with
** weight 1. SM_ERR_RUNTIME as sample. For tests against a reference.
*/
sm_status sm_sampler_dist(sm_sampler *s, const float *logits, const sm_candidate **c, size_t *n);

/*
** Picks a token from logits (n_vocab). SM_ERR_RUNTIME if a logit is NaN or
** infinite (the model produced garbage: stop rather than emit it).
*/
sm_status sm_sampler_sample(sm_sampler *s, const float *logits, int32_t *out);

/*
** As sm_sampler_sample over the tokens bitmap allow (n_vocab bits; NULL:
** all) takes: every setting (penalties, top-k, top-p, min-p, temperature)
** applies to those alone. SM_ERR_INPUT when allow takes none.
*/
sm_status sm_sampler_sample_masked(sm_sampler *s, const float *logits, const uint64_t *allow, int32_t *out);

#endif
