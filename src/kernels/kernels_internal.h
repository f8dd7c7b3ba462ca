/*
** kernels_internal.h -- the per-ISA tables (for dispatch.c) and plain-C
** helpers the ISA files share.
*/
#ifndef SM_KERNELS_INTERNAL_H
#define SM_KERNELS_INTERNAL_H

#include "sm_kernels.h"
#include "sm_quant.h"

#include <stdint.h>

/*
** Each ISA file's table as it is on any CPU that runs it: the baseline
** integer products (vpmaddubsw for the x86 tables) and the default L2 size;
** dispatch.c completes copies of them for this CPU.
*/
extern const sm_kernels sm_kernels_scalar;
#ifdef SM_X86_KERNELS
extern const sm_kernels sm_kernels_avx2;
extern const sm_kernels sm_kernels_avx512;
#endif

/* The L2 size the tables assume until dispatch.c has read this CPU's. */
#define SM_L2_DEFAULT (512 * 1024)

/* Most columns one packed panel holds (the KC of every table is at most this). */
#define SM_PACK_KC_MAX 256

/*
** Packs rows n..n+nr-1, columns k0..k0+kc-1 of w (N, K, elements of type dt)
** into dst (kc, width) as f32, transposed so one k step is `width`
** contiguous floats; rows nr..width-1 of the panel are zero. 16-bit rows are
** widened by `widen` (the table's to_f32) first. kc <= SM_PACK_KC_MAX. Plain
** C, shared by the SIMD matmuls (pack.c).
*/
void sm_kernels_pack_panel(float *restrict dst, const void *restrict w, sm_dtype dt, size_t K,
                           size_t n, size_t nr, size_t width, size_t k0, size_t kc,
                           void (*widen)(float *restrict, const void *restrict, sm_dtype,
                                         size_t));

/*
** A table's micro-kernel: out rows i < mr (its own mr: a full block, or
** one row), columns [0, nr), get x rows i (stride ldx) . panel (kc, the
** table's NR) added, or on the first column slice the bias (NULL: zero)
** plus the product written. next (NULL: none) is the panel slice read after
** this one, kc rows of the table's NR floats: its lines are asked into L2
** while this slice's are read (panels laid out at load stream from memory;
** without it a decoding batch's GEMM waited on each slice, then computed).
*/
typedef void (*sm_micro_fn)(float *restrict out, size_t ldo, const float *restrict x, size_t ldx,
                            const float *restrict panel, size_t kc, const float *restrict bias,
                            int first, size_t nr, const float *restrict next);

/* A table's packed product: its panel shape, micro-kernels and packer. A block's last
   rows (fewer than mr) go to few[r] for r of them at once where the table has one, else
   to few[1] one by one (a single row's product is one dependency chain per output, a
   quarter of the FMA rate). Every output's arithmetic is the same whichever kernel
   computes it. */
#define SM_MICRO_FEW 8
typedef struct {
    size_t nr, mr, kc; /* panel rows (outputs), tokens per full micro call, columns */
    sm_micro_fn full;  /* mr token rows */
    void (*pack)(float *restrict dst, const void *restrict w, sm_dtype dt, size_t K, size_t n,
                 size_t nr, size_t width, size_t k0, size_t kc);
    sm_micro_fn few[SM_MICRO_FEW]; /* [r]: r token rows (r < mr; [1] always there) */
    /* Where there is no pack (panels laid out at load), optionally: out[0, nr) of one token
       row (nr <= SM_ROW_GROUPS nr) from the panels at panel + g pstride, each output the
       arithmetic few[1] gives it, the panels' chains side by side (few[1] alone runs two
       chains: half the FMA rate); the next call's `next` panels (after these) may be
       prefetched. */
    void (*one_row)(float *restrict out, const float *restrict x, const float *restrict panel,
                    size_t pstride, size_t kc, const float *restrict bias, int first, size_t nr,
                    size_t next);
    /* Optionally, full asking for the next tile's rows of x (x + mr ldx on) into L1 as it goes:
       for the tiles of a tall block (SM_GEMM_TALL x mr rows or more) with another after them.
       Short blocks (batched decoding's rows, in L1 anyway) keep full. */
    sm_micro_fn full_pf;
    /* Bytes of a panel's weight where there is no pack: 4 (0 says so too), or 2 for 16-bit
       panels (SM_DTYPE_F16_P32, SM_DTYPE_BF16_P32), which the micro-kernels widen as they read
       them; a panel pointer handed to them is then the 16-bit data's. */
    size_t es;
} sm_gemm_kernel;

