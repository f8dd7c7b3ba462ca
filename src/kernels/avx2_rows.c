/*
** avx2_rows.c -- the AVX2 table's matrix-vector products: one or two token
** rows (decode: sm_avx2_gemv) and several rows each computed as if alone
** (batched decode: sm_avx2_matmul_rows, the table's matmul_rows). Compiled
** with -mavx2 -mfma -mf16c, like avx2.c.
*/
#if defined(__x86_64__) || defined(__i386__)
#include "kernels_internal.h"
#include "avx2_load.h"
#include "avx2_reduce.h"

#include <immintrin.h>
#include <stdbool.h>
#include <stdint.h>

/*
** Matrix-vector products stream the weights row by row. One token row
** (decode) of 16-bit weights reads four streams at once: a tile of 4 weight
** rows, one from each quarter of the rows it was given (gemv_one_dt,
** gemv_kblocks_one), so the widening before each FMA of one row no longer
** holds up the reads (Zen 3: f16 15M and GPT-2 decode 1.2-1.5x). f32 rows
** go one after another: in the same tiles they were no faster (GPT-2 small
** 2-8% slower), and 4 neighbouring rows in a tile measured 20-30% slower
** than one row after another. Each dot product keeps UN = 4 partial sums,
** chunk c of 8 weights going to sum c % 4, reduced as (s0 + s1) + (s2 + s3) (partials4)
** and then across lanes: the same order whatever the number of token rows
** sharing the pass (what batched decoding relies on: a row's result does
** not depend on its neighbours).
*/
#define UN 4

/* out[t * N] for r token rows (r <= 2, a constant at every call site) against weight row w. */
static inline __attribute__((always_inline)) void
dot_block(sm_dtype dt, size_t r, float *restrict out, size_t N, const float *restrict x,
          const void *restrict w, float bias, size_t K) {
    __m256 a[2][UN];
    for (size_t i = 0; i < r; i++)
        for (size_t u = 0; u < UN; u++) a[i][u] = _mm256_setzero_ps();
    size_t k = 0, c = 0;
    for (; k + 8 * UN <= K; k += 8 * UN)
        for (size_t u = 0; u < UN; u++) {
            __m256 wv = load_w(dt, w, k + 8 * u);
            for (size_t i = 0; i < r; i++)
                a[i][u] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + i * K + k + 8 * u), a[i][u]);
        }
    for (; k + 8 <= K; k += 8, c++) { /* c < UN - 1 here */
        __m256 wv = load_w(dt, w, k);
        for (size_t i = 0; i < r; i++)
            a[i][c] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + i * K + k), a[i][c]);
    }
    if (k < K) {
        __m256i mt = tail_mask(K - k);
        __m256 wv = load_w_tail(dt, w, k, K - k, mt);
        for (size_t i = 0; i < r; i++)
            a[i][c] = _mm256_fmadd_ps(wv, _mm256_maskload_ps(x + i * K + k, mt), a[i][c]);
    }
    for (size_t i = 0; i < r; i++) out[i * N] = hsum(partials4(a[i])) + bias;
}

static inline __attribute__((always_inline)) void
gemv_dt(sm_dtype dt, float *restrict out, const float *restrict x, const void *restrict w,
        const float *restrict bias, size_t T, size_t N, size_t K, size_t n0, size_t n1) {
    for (size_t n = n0; n < n1; n++) {
        const void *wr = sm_kernels_elem(w, dt, n * K);
        float b = bias ? bias[n] : 0.0f;
        size_t t = 0;
        for (; t + 2 <= T; t += 2) dot_block(dt, 2, out + t * N + n, N, x + t * K, wr, b, K);
        if (t < T) dot_block(dt, 1, out + t * N + n, N, x + t * K, wr, b, K);
    }
}

