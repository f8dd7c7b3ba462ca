/*
** avx2_reduce.h -- horizontal reductions of 8-lane vectors, shared by the
** AVX2 files (avx2.c, avx2_rows.c, avx2_quant.c) and avx512_rows.c (which
** sums as avx2_rows.c does); included only by files built with AVX2 enabled.
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

/*
** hsum of 8 vectors at once, in hsum's tree (lanes i + i+4, then i + i+2,
** then i + i+1): lane 4i + j of the result is hsum(v[2j + i]), i < 2, j < 4.
*/
static inline __m256 hsum8(const __m256 v[8]) {
    __m256 a[4], c[2];
    for (int p = 0; p < 4; p++) /* 128-bit half h: vector 2p + h, lanes i + i+4 */
        a[p] = _mm256_add_ps(_mm256_permute2f128_ps(v[2 * p], v[2 * p + 1], 0x20),
                             _mm256_permute2f128_ps(v[2 * p], v[2 * p + 1], 0x31));
    for (int q = 0; q < 2; q++) /* i + i+2 */
        c[q] = _mm256_add_ps(_mm256_shuffle_ps(a[2 * q], a[2 * q + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm256_shuffle_ps(a[2 * q], a[2 * q + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    return _mm256_add_ps(_mm256_shuffle_ps(c[0], c[1], _MM_SHUFFLE(2, 0, 2, 0)), /* i + i+1 */
                         _mm256_shuffle_ps(c[0], c[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

/* A dot product's four partial sums combined as the AVX2 products combine them. */
static inline __m256 partials4(const __m256 p[4]) {
    return _mm256_add_ps(_mm256_add_ps(p[0], p[1]), _mm256_add_ps(p[2], p[3]));
}

/* The largest of v's lanes. */
static inline float hmax8(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#endif
