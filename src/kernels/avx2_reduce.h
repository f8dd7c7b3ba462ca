/*
** avx2_reduce.h -- horizontal reductions of one 8-lane vector, shared by
** the AVX2 files (avx2.c, avx2_quant.c); included only by files built with
** AVX2 enabled.
*/
#ifndef SM_AVX2_REDUCE_H
#define SM_AVX2_REDUCE_H

#include <immintrin.h>

/* The sum of v's lanes: halves added, then pairs, then the last two. */
static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* The largest of v's lanes. */
static inline float hmax8(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#endif