/*
** Batched decoding (matmul_rows, T > 2) is bound by arithmetic, not memory:
** it wants several weight rows x several token rows per register block, so
** each load feeds several FMAs. The dot products must still be summed
** exactly as dot_block sums them (chunk g into partial sum g % UN, in
** increasing g). So the tile takes one partial sum at a time: pass u runs
** over chunks u, u + UN, ... for 4 weight rows x r token rows (8
** accumulators, 8 FMAs per 6 loads), and the UN partial vectors of each
** output are combined at the end in dot_block's order. The tile's rows stay
** in L1/L2 across the passes. pf is the next 4 weight rows, which the tile
** prefetches at the offsets it reads, in the passes set in pfm.
*/
static inline __attribute__((always_inline)) void
dot_tile_at(sm_dtype dt, size_t r, float *restrict out, size_t N, const float *restrict x,
            const void *restrict w, const char *pf, unsigned pfm, const float *restrict bias, size_t K,
            size_t ws, size_t js) {
    enum { NW = 4 };
    const size_t es = dt == SM_DTYPE_F32 ? 4 : 2, nf = K / 8;
    const __m256i mt = tail_mask(K % 8);
    __m256 part[2][NW][UN];
    for (size_t u = 0; u < UN; u++) {
        __m256 a[2][NW];
        for (size_t i = 0; i < r; i++)
            for (size_t j = 0; j < NW; j++) a[i][j] = _mm256_setzero_ps();
        for (size_t g = u; g < nf; g += UN) {
            __m256 wv[NW];
            for (size_t j = 0; j < NW; j++) {
                wv[j] = load_w(dt, w, j * ws + 8 * g);
                if (pfm >> u & 1) _mm_prefetch(pf + (j * ws + 8 * g) * es, _MM_HINT_T0);
            }
            for (size_t i = 0; i < r; i++) {
                __m256 xv = _mm256_loadu_ps(x + i * K + 8 * g);
                for (size_t j = 0; j < NW; j++) a[i][j] = _mm256_fmadd_ps(wv[j], xv, a[i][j]);
            }
        }
        if (K % 8 && nf % UN == u) {
            __m256 wv[NW];
            for (size_t j = 0; j < NW; j++) wv[j] = load_w_tail(dt, w, j * ws + 8 * nf, K % 8, mt);
            for (size_t i = 0; i < r; i++) {
                __m256 xv = _mm256_maskload_ps(x + i * K + 8 * nf, mt);
                for (size_t j = 0; j < NW; j++) a[i][j] = _mm256_fmadd_ps(wv[j], xv, a[i][j]);
            }
        }
        for (size_t i = 0; i < r; i++)
            for (size_t j = 0; j < NW; j++) part[i][j][u] = a[i][j];
    }
    __m256 v[8];
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < NW; j++)
            v[2 * j + i] = i < r ? partials4(part[i][j]) : _mm256_setzero_ps();
    float sum[8];
    _mm256_storeu_ps(sum, hsum8(v));
    for (size_t i = 0; i < r; i++)
        for (size_t j = 0; j < NW; j++) out[i * N + j * js] = sum[4 * i + j] + (bias ? bias[j * js] : 0.0f);
}

/* The tile of 4 neighbouring weight rows (batched decoding). */
static inline __attribute__((always_inline)) void
dot_tile(sm_dtype dt, size_t r, float *restrict out, size_t N, const float *restrict x,
         const void *restrict w, const char *pf, unsigned pfm, const float *restrict bias, size_t K) {
    dot_tile_at(dt, r, out, N, x, w, pf, pfm, bias, K, K, 1);
}

/*
** One token row: tile i takes row i of each quarter of n0..n1 (weight rows
** q apart, outputs q apart) and prefetches row i + 1 of each in every pass
** (all four passes: two of them would cover every line once, and measured
** slower); the rows left over one at a time. For rows of K < KBLK_MIN 16-bit
** weights (< 2 KB: the tile's rows and the next 4 stay in L1 beside x).
*/
static inline __attribute__((always_inline)) void
gemv_one_dt(sm_dtype dt, float *restrict out, const float *restrict x, const void *restrict w,
            const float *restrict bias, size_t N, size_t K, size_t n0, size_t n1) {
    const size_t q = (n1 - n0) / 4;
    for (size_t n = n0; n < n0 + q; n++) {
        const char *next = n + 1 < n0 + q ? sm_kernels_elem(w, dt, (n + 1) * K) : NULL;
        dot_tile_at(dt, 1, out + n, N, x, sm_kernels_elem(w, dt, n * K), next, next ? 0xf : 0,
                    bias ? bias + n : NULL, K, q * K, q);
    }
    gemv_dt(dt, out, x, w, bias, 1, N, K, n0 + 4 * q, n1);
}

