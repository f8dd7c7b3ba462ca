/*
** avx512.c -- AVX-512F kernels. Compiled with -mavx512f -mfma; only called
** when the CPU has AVX-512F (see dispatch.c). Tails use masked loads and
** stores instead of scalar loops, so every element goes through the same
** arithmetic as its neighbours.
**
** matmul, T >= 4: the weights are packed per thread into panels of NR = 32
** rows x KC = 256 columns, transposed so that one k step reads 32 contiguous
** weights; an MR = 8 tokens x NR micro-kernel keeps 16 accumulators in
** registers and does 16 FMAs per 2 panel loads + 8 broadcasts; it prefetches
** its output tile before the k loop. Panels are packed by 8 x 8 transposes
** (sm_kernels_pack_avx2; gathers were a seventh of the GEMM's time on AMD
** Zen 5). No horizontal sums. T < 4, and matmul_rows for
** any T: rows of w are streamed one at a time against up to four token
** rows (matrix-vector, one dot product per output).
** f16 weights are widened in registers by vcvtph2ps, bf16 by a 16-bit shift;
** panels hold them widened. f32 panels laid out at load (SM_DTYPE_F32_P32)
** take the packed product for every T, read in place; one token row runs 4
** panels' chains side by side (one_row).
*/
#if defined(__x86_64__) || defined(__i386__)
#include "kernels_internal.h"
#include "avx512_tile.h"

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define NR 32
#define MR 8
#define KC 256

/*
** out[i, 0..nr) (+)= x[i, 0..kc) . panel for i < mr. `first` stores (adding
** bias when given) instead of accumulating. mr is a compile-time constant at
** every call site so the accumulator array lives in registers.
*/
/* Panel weights [i, i + 16) of a panel of type pd (f32, or the 16-bit panels laid out at load)
   as f32: exact. */
static inline __attribute__((always_inline)) __m512 panel_w(sm_dtype pd, const float *panel, size_t i) {
    if (pd == SM_DTYPE_F32) return _mm512_load_ps(panel + i);
    return load_w(pd, panel, i);
}

/* Asks for k step kk's line(s) of the panel of type pd at next into L2. */
static inline __attribute__((always_inline)) void panel_ask(sm_dtype pd, const float *next, size_t kk) {
    const char *p = (const char *)next + kk * NR * (pd == SM_DTYPE_F32 ? 4 : 2);
    _mm_prefetch(p, _MM_HINT_T1);
    if (pd == SM_DTYPE_F32) _mm_prefetch(p + 64, _MM_HINT_T1);
}

static inline __attribute__((always_inline)) void
micro(sm_dtype pd, size_t mr, int pfx, float *restrict out, size_t ldo, const float *restrict x, size_t ldx,
      const float *restrict panel, size_t kc, const float *restrict bias, int first, size_t nr,
      const float *restrict next) {
    __m512 c0[MR], c1[MR];
    for (size_t i = 0; i < mr; i++) { /* the output tile, read after the k loop */
        _mm_prefetch((const char *)(out + i * ldo), _MM_HINT_T0);
        _mm_prefetch((const char *)(out + i * ldo + 16), _MM_HINT_T0);
    }
    SM_TILE_ROWS for (size_t i = 0; i < mr; i++) c0[i] = c1[i] = _mm512_setzero_ps();
    for (size_t kk = 0; kk < kc; kk++) {
        __m512 b0 = panel_w(pd, panel, kk * NR);
        __m512 b1 = panel_w(pd, panel, kk * NR + 16);
        if (next) panel_ask(pd, next, kk); /* the panel's line(s) a k step */
        if (pfx && (kk & 15) == 0) /* the next tile's rows of x, a line of each, into L1 */
            for (size_t i = 0; i < MR; i++) _mm_prefetch((const char *)(x + (MR + i) * ldx + kk), _MM_HINT_T0);
        SM_TILE_ROWS for (size_t i = 0; i < mr; i++) {
            __m512 a = _mm512_set1_ps(x[i * ldx + kk]);
            c0[i] = _mm512_fmadd_ps(a, b0, c0[i]);
            c1[i] = _mm512_fmadd_ps(a, b1, c1[i]);
        }
    }
    sm_avx512_tile_store(mr, out, ldo, c0, c1, bias, first, nr);
}

static void to_f32(float *restrict out, const void *restrict src, sm_dtype dt, size_t n) {
    size_t i = 0;
    if (sm_dtype_quantized(dt)) {
        sm_qkernel_avx2_maddubs.dequant(out, src, dt, n);
        return;
    }
    if (dt == SM_DTYPE_F32) {
        memcpy(out, src, n * sizeof *out);
        return;
    }
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(out + i, dt == SM_DTYPE_F16 ? load_w(SM_DTYPE_F16, src, i)
                                                     : load_w(SM_DTYPE_BF16, src, i));
    if (i < n) {
        __mmask16 m = tail_mask(n - i);
        _mm512_mask_storeu_ps(out + i, m,
                              dt == SM_DTYPE_F16 ? load_w_tail(SM_DTYPE_F16, src, i, n - i, m)
                                                 : load_w_tail(SM_DTYPE_BF16, src, i, n - i, m));
    }
}

/*
** The micro-kernel for a full block of MR token rows and for one row, each
** compiled on its own: inlined into the loop nest, GCC ran out of registers
** and kept an accumulator on the stack (half the speed).
*/
/* micro_mr_pf (sm_gemm_kernel.full_pf): a tall block's tiles but its last, the next tile's x
   asked for into L1 as this one runs (training's products: 4% fewer cycles a step; 512-row
   prefill 7%). Each panel type (f32; f16, bf16 laid out at load) its own set. */