/* Element i of panels laid out at load for g (its es bytes each), as the micro-kernels take it. */
static inline const float *sm_kernels_panel_at(const sm_gemm_kernel *g, const void *w, size_t i) {
    return (const float *)(const void *)((const char *)w + i * (g->es ? g->es : sizeof(float)));
}
#define SM_GEMM_TALL 4
#define SM_ROW_GROUPS 4

/* Put before a loop over a register tile's rows (at most 8 at any call: a table's MR,
   SM_ROW_GROUPS): unrolled, the tile's accumulator arrays stay in registers; rolled, GCC keeps
   them in memory (the AVX2 micro-kernel stored twice an FMA, the AVX-512 one zeroed and
   spilled its 16 accumulators each call). */
#define SM_TILE_ROWS _Pragma("GCC unroll 8")
/* From this many token rows a table's product on panels laid out at load packs (widens, for
   16-bit panels) each slice once for all its tiles rather than reading it in place. */
#define SM_PANELS_PACK_T 32

/*
** matmul for T >= 4 with a table's kernel (pack.c, plain C) for the table k: token
** rows in blocks whose kc-column slice fills half of k's l2_bytes (so the rows a panel
** meets stay in L2), then kc-column slices, then the thread's panels, each
** packed once per block and slice into panel (nr x kc floats). A kernel with
** no pack reads w's panels in place (SM_DTYPE_F32_P32, or the 16-bit panels
** of its es, of width nr; n0 a multiple of nr, dt their base type) and needs no
** panel scratch; a lone row there asks for the next panels unless k's row_prefetch is 2.
*/
void sm_kernels_gemm(const sm_gemm_kernel *g, const sm_kernels *k, float *restrict out, const float *restrict x,
                     const void *restrict w, sm_dtype dt, const float *restrict bias, size_t T,
                     size_t N, size_t K, size_t n0, size_t n1, float *restrict panel);

/*
** The same packing, by 8 x 8 transposes with AVX2 (avx2.c) where nr ==
** width, width % 8 == 0 and kc % 8 == 0, else by sm_kernels_pack_panel.
** Only on CPUs with AVX2 (the AVX2 and AVX-512 tables).
*/
void sm_kernels_pack_avx2(float *restrict dst, const void *restrict w, sm_dtype dt, size_t K,
                          size_t n, size_t nr, size_t width, size_t k0, size_t kc);
/* Row group n / 32 (rows n..n+nr-1 of 16-bit w, K even; rows past nr zeros) as sm_kernels_repack's
** 16-bit panel into dst (32 K values), by AVX2 (avx2_panels.c). */
void sm_kernels_repack16_avx2(uint16_t *restrict dst, const void *restrict w, size_t K, size_t n, size_t nr);

/* The AVX2 table's sum (the read probe, four streams), which the AVX-512 table uses too. */
float sm_kernels_sum_avx2(const float *x, size_t n);
/* The transpose (sm_kernels.transpose) by 8 x 8 blocks in AVX2 registers (avx2.c), for the
   AVX2 and AVX-512 tables. */
void sm_kernels_transpose_avx2(float *restrict out, size_t ldo, const float *restrict in, size_t ldi,
                               size_t R, size_t c0, size_t c1);

/*
** The AVX2 table's packed product on panels laid out at load (avx2_panels.c):
** f32 panels, and 16-bit panels widened as read (es 2), read in place by
** token rows whose x fits half the L2 (for more, avx2.c packs each slice's
** halves); each output bit for bit the packed product's on the file's rows,
** for every T. Only on CPUs with AVX2, FMA and F16C.
*/
extern const sm_gemm_kernel sm_avx2_gemm_panels, sm_avx2_gemm_panels_f16, sm_avx2_gemm_panels_bf16;

