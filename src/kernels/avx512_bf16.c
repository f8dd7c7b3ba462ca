/*
** avx512_bf16.c -- the packed product (T >= 4) of 16-bit weights by
** AVX512-BF16's vdpbf16ps. Compiled with -mavx512f -mavx512bf16; only
** called where the CPU has AVX512-BF16 (dispatch.c sets the table's
** dot16_types there).
**
** vdpbf16ps multiplies 16 pairs of bf16 by 16 pairs and adds each lane's two
** products to an f32 lane: twice the multiplies of a 512-bit FMA per
** instruction. Its operands are bf16, so the activations are rounded to bf16
** (to nearest even) once per block of token rows and column slice; bf16
** weights are used as they are (f16 weights, where the table takes them, are
** rounded to bf16 while packing). Sums are f32 throughout; the instruction
** treats subnormal inputs and results as zero (bf16 subnormals are below
** 1.2e-38: no activation or weight of a model comes near them).
**
** Layout: a panel of NR = 32 weight rows x KC columns holds, for each pair
** of columns p, the 32 rows' pairs (w[n, 2p], w[n, 2p + 1]) as 32-bit words:
** one column pair is 2 vectors. An MR = 8 token x NR micro-kernel keeps 16
** accumulators and does 16 vdpbf16ps per 2 panel loads and 8 broadcast
** activation pairs. Panels are packed from the 16-bit panels laid out at
** load (SM_DTYPE_BF16_P32, SM_DTYPE_F16_P32: two word permutes a column
** pair) or from the rows as stored (8 x 8 word transposes). Each output's
** sum runs over the column pairs in order, slice by slice, whatever the
** block, tile or thread split: a row's result does not depend on the other
** rows of the call.
*/
#if defined(__x86_64__) || defined(__i386__)
#include "kernels_internal.h"
#include "avx512_tile.h"

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define NR 32
#define MR 8
#define KC SM_BF16_KC
#define KP (KC / 2)
#define MC SM_BF16_MC

/* 32 floats (n <= 32 of them from src, zeros after) as 16 bf16 pairs, rounded to nearest even. */
static inline __m512i to_pairs(const float *src, size_t n) {
    __m512 lo = _mm512_maskz_loadu_ps(tail_mask(n), src);
    __m512 hi = _mm512_maskz_loadu_ps(tail_mask(n > 16 ? n - 16 : 0), src + 16);
    return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

/* Rows t0..t1-1, columns k0..k0+kc-1 of x (stride K) as bf16 pairs: row i at xb + i KP. */
static void convert_block(uint32_t *restrict xb, const float *restrict x, size_t K, size_t t0,
                          size_t t1, size_t k0, size_t kc) {
    for (size_t t = t0; t < t1; t++) {
        const float *r = x + t * K + k0;
        uint32_t *d = xb + (t - t0) * KP;
        for (size_t k = 0; k < kc; k += 32) {
            size_t n = kc - k < 32 ? kc - k : 32;
            _mm512_mask_storeu_epi32(d + k / 2, tail_mask((n + 1) / 2), to_pairs(r + k, n));
        }
    }
}

/* 32 f16 at src as 32 bf16, in order (each rounded to nearest even). */
static inline __m512i bf16_of_f16(const uint16_t *src) {
    __m512 lo = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)src));
    __m512 hi = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(src + 16)));
    return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

/* kc (even) halfs of an f16 row as bf16 pairs (each weight rounded to nearest even) into d. */
static void f16_pairs(uint32_t *restrict d, const uint16_t *restrict src, size_t kc) {
    size_t k = 0;
    for (; k + 32 <= kc; k += 32) _mm512_storeu_si512(d + k / 2, bf16_of_f16(src + k));
    if (k < kc) { /* the tail through a zero-padded buffer: 16-bit masked loads need AVX-512BW */
        uint16_t h[32] = {0};
        memcpy(h, src + k, (kc - k) * sizeof *h);
        _mm512_mask_storeu_epi32(d + k / 2, tail_mask((kc - k) / 2), bf16_of_f16(h));
    }
}

