/*
** sm_model.h -- a loaded model and its run state.
**
** sm_model is the read-only part: a source's validated config and tensors
** (sm_source.h: mapped in place, or made once at open); tensors are checked against the architecture (names,
** dtypes, shapes) at load. sm_state is everything one run writes: the
** activations for the largest batch, the KV-cache and the logits. Its size is
** planned first (sm_state_plan), then it is carved from a caller-provided
** arena (sm_state_init); sm_state_forward never allocates.
**
** Usage:
**   sm_model_load(&m, dir, true, &err);
**   sm_state_plan_bytes(m, &params, &plan, &err);   -> plan.total bytes
**   sm_arena_init(&arena, plan.total + other needs);
**   sm_state_init(&s, m, &params, pool, &arena, &err);
**   sm_state_forward(s, prompt, n, 0, &logits, &err); then one token at a time.
*/
#ifndef SM_MODEL_H
#define SM_MODEL_H

#include "sm_arena.h"
#include "sm_config.h"
#include "sm_kernels.h"
#include "sm_pool.h"

typedef struct sm_model sm_model;
typedef struct sm_state sm_state;

struct sm_source;

/*
** A model bound to source src (sm_source.h: opened with its weights), whose
** tensors are checked against the architecture (names, dtypes, shapes).
** The model owns src from the call on, also when it fails.
*/
sm_status sm_model_open(sm_model **out, struct sm_source *src, sm_error *err);
/* sm_source_open (mapped unless use_mmap is false), then sm_model_open. */
sm_status sm_model_load(sm_model **out, const char *path, bool use_mmap, sm_error *err);
void sm_model_free(sm_model *m);
/*
** Repacks (sm_kernels_repack) every block matrix and the output matrix
** (unless tied to the embeddings in a type other than f32) whose type is in `types` (bits 1u <<
** dtype) and whose shape allows, into one block the model owns, on up to
** n_threads threads; states whose params set repack multiply those. Once
** per model: a later call does nothing. The file's rows stay as they were
** (other states may read them). SM_ERR_NOMEM if the block cannot be had.
*/
sm_status sm_model_repack(sm_model *m, unsigned types, int n_threads, sm_error *err);
/* Bytes of the model's repacked matrices (0 before sm_model_repack or if none). */
size_t sm_model_repacked_bytes(const sm_model *m);

const sm_config *sm_model_config(const sm_model *m);
/* What the model was opened from: its kind, its GGUF metadata, the tensors made at open. */
const struct sm_source *sm_model_source(const sm_model *m);

/* The data of tensor i of sm_model_config(m)->tensors (in the file, or a copy made at load). */
const void *sm_model_tensor_data(const sm_model *m, size_t i);

size_t sm_model_params(const sm_model *m);

/* SM_ERR_FORMAT naming the first tensor with a NaN or infinite weight. */
sm_status sm_model_check_weights(const sm_model *m, sm_error *err);      /* number of weights */
size_t sm_model_weight_bytes(const sm_model *m); /* bytes of tensor data */

/* Most sequences one state decodes together (sm_state_decode). */
#define SM_MAX_SEQ 256

typedef struct sm_state_params {
    size_t n_ctx;     /* KV-cache length in tokens, 1..config n_ctx */
    size_t max_batch; /* most tokens one forward call takes, 1..n_ctx */
    bool all_logits;  /* logits for every token of a call, not just the last */
    int n_threads;    /* threads of the pool the state will run on */
    const sm_kernels *kernels; /* the table forward uses (plan needs its scratch size) */
    size_t n_seq;     /* sequences with their own KV-cache, 1..SM_MAX_SEQ (0 = 1) */
    sm_dtype kv_type; /* of the KV-cache: SM_DTYPE_F32 (as when zeroed) or SM_DTYPE_F16 */
    bool repack;      /* multiply the matrices sm_model_repack repacked in that layout (kernels
                         must take it: sm_kernels_repack_types) */
    size_t row_logits; /* sm_state_forward_rows's calls take up to this many tokens, logits for each
                          (1..max_batch; 0 = 1): rows of logits planned, besides one per sequence */
} sm_state_params;

typedef struct sm_state_plan {
    size_t total;       /* arena bytes sm_state_init carves, alignment included */
    size_t kv_cache;    /* of which keys and values */
    size_t activations; /* of which activations for max_batch tokens */
    size_t logits;      /* of which logits */
    size_t scratch;     /* of which per-thread kernel scratch */
} sm_state_plan;

/* Checks params against the model and fills plan. SM_ERR_INPUT on bad params. */
sm_status sm_state_plan_bytes(const sm_model *m, const sm_state_params *p, sm_state_plan *plan,
                              sm_error *err);