#define MICRO(name, pd, r, pfx)                                                                    \
    static void name(float *restrict out, size_t ldo, const float *restrict x, size_t ldx,         \
                     const float *restrict panel, size_t kc, const float *restrict bias,           \
                     int first, size_t nr, const float *restrict next) {                           \
        micro(pd, r, pfx, out, ldo, x, ldx, panel, kc, bias, first, nr, next);                     \
    }
#define MICROS(sfx, pd)                                                                            \
    MICRO(micro_mr##sfx, pd, MR, 0)                                                                \
    MICRO(micro_mr_pf##sfx, pd, MR, 1)                                                             \
    MICRO(micro_1##sfx, pd, 1, 0)                                                                  \
    MICRO(micro_2##sfx, pd, 2, 0)                                                                  \
    MICRO(micro_3##sfx, pd, 3, 0)                                                                  \
    MICRO(micro_4##sfx, pd, 4, 0)                                                                  \
    MICRO(micro_5##sfx, pd, 5, 0)                                                                  \
    MICRO(micro_6##sfx, pd, 6, 0)                                                                  \
    MICRO(micro_7##sfx, pd, 7, 0)
MICROS(, SM_DTYPE_F32)
MICROS(_f16, SM_DTYPE_F16)
MICROS(_bf16, SM_DTYPE_BF16)
#undef MICROS
#undef MICRO

/* One token row over g <= SM_ROW_GROUPS panels (kernels_internal.h: one_row), micro(1)'s
** arithmetic; the next call's nx panels asked for into L2 as it goes: each panel is a stream
** of its own, which the prefetchers would otherwise meet cold (f32 15M shapes, 1 thread: 10%
** slower than the rows as stored without this, 3% faster with it). */
/* How far ahead (k steps of 64 bytes) a lone row on 16-bit panels asks for each group's lines:
   bench_gemv --types f16 2, one row, share of the read probe on Emerald Rapids: the f32 panels'
   way (the next groups' lines at the same step) 67-79%, 16 steps 95-99%, 32 95-97% (the rows as
   stored: 93-96%). */
enum { ROW16_AHEAD = 32 };
static inline __attribute__((always_inline)) void
row_groups(sm_dtype pd, size_t g, float *restrict out, const float *restrict x, const float *restrict panel,
           size_t ps, size_t kc, const float *restrict bias, int first, size_t nr, size_t nx) {
    __m512 c0[SM_ROW_GROUPS], c1[SM_ROW_GROUPS];
    SM_TILE_ROWS for (size_t j = 0; j < g; j++) c0[j] = c1[j] = _mm512_setzero_ps();
    for (size_t kk = 0; kk < kc; kk++) {
        __m512 a = _mm512_set1_ps(x[kk]);
        if (pd != SM_DTYPE_F32) /* 16-bit: each group's own stream asked for ROW16_AHEAD steps on */
            for (size_t j = 0; j < g; j++)
                _mm_prefetch((const char *)panel + (j * ps + (kk + ROW16_AHEAD) * NR) * 2, _MM_HINT_T0);
        else
            for (size_t j = 0; j < nx; j++) panel_ask(pd, panel + (g + j) * ps, kk);
        SM_TILE_ROWS for (size_t j = 0; j < g; j++) {
            c0[j] = _mm512_fmadd_ps(a, panel_w(pd, panel, j * ps + kk * NR), c0[j]);
            c1[j] = _mm512_fmadd_ps(a, panel_w(pd, panel, j * ps + kk * NR + 16), c1[j]);
        }
    }
    SM_TILE_ROWS for (size_t j = 0; j < g; j++)
        sm_avx512_tile_store(1, out + j * NR, 0, &c0[j], &c1[j], bias ? bias + j * NR : NULL, first,
                             nr - j * NR < NR ? nr - j * NR : NR);
}

static inline __attribute__((always_inline)) void
one_row_of(sm_dtype pd, float *restrict out, const float *restrict x, const float *restrict panel, size_t ps,
           size_t kc, const float *restrict bias, int first, size_t nr, size_t next) {
    if (nr > (SM_ROW_GROUPS - 1) * NR) /* whole sets of panels: the next call's too, if it has them */
        row_groups(pd, SM_ROW_GROUPS, out, x, panel, ps, kc, bias, first, nr, next);
    else if (nr > 2 * NR) /* a call's last set of panels */
        row_groups(pd, 3, out, x, panel, ps, kc, bias, first, nr, 0);
    else if (nr > NR)
        row_groups(pd, 2, out, x, panel, ps, kc, bias, first, nr, 0);
    else
        row_groups(pd, 1, out, x, panel, ps, kc, bias, first, nr, 0);
}
#define ONE_ROW(name, pd)                                                                               \
    static void name(float *restrict out, const float *restrict x, const float *restrict panel, size_t ps, \
                     size_t kc, const float *restrict bias, int first, size_t nr, size_t next) {          \
        one_row_of(pd, out, x, panel, ps, kc, bias, first, nr, next);                                   \
    }
ONE_ROW(one_row, SM_DTYPE_F32)
ONE_ROW(one_row_f16, SM_DTYPE_F16)
ONE_ROW(one_row_bf16, SM_DTYPE_BF16)
#undef ONE_ROW

static const sm_gemm_kernel gemm_kernel = {NR, MR, KC, micro_mr, sm_kernels_pack_avx2,
                                           {NULL, micro_1, micro_2, micro_3, micro_4, micro_5, micro_6, micro_7},
                                           NULL, micro_mr_pf, 0};
/* The same on f32 panels laid out at load (SM_DTYPE_F32_P32), read in place: for every T; and
   on 16-bit panels (SM_DTYPE_F16_P32, SM_DTYPE_BF16_P32), widened as they are read: each
   output the arithmetic of the 16-bit weights packed per call (their exact f32 values). */
static const sm_gemm_kernel gemm_panels = {NR, MR, KC, micro_mr, NULL,
                                           {NULL, micro_1, micro_2, micro_3, micro_4, micro_5, micro_6, micro_7},
                                           one_row, micro_mr_pf, 0};
/* A slice of 16-bit panels (SM_DTYPE_F16_P32, SM_DTYPE_BF16_P32; rows past N already zeros),
   columns [k0, k0 + kc) of the 32 rows from n, widened into dst: what the 16-bit rows packed per
   call give, so gemm_kernel's micro-kernels make the same sums on either. */
static void pack_panels16(float *restrict dst, const void *restrict w, sm_dtype dt, size_t K, size_t n,
                          size_t nr, size_t width, size_t k0, size_t kc) {
    (void)nr, (void)width;
    to_f32(dst, (const uint16_t *)w + n * K + k0 * NR, dt, kc * NR);
}
/* Many token rows on 16-bit panels: each slice widened once for them all (SM_PANELS_PACK_T
   rows and more), not at every tile of 8 rows. */
static const sm_gemm_kernel gemm_widen16 = {NR, MR, KC, micro_mr, pack_panels16,
                                            {NULL, micro_1, micro_2, micro_3, micro_4, micro_5, micro_6, micro_7},
                                            NULL, micro_mr_pf, 0};
static const sm_gemm_kernel gemm_panels_f16 = {
    NR, MR, KC, micro_mr_f16, NULL,
    {NULL, micro_1_f16, micro_2_f16, micro_3_f16, micro_4_f16, micro_5_f16, micro_6_f16, micro_7_f16},
    one_row_f16, micro_mr_pf_f16, 2};
static const sm_gemm_kernel gemm_panels_bf16 = {
    NR, MR, KC, micro_mr_bf16, NULL,
    {NULL, micro_1_bf16, micro_2_bf16, micro_3_bf16, micro_4_bf16, micro_5_bf16, micro_6_bf16, micro_7_bf16},
    one_row_bf16, micro_mr_pf_bf16, 2};


/*
** Matrix-vector products stream the weights one row at a time (f32 rows:
** contiguous, one row after another is a single sequential stream, which
** the hardware prefetchers follow at full speed; neighbouring rows side by
** side measured slower; tests/tools/bench_gemv), except one token row of
** 16-bit weights, which reads four quarters side by side (gemv_one_dt). Each dot
** product keeps UN = 4 partial sums, chunk c of 16 weights going to sum
** c % 4, reduced as (s0 + s1) + (s2 + s3) and then across lanes: the same
** order whatever the number of token rows sharing the pass (what batched
** decoding relies on: a row's result does not depend on its neighbours).
*/
#define UN 4

/*
** The horizontal sum of v in a fixed tree: lanes i + i+8, then i + i+4, then
** i + i+2, then i + i+1 (what GCC's _mm512_reduce_add_ps does; clang's may
** pair them otherwise). hsum16 does the same tree for 16 vectors at once, so
** a tile's outputs equal the dot products summed one at a time, bit for bit.
*/
static inline float hsum(__m512 v) {
    __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v),
                             _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    __m128 c = _mm_add_ps(b, _mm_shuffle_ps(b, b, _MM_SHUFFLE(1, 0, 3, 2)));
    return _mm_cvtss_f32(c) + _mm_cvtss_f32(_mm_shuffle_ps(c, c, 1));
}

/* Lane 4j + i of the result is hsum(v[4i + j]), i, j < 4. */
static inline __m512 hsum16(const __m512 v[16]) {
    __m512 a[8], c[4], g[2];
    for (int p = 0; p < 8; p++) /* per vector: lanes i + i+8 (8 sums each, two vectors) */
        a[p] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    for (int q = 0; q < 4; q++) /* i + i+4: 128-bit block k is vector 4q + k */
        c[q] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * q], a[2 * q + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(a[2 * q], a[2 * q + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    for (int r = 0; r < 2; r++) /* i + i+2 */
        g[r] = _mm512_add_ps(_mm512_shuffle_ps(c[2 * r], c[2 * r + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(c[2 * r], c[2 * r + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    /* i + i+1: lane 4k + m is vector 4m + k */
    return _mm512_add_ps(_mm512_shuffle_ps(g[0], g[1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_ps(g[0], g[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

/* F(0) .. F(3) for the partial sum c names, each with a constant index (indexed by a variable,
   GCC kept the sums on the stack). */
#define BY_SUM(c, F)                                                                            \
    switch (c) {                                                                                \
    case 0: F(0); break;                                                                        \
    case 1: F(1); break;                                                                        \
    case 2: F(2); break;                                                                        \
    default: F(3); break;                                                                       \
    }

/* out[t * N] for r token rows (r <= 4, a constant at every call site) against weight row w. */
static inline __attribute__((always_inline)) void
dot_block(sm_dtype dt, size_t r, float *restrict out, size_t N, const float *restrict x,
          const void *restrict w, float bias, size_t K) {
    __m512 a[4][UN];
    for (size_t i = 0; i < r; i++)
        for (size_t u = 0; u < UN; u++) a[i][u] = _mm512_setzero_ps();
    size_t k = 0, c = 0;
    for (; k + 16 * UN <= K; k += 16 * UN)
        for (size_t u = 0; u < UN; u++) {
            __m512 wv = load_w(dt, w, k + 16 * u);
            for (size_t i = 0; i < r; i++)
                a[i][u] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + i * K + k + 16 * u), a[i][u]);
        }
    /* the last chunks (at most UN - 1 whole ones, then a masked one) into sums 0, 1, ...,
       each named by a constant: indexed by a variable, GCC kept the sums on the stack */
#define CHUNK(cc)                                                                               \
    if (k + 16 <= K) {                                                                          \
        __m512 wv = load_w(dt, w, k);                                                           \
        for (size_t i = 0; i < r; i++) a[i][cc] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + i * K + k), a[i][cc]); \
        k += 16, c = cc + 1;                                                                    \
    }
    CHUNK(0) CHUNK(1) CHUNK(2)
#undef CHUNK
    if (k < K) {
        __mmask16 mt = tail_mask(K - k);
        __m512 wv = load_w_tail(dt, w, k, K - k, mt);
#define TAIL(cc) for (size_t i = 0; i < r; i++) \
        a[i][cc] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(mt, x + i * K + k), a[i][cc])
        BY_SUM(c, TAIL);
#undef TAIL
    }
    for (size_t i = 0; i < r; i++)
        out[i * N] = hsum(_mm512_add_ps(_mm512_add_ps(a[i][0], a[i][1]),
                                        _mm512_add_ps(a[i][2], a[i][3]))) + bias;
}

/*
** Token rows in blocks of 4 against one weight row, which stays in L1 after
** the first block. Decoding (T <= 4) makes one block; more rows come only
** from the leftover (fewer than 4) weight rows of a tiled call (gemv_tiles).
*/
static inline __attribute__((always_inline)) void
gemv_dt(sm_dtype dt, float *restrict out, const float *restrict x, const void *restrict w,
        const float *restrict bias, size_t T, size_t N, size_t K, size_t n0, size_t n1) {
    for (size_t n = n0; n < n1; n++) {
        const void *wr = sm_kernels_elem(w, dt, n * K);
        float b = bias ? bias[n] : 0.0f;
        for (size_t t = 0; t < T; t += 4) switch (T - t) {
            case 1: dot_block(dt, 1, out + t * N + n, N, x + t * K, wr, b, K); break;
            case 2: dot_block(dt, 2, out + t * N + n, N, x + t * K, wr, b, K); break;
            case 3: dot_block(dt, 3, out + t * N + n, N, x + t * K, wr, b, K); break;
            default: dot_block(dt, 4, out + t * N + n, N, x + t * K, wr, b, K); break;
            }
    }
}

/*
** One token row of 16-bit weights reads four streams at once: weight rows
** n, n + q, n + 2q, n + 3q (one from each quarter of the rows given), each
** summed as dot_block sums it (chunk g into a[j][g % UN], the tail into the
** sum after the last whole chunk), 16 accumulators in one pass. Widening
** each load before its FMA left one row at a time waiting on memory: on a
** 2-vCPU Emerald Rapids bench_gemv --types f16 read 63-68% of the probe
** that way, against the AVX2 table's four streams (avx2_rows.c) 87-90%.
** Each stream asks for its lines PF_AHEAD bytes ahead of its reads: the
** next row's (as the AVX2 table does) was 72-77% on GPT-2's bf16 down
** projection (rows of 6 KB); 1 KB ahead 92-99% on every shape, 512 bytes
** and 4 KB 86-93%, none 78-85%.
*/
#define PF_AHEAD 1024
static inline __attribute__((always_inline)) void
dot_quarters(sm_dtype dt, float *restrict out, const float *restrict x, const void *restrict w,
             const float *restrict bias, size_t K, size_t q) {
    enum { NW = 4 };
    const uint16_t *wj[NW];
    for (size_t j = 0; j < NW; j++) wj[j] = (const uint16_t *)w + j * q * K;
    __m512 a[NW][UN];
    for (size_t j = 0; j < NW; j++)
        for (size_t u = 0; u < UN; u++) a[j][u] = _mm512_setzero_ps();
    size_t k = 0, c = 0;
    for (; k + 16 * UN <= K; k += 16 * UN) {
        for (size_t j = 0; j < NW; j++) { /* 128 bytes a row this step: two lines */
            _mm_prefetch((const char *)(wj[j] + k) + PF_AHEAD, _MM_HINT_T0);
            _mm_prefetch((const char *)(wj[j] + k) + PF_AHEAD + 64, _MM_HINT_T0);
        }
        for (size_t u = 0; u < UN; u++) {
            __m512 xv = _mm512_loadu_ps(x + k + 16 * u);
            for (size_t j = 0; j < NW; j++) a[j][u] = _mm512_fmadd_ps(load_w(dt, wj[j], k + 16 * u), xv, a[j][u]);
        }
    }
#define CHUNK(cc)                                                                               \
    if (k + 16 <= K) {                                                                          \
        __m512 xv = _mm512_loadu_ps(x + k);                                                     \
        for (size_t j = 0; j < NW; j++) a[j][cc] = _mm512_fmadd_ps(load_w(dt, wj[j], k), xv, a[j][cc]); \
        k += 16, c = cc + 1;                                                                    \
    }
    CHUNK(0) CHUNK(1) CHUNK(2)
#undef CHUNK
    if (k < K) {
        __mmask16 mt = tail_mask(K - k);
        __m512 xv = _mm512_maskz_loadu_ps(mt, x + k);
#define TAIL(cc) for (size_t j = 0; j < NW; j++) \
        a[j][cc] = _mm512_fmadd_ps(load_w_tail(dt, wj[j], k, K - k, mt), xv, a[j][cc])
        BY_SUM(c, TAIL);
#undef TAIL
    }
    for (size_t j = 0; j < NW; j++)
        out[j * q] = hsum(_mm512_add_ps(_mm512_add_ps(a[j][0], a[j][1]), _mm512_add_ps(a[j][2], a[j][3]))) +
                     (bias ? bias[j * q] : 0.0f);
}

static inline __attribute__((always_inline)) void
gemv_one_dt(sm_dtype dt, float *restrict out, const float *restrict x, const void *restrict w,
            const float *restrict bias, size_t N, size_t K, size_t n0, size_t n1) {
    const size_t q = (n1 - n0) / 4;
    for (size_t n = n0; n < n0 + q; n++)
        dot_quarters(dt, out + n, x, sm_kernels_elem(w, dt, n * K), bias ? bias + n : NULL, K, q);
    gemv_dt(dt, out, x, w, bias, 1, N, K, n0 + 4 * q, n1);
}

static void gemv(float *restrict out, const float *restrict x, const void *restrict w,
                 sm_dtype dt, const float *restrict bias, size_t T, size_t N, size_t K,
                 size_t n0, size_t n1) {
    if (T == 1 && dt == SM_DTYPE_F16)
        gemv_one_dt(SM_DTYPE_F16, out, x, w, bias, N, K, n0, n1);
    else if (T == 1 && dt == SM_DTYPE_BF16)
        gemv_one_dt(SM_DTYPE_BF16, out, x, w, bias, N, K, n0, n1);
    else if (dt == SM_DTYPE_F16)
        gemv_dt(SM_DTYPE_F16, out, x, w, bias, T, N, K, n0, n1);
    else if (dt == SM_DTYPE_BF16)
        gemv_dt(SM_DTYPE_BF16, out, x, w, bias, T, N, K, n0, n1);
    else
        gemv_dt(SM_DTYPE_F32, out, x, w, bias, T, N, K, n0, n1);
}

/* 16-bit panels, exactly: widened as read, or a slice at a time for many rows. */
static void panels16(const sm_kernels *k, float *restrict out, const float *restrict x, const void *restrict w,
                     sm_dtype wt, const float *restrict bias, size_t T, size_t N, size_t K, size_t n0,
                     size_t n1, float *restrict scratch) {
    const sm_gemm_kernel *g = T >= SM_PANELS_PACK_T     ? &gemm_widen16
                              : wt == SM_DTYPE_F16_P32 ? &gemm_panels_f16
                                                       : &gemm_panels_bf16;
    sm_kernels_gemm(g, k, out, x, w, sm_dtype_base(wt), bias, T, N, K, n0, n1, scratch);
}

static void matmul(const sm_kernels *k, float *restrict out, const float *restrict x, const void *restrict w,
                   sm_dtype wt, const float *restrict bias, size_t T, size_t N, size_t K,
                   size_t n0, size_t n1, float *restrict scratch) {
    if (sm_kernels_dot16_takes(k, sm_dtype_base(wt), T, K)) /* vdpbf16ps: from the rows or the panels */
        sm_kernels_gemm_bf16(out, x, w, wt, bias, T, N, K, n0, n1, scratch);
    else if (wt == SM_DTYPE_F32_T) /* weights held transposed: packed from there, for every T */
        sm_kernels_gemm(&gemm_kernel, k, out, x, w, wt, bias, T, N, K, n0, n1, scratch);
    else if (wt == SM_DTYPE_F32_P32) /* f32 panels: the packed product for every T */
        sm_kernels_gemm(&gemm_panels, k, out, x, w, SM_DTYPE_F32, bias, T, N, K, n0, n1, scratch);
    else if (wt == SM_DTYPE_F16_P32 || wt == SM_DTYPE_BF16_P32)
        panels16(k, out, x, w, wt, bias, T, N, K, n0, n1, scratch);
    else if (wt != sm_dtype_base(wt) && k->quant->gemm_r32) /* repacked: one product for every T */
        k->quant->gemm_r32(out, x, w, sm_dtype_base(wt), bias, T, N, K, n0, n1, scratch);
    else if (sm_kernels_qgemm_takes(k->quant, wt, T))
        k->quant->gemm(out, x, w, wt, bias, T, N, K, n0, n1, scratch);
    else if (sm_dtype_quantized(wt) && T < 4)
        sm_kernels_qmatmul(k->quant, out, x, w, wt, bias, T, N, K, n0, n1, scratch);
    else if (T >= 4)
        sm_kernels_gemm(&gemm_kernel, k, out, x, w, wt, bias, T, N, K, n0, n1, scratch);
    else
        gemv(out, x, w, wt, bias, T, N, K, n0, n1);
}

/*
** Batched decoding (matmul_rows, T > 4) is bound by arithmetic, not memory:
** it wants several weight rows x several token rows per register block, so
** each load feeds several FMAs. The dot products must still be summed
** exactly as dot_block sums them (chunk g into partial sum g % UN, in
** increasing g). So the tile takes one partial sum at a time: pass u runs
** over chunks u, u + UN, ... for 4 weight rows x r token rows (16
** accumulators, 16 FMAs per 8 loads), and the UN partial vectors of each
** output are combined at the end in dot_block's order. The tile's rows stay
** in L1/L2 across the passes. pf is 4 weight rows to come, which the tile
** prefetches (into L2) at the offsets it reads, in the passes set in pfm.
*/
static inline __attribute__((always_inline)) void
dot_tile(sm_dtype dt, size_t r, float *restrict out, size_t N, const float *restrict x,
         const void *restrict w, const char *pf, unsigned pfm, const float *restrict bias, size_t K) {
    enum { NW = 4 };
    __m512 part[4][NW][4];
    sm_avx512_tile_passes(dt, r, UN, x, w, pf, pfm, K, (__mmask16)0xFFFF, part);
    __m512 v[16];
    for (size_t i = 0; i < 4; i++)
        for (size_t j = 0; j < NW; j++)
            v[4 * i + j] = i < r ? _mm512_add_ps(_mm512_add_ps(part[i][j][0], part[i][j][1]),
                                                 _mm512_add_ps(part[i][j][2], part[i][j][3]))
                                 : _mm512_setzero_ps();
    float sum[16];
    _mm512_storeu_ps(sum, hsum16(v));
    for (size_t i = 0; i < r; i++)
        for (size_t j = 0; j < NW; j++) out[i * N + j] = sum[4 * j + i] + (bias ? bias[j] : 0.0f);
}

/*
** Blocks of 4 weight rows; each prefetches the block after the next, its
** passes shared among the token blocks (block b takes the passes u with u %
** nb = b, nb = the number of token blocks up to UN), so the loads from memory
** are spread over the block's time rather than bunched in its first token
** block. bench_gemv --rows 16, 1 thread: the 15M shapes (K = 288) 95-101 ->
** 114-130 GFLOPS, the GPT-2 shapes unchanged; into L2 rather than L1 gave
** GPT-2 qkv 180-190 -> 205-210 on 2 threads.
*/
static inline __attribute__((always_inline)) void
gemv_tiles(sm_dtype dt, float *restrict out, const float *restrict x, const void *restrict w,
           const float *restrict bias, size_t T, size_t N, size_t K, size_t n0, size_t n1) {
    size_t n = n0;
    for (; n + 4 <= n1; n += 4) {
        const void *wr = sm_kernels_elem(w, dt, n * K);
        const char *next = n + 12 <= n1 ? sm_kernels_elem(w, dt, (n + 8) * K) : NULL;
        const float *b = bias ? bias + n : NULL;
        for (size_t t = 0; t < T; t += 4) {
            unsigned pfm = next ? sm_kernels_pf_passes(t / 4, (T + 3) / 4, UN) : 0;
            switch (T - t) {
            case 1: dot_tile(dt, 1, out + t * N + n, N, x + t * K, wr, next, pfm, b, K); break;
            case 2: dot_tile(dt, 2, out + t * N + n, N, x + t * K, wr, next, pfm, b, K); break;
            case 3: dot_tile(dt, 3, out + t * N + n, N, x + t * K, wr, next, pfm, b, K); break;
            default: dot_tile(dt, 4, out + t * N + n, N, x + t * K, wr, next, pfm, b, K); break;
            }
        }
    }
    if (n < n1) gemv_dt(dt, out, x, w, bias, T, N, K, n, n1);
}

static void matmul_rows(const sm_kernels *k, float *restrict out, const float *restrict x, const void *restrict w,
                        sm_dtype wt, const float *restrict bias, size_t T, size_t N, size_t K,
                        size_t n0, size_t n1, float *restrict scratch) {
    if (wt == SM_DTYPE_F16_P32 || wt == SM_DTYPE_BF16_P32) { /* exact, vdpbf16ps or not */
        panels16(k, out, x, w, wt, bias, T, N, K, n0, n1, scratch);
        return;
    }
    if (wt != sm_dtype_base(wt)) { /* repacked: matmul's one product for every T */
        matmul(k, out, x, w, wt, bias, T, N, K, n0, n1, scratch);
        return;
    }
    if (sm_dtype_quantized(wt)) {
        sm_kernels_qmatmul(k->quant, out, x, w, wt, bias, T, N, K, n0, n1, scratch);
        return;
    }
    if (T <= 4)
        gemv(out, x, w, wt, bias, T, N, K, n0, n1);
    else if (wt == SM_DTYPE_F16)
        gemv_tiles(SM_DTYPE_F16, out, x, w, bias, T, N, K, n0, n1);
    else if (wt == SM_DTYPE_BF16)
        gemv_tiles(SM_DTYPE_BF16, out, x, w, bias, T, N, K, n0, n1);
    else
        gemv_tiles(SM_DTYPE_F32, out, x, w, bias, T, N, K, n0, n1);
}

static float hmax(const float *x, size_t n) {
    __m512 m = _mm512_set1_ps(-INFINITY);
    for (size_t i = 0; i < n; i += 16)
        m = _mm512_mask_max_ps(m, tail_mask(n - i), m, _mm512_maskz_loadu_ps(tail_mask(n - i), x + i));
    return _mm512_reduce_max_ps(m);
}

/* x[i] = exp(x[i] - mx); returns the sum. */
static float exp_sum(float *x, size_t n, float mx) {
    __m512 s = _mm512_setzero_ps(), vm = _mm512_set1_ps(mx);
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask(n - i);
        __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), vm));
        _mm512_mask_storeu_ps(x + i, m, e);
        s = _mm512_mask_add_ps(s, m, s, e);
    }
    return _mm512_reduce_add_ps(s);
}

static void scale_inplace(float *x, size_t n, float f) {
    __m512 vf = _mm512_set1_ps(f);
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask(n - i);
        _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), vf));
    }
}

static void softmax(float *x, size_t n) {
    float sum = exp_sum(x, n, hmax(x, n));
    scale_inplace(x, n, 1.0f / sum);
}

/* The attention pieces on 16 lanes: the tiles in avx512_attn.c, the softmax step here. */
#define GQ SM_ATTN_QGROUP
#define KB SM_ATTN_KBLOCK

/*
** The online-softmax step of a group's rows (sm_attn_kernel's softmax_group):
** what attention.c does row by row, with hmax and exp_sum inlined here
** instead of called through the table, and masked stores for its zeroing
** memsets; a 1,536-token prefill 2.5% faster.
*/
static void softmax_group(float *restrict p, const size_t *ra, const size_t *rn, size_t nk, float *m, float *l,
                     float *corr) {
    for (size_t i = 0; i < GQ; i++) {
        float *s = p + i * KB;
        size_t a = ra[i], n = rn[i];
        if (n == a) {
            for (size_t c = 0; c < KB; c += 16) _mm512_storeu_ps(s + c, _mm512_setzero_ps());
            corr[i] = 1.0f;
            continue;
        }
        float mnew = fmaxf(m[i], hmax(s + a, n - a));
        float sum = exp_sum(s + a, n - a, mnew);
        for (size_t c = 0; c < a; c += 16) _mm512_mask_storeu_ps(s + c, tail_mask(a - c), _mm512_setzero_ps());
        for (size_t c = n; c < nk; c += 16) _mm512_mask_storeu_ps(s + c, tail_mask(nk - c), _mm512_setzero_ps());
        float cf = expf(m[i] - mnew);
        l[i] = l[i] * cf + sum;
        m[i] = mnew;
        corr[i] = cf;
    }
}

static const sm_attn_kernel attn_kernel = {sm_avx512_attn_scores, sm_avx512_attn_pv, hmax, exp_sum, to_f32,
                                           softmax_group, sm_avx512_pv_lone, sm_avx512_attn_scores_softmax};

static void attention(float *restrict out, const float *restrict q, const sm_kv_head *kv,
                      float *restrict scratch, size_t T, size_t pos, size_t hs, size_t nh,
                      size_t q_stride, size_t out_stride, float scale, size_t window) {
    sm_kernels_attention(&attn_kernel, out, q, kv, scratch, T, pos, hs, nh, q_stride, out_stride,
                         scale, window);
}

static void attention_rows(const sm_attn_row *const *rows, size_t n, float *restrict scratch, size_t hs, float scale) {
    sm_kernels_attention_rows(&attn_kernel, rows, n, scratch, hs, scale);
}

static void layernorm(float *restrict out, const float *restrict x, const float *restrict g,
                      const float *restrict b, size_t C, float eps) {
    __m512 s = _mm512_setzero_ps();
    for (size_t i = 0; i < C; i += 16) s = _mm512_add_ps(s, _mm512_maskz_loadu_ps(tail_mask(C - i), x + i));
    float mean = _mm512_reduce_add_ps(s) / (float)C;
    __m512 vm = _mm512_set1_ps(mean), v2 = _mm512_setzero_ps();
    for (size_t i = 0; i < C; i += 16) {
        __mmask16 m = tail_mask(C - i);
        __m512 d = _mm512_maskz_sub_ps(m, _mm512_maskz_loadu_ps(m, x + i), vm);
        v2 = _mm512_fmadd_ps(d, d, v2);
    }
    float rstd = 1.0f / sqrtf(_mm512_reduce_add_ps(v2) / (float)C + eps);
    __m512 vr = _mm512_set1_ps(rstd);
    for (size_t i = 0; i < C; i += 16) {
        __mmask16 m = tail_mask(C - i);
        __m512 d = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), vm), vr);
        __m512 y = _mm512_fmadd_ps(d, _mm512_maskz_loadu_ps(m, g + i),
                                   b ? _mm512_maskz_loadu_ps(m, b + i) : _mm512_setzero_ps());
        _mm512_mask_storeu_ps(out + i, m, y);
    }
}

static void rmsnorm(float *out, const float *x, const float *restrict g, size_t C, float eps) {
    __m512 s = _mm512_setzero_ps();
    for (size_t i = 0; i < C; i += 16) {
        __m512 v = _mm512_maskz_loadu_ps(tail_mask(C - i), x + i);
        s = _mm512_fmadd_ps(v, v, s);
    }
    __m512 r = _mm512_set1_ps(1.0f / sqrtf(_mm512_reduce_add_ps(s) / (float)C + eps));
    for (size_t i = 0; i < C; i += 16) {
        __mmask16 m = tail_mask(C - i);
        __m512 y = _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), r),
                                 _mm512_maskz_loadu_ps(m, g + i));
        _mm512_mask_storeu_ps(out + i, m, y);
    }
}

static void swiglu(float *restrict gate, const float *restrict up, size_t n) {
    const __m512 one = _mm512_set1_ps(1.0f);
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask(n - i);
        __m512 u = _mm512_maskz_loadu_ps(m, gate + i);
        __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), u));
        __m512 y = _mm512_mul_ps(_mm512_div_ps(u, _mm512_add_ps(one, e)),
                                 _mm512_maskz_loadu_ps(m, up + i));
        _mm512_mask_storeu_ps(gate + i, m, y);
    }
}