/*
** The same panel from 16-bit panels laid out at load (SM_DTYPE_BF16_P32,
** SM_DTYPE_F16_P32: column k of the 32 rows from n at 32 k, one 64-byte
** vector; rows past N zeros): each column pair's two vectors interleaved by
** two word permutes (f16 rounded to bf16 first, as f16_pairs does), read as
** one stream. The same words as pack below makes from the file's rows.
*/
static void pack_p32(uint32_t *restrict panel, const void *restrict w, sm_dtype dt, size_t K, size_t n,
                     size_t k0, size_t kc) {
    const uint16_t *src = (const uint16_t *)w + n * K + k0 * NR;
    const __m512i lo = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7,
                                        38, 6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
    const __m512i hi = _mm512_add_epi16(lo, _mm512_set1_epi16(16));
    for (size_t p = 0; p < kc / 2; p++) {
        const uint16_t *c = src + 2 * p * NR; /* columns 2p and 2p + 1 */
        __m512i a = dt == SM_DTYPE_F16_P32 ? bf16_of_f16(c) : _mm512_loadu_si512(c);
        __m512i b = dt == SM_DTYPE_F16_P32 ? bf16_of_f16(c + NR) : _mm512_loadu_si512(c + NR);
        _mm512_store_si512(panel + p * NR, _mm512_permutex2var_epi16(a, lo, b));
        _mm512_store_si512(panel + p * NR + 16, _mm512_permutex2var_epi16(a, hi, b));
    }
}

/*
** Packs rows n..n+nr-1, columns k0..k0+kc-1 (kc even) of w into the panel
** (kc / 2 pairs x NR words; rows nr..NR-1 zero). bf16 rows are already
** pairs: a whole panel is 8 x 8 transposes of words (avx2.c's, which moves
** bits, not values). Otherwise the rows are gathered as pairs into `rows`
** (f16 rounded to bf16) and transposed from there.
*/
static void pack(uint32_t *restrict panel, uint32_t *restrict rows, const void *restrict w,
                 sm_dtype dt, size_t K, size_t n, size_t nr, size_t k0, size_t kc) {
    const size_t kp = kc / 2;
    if (dt == SM_DTYPE_BF16 && nr == NR && kp % 8 == 0) {
        sm_kernels_pack_avx2((float *)panel, w, SM_DTYPE_F32, K / 2, n, NR, NR, k0 / 2, kp);
        return;
    }
    for (size_t j = 0; j < nr; j++) {
        const uint16_t *src = (const uint16_t *)w + (n + j) * K + k0;
        if (dt == SM_DTYPE_BF16) memcpy(rows + j * KP, src, kc * sizeof *src);
        else f16_pairs(rows + j * KP, src, kc);
    }
    if (nr == NR && kp % 8 == 0) {
        sm_kernels_pack_avx2((float *)panel, rows, SM_DTYPE_F32, KP, 0, NR, NR, 0, kp);
        return;
    }
    for (size_t p = 0; p < kp; p++)
        for (size_t j = 0; j < NR; j++) panel[p * NR + j] = j < nr ? rows[j * KP + p] : 0;
}

/*
** out[i, 0..nr) (+)= x pairs[i, 0..kp) . panel for i < mr. `first` stores
** (adding bias when given) instead of accumulating. mr is a compile-time
** constant at every call site so the accumulators live in registers.
*/
static inline __attribute__((always_inline)) void
micro(size_t mr, float *restrict out, size_t ldo, const uint32_t *restrict x,
      const uint32_t *restrict panel, size_t kp, const float *restrict bias, int first, size_t nr) {
    __m512 c0[MR], c1[MR];
    for (size_t i = 0; i < mr; i++) { /* the output tile, read after the k loop */
        _mm_prefetch((const char *)(out + i * ldo), _MM_HINT_T0);
        _mm_prefetch((const char *)(out + i * ldo + 16), _MM_HINT_T0);
    }
    SM_TILE_ROWS for (size_t i = 0; i < mr; i++) c0[i] = c1[i] = _mm512_setzero_ps();
    for (size_t p = 0; p < kp; p++) {
        __m512bh b0 = (__m512bh)_mm512_load_si512(panel + p * NR);
        __m512bh b1 = (__m512bh)_mm512_load_si512(panel + p * NR + 16);
        SM_TILE_ROWS for (size_t i = 0; i < mr; i++) {
            __m512bh a = (__m512bh)_mm512_set1_epi32((int)x[i * KP + p]);
            c0[i] = _mm512_dpbf16_ps(c0[i], a, b0);
            c1[i] = _mm512_dpbf16_ps(c1[i], a, b1);
        }
    }
    sm_avx512_tile_store(mr, out, ldo, c0, c1, bias, first, nr);
}

