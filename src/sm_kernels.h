/*
** sm_kernels.h -- the compute kernels behind one dispatch table.
**
** A table holds one implementation of every hot operation for one ISA:
** scalar (the reference, portable C), avx2 (AVX2 + FMA) and avx512
** (AVX-512F), with the integer products its quantized matmuls use (the
** best this CPU has for that ISA) and the cache size its blocking follows.
** The tables are completed once, from CPU features, when first handed out;
** sm_kernels_select picks one; the model only ever calls through it. A
** table may also be composed: the products of prefill, of decoding and
** attention each taken from the table that runs them fastest on this CPU
** (sm_kernels_op; the choice per CPU family is a table in dispatch.c that
** `bench --pick-kernels` measures), the rest from the best ISA's. Intrinsics live only in
** src/kernels/<isa>.c. Every kernel is a pure function of its inputs: the
** result of a given output element does not depend on how the caller splits
** the work, which is what makes 1- and 2-thread runs bit-identical.
**
** Layouts (row-major, float32 unless said):
**   linear weights      w[N, K]      (out features, in features); f32, f16
**                                    or bf16, widened to f32 in registers
**                                    (exact), so every product and sum is f32
**                                    (but see dot16_types: prefill on
**                                    vdpbf16ps, x rounded to bf16);
**                                    or a quantized type (sm_quant.h): x is
**                                    quantized to 8-bit blocks and each
**                                    block's integer dot product scaled (T < 4
**                                    and matmul_rows stream weight rows; T >= 4
**                                    packs them in integer panels; a repacked
**                                    q4_0 / q8_0 matrix, sm_kernels_repack, is
**                                    read in place for every T), except in
**                                    the scalar table's T >= 4 and where a
**                                    table lacks the integer product (q8_0
**                                    without vpdpbusd): weights dequantized
**                                    into the f32 panels
**   activations         x[T, K]      one row per token
**   key cache (a head)  kt[hs, ctx]  transposed: keys are columns, so
**                                    Q.K^T is a broadcast-multiply product
**   value cache (head)  v[ctx, hs]
*/
#ifndef SM_KERNELS_H
#define SM_KERNELS_H

#include "sm_base.h"
#include "sm_dtype.h"

#include <stddef.h>

/*
** Attention streams keys in blocks of SM_ATTN_KBLOCK for groups of
** SM_ATTN_QGROUP queries (online softmax), so its per-thread scratch holds
** one group's score block and output accumulators, one key block and its
** values widened to f32 (an f16 cache), plus one score row of the context
** for the scalar reference: SM_ATTN_SCRATCH(head_dim, ctx) floats, never
** T x T.
*/
#define SM_ATTN_QGROUP 4
#define SM_ATTN_KBLOCK 64
#define SM_ATTN_SCRATCH(hs, ctx) \
    ((ctx) + SM_ATTN_QGROUP * (SM_ATTN_KBLOCK + SM_ATTN_ACC_STRIDE(hs)) + 2 * SM_ATTN_KBLOCK * (hs))
/* Floats per output accumulator row in that scratch: hs rounded up to 16. */
#define SM_ATTN_ACC_STRIDE(hs) (((hs) + 15) & ~(size_t)15)

/*
** A head's key cache is blocked: keys in blocks of SM_ATTN_KBLOCK, each
** block (hs, SM_ATTN_KBLOCK), dimension-major, so one block's scores are
** products over hs contiguous rows of KBLOCK keys; its values are blocks of
** KBLOCK rows of hs. A head's blocks follow each other (sm_attn_key_index:
** hs * sm_attn_ctx_padded(ctx) elements for ctx positions) or are bstride
** elements apart, the blocks of other heads and layers between them
** (sm_kv_head.bstride: a model state's cache, block-major, so the positions a
** sequence has used are one stretch of memory, whatever its context).
*/
/* Slot j's key dimension d, and its value row, from a head's first block, its blocks bstride
   elements apart. */