/* Pairs (2i, 2i+1): even lanes a, odd lanes b; cos and sin duplicated to both. */
static void rope(float *restrict x, const float *restrict cs, const float *restrict sn,
                 size_t hs) {
    const __m512i dup = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    const __mmask16 odd = 0xAAAA;
    for (size_t i = 0; i < hs; i += 16) {
        __mmask16 m = tail_mask(hs - i);
        __mmask16 mh = tail_mask((hs - i) / 2);
        __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        __m512 c = _mm512_permutexvar_ps(dup, _mm512_maskz_loadu_ps(mh, cs + i / 2));
        __m512 sv = _mm512_permutexvar_ps(dup, _mm512_maskz_loadu_ps(mh, sn + i / 2));
        /* swapped pairs (b, a), then sign: (-b, a) */
        __m512 sw = _mm512_permute_ps(v, 0xB1);
        sw = _mm512_mask_sub_ps(sw, (__mmask16)~odd, _mm512_setzero_ps(), sw);
        __m512 y = _mm512_fmadd_ps(v, c, _mm512_mul_ps(sw, sv));
        _mm512_mask_storeu_ps(x + i, m, y);
    }
}

/* tanh(c (u + c3 u^3)), its argument clamped to +-lim: 1 - 2 / (exp(2z) + 1). u2 = u u. */
static inline __m512 gelu_th(__m512 u, __m512 u2, float lim) {
    const __m512 c = _mm512_set1_ps(0.7978845608028654f), c3 = _mm512_set1_ps(0.044715f);
    const __m512 one = _mm512_set1_ps(1.0f), l = _mm512_set1_ps(lim);
    __m512 z = _mm512_mul_ps(c, _mm512_fmadd_ps(_mm512_mul_ps(c3, u), u2, u));
    z = _mm512_min_ps(_mm512_max_ps(z, _mm512_sub_ps(_mm512_setzero_ps(), l)), l);
    return _mm512_sub_ps(one, _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(exp16(_mm512_add_ps(z, z)), one)));
}

