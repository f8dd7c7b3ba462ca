/*
** avx512_tile.h -- what the AVX-512 files share (avx512.c, avx512_bf16.c,
** avx512_rows.c, avx512_attn.c): tail masks, exp on 16 lanes, 16 weights
** of a 16/32-bit type widened to f32, and the end of a packed product's
** micro-kernel, whose mr x 32 output tile gets its accumulators. Only for
** files built with -mavx512f.
*/
#ifndef SM_AVX512_TILE_H
#define SM_AVX512_TILE_H

#include "kernels_internal.h"

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline __mmask16 tail_mask(size_t n) {
    return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u);
}

/* exp(x) to about 2 ulp: x = n ln2 + r, |r| <= ln2/2, degree-6 polynomial in r. */
static inline __m512 exp16(__m512 x) {
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.33654f)), _mm512_set1_ps(88.72283f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187e-06f), r);
    __m512 p = _mm512_set1_ps(1.0f / 720.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

/* 16 weights from element i of w (type dt: a constant wherever this is inlined), as f32. */
static inline __attribute__((always_inline)) __m512 load_w(sm_dtype dt, const void *w, size_t i) {
    if (dt == SM_DTYPE_F32) return _mm512_loadu_ps((const float *)w + i);
    __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)w + i));
    if (dt == SM_DTYPE_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* The first n < 16 weights from element i (mask m = those lanes), zeros after. */
static inline __attribute__((always_inline)) __m512
load_w_tail(sm_dtype dt, const void *w, size_t i, size_t n, __mmask16 m) {
    if (dt == SM_DTYPE_F32) return _mm512_maskz_loadu_ps(m, (const float *)w + i);
    uint16_t buf[16] = {0}; /* 16-bit masked loads need AVX-512BW */
    memcpy(buf, (const uint16_t *)w + i, n * sizeof *buf);
    return load_w(dt, buf, 0);
}

/*
** The passes of a batched-decoding tile (avx512.c's and avx512_rows.c's):
** pass u < np runs over the 16-weight vectors u, u + np, ... of 4 weight
** rows (w, stride K) x r token rows (x, stride K; r <= 4, np <= 4, both
** constants where inlined), 16 accumulators, and leaves them in part[i][j][u].
** The last vector's weights past K are zeros, its FMAs on the lanes in mf
** (all of them for the avx512 table's 16-lane chunks; the chunks of 8 the
** row has for the AVX2 sums). pf (4 weight rows to come) is prefetched into
** L2 at the offsets read, in the passes set in pfm.
*/
static inline __attribute__((always_inline)) void
sm_avx512_tile_passes(sm_dtype dt, size_t r, size_t np, const float *restrict x, const void *restrict w,
                      const char *pf, unsigned pfm, size_t K, __mmask16 mf, __m512 part[4][4][4]) {
    enum { NW = 4 };
    const size_t es = dt == SM_DTYPE_F32 ? 4 : 2, nv = K / 16, rem = K % 16;
    const __mmask16 ml = tail_mask(rem);
    for (size_t u = 0; u < np; u++) {
        __m512 a[4][NW];
        for (size_t i = 0; i < r; i++)
            for (size_t j = 0; j < NW; j++) a[i][j] = _mm512_setzero_ps();
        for (size_t g = u; g < nv; g += np) {
            __m512 wv[NW];
            for (size_t j = 0; j < NW; j++) {
                wv[j] = load_w(dt, w, j * K + 16 * g);
                if (pfm >> u & 1) _mm_prefetch(pf + (j * K + 16 * g) * es, _MM_HINT_T2);
            }
            for (size_t i = 0; i < r; i++) {
                __m512 xv = _mm512_loadu_ps(x + i * K + 16 * g);
                for (size_t j = 0; j < NW; j++) a[i][j] = _mm512_fmadd_ps(wv[j], xv, a[i][j]);
            }
        }
        if (rem && nv % np == u) {
            __m512 wv[NW];
            for (size_t j = 0; j < NW; j++) wv[j] = load_w_tail(dt, w, j * K + 16 * nv, rem, ml);
            for (size_t i = 0; i < r; i++) {
                __m512 xv = _mm512_maskz_loadu_ps(ml, x + i * K + 16 * nv);
                for (size_t j = 0; j < NW; j++) a[i][j] = _mm512_mask3_fmadd_ps(wv[j], xv, a[i][j], mf);
            }
        }
        for (size_t i = 0; i < r; i++)
            for (size_t j = 0; j < NW; j++) part[i][j][u] = a[i][j];
    }
}

/*
** out[i, 0..nr) (rows i < mr, stride ldo) = c0[i] | c1[i] (16 + 16 columns) +
** the bias (NULL: zero) when `first`, else + out as it is.
*/
static inline __attribute__((always_inline)) void
sm_avx512_tile_store(size_t mr, float *restrict out, size_t ldo, const __m512 *c0, const __m512 *c1,
                     const float *restrict bias, int first, size_t nr) {
    /* the masks only now: live across a k loop, they cost registers */
    const __mmask16 m0 = tail_mask(nr), m1 = tail_mask(nr > 16 ? nr - 16 : 0);
    SM_TILE_ROWS for (size_t i = 0; i < mr; i++) {
        float *o = out + i * ldo;
        __m512 add0, add1;
        if (first) {
            add0 = bias ? _mm512_maskz_loadu_ps(m0, bias) : _mm512_setzero_ps();
            add1 = bias ? _mm512_maskz_loadu_ps(m1, bias + 16) : _mm512_setzero_ps();
        } else {
            add0 = _mm512_maskz_loadu_ps(m0, o);
            add1 = _mm512_maskz_loadu_ps(m1, o + 16);
        }
        _mm512_mask_storeu_ps(o, m0, _mm512_add_ps(c0[i], add0));
        _mm512_mask_storeu_ps(o + 16, m1, _mm512_add_ps(c1[i], add1));
    }
}

#endif