static inline size_t sm_kv_key_at(size_t bstride, size_t j, size_t d) {
    return (j / SM_ATTN_KBLOCK) * bstride + d * SM_ATTN_KBLOCK + j % SM_ATTN_KBLOCK;
}
static inline size_t sm_kv_value_at(size_t bstride, size_t j, size_t hs) {
    return (j / SM_ATTN_KBLOCK) * bstride + j % SM_ATTN_KBLOCK * hs;
}
/* The same key index in a head whose blocks follow each other. */
static inline size_t sm_attn_key_index(size_t j, size_t d, size_t hs) {
    return sm_kv_key_at(SM_ATTN_KBLOCK * hs, j, d);
}
static inline size_t sm_attn_ctx_padded(size_t ctx) {
    return (ctx + SM_ATTN_KBLOCK - 1) / SM_ATTN_KBLOCK * SM_ATTN_KBLOCK;
}

/*
** One head's cache as attention reads it: keys blocked (sm_attn_key_index)
** in kt, values (rows of hs) in v, elements of `type` (f32 or f16). With
** ring > 0 (a multiple of SM_ATTN_KBLOCK), position j is held in slot
** j % ring: a sliding window's cache. Slots below `shared` (a multiple of
** SM_ATTN_KBLOCK; 0 with a ring) are read from kt0 and v0 instead, laid
** out the same: another sequence's cache of the same head holding the same
** prefix (the scheduler's shared prefixes), so the prefix is in memory once.
*/
typedef struct sm_kv_head {
    const void *kt, *v;   /* this sequence's own cache */
    const void *kt0, *v0; /* the shared prefix's, for slots < shared (NULL when shared is 0) */
    size_t shared, ring;
    size_t bstride; /* elements from a block to the next (0: SM_ATTN_KBLOCK * hs, contiguous) */
    sm_dtype type;
} sm_kv_head;

/*
** One decoding row of attention_rows: the query q (hs) of one sequence at
** position pos, over its cache kv (keys 0..pos), into out (hs).
*/
typedef struct sm_attn_row {
    float *out;
    const float *q;
    sm_kv_head kv;
    size_t pos;
} sm_attn_row;

/* The keys (kt) or values (v) array that holds slot j of kv. */
static inline const void *sm_kv_keys(const sm_kv_head *kv, size_t j) {
    return j < kv->shared ? kv->kt0 : kv->kt;
}
static inline const void *sm_kv_values(const sm_kv_head *kv, size_t j) {
    return j < kv->shared ? kv->v0 : kv->v;
}
/* Elements from a block of kv to its next. */
static inline size_t sm_kv_stride(const sm_kv_head *kv, size_t hs) {
    return kv->bstride ? kv->bstride : SM_ATTN_KBLOCK * hs;
}

struct sm_kernels;
struct sm_qkernel;

/*
** The core's arithmetic peaks (peak.c): register-only loops of one
** instruction, the ceiling `bench --peaks` measures the products against.
*/
typedef enum sm_peak {
    SM_PEAK_FMA256,     /* f32 vfmadd, 256-bit */
    SM_PEAK_FMA512,     /* f32 vfmadd, 512-bit */
    SM_PEAK_MADDUBS256, /* int8 as the tables multiply without VNNI: vpmaddubsw, vpmaddwd, vpaddd */
    SM_PEAK_VNNI256,    /* int8 AVX-VNNI vpdpbusd, 256-bit */
    SM_PEAK_VNNI512,    /* int8 AVX512-VNNI vpdpbusd, 512-bit */
    SM_PEAK_BF16_512,   /* bf16 AVX512-BF16 vdpbf16ps, 512-bit */
    SM_PEAK_VNNI512_BLOCK, /* SM_PEAK_VNNI512 with a q8_0 block's f32 step per 8 vpdpbusd */
    SM_PEAK_VNNI512_ISTEP, /* SM_PEAK_VNNI512 with an integer scale step (vpmulld, vpaddd) per 8 */
    SM_PEAK_MADDUBS256_RUN, /* vpmaddubsw added up in int16 (vpaddw), widened (vpmaddwd, vpaddd) per 8 */
    SM_PEAK_COUNT
} sm_peak;

