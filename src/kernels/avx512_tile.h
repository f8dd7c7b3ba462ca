/*
** avx512_tile.h -- what the AVX-512 packed products share (avx512.c's f32
** GEMM, avx512_bf16.c's bf16 one): tail masks, and the end of a
** micro-kernel, whose mr x 32 output tile gets its accumulators. Only for
** files built with -mavx512f.
*/
#ifndef SM_AVX512_TILE_H
#define SM_AVX512_TILE_H

#include <immintrin.h>
#include <stddef.h>

static inline __mmask16 tail_mask(size_t n) {
    return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u);
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
    for (size_t i = 0; i < mr; i++) {
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
