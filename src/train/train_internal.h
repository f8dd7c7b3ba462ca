/*
** train_internal.h -- the trainer's struct, shared by train.c, setup.c and checkpoint.c.
*/
#ifndef SM_TRAIN_INTERNAL_H
#define SM_TRAIN_INTERNAL_H

#include "sm_arena.h"
#include "sm_train.h"

#define SM_NO_TENSOR ((size_t)-1)
#define SM_TRAIN_NORM_CHUNK 4096 /* floats per partial sum of the gradient norm */

/* Offsets (in floats) of one layer's tensors in the parameter buffer. */
typedef struct train_layer {
    size_t ln1_g, ln1_b, qkv_w, qkv_b, proj_w, proj_b;
    size_t ln2_g, ln2_b, up_w, up_b, down_w, down_b;
} train_layer;

/* Activations of one layer kept for the backward pass. */
typedef struct train_acts {
    float *ln1, *ln1_mu, *ln1_rs; /* (BT, C), (BT), (BT) */
    float *qkv;                   /* (BT, 3C) */
    float *probs;                 /* (B, H, T, T) attention weights */
    float *atty;                  /* (BT, C) */
    float *resm;                  /* (BT, C) residual after attention */
    float *ln2, *ln2_mu, *ln2_rs; /* (BT, C), (BT), (BT) */
    float *fch, *fchg;            /* (BT, 4C) before and after GELU */
} train_acts;

struct sm_trainer {
    sm_config cfg; /* shape, and the manifest the parameters are laid out by */
    sm_train_hparams hp;
    const sm_kernels *k;
    sm_pool *pool;
    const uint8_t *text;
    size_t n_train, n_val;
    int step;

    size_t n_floats;  /* parameter buffer length, alignment padding included */
    size_t n_params;  /* real parameters */
    size_t *offset;   /* (n_tensors) start of each tensor in floats */
    bool *decay;      /* (n_tensors) AdamW weight decay applies */
    size_t wte, wpe, lnf_g, lnf_b, out_w;
    train_layer *layers;

    float *params, *grads, *m, *v;
    double *norm_part; /* (n_chunks) partial squared norms */
    size_t n_chunks;

    size_t B, T;   /* batch, sequence length (= n_ctx) */
    int32_t *tokens, *targets; /* (BT) */
    float *res;    /* (L + 1, BT, C) residual stream at each block input, and the last */
    train_acts *acts;
    float *lnf, *lnf_mu, *lnf_rs; /* (BT, C), (BT), (BT) */
    float *logits; /* (BT, V), probabilities then their gradient after the loss */
    float *losses; /* (BT) */
    float *dres, *dln, *datty, *dqkv, *dfch; /* gradients of activations */
    float *ta;      /* (max(4C, 3C, V), BT) a linear layer's d_out^T or in^T, the narrower */
    float *tw;      /* (C + 1, max(4C, V)) a weight gradient computed transposed, and db */
    float *scratch; /* (pool threads, scratch_floats) */
    size_t scratch_floats;

    sm_arena arena;
};

/* The i-th output of the splitmix64 sequence seeded with seed. */
static inline uint64_t sm_train_splitmix(uint64_t seed, uint64_t i) {
    uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/*
** Attention's causal matrices (a head's probabilities, their gradient) are
** held by blocks of SM_TRAIN_ATT_ROWS rows: block [r0, r1) keeps only its
** columns [0, r1), r1 floats a row, the blocks back to back, so the products
** over a block skip the columns no row of it attends to (train.c). The same
** count of floats holds the transposed matrix by column blocks: block
** [c0, c1) keeps the rows [c0, T), T - c0 floats a row.
*/
#define SM_TRAIN_ATT_ROWS 32 /* 64 did 1-2% more work a step (Emerald Rapids, T 256) */

/* The end of the block of rows (or columns) starting at r0 < T: the next block's start, or T. */
static inline size_t sm_train_att_end(size_t r0, size_t T) {
    return T - r0 < SM_TRAIN_ATT_ROWS ? T : r0 + SM_TRAIN_ATT_ROWS;
}

/* Floats of one head's causal matrix for sequence length T. */
static inline size_t sm_train_causal_floats(size_t T) {
    size_t n = 0;
    for (size_t r0 = 0; r0 < T; r0 += SM_TRAIN_ATT_ROWS) {
        size_t r1 = sm_train_att_end(r0, T);
        n += (r1 - r0) * r1;
    }
    return n;
}

/* Floats of one thread's attention scratch (train.c's att_scr) for sequence
   length T, head size hs and matmul panel scratch mm. */
static inline size_t sm_train_att_floats(size_t T, size_t hs, size_t mm) {
    return 7 * T * hs + 2 * sm_train_causal_floats(T) + mm + 16 * 10;
}

#endif