static void gelu_tanh(float *x, size_t n) {
    const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask(n - i);
        __m512 u = _mm512_maskz_loadu_ps(m, x + i), th = gelu_th(u, _mm512_mul_ps(u, u), 9.0f);
        _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_mul_ps(half, u), _mm512_add_ps(one, th)));
    }
}

/* d *= gelu'(x): 0.5 (1 + th) + 0.5 u (1 - th^2) c (1 + 3 c3 u^2), th gelu_tanh's but clamped at
   +-20, where it is +-1 exactly (at +-9, 1 - th^2 times u's cube is off by 1e-5). */
static void gelu_tanh_grad(float *restrict d, const float *restrict x, size_t n) {
    const __m512 c = _mm512_set1_ps(0.7978845608028654f), c33 = _mm512_set1_ps(3 * 0.044715f);
    const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask(n - i);
        __m512 u = _mm512_maskz_loadu_ps(m, x + i), u2 = _mm512_mul_ps(u, u), th = gelu_th(u, u2, 20.0f);
        __m512 dz = _mm512_mul_ps(c, _mm512_fmadd_ps(c33, u2, one)); /* dz/du */
        __m512 sech2 = _mm512_fnmadd_ps(th, th, one);                  /* 1 - th^2 */
        __m512 g = _mm512_mul_ps(half, _mm512_fmadd_ps(_mm512_mul_ps(u, sech2), dz, _mm512_add_ps(one, th)));
        _mm512_mask_storeu_ps(d + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, d + i), g));
    }
}

