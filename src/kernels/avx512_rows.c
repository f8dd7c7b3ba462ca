/*
** avx512_rows.c -- the AVX2 table's batched products on 512-bit registers.
** Where the kernel choice takes decoding's float products from the AVX2
** table on a CPU with AVX-512 (a Zen 4: dispatch.c's CPU-family table), a
** composed table's matmul_rows of 3 or more token rows runs here: tiles of
** 4 weight rows x 4 token rows on 16-lane vectors, as the AVX-512 table's
** own, instead of the AVX2 table's 4 x 2 (and 4 x 3) on 8 lanes.
**
** Every output is bit for bit the AVX2 one-row product's (avx2_rows.c,
** dot_block), so a row decoded in a batch is still the row decoded alone.
** That product keeps four 8-lane partial sums, chunk g of 8 weights into
** sum g % 4, in increasing g. Here they are the halves of two 16-lane
** sums: A (sums 0 and 1) over the 16-weight vectors 0, 2, 4, ..., and B
** (sums 2 and 3) over vectors 1, 3, 5, ...; each lane meets the same FMAs
** in the same order. A last, partial chunk is multiplied on all its 8
** lanes, zeros past the row's end, as dot_block does, and a chunk the row
** does not have leaves its lanes alone (a masked FMA). The halves are then
** combined as dot_block combines its sums (partials4, then hsum's tree).
** Compiled with -mavx512f -mfma.
*/
#if defined(__x86_64__) || defined(__i386__)
#include "kernels_internal.h"
#include "avx512_tile.h"
#include "avx2_reduce.h"

#include <immintrin.h>

enum { NP = 2, NW = 4 }; /* passes (A, then B) and weight rows per tile */

/*
** out[t * N + j], token rows t < r (r <= 4, a constant at every call site)
** and weight rows j < NW from w (stride K). pf is the 4 weight rows to
** come, prefetched into L2 at the offsets the tile reads, in the passes set
** in pfm (as the AVX-512 table's tiles do).
*/
static inline __attribute__((always_inline)) void
dot_tile(sm_dtype dt, size_t r, float *restrict out, size_t N, const float *restrict x,
         const void *restrict w, const char *pf, unsigned pfm, const float *restrict bias, size_t K) {
    /* the last vector's FMAs on the chunks dot_block has (one or two of 8) */
    const size_t rem = K % 16;
    __m512 part[4][NW][4];
    sm_avx512_tile_passes(dt, r, NP, x, w, pf, pfm, K, rem > 8 ? (__mmask16)0xFFFF : (__mmask16)0x00FF, part);
    for (size_t i0 = 0; i0 < r; i0 += 2) { /* token pairs, as hsum8 lays out 8 sums */
        __m256 v[8];
        for (size_t i = 0; i < 2; i++)
            for (size_t j = 0; j < NW; j++) {
                __m256 p[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
                if (i0 + i < r)
                    for (size_t u = 0; u < NP; u++) {
                        __m512 s = part[i0 + i][j][u];
                        p[2 * u] = _mm512_castps512_ps256(s);
                        p[2 * u + 1] = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1));
                    }
                v[2 * j + i] = partials4(p);
            }
        float sum[8];
        _mm256_storeu_ps(sum, hsum8(v));
        for (size_t i = 0; i < 2 && i0 + i < r; i++)
            for (size_t j = 0; j < NW; j++)
                out[(i0 + i) * N + j] = sum[4 * i + j] + (bias ? bias[j] : 0.0f);
    }
}

/*
** Blocks of 4 weight rows against every token row, 4 at a time; each block
** prefetches the block after the next, its passes shared among the token
** blocks (sm_kernels_pf_passes). Weight rows left over go to the AVX2
** product, whose sums these are.
*/
static inline __attribute__((always_inline)) void
gemv_tiles(sm_dtype dt, float *restrict out, const float *restrict x, const void *restrict w,
           const float *restrict bias, size_t T, size_t N, size_t K, size_t n0, size_t n1) {
    size_t n = n0;
    for (; n + NW <= n1; n += NW) {
        const void *wr = sm_kernels_elem(w, dt, n * K);
        const char *next = n + 3 * NW <= n1 ? sm_kernels_elem(w, dt, (n + 2 * NW) * K) : NULL;
        const float *b = bias ? bias + n : NULL;
        for (size_t t = 0; t < T; t += 4) {
            unsigned pfm = next ? sm_kernels_pf_passes(t / 4, (T + 3) / 4, NP) : 0;
            switch (T - t) {
            case 1: dot_tile(dt, 1, out + t * N + n, N, x + t * K, wr, next, pfm, b, K); break;
            case 2: dot_tile(dt, 2, out + t * N + n, N, x + t * K, wr, next, pfm, b, K); break;
            case 3: dot_tile(dt, 3, out + t * N + n, N, x + t * K, wr, next, pfm, b, K); break;
            default: dot_tile(dt, 4, out + t * N + n, N, x + t * K, wr, next, pfm, b, K); break;
            }
        }
    }
    if (n < n1) sm_avx2_gemv(out, x, w, dt, bias, T, N, K, n, n1);
}

void sm_avx512_rows_avx2(const sm_kernels *k, float *restrict out, const float *restrict x,
                         const void *restrict w, sm_dtype wt, const float *restrict bias, size_t T,
                         size_t N, size_t K, size_t n0, size_t n1, float *restrict scratch) {
    if (sm_dtype_quantized(wt) || wt != sm_dtype_base(wt) || T <= 2) /* laid out: the table's matmul */
        sm_avx2_matmul_rows(k, out, x, w, wt, bias, T, N, K, n0, n1, scratch);
    else if (wt == SM_DTYPE_F16)
        gemv_tiles(SM_DTYPE_F16, out, x, w, bias, T, N, K, n0, n1);
    else if (wt == SM_DTYPE_BF16)
        gemv_tiles(SM_DTYPE_BF16, out, x, w, bias, T, N, K, n0, n1);
    else
        gemv_tiles(SM_DTYPE_F32, out, x, w, bias, T, N, K, n0, n1);
}

#endif