/*
** The AVX2 table's matrix-vector products (avx2_rows.c): sm_avx2_gemv for
** T <= 2 token rows of f32/f16/bf16 weights (columns [n0, n1)), and
** sm_avx2_matmul_rows (the table's matmul_rows: each row bit for bit what
** sm_avx2_gemv gives it alone, whatever T). Only on CPUs with AVX2 and FMA.
*/
void sm_avx2_gemv(float *restrict out, const float *restrict x, const void *restrict w, sm_dtype dt,
                  const float *restrict bias, size_t T, size_t N, size_t K, size_t n0, size_t n1);
void sm_avx2_matmul_rows(const sm_kernels *k, float *restrict out, const float *restrict x,
                         const void *restrict w, sm_dtype wt, const float *restrict bias, size_t T,
                         size_t N, size_t K, size_t n0, size_t n1, float *restrict scratch);
/*
** The same products as sm_avx2_matmul_rows, bit for bit, with 3 or more
** token rows of f32/f16/bf16 weights on 512-bit registers (avx512_rows.c):
** the matmul_rows of a composed table that takes decoding's products from
** the AVX2 table on a CPU with AVX-512. Only on CPUs with AVX-512F.
*/
void sm_avx512_rows_avx2(const sm_kernels *k, float *restrict out, const float *restrict x,
                         const void *restrict w, sm_dtype wt, const float *restrict bias, size_t T,
                         size_t N, size_t K, size_t n0, size_t n1, float *restrict scratch);

/*
** Key block j0 (nk keys, slot j0 of kv) and its values as f32: *kb the
** keys (hs, SM_ATTN_KBLOCK), *vb the values (nk, hs). An f32 cache is used
** in place; an f16 one is widened by the table's `widen` into kw and vw
** (the attention scratch). Plain C, shared by the SIMD attentions (pack.c).
*/
void sm_kernels_kv_block(const float **kb, const float **vb, float *restrict kw,
                         float *restrict vw, const sm_kv_head *kv, size_t j0, size_t nk, size_t hs,
                         void (*widen)(float *restrict, const void *restrict, sm_dtype, size_t));

/*
** A table's attention pieces, for the one streaming attention
** (attention.c). scores: p[i * SM_ATTN_KBLOCK + j] = scale * q_i . key j of
** the block kb (hs, SM_ATTN_KBLOCK) for i < nq (1, or SM_ATTN_QGROUP whose
** rows qr may repeat) and j < nk (entries up to the next vector past nk may
** be written). pv: acc row i (stride as, hs used) = corr[i] * acc row i +
** sum_{j < nk} p[i, j] v row j (v: nk rows of hs), for i < nq. max: the
** largest of x (n >= 1); exp_sum: x <- exp(x - mx), returning their sum;
** widen: the table's to_f32 (for an f16 cache). softmax_group (NULL: row by
** row through max and exp_sum): the online-softmax step of all
** SM_ATTN_QGROUP rows of a block at once, row i's keys [a[i], n[i]) (none
** when equal), each row's m, l and corr updated bit for bit as attention.c's
** row-by-row step does. pv_lone (NULL: pv row by row): pv of SM_ATTN_QGROUP
** rows, each row bit for bit what pv gives it with nq = 1 (a lone query's
** partial sums), the value loads shared (attention_rows' groups).
** scores_softmax (NULL: scores, then the softmax step): scores of
** SM_ATTN_QGROUP rows going straight on to their online-softmax step, row
** i's keys [0, n[i]), bit for bit scores followed by softmax_group.
*/
typedef struct {
    void (*scores)(float *restrict p, const float *const *qr, size_t nq, const float *restrict kb,
                   size_t hs, size_t nk, float scale);
    void (*pv)(float *restrict acc, size_t as, const float *restrict p, const float *corr,
               const float *restrict v, size_t nq, size_t hs, size_t nk);
    float (*max)(const float *x, size_t n);
    float (*exp_sum)(float *x, size_t n, float mx);
    void (*widen)(float *restrict out, const void *restrict src, sm_dtype dt, size_t n);
    void (*softmax_group)(float *restrict p, const size_t *a, const size_t *n, size_t nk, float *m,
                          float *l, float *corr);
    void (*pv_lone)(float *restrict acc, size_t as, const float *restrict p, const float *corr,
                    const float *restrict v, size_t hs, size_t nk);
    void (*scores_softmax)(float *restrict p, const float *const *qr, const float *restrict kb, size_t hs,
                           size_t nk, float scale, const size_t *n, float *m, float *l, float *corr);
} sm_attn_kernel;

