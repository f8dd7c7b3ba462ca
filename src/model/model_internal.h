/*
** model_internal.h -- structs shared by model.c and the architectures.
*/
#ifndef SM_MODEL_INTERNAL_H
#define SM_MODEL_INTERNAL_H

#include "sm_model.h"
#include "sm_weights.h"
#include "sm_gguf.h"
#include "sm_source.h"

/* A weight matrix: its data, elements of type dt (f32, f16 or bf16). */
typedef struct sm_mat {
    const void *data;
    sm_dtype dt;
    const void *r32; /* the same rows repacked (sm_model_repack, layout sm_kernels_repacked(dt)), or NULL */
} sm_mat;

/*
** One block's tensors (matrices typed, vectors f32). Q = n_head * head_dim, KV = n_kv_head * head_dim,
** F = n_ff. gpt2: LayerNorms with biases, gelu MLP (no gate). llama:
** RMSNorms (no b), SwiGLU MLP, no biases.
*/
typedef struct sm_layer {
    const float *ln1_g, *ln1_b;   /* (C), (C) or NULL */
    sm_mat qkv_w;                 /* (Q + 2 KV, C): rows are q | k | v, heads contiguous; */
    sm_mat q_w, k_w, v_w;         /* or data NULL and these: (Q, C), (KV, C), (KV, C) (GGUF) */
    const float *q_b, *k_b, *v_b; /* their biases (qkv_bias), else NULL */
    const float *q_norm, *k_norm; /* (head_dim) RMSNorm of each head (qk_norm), else NULL */
    const float *attn_post, *ffn_post; /* (C) norms of the attention and MLP outputs (post_norms) */
    const float *qkv_b;           /* (Q + 2 KV) */
    sm_mat proj_w;                /* (C, Q) */
    const float *proj_b;          /* (C) */
    const float *ln2_g, *ln2_b;   /* (C), (C) */
    sm_mat gate_w;                /* (F, C), llama */
    sm_mat up_w;                  /* (F, C) */
    const float *up_b;            /* (F) */
    sm_mat down_w;                /* (C, F) */
    const float *down_b;          /* (C) */
} sm_layer;

struct sm_model {
    sm_source *src;          /* owned: the files, the config, the tensors */
    const sm_config *cfg;    /* src's */
    const sm_weights *w;     /* src's: a pointer per tensor */
    size_t params;           /* elements of all its tensors (counted at load: each call's work uses it) */
    sm_mat tok_embd;         /* (V, C) */
    sm_mat pos_embd;         /* (n_ctx, C); data NULL for llama (rotary positions) */
    const float *lnf_g, *lnf_b; /* (C), (C) */
    sm_mat out_w;            /* (V, C): tok_embd when tied */
    sm_layer *layers;        /* (n_layer) */
    const float *rope_div;   /* (head_dim / 2) GGUF rope_freqs.weight: frequencies divided by it */
    size_t q_dim, kv_dim;    /* n_head * head_dim, n_kv_head * head_dim */
    void *r32;               /* owned (sm_alloc_big): the repacked matrices the sm_mats' r32 point into */
    size_t r32_bytes;
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
    float *xn_own; /* (n_threads, SM_FWD_OWN_ROWS, C) each thread's own copy, small calls */
    float *qkv;    /* (B, Q + 2 KV) */
    float *att;    /* (B, Q) attention output, heads concatenated */
    float *tmp;    /* (B, C) projection output before the residual add */
    float *hid;    /* (B, F) MLP hidden */
    float *up;     /* (B, F) llama: the up projection beside the gate in hid */
    float *rope_cos, *rope_sin; /* (B, head_dim / 2) llama: the rotary angles of each row */
    float *rope_freq;           /* (head_dim / 2) llama: rotary frequencies */
    float *rope_cos_l, *rope_sin_l, *rope_freq_l; /* the same for windowed layers with their own
                                                     base (rope_local_theta), else NULL */
    float *logits; /* (B or 1, V) */
    void *kt;      /* (n_seq, ...) keys, blocked (sm_kv_key_at), per sequence block-major: */
    void *v;       /* the same for values (sm_kv_value_at); for each distinct kv_len (the
                      layers that hold that many positions), its blocks in turn, each block
                      those layers' heads' blocks side by side: so a sequence's first
                      positions are the first stretch of its cache, whatever its context;
                      both of type p.kv_type */
    size_t kv_seq_elems;   /* elements of one sequence's keys (or values) */
    size_t *kv_off;        /* (n_layer) where each layer's first block starts in a sequence's cache */
    size_t *kv_bstride;    /* (n_layer) elements from one of a layer's blocks to its next */
    size_t *kv_len;        /* (n_layer) positions each head of the layer holds (padded); fewer
                              than the context: a sliding-window layer's ring (p in slot p % len) */
    size_t *kv_src;        /* (n_seq) whose cache holds each sequence's first kv_shared[seq]
                              positions: its own, or another's (sm_state_kv_share) */
    size_t *kv_shared;     /* (n_seq) a multiple of SM_ATTN_KBLOCK, 0 when none is shared */
    size_t *kv_low;        /* (n_seq) the lowest position written since sm_state_kv_mark */
    float *scratch;        /* (n_threads, scratch_floats) */
    size_t scratch_floats; /* per thread: matmul panel or attention scores */
    size_t scratch_rows;   /* token rows whose quantized activations it keeps (sm_kernels_reuse_begin) */
    void *xshared;         /* quantized activations the threads share (sm_kernels_share_quant); NULL: none */
    /* the forward call in flight: n token rows in runs, each run the rows
       start..start+len-1 of one sequence at positions pos.. */
    const int32_t *tokens;
    size_t n;
    sm_run *runs; /* (n_seq) */
    sm_attn_row *att_rows; /* (n_threads, n_seq) a head's decoding rows for attention_rows */
    const sm_attn_row **att_order; /* (n_threads, n_seq) the same rows, sorted by prefix */
    size_t n_runs;
    const volatile int *cancel; /* polled between blocks (NULL: never) */
    bool stop;         /* thread 0's reading of *cancel, for all threads after a barrier */
    sm_profile *prof;  /* NULL unless profiling */
    double prof_t;     /* thread 0's clock at the end of the last profiled step */
    size_t n_packed; /* rows [0, n_packed): runs of several tokens (matmul); the rest one-row runs, each
                        computed as alone (matmul_rows) */
    bool every_row;  /* logits for every row (one run, all_logits), else each run's last */
};