/* erf via Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7), odd symmetry. */
static void gelu_erf(float *x, size_t n) {
    const __m512 one = _mm512_set1_ps(1.0f), half = _mm512_set1_ps(0.5f);
    const __m512i sign = _mm512_set1_epi32((int)0x80000000u);
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask(n - i);
        __m512 u = _mm512_maskz_loadu_ps(m, x + i);
        __m512 z = _mm512_mul_ps(u, _mm512_set1_ps(0.7071067811865476f));
        __m512 az = _mm512_castsi512_ps(_mm512_andnot_si512(sign, _mm512_castps_si512(z)));
        __m512 t = _mm512_div_ps(one, _mm512_fmadd_ps(_mm512_set1_ps(0.3275911f), az, one));
        __m512 p = _mm512_set1_ps(1.061405429f);
        p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-1.453152027f));
        p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(1.421413741f));
        p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-0.284496736f));
        p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.254829592f));
        p = _mm512_mul_ps(p, t);
        __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(az, az)));
        __m512 erfa = _mm512_fnmadd_ps(p, e, one);
        __m512 erfz = _mm512_castsi512_ps(_mm512_or_si512(
            _mm512_castps_si512(erfa), _mm512_and_si512(sign, _mm512_castps_si512(z))));
        _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_mul_ps(half, u), _mm512_add_ps(one, erfz)));
    }
}