/* Each row count compiled on its own (inlined into the loop nest, the accumulators spill). */
#define MICRO(r)                                                                                   \
    static void micro_##r(float *restrict out, size_t ldo, const uint32_t *restrict x,            \
                          const uint32_t *restrict panel, size_t kp, const float *restrict bias,   \
                          int first, size_t nr) {                                                  \
        micro(r, out, ldo, x, panel, kp, bias, first, nr);                                         \
    }
MICRO(1)
MICRO(2)
MICRO(3)
MICRO(4)
MICRO(5)
MICRO(6)
MICRO(7)
MICRO(8)
typedef void micro_fn(float *restrict, size_t, const uint32_t *restrict, const uint32_t *restrict,
                      size_t, const float *restrict, int, size_t);
static micro_fn *const micros[MR + 1] = {NULL,    micro_1, micro_2, micro_3, micro_4,
                                         micro_5, micro_6, micro_7, micro_8};

/*
** Rows n..n1-1 (at most NR), columns k0..k0+kc-1 of w into L2: the next
** panel, asked for while this one's products run (a pack reads 32 rows far
** apart; without it each waits on memory).
*/
static void prefetch_rows(const void *w, size_t K, size_t n, size_t n1, size_t k0, size_t kc) {
    for (size_t j = n; j < n1; j++) {
        const char *row = (const char *)((const uint16_t *)w + j * K + k0);
        for (size_t off = 0; off < kc * 2; off += 64) _mm_prefetch(row + off, _MM_HINT_T1);
        _mm_prefetch(row + kc * 2 - 1, _MM_HINT_T1);
    }
}

void sm_kernels_gemm_bf16(float *restrict out, const float *restrict x, const void *restrict w,
                          sm_dtype dt, const float *restrict bias, size_t T, size_t N, size_t K,
                          size_t n0, size_t n1, void *restrict scratch) {
    uint32_t *panel = scratch, *rows = panel + NR * KP, *xb = rows + NR * KP;
    const bool p32 = dt == SM_DTYPE_BF16_P32 || dt == SM_DTYPE_F16_P32; /* panels laid out at load */
    const size_t blocks = (T + MC - 1) / MC;
    const size_t mc = ((T + blocks - 1) / blocks + MR - 1) / MR * MR; /* even blocks, <= MC */
    for (size_t t0 = 0; t0 < T; t0 += mc) {
        size_t t1 = T - t0 < mc ? T : t0 + mc;
        for (size_t k0 = 0; k0 < K; k0 += KC) {
            size_t kc = K - k0 < KC ? K - k0 : KC;
            convert_block(xb, x, K, t0, t1, k0, kc);
            for (size_t n = n0; n < n1; n += NR) {
                size_t nr = n1 - n < NR ? n1 - n : NR;
                const float *b = bias ? bias + n : NULL;
                const size_t calls = (t1 - t0 + MR - 1) / MR, per = (NR + calls - 1) / calls;
                const char *next = NULL; /* panels laid out at load: the next panel's slice, kc lines */
                if (p32) {
                    pack_p32(panel, w, dt, K, n, k0, kc);
                    if (n + NR < n1) next = (const char *)w + ((n + NR) * K + k0 * NR) * 2;
                } else
                    pack(panel, rows, w, dt, K, n, nr, k0, kc);
                for (size_t t = t0, c = 0; t < t1; t += MR, c++) {
                    size_t r = t1 - t < MR ? t1 - t : MR, j = n + NR + (t - t0) / MR * per;
                    for (size_t l = c * kc / calls; next && l < (c + 1) * kc / calls; l++) /* a share a tile */
                        _mm_prefetch(next + 64 * l, _MM_HINT_T1);
                    if (!p32 && j < n1 && j < n + 2 * NR) prefetch_rows(w, K, j, j + per < n1 ? j + per : n1, k0, kc);
                    micros[r](out + t * N + n, N, xb + (t - t0) * KP, panel, kc / 2, b, k0 == 0, nr);
                }
            }
        }
    }
}
#endif