/*
** The operations a composed table takes from different tables. Each keeps
** its contract within one table: a product of 1-3 rows and matmul_rows come
** from the same table (ROWS/QROWS), so a row decoded beside others is still
** bit for bit the row decoded alone.
*/
typedef enum sm_kernels_op {
    SM_KOP_GEMM,      /* matmul of 4 or more rows, f32/f16/bf16 weights (prefill, training) */
    SM_KOP_QGEMM,     /* the same, quantized weights */
    SM_KOP_ROWS,      /* matmul of 1-3 rows and matmul_rows, f32/f16/bf16 weights (decoding) */
    SM_KOP_QROWS,     /* the same, quantized weights */
    SM_KOP_ATTENTION, /* attention */
    SM_KOP_COUNT
} sm_kernels_op;

/* A linear-layer product through table k (see matmul below for the contract). */
typedef void (*sm_matmul_fn)(const struct sm_kernels *k, float *restrict out, const float *restrict x,
                             const void *restrict w, sm_dtype wt, const float *restrict bias,
                             size_t T, size_t N, size_t K, size_t n0, size_t n1,
                             float *restrict scratch);

typedef struct sm_kernels {
    /* "scalar", "avx2", "avx512"; a composed table's is its spec, the base table first and each
    ** operation taken from another after it: "avx512,rows=avx2". */
    const char *name;

    /* The table each operation comes from: this table's own (the tables as dispatch.c completes
    ** them), or, composed, the ones its matmul, matmul_rows and attention hand the work to. */
    const struct sm_kernels *from[SM_KOP_COUNT];

    /*
    ** The integer products behind matmul on quantized weights (an
    ** implementation of kernels_internal.h's sm_qkernel): for avx2, AVX-VNNI's
    ** vpdpbusd where the CPU has it, else vpmaddubsw; for avx512,
    ** AVX512-VNNI's where it has it, else avx2's; the scalar reference's.
    */
    const struct sm_qkernel *quant;

    /* Bytes of L2 cache per core (512 KiB if the C library does not say): the
    ** packed products take token rows in blocks whose slice fills half of it. */
    size_t l2_bytes;

    /* Floats of per-thread scratch that matmul needs for f32/f16/bf16 weights
    ** (packed panels); see sm_kernels_scratch for quantized ones. */
    size_t matmul_scratch;

    /* The instruction its packed f32 products (GEMM) run on, whose peak they are measured
    ** against (peak.c); SM_PEAK_COUNT for none (the scalar table). */
    sm_peak gemm_peak;

    /* The 16-bit weight types (bit 1u << dtype) whose packed products (T >= 4, K even) run on
    ** AVX512-BF16's vdpbf16ps, rounding the activations to bf16: bf16 on CPUs that have it
    ** (dispatch.c), none elsewhere. See sm_kernels_dot16_takes. */
    unsigned dot16_types;

    /* Whether matmul and matmul_rows take SM_DTYPE_F32_P32, SM_DTYPE_F16_P32 and
    ** SM_DTYPE_BF16_P32 (sm_kernels_repack): the packed f32 product on panels laid out at
    ** load, for every T; but 16-bit panels of a type dot16_types has: matmul's T >= 4 on
    ** vdpbf16ps (column pairs packed from the panels), matmul_rows exact for every T. */
    bool f32_panels;

    /* How a lone token row on f32 panels (SM_DTYPE_F32_P32) meets the panels after the ones it
    ** reads: 0 the table's one-row product has no such choice (it leaves them to the hardware
    ** prefetchers), 1 it asks for their lines into L2 as it reads (software prefetch: the
    ** avx512 table's default), 2 it could but leaves them to the hardware (--kernels item
    ** prefetch=hw; dispatch.c's choice on CPUs where that reads faster). The same sums. */
    unsigned char row_prefetch;

    /*
    ** out[t, n] = sum_k x[t, k] * w[n, k] (+ bias[n]) for all t < T and
    ** n0 <= n < n1; other columns of out are not touched. bias may be NULL.
    ** w holds elements of type wt; a 16-bit weight gives exactly the result
    ** of its f32 widening, except where dot16_types has its type: there T >= 4
    ** gives sum_k bf16(x[t, k]) w[n, k] (x rounded to bf16, f32 sums). T >= 4 uses packed panels (matrix-matrix, weights
    ** widened while packing), smaller T streams rows of w (matrix-vector,
    ** widened in registers, so 16-bit weights read half the bytes). out must
    ** not alias x or w. k is the table itself (its quant and l2_bytes).
    ** wt SM_DTYPE_F32_T: w held transposed, (K, N), packed from there for
    ** every T (the same panels, so the same bits as its transpose as f32).
    **   out (T, N)  x (T, K)  w (N, K)  bias (N)  scratch (sm_kernels_scratch)
    */
    sm_matmul_fn matmul;

    /*
    ** The same product as matmul, computed row by row: out row t is bit for
    ** bit what matmul gives for that row alone (T = 1), whatever T is. Rows
    ** still share each pass over w. Batched decoding uses it so that a
    ** sequence decoded beside others gives exactly its result decoded alone.
    */
    sm_matmul_fn matmul_rows;

    /*
    ** Causal attention of nh query heads that read one key/value head (head
    ** h's queries at q + h hs, its outputs at out + h hs) for T queries at
    ** positions pos..pos+T-1 over keys 0..pos+T-1, which must already be in
    ** kv's cache (with window > 0, the query at position p sees only keys p - window + 1 ..
    ** p: sliding-window attention; blocks of keys before every query's
    ** window are skipped; kv->ring holds only what a window needs): softmax
    ** of scale * Q.K^T over the unmasked keys only, times V. The scalar
    ** reference takes one query at a time over a whole score row; the SIMD
    ** tables stream blocks of keys (online softmax, see SM_ATTN_SCRATCH).
    ** An f16 cache is half the bytes to read; each key block and its values
    ** are widened to f32 in the scratch, so the result is that of the f32
    ** widening of the cache. Where a slot is read from (kv->shared) changes
    ** no bit.
    ** A head's row is the same bits whatever the other heads' queries are.
    **   out (T rows, stride out_stride, nh hs used)  q (T rows, stride q_stride)
    **   scores: SM_ATTN_SCRATCH(hs, pos + T) scratch
    */
    void (*attention)(float *restrict out, const float *restrict q, const sm_kv_head *kv,
                      float *restrict scores, size_t T, size_t pos, size_t hs, size_t nh,
                      size_t q_stride, size_t out_stride, float scale, size_t window);

    /*
    ** Decoding rows of n sequences, one query each, for a head that is the
    ** only query head of its key/value head (nh = 1) with no window and no
    ** ring: row *rows[i] bit for bit what attention gives for it alone (T =
    ** 1, pos rows[i]->pos). Neighbouring rows that read the same shared prefix
    ** (kv.kt0) go through its key blocks together, up to SM_ATTN_QGROUP at a
    ** time, so each of the prefix's key and value loads serves them all;
    ** which rows are neighbours changes no bit. NULL in a table whose
    ** attention has no such rows (the scalar reference): call attention per
    ** row. scores: SM_ATTN_SCRATCH(hs, 0) scratch.
    */
    void (*attention_rows)(const sm_attn_row *const *rows, size_t n, float *restrict scores, size_t hs,
                           float scale);

    /* x (n) <- softmax(x), in place. n >= 1. */
    void (*softmax)(float *x, size_t n);

    /* out (C) = (x - mean) / sqrt(var + eps) * g + b, for one row; b may be NULL. */
    void (*layernorm)(float *restrict out, const float *restrict x, const float *restrict g,
                      const float *restrict b, size_t C, float eps);

    /* out (C) = x / sqrt(mean(x^2) + eps) * g, for one row (RMSNorm); out may be x (in place). */
    void (*rmsnorm)(float *out, const float *x, const float *restrict g, size_t C, float eps);

    /* gate (n) <- silu(gate) * up = gate / (1 + exp(-gate)) * up (SwiGLU), in place. */
    void (*swiglu)(float *restrict gate, const float *restrict up, size_t n);

    /* y (n) += x: the residual stream's adds, each element one rounding. */
    void (*add)(float *restrict y, const float *restrict x, size_t n);

    /*
    ** Rotary embedding of one head vector x (hs, even), pairs (2i, 2i+1)
    ** rotated by the angle whose cosine and sine are cs[i], sn[i]:
    ** (a, b) <- (a cos - b sin, a sin + b cos).
    */
    void (*rope)(float *restrict x, const float *restrict cs, const float *restrict sn,
                 size_t hs);

    /*
    ** The same rotation with pairs (i, i + hs/2): Hugging Face's "rotate
    ** halves" layout, used where Q and K rows are taken unpermuted.
    */
    void (*rope_halves)(float *restrict x, const float *restrict cs, const float *restrict sn,
                        size_t hs);

    /* x (n) <- gelu(x), tanh approximation / exact erf form, in place. */
    void (*gelu_tanh)(float *x, size_t n);
    void (*gelu_erf)(float *x, size_t n);
    /* d (n) <- d * gelu'(x), the tanh form's derivative (training's backward). */
    void (*gelu_tanh_grad)(float *restrict d, const float *restrict x, size_t n);

    /* out (n) = src (n elements of type dt) widened to f32, exactly. */
    void (*to_f32)(float *restrict out, const void *restrict src, sm_dtype dt, size_t n);

    /* out (n) = exp(x) (the vectorized exp the others use; exposed for tests). */
    void (*exp)(float *restrict out, const float *restrict x, size_t n);

    /*
    ** The sum of x (n), in any order, for any n and alignment: vector loads
    ** over four streams side by side where n allows (the quarters of x),
    ** which bench uses to measure read bandwidth (there n a multiple of 64,
    ** x 64-byte aligned).
    */
    float (*sum)(const float *x, size_t n);

    /*
    ** Rows c0 <= c < c1 of out = in^T, in R rows ldi floats apart, out's rows
    ** ldo floats apart (out[c ldo + r] = in[r ldi + c], r < R): the columns of
    ** in from c0 to c1 (training's backward products, whose threads take column
    ** ranges; its attention's causal blocks, strided both sides). A copy: every
    ** table gives the same bytes.
    */
    void (*transpose)(float *restrict out, size_t ldo, const float *restrict in, size_t ldi, size_t R,
                      size_t c0, size_t c1);
} sm_kernels;