static void vexp(float *restrict out, const float *restrict x, size_t n) {
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask(n - i);
        _mm512_mask_storeu_ps(out + i, m, exp16(_mm512_maskz_loadu_ps(m, x + i)));
    }
}

const sm_kernels sm_kernels_avx512 = {
    .name = "avx512",
    .quant = &sm_qkernel_avx2_maddubs,
    .l2_bytes = SM_L2_DEFAULT,
    .matmul_scratch = (size_t)NR * KC,
    .gemm_peak = SM_PEAK_FMA512,
    .f32_panels = true,
    .row_prefetch = 1,
    .matmul = matmul,
    .matmul_rows = matmul_rows,
    .attention = attention,
    .attention_rows = attention_rows,
    .softmax = softmax,
    .layernorm = layernorm,
    .rmsnorm = rmsnorm,
    .swiglu = swiglu,
    .add = sm_kernels_add,
    .rope = rope,
    .rope_halves = sm_kernels_rope_halves,
    .gelu_tanh = gelu_tanh,
    .gelu_tanh_grad = gelu_tanh_grad,
    .gelu_erf = gelu_erf,
    .to_f32 = to_f32,
    .exp = vexp,
    .sum = sm_kernels_sum_avx2, /* the read probe: avx2.c's */
    .transpose = sm_kernels_transpose_avx2,
};
#endif