/* The AVX-512 table's scores, pv and pv_lone (avx512_attn.c). Only on CPUs with AVX-512F. */
void sm_avx512_attn_scores(float *restrict p, const float *const *qr, size_t nq, const float *restrict kb,
                           size_t hs, size_t nk, float scale);
void sm_avx512_attn_scores_softmax(float *restrict p, const float *const *qr, const float *restrict kb, size_t hs,
                                   size_t nk, float scale, const size_t *rn, float *m, float *l, float *corr);
void sm_avx512_attn_pv(float *restrict acc, size_t as, const float *restrict p, const float *corr,
                       const float *restrict v, size_t nq, size_t hs, size_t nk);
void sm_avx512_pv_lone(float *restrict acc, size_t as, const float *restrict p, const float *corr,
                       const float *restrict v, size_t hs, size_t nk);

/* The kernel table's attention_rows (sm_kernels.h) made of ak's pieces (attention.c). */
void sm_kernels_attention_rows(const sm_attn_kernel *ak, const sm_attn_row *const *rows, size_t n,
                               float *restrict scratch, size_t hs, float scale);

/* The kernel table's attention (sm_kernels.h) made of ak's pieces (attention.c, plain C). */
void sm_kernels_attention(const sm_attn_kernel *ak, float *restrict out, const float *restrict q,
                          const sm_kv_head *kv, float *restrict scratch, size_t T, size_t pos,
                          size_t hs, size_t nh, size_t q_stride, size_t out_stride, float scale,
                          size_t window);

/* rope_halves in plain C (pack.c): contiguous halves, which the compiler vectorizes; every table's. */
void sm_kernels_rope_halves(float *restrict x, const float *restrict cs, const float *restrict sn,
                            size_t hs);

/*
** The batched-decode tiles share the prefetch of the weight rows to come
** among the token blocks that pass over a block of rows: of nb token blocks
** and np passes each, block b makes the passes u = b, b + nb', ... (nb' = nb
** up to np). Returns those passes as a bit mask (0 for b >= np).
*/
static inline unsigned sm_kernels_pf_passes(size_t b, size_t nb, size_t np) {
    unsigned m = 0;
    for (size_t u = b, step = nb < np ? nb : np; u < np; u += step) m |= 1u << u;
    return m;
}

/* The tables' add (sm_kernels.h): y += x, a plain loop each table's file instantiates, so the
   compiler widens it to that file's vectors; one rounding per element whatever the width. */
static inline void sm_kernels_add(float *restrict y, const float *restrict x, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] += x[i];
}

/* Address of element i of a tensor of type dt (for the q types, i starts a block). */
static inline const void *sm_kernels_elem(const void *w, sm_dtype dt, size_t i) {
    switch (dt) {
    case SM_DTYPE_F32: return (const char *)w + i * 4;
    case SM_DTYPE_Q8_0: return (const sm_block_q8_0 *)w + i / SM_QK;
    case SM_DTYPE_Q4_0: return (const sm_block_q4_0 *)w + i / SM_QK;
    case SM_DTYPE_Q4_K: return (const sm_block_q4_k *)w + i / SM_QK_K;
    case SM_DTYPE_Q5_K: return (const sm_block_q5_k *)w + i / SM_QK_K;
    case SM_DTYPE_Q6_K: return (const sm_block_q6_k *)w + i / SM_QK_K;
    case SM_DTYPE_Q4_1: return (const sm_block_q4_1 *)w + i / SM_QK;
    case SM_DTYPE_IQ4_NL: return (const sm_block_q4_0 *)w + i / SM_QK; /* the same 18 bytes */
    case SM_DTYPE_Q5_0: return (const sm_block_q5_0 *)w + i / SM_QK;
    case SM_DTYPE_Q5_1: return (const sm_block_q5_1 *)w + i / SM_QK;
    case SM_DTYPE_Q2_K: return (const sm_block_q2_k *)w + i / SM_QK_K;
    case SM_DTYPE_Q3_K: return (const sm_block_q3_k *)w + i / SM_QK_K;
    case SM_DTYPE_IQ4_XS: return (const sm_block_iq4_xs *)w + i / SM_QK_K;
    default: return (const char *)w + i * 2;
    }
}