/*
** The table a spec names, if this CPU runs it: "auto" (or NULL) for this
** CPU's choice (the best ISA's table, with the operations the CPU-family
** table in dispatch.c takes from others); "scalar", "avx2" or "avx512" for
** that table alone; or a comma-separated list whose items are a table name
** (the base: every operation from it) or OP=TABLE with OP one of gemm,
** qgemm, rows, qrows, attention (sm_kernels_op), applied in order from auto's
** choice ("rows=scalar": this CPU's choice with decoding's products from the
** reference). The same composition always gives the same pointer, named in
** one canonical form. On a bad spec, returns SM_ERR_INPUT and a message
** naming the item; SM_ERR_NOMEM past 32 distinct compositions.
*/
sm_status sm_kernels_choose(const char *spec, const sm_kernels **out, sm_error *err);

/* sm_kernels_choose without the message: NULL if the spec is bad or the CPU lacks a table. */
const sm_kernels *sm_kernels_select(const char *name);

/* "gemm", "qgemm", "rows", "qrows", "attention". */
const char *sm_kernels_op_name(sm_kernels_op op);

/* Into buf (n bytes, cut short if needed): where each operation of k comes from, with the
** integer products of its quantized ones and the bf16 products of its GEMM where it has them:
** "gemm avx512 (bf16: vdpbf16ps), qgemm avx2 (avx2), rows scalar, ...". */
void sm_kernels_describe(const sm_kernels *k, char *buf, size_t n);

