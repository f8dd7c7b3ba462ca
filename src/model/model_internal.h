/*
** model_internal.h -- structs shared by model.c and the architectures.
*/
#ifndef SM_MODEL_INTERNAL_H
#define SM_MODEL_INTERNAL_H

#include "sm_model.h"
#include "sm_weights.h"

typedef struct gpt2_layer {
    const float *ln1_g, *ln1_b;   /* (C), (C) or NULL without biases */
    const float *qkv_w, *qkv_b;   /* (3C, C), (3C): rows are q | k | v, heads contiguous */
    const float *proj_w, *proj_b; /* (C, C), (C) */
    const float *ln2_g, *ln2_b;   /* (C), (C) */
    const float *up_w, *up_b;     /* (4C, C), (4C) */
    const float *down_w, *down_b; /* (C, 4C), (C) */
} gpt2_layer;

struct sm_model {
    sm_config cfg;
    sm_weights w;
    const float *tok_embd;   /* (V, C) */
    const float *pos_embd;   /* (n_ctx, C) */
    const float *lnf_g, *lnf_b; /* (C), (C) */
    const float *out_w;      /* (V, C): tok_embd when tied */
    gpt2_layer *layers;      /* (n_layer) */
};

typedef struct sm_run {
    size_t start, len, seq, pos;
} sm_run;

struct sm_state {
    const sm_model *m;
    const sm_kernels *k;
    sm_pool *pool;
    sm_state_params p;
    float *x;      /* (B, C) residual stream */
    float *xn;     /* (B, C) normalised input of the next matmul */
    float *qkv;    /* (B, 3C) */
    float *att;    /* (B, C) attention output, heads concatenated */
    float *tmp;    /* (B, C) projection output before the residual add */
    float *hid;    /* (B, 4C) MLP hidden */
    float *logits; /* (B or 1, V) */
    float *kt;     /* (n_seq, n_layer, n_head, hs, n_ctx) keys, transposed per head */
    float *v;      /* (n_seq, n_layer, n_head, n_ctx, hs) values */
    size_t kv_seq_floats;  /* floats of one sequence's keys (or values) */
    float *scratch;        /* (n_threads, scratch_floats) */
    size_t scratch_floats; /* per thread: matmul panel or attention scores */
    /* the forward call in flight: n token rows in runs, each run the rows
       start..start+len-1 of one sequence at positions pos.. */
    const int32_t *tokens;
    size_t n;
    sm_run *runs; /* (n_seq) */
    size_t n_runs;
    bool rows_apart; /* several one-row runs: rows computed as each alone (matmul_rows) */
    bool every_row;  /* logits for every row (one run, all_logits), else each run's last */
};

/* Binds and shape-checks every GPT-2 tensor; refuses unknown ones. */
sm_status sm_gpt2_bind(sm_model *m, sm_error *err);

/* The forward pass of one call, as a pool task (see sm_pool_run). */
void sm_gpt2_forward_task(void *state, int ith, int nth);

#endif