/*
** Quantized weights (sm_quant.h) meet activations quantized the same way:
** each row of x in blocks of SM_QK, an f32 scale d = amax / 127 per block
** and values q = x / d rounded to nearest (ties to even), so a block's
** product is d_w * d_x * (an exact integer dot product). A block holding a
** NaN or infinity gets d = NaN and q = 0, so the products say so. Rows of
** K: q (K int8), d (K / 32), s (K / 4 int32): minus the sum of each 4
** consecutive q, which is what a 256-bit integer dot product's lane j holds
** for bytes 4j..4j+3 of a block, so lanes can start from a zero point z
** times it where the scale changes within a block (q6_k's 32); and xs
** (K / 32): d times the sum of the block's q, which zero points constant
** over a block (q4_0's 8, q8_0's 128 when its bytes are made unsigned) and
** the k types' mins multiply (NaN with d); h (K / 16 int16): minus each 16
** consecutive q's sum, which q2_k's mins (one for each 16 weights) multiply
** (sm_qx_halves).
*/
typedef struct {
    int8_t *q;
    float *d;
    int32_t *s;
    float *xs;
    int16_t *h;
} sm_qx;

/* Rows a quantized product takes per pass over the weights. */
#define SM_QX_ROWS 16

/* Bytes of SM_QX_ROWS quantized rows of K, laid out by sm_kernels_qx. */
#define SM_QX_BYTES(K) (SM_QX_ROWS * (2 * (K) + (K) / 4 + (K) / 8) + 64)

/* The quantized-row buffers for K in scratch (SM_QX_BYTES(K), 64-byte aligned). */
static inline sm_qx sm_kernels_qx(void *scratch, size_t K) {
    int8_t *q = scratch;
    int32_t *s = (int32_t *)(q + SM_QX_ROWS * K);
    float *d = (float *)(s + SM_QX_ROWS * (K / 4));
    int16_t *h = (int16_t *)(d + 2 * SM_QX_ROWS * (K / SM_QK));
    return (sm_qx){q, d, s, d + SM_QX_ROWS * (K / SM_QK), h};
}

/* A block's two h (minus its 16-weight halves' sums) from its eight s (minus sums of 4: |h| <= 2048). */
static inline void sm_qx_halves(const int32_t *s, int16_t *h) {
    h[0] = (int16_t)(s[0] + s[1] + s[2] + s[3]);
    h[1] = (int16_t)(s[4] + s[5] + s[6] + s[7]);
}

/*
** The packed quantized product (prefill: many token rows against one pass
** over the weights) works in blocks of SM_QGEMM_MC token rows and
** SM_QGEMM_KC columns: a block's activations quantized as sm_qx does
** (q, d, xs, and q6_k's half-block sums; SM_QGEMM_MC x SM_QGEMM_KC bytes
** of levels, the slice that stays in L2),
** and a panel of at most SM_QGEMM_NR weight rows over those columns,
** unpacked to unsigned levels interleaved four bytes per row, with each
** block's scale D and zero-point term M (w = D u - M) as floats (40 bytes
** per row and block; q2_k's 44, its second min M2 too; the panel stays in
** L1). SM_QGEMM_BYTES is its scratch.
*/
#define SM_QGEMM_KC 512
#define SM_QGEMM_MC 256
#define SM_QGEMM_NR 32
#define SM_QGEMM_BYTES \
    (SM_QGEMM_NR * SM_QGEMM_KC / SM_QK * (44 + 12) + SM_QGEMM_NR * SM_QGEMM_KC + \
     SM_QGEMM_MC * SM_QGEMM_KC / SM_QK * (SM_QK + 16) + 4 * 64)