/*
** This CPU as CPUID names it: vendor ("AuthenticAMD", "GenuineIntel"; "" off
** x86), family and model with their extended fields added (AMD Zen 3 is
** family 25, models 0-15 and 32-95; Zen 4 family 25, models 16-31, 96-127, 160-175).
*/
void sm_kernels_cpu(char vendor[13], unsigned *family, unsigned *model);

/* Into buf (n bytes): "VENDOR family F model M", or "not identified by this build". */
void sm_kernels_cpu_name(char *buf, size_t n);

/* Family and model from CPUID leaf 1's EAX, as the vendors' manuals combine them. */
void sm_kernels_cpu_decode(unsigned eax, unsigned *family, unsigned *model);

/*
** The operations the table keyed by CPU family takes from other tables than
** the best ISA's, as a spec ("rows=avx2"), for this vendor, family and model;
** NULL where the best table does everything (no entry).
*/
const char *sm_kernels_cpu_choice(const char *vendor, unsigned family, unsigned model);

/*
** Floats of per-thread scratch that matmul and matmul_rows need for inputs
** of K columns, any weight type (matmul_scratch, or room for quantized
** activation rows if that is more).
*/
size_t sm_kernels_scratch(const sm_kernels *k, size_t K);
/* The same with room to keep the quantized activations of up to `rows` token rows between calls
   (sm_kernels_reuse_begin); sm_kernels_scratch keeps one token block's (256 rows). */