/*
** Blocks of 4 weight rows; each prefetches the next, its passes shared among
** the token blocks (block b takes the passes u with u % nb = b, nb = the
** number of token blocks up to UN) rather than all made by the second one.
** bench_gemv --kernels avx2 --rows 16, 3 interleaved runs: f32 GPT-2 qkv
** 72-74 -> 81-83 GFLOPS on 1 thread, 134-139 -> 155-160 on 2; f16 +5-10%.
** (Into L2 instead, as the AVX-512 tile does, cost the 15M shapes a fifth.)
*/
static inline __attribute__((always_inline)) void
gemv_tiles(sm_dtype dt, float *restrict out, const float *restrict x, const void *restrict w,
           const float *restrict bias, size_t T, size_t N, size_t K, size_t n0, size_t n1) {
    size_t n = n0;
    for (; n + 4 <= n1; n += 4) {
        const void *wr = sm_kernels_elem(w, dt, n * K);
        const char *next = n + 8 <= n1 ? sm_kernels_elem(w, dt, (n + 4) * K) : NULL;
        const float *b = bias ? bias + n : NULL;
        for (size_t t = 0; t < T; t += 2) {
            unsigned pfm = next ? sm_kernels_pf_passes(t / 2, (T + 1) / 2, UN) : 0;
            if (T - t >= 2)
                dot_tile(dt, 2, out + t * N + n, N, x + t * K, wr, next, pfm, b, K);
            else
                dot_tile(dt, 1, out + t * N + n, N, x + t * K, wr, next, pfm, b, K);
        }
    }
    if (n < n1) gemv_dt(dt, out, x, w, bias, T, N, K, n, n1);
}

/*
** Rows of K >= KBLK_MIN floats (GPT-2's down projection, 3,072; a 1.1B model's
** 2,048 and 5,632): 4 weight rows no longer fit L1 beside the token rows, so
** dot_tile's passes (one per token pair) read them from L2. Here the
** weights go in blocks of KBLK floats (4 x 2 KB of f32: in L1 across every
** token group), and each output's UN partial sums are kept in acc between
** blocks: chunk g still goes to sum g % UN in increasing g (KBLK is a multiple
** of 8 * UN), so every output is bit for bit dot_block's. The tile is 4
** weight rows x 3 token rows (12 accumulators, 12 FMAs per 7 loads); the
** first token group prefetches the next block (or the next 4 rows' first).
** bench_gemv --rows 8|16, 2 threads, on a Zen 3 (docs/performance.md):
** f32 1.34-1.68x dot_tile's GFLOPS at K = 2,048 and 3,072, f16 1.12-1.48x;
** at K <= 768 dot_tile was faster here (57 vs 44), so shorter rows keep it.
*/
#define KBLK 512
#define KBLK_MIN 1024
#define TG 16 /* token rows per accumulator set (acc on the stack: 8 KB) */
#define RT 3

static inline __attribute__((always_inline)) void
kb_tile(sm_dtype dt, size_t r, float *restrict acc, const float *restrict x, const void *restrict w,
        size_t K, size_t ws, size_t c0, size_t c1, bool tail, const char *pf) {
    enum { NW = 4 };
    const size_t es = dt == SM_DTYPE_F32 ? 4 : 2, nf = K / 8;
    /* one pointer per row, so the loop indexes each with one offset (no strides to spill) */
    const char *wj[NW], *pj[NW];
    const float *xi[RT];
    for (size_t j = 0; j < NW; j++) {
        wj[j] = (const char *)w + j * ws * es;
        pj[j] = pf ? pf + j * ws * es - 8 * c0 * es : NULL;
    }
    for (size_t i = 0; i < r; i++) xi[i] = x + i * K;
    for (size_t u = 0; u < UN; u++) {
        __m256 a[RT][NW];
        for (size_t i = 0; i < r; i++)
            for (size_t j = 0; j < NW; j++)
                a[i][j] = c0 ? _mm256_load_ps(acc + ((i * NW + j) * UN + u) * 8) : _mm256_setzero_ps();
        for (size_t g = c0 + u; g < c1; g += UN) { /* c0 % UN == 0 */
            if (pf && g % 2 == 0) /* one prefetch per 64-byte line of each row */
                for (size_t j = 0; j < NW; j++) _mm_prefetch(pj[j] + 8 * g * es, _MM_HINT_T0);
            __m256 xv[RT];
            for (size_t i = 0; i < r; i++) xv[i] = _mm256_loadu_ps(xi[i] + 8 * g);
            for (size_t j = 0; j < NW; j++) {
                __m256 wv = load_w(dt, wj[j], 8 * g);
                for (size_t i = 0; i < r; i++) a[i][j] = _mm256_fmadd_ps(wv, xv[i], a[i][j]);
            }
        }
        if (tail && nf % UN == u) { /* the last, partial chunk: after every whole one of sum u */
            const __m256i mt = tail_mask(K % 8);
            for (size_t j = 0; j < NW; j++) {
                __m256 wv = load_w_tail(dt, wj[j], 8 * nf, K % 8, mt);
                for (size_t i = 0; i < r; i++)
                    a[i][j] = _mm256_fmadd_ps(wv, _mm256_maskload_ps(xi[i] + 8 * nf, mt), a[i][j]);
            }
        }
        for (size_t i = 0; i < r; i++)
            for (size_t j = 0; j < NW; j++) _mm256_store_ps(acc + ((i * NW + j) * UN + u) * 8, a[i][j]);
    }
}