/*
** Carves a state from `arena` (which must have plan.total bytes free). The
** state lives as long as the arena; there is no free. pool must have
** p->n_threads threads. On a measuring arena it only adds the state's size
** (pool may then be NULL and *out stays NULL), so a caller that carves more
** from the same arena plans everything in one walk.
*/
sm_status sm_state_init(sm_state **out, const sm_model *m, const sm_state_params *p,
                        sm_pool *pool, sm_arena *arena, sm_error *err);

/*
** Runs n tokens at positions pos..pos+n-1 (1 <= n <= max_batch,
** pos + n <= n_ctx), appending their keys and values to the cache. *logits
** points into the state: (n, n_vocab) with all_logits, else (1, n_vocab) for
** the last token; valid until the next call. SM_ERR_INPUT for a token id
** outside the vocabulary or a position past the context.
*/
sm_status sm_state_forward(sm_state *s, const int32_t *tokens, size_t n, size_t pos,
                           const float **logits, sm_error *err);

/*
** Runs n >= 1 tokens at positions pos.. as forward calls of up to max_batch
** tokens each (prompts longer than the batch), the calls ending at
** multiples of max_batch: a position's call never depends on where the
** prefill began, so a prompt prefilled after a cached prefix computes its
** rows as the whole prompt prefilled from 0 does (see sm_prefix.h). *logits
** is that of the last call, as sm_state_forward gives it.
*/
sm_status sm_state_prefill(sm_state *s, const int32_t *tokens, size_t n, size_t pos,
                           const float **logits, sm_error *err);

/* As sm_state_forward and sm_state_prefill, on sequence seq's KV-cache (0..n_seq-1). */
sm_status sm_state_forward_seq(sm_state *s, size_t seq, const int32_t *tokens, size_t n,
                               size_t pos, const float **logits, sm_error *err);
sm_status sm_state_prefill_seq(sm_state *s, size_t seq, const int32_t *tokens, size_t n,
                               size_t pos, const float **logits, sm_error *err);

/*
** As sm_state_forward_seq, with the logits of every one of the n tokens
** ((n, n_vocab)), whatever all_logits says: 1 <= n <= sm_state_row_logits.
** For a prompt's own log-probabilities (an OpenAI "echo").
*/
sm_status sm_state_forward_rows(sm_state *s, size_t seq, const int32_t *tokens, size_t n, size_t pos,
                                const float **logits, sm_error *err);
/* The most tokens sm_state_forward_rows takes. */
size_t sm_state_row_logits(const sm_state *s);

/*
** A sequence's keys and values by positions, every layer, as bytes (for the
** prefix cache and the prompt-cache file): sm_state_kv_bytes per position,
** in the state's kv_type, layer by layer, in each layer kv head by kv head
** its keys then its values. get copies positions [p0, p0 + n) of seq out
** to dst, where `end` is the sequence's length (the position after its
** last written one); it returns false if a sliding-window layer no longer
** holds some of them (their bytes are then zeros: only the window before a
** later position is ever read). put copies them into seq (in increasing
** positions: a window's ring keeps the latest). Neither checks its range:
** positions below n_ctx, seq below n_seq.
*/
size_t sm_state_kv_bytes(const sm_state *s);
size_t sm_model_kv_bytes(const sm_model *m, sm_dtype kv_type); /* the same, before a state */
bool sm_state_kv_get(const sm_state *s, size_t seq, size_t p0, size_t n, size_t end, void *dst);
void sm_state_kv_put(sm_state *s, size_t seq, size_t p0, size_t n, const void *src);

/*
** Shared prefixes: sequence seq reads its positions [0, n) from sequence
** src's cache instead of its own, so one copy of a prefix serves many
** sequences (n a multiple of SM_ATTN_KBLOCK; n = 0 ends the sharing). The
** caller keeps src's rows [0, n) in place and equal to what seq's own would
** be while they are shared; seq's rows from n on are its own. A row read
** from another sequence is read as its own would be: no result changes.
** kv_get reads shared positions where they are; kv_put into them first
** (or a forward call writing there) gives seq its own copy. Returns
** false, changing nothing, when the state cannot share: a layer's cache is
** a sliding window's ring, n is unaligned or past the context, src is seq,
** or src itself shares.
*/
bool sm_state_kv_share(sm_state *s, size_t seq, size_t src, size_t n);
/* Copies positions [0, n) of src's cache (where src reads them) into seq's own; n a multiple
   of SM_ATTN_KBLOCK. For a sequence taking over a prefix others share. */