size_t sm_kernels_scratch_rows(const sm_kernels *k, size_t K, size_t rows);

/*
** A window in which matmul on repacked quantized weights may keep a call's
** quantized activations in the scratch for the next call with the same x,
** T and K (the caller's promise: x's rows do not change inside the window);
** rows: what the scratch was sized for (sm_kernels_scratch_rows; 0 for
** sm_kernels_scratch), calls of more rows keep nothing. Any other use of
** the scratch inside it (another product, attention) must be followed by
** sm_kernels_reuse_begin again; end closes the window.
*/
void sm_kernels_reuse_begin(float *scratch, size_t rows);
void sm_kernels_reuse_end(float *scratch);

/*
** Activations quantized once for all the threads of a product, not once per
** thread: a buffer the threads share (sm_kernels_share_bytes(k, K, rows)
** bytes for calls of up to `rows` rows of K; 0 where k never shares). Where
** k's product on weights of type wt quantizes x itself
** (sm_kernels_share_takes: repacked quantized weights, calls of many rows),
** sm_kernels_share_open opens thread ith's reuse window (of nth threads) and
** quantizes its share of x's rows into buf, and returns true: once every
** thread has (a barrier), each thread's calls on (x, T, K) of that type read
** them all from buf, until the window ends. Elsewhere (buf NULL, few rows,
** weights not repacked) it opens the window alone and returns false. Every output
** is bit for bit what the thread's own quantization gives.
*/
size_t sm_kernels_share_bytes(const sm_kernels *k, size_t K, size_t rows);
bool sm_kernels_share_takes(const sm_kernels *k, sm_dtype wt, size_t T, size_t K);
bool sm_kernels_share_open(const sm_kernels *k, void *buf, float *scratch, size_t rows, const float *x, sm_dtype wt,
                           size_t T, size_t K, int ith, int nth);