/*
** The product on repacked matrices (gemm_r32) with many rows keeps a row
** group's panel over the whole row and token blocks' activations for every
** column slice at once (K rounded up to slices, SM_QGEMM_KP: levels,
** scales, sums, zero-point starts; SM_QGEMM_XBLOCK_BYTES a block, a
** multiple of 64 bytes). SM_QGEMM_R32_BYTES(K, rows) is its scratch with
** room for SM_QGEMM_XBLOCKS(rows) token blocks (at least one), so that
** calls of up to `rows` rows keep every block's activations between calls.
*/
#define SM_QGEMM_KP(K) (((K) + SM_QGEMM_KC - 1) / SM_QGEMM_KC * SM_QGEMM_KC)
#define SM_QGEMM_XBLOCK_BYTES(K) (SM_QGEMM_MC * SM_QGEMM_KP(K) / SM_QK * (SM_QK + 16))
#define SM_QGEMM_XBLOCKS(rows) ((rows) > SM_QGEMM_MC ? ((rows) + SM_QGEMM_MC - 1) / SM_QGEMM_MC : 1)
#define SM_QGEMM_R32_BYTES(K, rows) \
    (SM_QGEMM_XBLOCKS(rows) * SM_QGEMM_XBLOCK_BYTES(K) + SM_QGEMM_NR * SM_QGEMM_KP(K) / SM_QK * 40 + 4 * 64)

/*
** The head of a thread's scratch when its table has the repacked product
** (sm_kernels_scratch leaves SM_QMEMO_BYTES for it): which activations the
** buffers after it hold quantized, so that between sm_kernels_reuse_begin
** and sm_kernels_reuse_end a call on the same rows (the other chunks of a
** product, q / k / v and gate / up on one input) does not quantize them again;
** rows: how many token rows the buffers have room for (sm_kernels_scratch_rows).
*/
typedef struct sm_qmemo {
    uint64_t armed; /* SM_QMEMO_ARMED inside a begin / end window */
    const float *x; /* the rows held (NULL: none) */
    size_t T, K, rows;
    int mode;
    int32_t zp;
    const void *xbuf; /* NULL: in the buffers after the memo; else in this buffer the threads share */
} sm_qmemo;
#define SM_QMEMO_BYTES 64
#define SM_QMEMO_ARMED 0x534d514d454d4f31ull
_Static_assert(sizeof(sm_qmemo) <= SM_QMEMO_BYTES, "the memo's room");

/* A packed quantized product: matmul's contract (T >= 4), scratch SM_QGEMM_BYTES. */
typedef void sm_qgemm_fn(float *restrict out, const float *restrict x, const void *restrict w,
                         sm_dtype dt, const float *restrict bias, size_t T, size_t N, size_t K,
                         size_t n0, size_t n1, void *restrict scratch);

/*
** An implementation of the quantized products for one instruction set.
** quant_x quantizes rows 0..r-1 of x (stride K) into qx (row i at q + i K,
** d + i K / 32, s + i K / 4, xs + i K / 32). gemv gives out[t, n] = x row t . w row n
** (+ bias) for t < r <= SM_QX_ROWS and n0 <= n < n1 from those rows.
** dequant is to_f32 for the q types. gemm (NULL if none) is the packed
** product for the types whose bit (1u << dt) is in gemm_types: each output
** the same as gemv's up to the order of its f32 sums; gemm_peak the
** instruction it runs on (SM_PEAK_COUNT without one).
*/
typedef struct sm_qkernel {
    const char *name;
    void (*quant_x)(sm_qx qx, const float *restrict x, size_t r, size_t K);
    void (*gemv)(float *restrict out, sm_qx qx, size_t r, const void *restrict w, sm_dtype dt,
                 const float *restrict bias, size_t N, size_t K, size_t n0, size_t n1);
    void (*dequant)(float *restrict out, const void *restrict src, sm_dtype dt, size_t n);
    sm_qgemm_fn *gemm;
    unsigned gemm_types;
    sm_peak gemm_peak;
    /* The packed product on repacked matrices (sm_kernels_repack) of the types in gemm_types,
    ** any T >= 1, dt the file type, n0 and n1 multiples of SM_R32: each output gemm's bit for
    ** bit; NULL if none. */
    sm_qgemm_fn *gemm_r32;
    /* Rows [t0, t1) of x (T rows of K) quantized into buf (sm_kernels_share_bytes(K, T)) as
    ** gemm_r32 reads them for type dt (its file type), and the thread's memo set to read them
    ** there: the threads of a product quantize their shares of x's rows, then (a barrier) each
    ** product call of theirs on x reads all of them; NULL with gemm_r32. */
    void (*xquant_r32)(void *buf, sm_qmemo *memo, const float *x, sm_dtype dt, size_t T, size_t K, size_t t0,
                       size_t t1);
} sm_qkernel;