void sm_state_kv_copy(sm_state *s, size_t seq, size_t src, size_t n);
/* How many of seq's first positions it reads from another sequence's cache (0: none), and
   from which (*src; seq itself when none). */
size_t sm_state_kv_shared(const sm_state *s, size_t seq, size_t *src);
/*
** Whether rows a caller keeps track of are still in seq's cache: the lowest
** position written into it (by a forward call or kv_put) since
** sm_state_kv_mark(s, seq), SIZE_MAX when none (0 before the first mark).
** Any writer may use a sequence; a caller that keeps rows there for later
** (the scheduler's slots) trusts only those below this.
*/
size_t sm_state_kv_low(const sm_state *s, size_t seq);
void sm_state_kv_mark(sm_state *s, size_t seq);
/*
** Asks for the memory of seq's own cache of positions [0, n) now (a hint:
** nothing is written), at most SM_KV_RESERVE_MAX bytes: a sequence about to
** fill them gets its pages in one call instead of a page fault at each new
** block while it decodes beside others (each fault stalls every thread of
** the step: 4 ms for a 2 MiB page on a fresh VM).
*/
#define SM_KV_RESERVE_MAX ((size_t)64 << 20)
void sm_state_kv_reserve(sm_state *s, size_t seq, size_t n);

/* The widest attention window of a layer whose cache is a ring in states made with p (0:
** every layer holds the whole context). A query at position q reads keys q - window + 1 .. q
** of such a layer. */
size_t sm_model_kv_window(const sm_model *m, const sm_state_params *p);

/*
** Batched decoding: one token each for n distinct sequences (1 <= n <=
** n_seq), tokens[i] at position poss[i] of sequence seqs[i]. The sequences
** share every pass over the weights. *logits is (n, n_vocab), row i bit for
** bit what sm_state_forward_seq(s, seqs[i], &tokens[i], 1, poss[i]) gives.
*/
sm_status sm_state_decode(sm_state *s, const int32_t *tokens, const size_t *seqs,
                          const size_t *poss, size_t n, const float **logits, sm_error *err);

/*
** Several sequences in one call: row i is tokens[i] at position poss[i] of
** sequence seqs[i]; a sequence's rows are one run of consecutive rows and
** positions. Runs of 4 to max_batch rows (prompts prefilled together) come
** first, then runs of 1 row (sequences decoding; only those: that is
** sm_state_decode), so each run gets exactly what it gets in a call of its
** own: the prompts' rows go through the packed products, the one-row runs
** through the row-by-row ones, column block by column block, so both read
** the weights once. *logits is (runs, n_vocab): the last row of each run, in
** run order. n <= max(max_batch, n_seq).
*/
sm_status sm_state_forward_many(sm_state *s, const int32_t *tokens, const size_t *seqs,
                                const size_t *poss, size_t n, const float **logits,
                                sm_error *err);

/*
** Where forward time goes, for `bench`: wall time per kind of step (thread
** 0's clock read at the barriers between steps, so a step's time includes
** waiting for the slowest thread), and the arithmetic and bytes the step
** does or reads (weights, KV-cache), from the shapes. Callers may add their
** own steps (sampling) to the same record.
*/
typedef enum {
    SM_OP_MATMUL,    /* linear layers of the blocks (QKV, projection, MLP) */
    SM_OP_ATTENTION, /* rotary embedding, cache append, Q.K^T, softmax, P.V */
    SM_OP_NORM,      /* LayerNorm / RMSNorm (and the embedding lookup) */
    SM_OP_ACT,       /* GELU / SwiGLU */
    SM_OP_OUTPUT,    /* final norm and the output layer (the vocabulary product) */
    SM_OP_SAMPLE,    /* sampling (added by the caller) */
    SM_OP_COUNT
} sm_op;

typedef struct sm_profile {
    double s[SM_OP_COUNT];     /* seconds */
    double flops[SM_OP_COUNT]; /* floating-point operations (a multiply-add is 2) */
    double bytes[SM_OP_COUNT]; /* bytes of weights and cache read */
} sm_profile;

const char *sm_op_name(sm_op op);

/* Forward calls add to *p from now on (NULL: stop). Costs two clock reads per step. */
void sm_state_set_profile(sm_state *s, sm_profile *p);

/*
** Forward calls poll *cancel (NULL: never) between blocks; once it is
** non-zero a call stops within a block's time and returns SM_ERR_CANCELLED,
** its logits and the cache positions it was writing unusable.
*/
void sm_state_set_cancel(sm_state *s, const volatile int *cancel);

/* The parameters the state was built with, and its model. */
const sm_state_params *sm_state_params_of(const sm_state *s);
const sm_model *sm_state_model(const sm_state *s);

#endif