/*
** Repacked quantized weights (what llama.cpp's CPU "repack" buffers and
** ik_llama.cpp's -rtr do): a q4_0 or q8_0 matrix of N rows laid out once,
** at load, so that its products read it as it is,
** with no packing per call, in one stream. Row group G (rows 32G..32G+31)
** takes the bytes its rows take in the file, from G * 32 * row bytes, block
** after block; a block holds rows 0-15's levels, then rows 16-31's, then
** the 32 rows' f16 scales (64 bytes). Levels go four bytes of a row at a
** time, the 16 rows' four bytes side by side in each 64 bytes: q4_0's 16
** bytes of nibbles as stored (256 bytes for 16 rows), q8_0's 32 bytes each
** plus 128, unsigned (512). A product on it gives, bit for bit, what the
** table's packed product (T >= 4) gives on the file's rows, for any T: so
** one-row decoding, batches and prefill agree (a product's columns must then
** start at a multiple of SM_R32 and end at one or at N). Where N is not a
** multiple of SM_R32 the last row group's rows past N are zero bytes (zero
** scales: their products are 0, and never written). The dtype of the result is
** sm_kernels_repacked(dt) (SM_DTYPE_Q4_0_R32, SM_DTYPE_Q8_0_R32). A q4_k
** matrix (K a multiple of 256; SM_DTYPE_Q4_K_R32) takes 148 bytes a row
** per super-block where the file has 144: row group G's super-block s at
** (G K / 256 + s) 32 * 148, its eight blocks in turn, each q4_0_r32's 512
** bytes of levels (a block's 32 levels as q4_0 holds them: byte i, levels
** i and i + 16) then the 32 rows' 6-bit scales and mins, a byte each (64
** bytes); after the eight, the 32 rows' f16 d, then dmin (128 bytes). A
** q5_k matrix (SM_DTYPE_Q5_K_R32, 180 bytes where the file has 176) is laid
** out the same with each block's fifth bits after its levels, a 64-byte
** plane for each 16 rows: the byte of a row's k-th level byte (k < 4) holds
** in bit q the fifth bit of level 4q + k, in bit 4 + q that of 16 + 4q + k
** (704 bytes a block). A q6_k matrix (SM_DTYPE_Q6_K_R32, the file's 210
** bytes) is laid out the same way, a block's levels (0..63) as q4_0_r32's
** nibbles of their low four bits, then their top two bits in two 64-byte
** planes for each 16 rows (bits 2q, 2q + 1 of a row's k-th byte: level
** 4q + k in the first plane, 16 + 4q + k in the second), then the 32 rows'
** int8 scales of the block's first 16 levels and of its last 16 (832 bytes
** a block); after the eight blocks, the 32 rows' f16 d (64 bytes). An
** iq4_nl matrix (SM_DTYPE_IQ4_NL_R32) takes q4_0_r32's bytes as they are
** (its levels index iq4_nl's table). An iq4_xs matrix (K a multiple of 256;
** SM_DTYPE_IQ4_XS_R32, 138 bytes where the file has 136) takes per
** super-block its eight blocks' levels as q4_0_r32's (512 bytes each), then
** the 32 rows' block scales ls - 32 as int8 bytes, block after block (256
** bytes), then the 32 rows' f16 d (64 bytes).
**
** An f32 matrix (any N) is laid out as the same product's panels
** (SM_DTYPE_F32_P32): row group G takes 32 K floats from G * 32 K, column k
** of its 32 rows side by side at 32 k (rows past N zeros). The table's
** packed product reads them in place for every T, so a decoded row (T = 1),
** a batch's rows and a prompt's get each output's sums in the same order;
** the table's decoding products on the file's rows sum in another. An f16
** or bf16 matrix the same in its own 16-bit values (SM_DTYPE_F16_P32,
** SM_DTYPE_BF16_P32: 32 K of them a group), widened exactly as they are
** read: the results of its weights packed per call, for every T.
*/
#define SM_R32 32
/* Row groups of SM_R32 rows that N rows take (the last one padded with zero rows). */
static inline size_t sm_kernels_row_groups(size_t N) {
    return (N + SM_R32 - 1) / SM_R32;
}
/* Whether an N x K matrix of type dt can be repacked: f32; q4_0, q8_0, q4_k, q5_k or q6_k with
** K whole blocks (any N > 0). */
bool sm_kernels_repackable(sm_dtype dt, size_t N, size_t K);
/* The layout dt repacks into (dt itself if none). */
sm_dtype sm_kernels_repacked(sm_dtype dt);
/* The bytes sm_kernels_repack writes for all of an N x K matrix of type dt: whole row groups,
** the last one padded with zero rows. */
size_t sm_kernels_repacked_bytes(sm_dtype dt, size_t N, size_t K);
/* Row groups [g0, g1) (rows 32 g0 .. 32 g1 - 1, those past N zeros) of src (N rows of K of type
** dt, repackable) into dst (sm_dtype_row_bytes of the layout for each of 32 g1 rows: the same
** bytes for q4_0, q8_0, q6_k, f32, f16, bf16), as above. */
void sm_kernels_repack(void *restrict dst, const void *restrict src, sm_dtype dt, size_t N, size_t K,
                       size_t g0, size_t g1);