/* Whether qk's packed product takes T rows of weights of type dt. */
static inline bool sm_kernels_qgemm_takes(const sm_qkernel *qk, sm_dtype dt, size_t T) {
    return qk->gemm && T >= 4 && (qk->gemm_types >> dt & 1u);
}

/* The plain-C reference (quant_ref.c). */
extern const sm_qkernel sm_qkernel_scalar;

#ifdef SM_X86_KERNELS
/* avx2_quant.c, built once per flavour: vpmaddubsw, AVX-VNNI, AVX512-VNNI (256-bit). */
extern const sm_qkernel sm_qkernel_avx2_maddubs, sm_qkernel_avxvnni, sm_qkernel_avx512vnni;
/* Their packed products (avx2_qgemm.c, built per flavour; AVX512-VNNI's on 512-bit vectors). */
sm_qgemm_fn sm_qgemm_avx2_maddubs, sm_qgemm_avxvnni, sm_qgemm_avx512vnni;
/* The same on repacked matrices (gemm_r32), and their shared activations (xquant_r32). */
sm_qgemm_fn sm_qgemm_r32_avx2_maddubs, sm_qgemm_r32_avxvnni, sm_qgemm_r32_avx512vnni;
void sm_xquant_r32_avx2_maddubs(void *buf, sm_qmemo *memo, const float *x, sm_dtype dt, size_t T, size_t K,
                                size_t t0, size_t t1);
void sm_xquant_r32_avxvnni(void *buf, sm_qmemo *memo, const float *x, sm_dtype dt, size_t T, size_t K, size_t t0,
                           size_t t1);
void sm_xquant_r32_avx512vnni(void *buf, sm_qmemo *memo, const float *x, sm_dtype dt, size_t T, size_t K,
                              size_t t0, size_t t1);
#endif

/*
** The packed product of 16-bit weights by AVX512-BF16 (avx512_bf16.c):
** matmul's contract for T >= 4 and even K, except that x is rounded to bf16
** (nearest even), and f16 weights too, before the f32 sums: out[t, n] =
** sum_k bf16(x[t, k]) bf16(w[n, k]) (+ bias). Blocks of SM_BF16_MC token rows
** and SM_BF16_KC columns; scratch SM_BF16_BYTES (a panel, its rows, a block
** of x as bf16). Only on CPUs with AVX512-BF16.
*/
#define SM_BF16_KC 512
#define SM_BF16_MC 192
#define SM_BF16_BYTES ((2 * 32 + SM_BF16_MC) * (SM_BF16_KC / 2) * 4)
void sm_kernels_gemm_bf16(float *restrict out, const float *restrict x, const void *restrict w,
                          sm_dtype dt, const float *restrict bias, size_t T, size_t N, size_t K,
                          size_t n0, size_t n1, void *restrict scratch);

/* Every implementation this CPU runs, scalar first (for tests); returns the count. */
size_t sm_kernels_qavailable(const sm_qkernel **out, size_t cap);

/*
** matmul for quantized w through qk: rows of x quantized SM_QX_ROWS at a
** time into scratch (SM_QX_BYTES(K)), each group one pass over w. Row t's
** result is the same whatever T is.
*/
void sm_kernels_qmatmul(const sm_qkernel *qk, float *restrict out, const float *restrict x,
                        const void *restrict w, sm_dtype dt, const float *restrict bias, size_t T,
                        size_t N, size_t K, size_t n0, size_t n1, void *restrict scratch);

#endif