/* Each (type, token rows) tile its own function: inlined into one body with the rest,
   the loop's pointers spilled to the stack. */
#define KB_TILE(name, dt, r)                                                                   \
    static __attribute__((noinline)) void name(float *restrict acc, const float *restrict x,    \
                                               const void *restrict w, size_t K, size_t ws,     \
                                               size_t c0, size_t c1, bool tail, const char *pf) { \
        kb_tile(dt, r, acc, x, w, K, ws, c0, c1, tail, pf);                                     \
    }
KB_TILE(kb_f32_1, SM_DTYPE_F32, 1)
KB_TILE(kb_f32_2, SM_DTYPE_F32, 2)
KB_TILE(kb_f32_3, SM_DTYPE_F32, 3)
KB_TILE(kb_f16_1, SM_DTYPE_F16, 1)
KB_TILE(kb_f16_2, SM_DTYPE_F16, 2)
KB_TILE(kb_f16_3, SM_DTYPE_F16, 3)
KB_TILE(kb_bf16_1, SM_DTYPE_BF16, 1)
KB_TILE(kb_bf16_2, SM_DTYPE_BF16, 2)
KB_TILE(kb_bf16_3, SM_DTYPE_BF16, 3)
#undef KB_TILE

typedef void (*kb_tile_fn)(float *restrict, const float *restrict, const void *restrict, size_t, size_t,
                           size_t, size_t, bool, const char *);
static const kb_tile_fn kb_tiles[3][RT] = {{kb_f32_1, kb_f32_2, kb_f32_3},
                                           {kb_f16_1, kb_f16_2, kb_f16_3},
                                           {kb_bf16_1, kb_bf16_2, kb_bf16_3}};

/* The blocked tile of weight type dt for r token rows (1 <= r <= RT). */
static kb_tile_fn kb_tile_for(sm_dtype dt, size_t r) {
    return kb_tiles[dt == SM_DTYPE_F32 ? 0 : dt == SM_DTYPE_F16 ? 1 : 2][r - 1];
}

static void gemv_kblocks(sm_dtype dt, float *restrict out, const float *restrict x, const void *restrict w,
                         const float *restrict bias, size_t T, size_t N, size_t K, size_t n0, size_t n1) {
    enum { NW = 4 };
    _Alignas(32) float acc[TG * NW * UN * 8];
    const size_t nf = K / 8;
    size_t n = n0;
    for (; n + NW <= n1; n += NW) {
        const void *wr = sm_kernels_elem(w, dt, n * K);
        const char *next = n + 2 * NW <= n1 ? sm_kernels_elem(w, dt, (n + NW) * K) : NULL;
        for (size_t t0 = 0; t0 < T; t0 += TG) {
            size_t tn = T - t0 < TG ? T - t0 : TG;
            for (size_t c0 = 0; c0 < nf; c0 += KBLK / 8) {
                size_t c1 = c0 + KBLK / 8 < nf ? c0 + KBLK / 8 : nf;
                bool last = c1 == nf;
                /* the first token group fetches the next block: this tile's, else the next tile's first */
                const char *pf = t0 ? NULL : !last ? sm_kernels_elem(wr, dt, 8 * c1) : next;
                for (size_t t = 0; t < tn; t += RT) {
                    float *ac = acc + t * NW * UN * 8;
                    const float *xt = x + (t0 + t) * K;
                    const char *p = t == 0 ? pf : NULL;
                    size_t r = tn - t < RT ? tn - t : RT;
                    kb_tile_for(dt, r)(ac, xt, wr, K, K, c0, c1, last && K % 8, p);
                }
            }
            for (size_t t = 0; t < tn; t++) /* dot_block's order */
                for (size_t j = 0; j < NW; j++) {
                    __m256 p[UN];
                    for (size_t u = 0; u < UN; u++) p[u] = _mm256_load_ps(acc + ((t * NW + j) * UN + u) * 8);
                    out[(t0 + t) * N + n + j] = hsum(partials4(p)) + (bias ? bias[n + j] : 0.0f);
                }
        }
    }
    if (n < n1) sm_avx2_gemv(out, x, w, dt, bias, T, N, K, n, n1);
}