/* The file types (bits 1u << dt: q4_0, q8_0, q4_k, q5_k, q6_k; f32, f16, bf16) whose repacked
** matrices table k multiplies: the quantized ones where its packed and its decoding products
** come from one table whose integer products have the repacked product (the avx512 table on
** AVX512-VNNI), f32 and the 16-bit types where its packed f32 product's table reads the panels
** (f32_panels); 0 where none. */
unsigned sm_kernels_repack_types(const sm_kernels *k);
/* The name of the integer products table k's quantized matmuls use (sm_qkernel's name:
** "scalar", "avx2", "avx-vnni", "avx512-vnni"): what a benchmark of quantized weights measured. */
const char *sm_kernels_int8_name(const sm_kernels *k);

/* The scalar reference table. */
const sm_kernels *sm_kernels_reference(void);

/* Fills out with every table this CPU can run (scalar first); returns count. */
size_t sm_kernels_available(const sm_kernels **out, size_t cap);

/* Whether k's matmul of T rows of weights of type wt and K columns runs on vdpbf16ps (its
** dot16_types; T >= 4, K even), rounding the activations to bf16. */
static inline bool sm_kernels_dot16_takes(const sm_kernels *k, sm_dtype wt, size_t T, size_t K) {
    return T >= 4 && K % 2 == 0 && (k->dot16_types >> wt & 1u);
}

/* Whether k's matmul of a layout made at load (wt) gives each row the same whatever rows share
** the call, so a prompt's rows and decoding's may: every layout but 16-bit panels of a type k
** multiplies on vdpbf16ps (T >= 4 rounds the activations; decoding's rows, by matmul_rows, stay
** exact). */
static inline bool sm_kernels_rows_alike(const sm_kernels *k, sm_dtype wt) {
    return wt != sm_dtype_base(wt) && !(k->from[SM_KOP_GEMM]->dot16_types >> sm_dtype_base(wt) & 1u);
}

/* "f32 FMA, 512-bit", ...; "" for no such loop. */
const char *sm_kernels_peak_name(sm_peak p);

/* Whether this CPU (and build) runs loop p. */
bool sm_kernels_peak_runs(sm_peak p);

/*
** The loop whose peak bounds k's matmul of 4 or more rows of weights of
** type dt: the int8 products of its packed quantized product where that
** takes dt, vdpbf16ps where its dot16_types has dt, else the FMA of its f32
** GEMM (which dequantizes the rest);
** SM_PEAK_COUNT where there is none (the scalar reference).
*/
sm_peak sm_kernels_peak_of(const sm_kernels *k, sm_dtype dt);

/*
** Runs loop p `iters` times on the calling thread, adding a value made of
** its results to *sink; returns the arithmetic operations done (a
** multiply-add counts two, an int8 or bf16 pair product one multiply-add),
** 0 where p does not run here.
*/
double sm_kernels_peak(sm_peak p, size_t iters, float *sink);

#endif