/*
** Positions layer l's cache holds: the context padded to whole key blocks,
** or for a sliding-window layer, when fewer, its window plus the rows one
** call may add (they are written before they are attended), padded: a ring.
*/
size_t sm_kv_len(const sm_model *m, int l, size_t n_ctx, size_t rows);

/* Whether layer l is the first of the layers holding kv_len[l] positions: the one whose blocks
   start their stretch of a sequence's cache (sm_state_init's layout). */
static inline bool sm_kv_len_first(const sm_state *s, size_t l) {
    for (size_t j = 0; j < l; j++)
        if (s->kv_len[j] == s->kv_len[l]) return false;
    return true;
}

/* Where head kh of layer l's first block is in sequence seq's own cache, in elements of kt (or
   v); its next blocks are s->kv_bstride[l] apart (sm_kv_key_at, sm_kv_value_at). */
static inline size_t sm_kv_head_at(const sm_state *s, size_t seq, int l, size_t kh) {
    return seq * s->kv_seq_elems + s->kv_off[l] + kh * (size_t)s->m->cfg->head_dim * SM_ATTN_KBLOCK;
}

/* Before rows from position p0 on are written into seq's cache (kv.c): a sequence sharing
   them first gets its own copy, and the low-water mark of writes goes down to p0. */
void sm_kv_will_write(sm_state *s, size_t seq, size_t p0);

/* Binds and shape-checks every tensor of the architecture; refuses unknown ones. */
sm_status sm_gpt2_bind(sm_model *m, sm_error *err);
sm_status sm_llama_bind(sm_model *m, sm_error *err);

/* ---- forward.c: binding and the forward pass ---- */

/*
** One tensor an architecture binds: shape (d0[, d1]) (d1 = 0: a vector),
** stored at byte `off` of sm_model, or of each sm_layer when per_layer
** (named "blk.{i}." + name): a matrix (d1 > 0) as an sm_mat of any dtype, a
** vector as an f32 pointer. Biases are skipped when the config has none.
*/
typedef struct sm_bind_spec {
    const char *name;
    int64_t d0, d1;
    size_t off;
    bool per_layer, is_bias;
} sm_bind_spec;

/*
** Binds the specs in order (the per-layer ones layer by layer, where the
** first of them stands), then the output layer (tok_embd when tied, else
** output.weight [V, C]); refuses any tensor left over, naming it.
*/
sm_status sm_bind_model(sm_model *m, const sm_bind_spec *spec, size_t n, sm_error *err);

/*
** Calls of up to SM_FWD_OWN_ROWS rows (decoding) normalise into a copy of
** each thread's own: every thread computes all rows' norm itself, the same
** arithmetic, so the products need no barrier to wait for the norm. Larger
** calls split the rows over the threads into the shared xn, then meet.
*/
#define SM_FWD_OWN_ROWS 4

/* The normalised input thread ith's products read in this call. */
/* Matrix w as this state's products read it: repacked where the model holds it so and the
** state's params ask for it (sm_state_params.repack). */
static inline sm_mat sm_fwd_weights(const sm_state *s, const sm_mat *w) {
    if (s->p.repack && w->r32) return (sm_mat){w->r32, sm_kernels_repacked(w->dt), NULL};
    return *w;
}

static inline float *sm_fwd_xn(const sm_state *s, int ith) {
    return s->n <= SM_FWD_OWN_ROWS
               ? s->xn_own + (size_t)ith * SM_FWD_OWN_ROWS * (size_t)s->m->cfg->n_embd
               : s->xn;
}

/*
** The forward pass of the call in s (s->tokens in s->runs), as a pool task
** (sm_pool_run): every architecture's blocks, step by step. If thread 0
** finds *s->cancel set at the end of a residual step, every thread returns
** there with s->stop true.
*/
void sm_forward_task(void *state, int ith, int nth);

/* After the task: profiling's mark for the output layer, the last step, which no barrier ends. */
void sm_fwd_prof_output(sm_state *s);

#endif