/*
** One token row, 16-bit rows of K >= KBLK_MIN: gemv_one_dt's four streams
** in kb_tile's blocks (4 such rows do not stay in L1 across dot_tile's
** passes). bench_gemv, 1 thread, Zen 3, 3 interleaved runs: f16 GPT-2 down
** and 1.1B ffn 11-13 -> 13-17 GB/s (f32 rows: 12-16 either way).
*/
static void gemv_kblocks_one(sm_dtype dt, float *restrict out, const float *restrict x, const void *restrict w,
                             const float *restrict bias, size_t N, size_t K, size_t n0, size_t n1) {
    enum { NW = 4 };
    _Alignas(32) float acc[NW * UN * 8];
    const size_t nf = K / 8, q = (n1 - n0) / 4;
    const kb_tile_fn tile = kb_tile_for(dt, 1);
    for (size_t n = n0; n < n0 + q; n++) {
        const void *wr = sm_kernels_elem(w, dt, n * K);
        const char *next = n + 1 < n0 + q ? sm_kernels_elem(w, dt, (n + 1) * K) : NULL;
        for (size_t c0 = 0; c0 < nf; c0 += KBLK / 8) {
            size_t c1 = c0 + KBLK / 8 < nf ? c0 + KBLK / 8 : nf;
            bool last = c1 == nf;
            tile(acc, x, wr, K, q * K, c0, c1, last && K % 8, !last ? sm_kernels_elem(wr, dt, 8 * c1) : next);
        }
        for (size_t j = 0; j < NW; j++) {
            __m256 p[UN];
            for (size_t u = 0; u < UN; u++) p[u] = _mm256_load_ps(acc + (j * UN + u) * 8);
            out[n + j * q] = hsum(partials4(p)) + (bias ? bias[n + j * q] : 0.0f);
        }
    }
    if (n0 + 4 * q < n1) sm_avx2_gemv(out, x, w, dt, bias, 1, N, K, n0 + 4 * q, n1);
}

void sm_avx2_gemv(float *restrict out, const float *restrict x, const void *restrict w,
                 sm_dtype dt, const float *restrict bias, size_t T, size_t N, size_t K,
                 size_t n0, size_t n1) {
    if (T == 1 && K >= KBLK_MIN && dt != SM_DTYPE_F32 && n1 - n0 >= 4) {
        gemv_kblocks_one(dt, out, x, w, bias, N, K, n0, n1);
        return;
    }
    if (dt == SM_DTYPE_F16)
        T == 1 ? gemv_one_dt(SM_DTYPE_F16, out, x, w, bias, N, K, n0, n1)
               : gemv_dt(SM_DTYPE_F16, out, x, w, bias, T, N, K, n0, n1);
    else if (dt == SM_DTYPE_BF16)
        T == 1 ? gemv_one_dt(SM_DTYPE_BF16, out, x, w, bias, N, K, n0, n1)
               : gemv_dt(SM_DTYPE_BF16, out, x, w, bias, T, N, K, n0, n1);
    else
        gemv_dt(SM_DTYPE_F32, out, x, w, bias, T, N, K, n0, n1);
}

void sm_avx2_matmul_rows(const sm_kernels *k, float *restrict out, const float *restrict x, const void *restrict w,
                        sm_dtype wt, const float *restrict bias, size_t T, size_t N, size_t K,
                        size_t n0, size_t n1, float *restrict scratch) {
    if (wt != sm_dtype_base(wt)) { /* panels, repacked: matmul's one product for every T */
        k->matmul(k, out, x, w, wt, bias, T, N, K, n0, n1, scratch);
        return;
    }
    if (sm_dtype_quantized(wt)) {
        sm_kernels_qmatmul(k->quant, out, x, w, wt, bias, T, N, K, n0, n1, scratch);
        return;
    }
    if (T <= 2)
        sm_avx2_gemv(out, x, w, wt, bias, T, N, K, n0, n1);
    else if (K >= KBLK_MIN) /* its tiles are compiled per type (kb_tiles); the loop takes wt as it is */
        gemv_kblocks(wt, out, x, w, bias, T, N, K, n0, n1);
    else if (wt == SM_DTYPE_F16)
        gemv_tiles(SM_DTYPE_F16, out, x, w, bias, T, N, K, n0, n1);
    else if (wt == SM_DTYPE_BF16)
        gemv_tiles(SM_DTYPE_BF16, out, x, w, bias, T, N, K, n0, n1);
    else
        gemv_tiles(SM_DTYPE_F32, out, x, w, bias, T, N, K, n0, n1);
}

#endif
