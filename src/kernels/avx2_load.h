/*
** avx2_load.h -- loads shared by the AVX2 files (avx2.c, avx2_rows.c):
** tail masks and 8 weights of any 16/32-bit type widened to f32; included
** only by files built with AVX2, FMA and F16C enabled.
*/
#ifndef SM_AVX2_LOAD_H
#define SM_AVX2_LOAD_H

#include "kernels_internal.h"

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

static const int32_t mask_table[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

/* Lanes [0, min(n, 8)) set. */
static inline __m256i tail_mask(size_t n) {
    return _mm256_loadu_si256((const __m256i *)(mask_table + 8 - (n >= 8 ? 8 : n)));
}

/* 8 weights from element i of w (type dt: a constant wherever this is inlined), as f32. */
static inline __attribute__((always_inline)) __m256 load_w(sm_dtype dt, const void *w, size_t i) {
    if (dt == SM_DTYPE_F32) return _mm256_loadu_ps((const float *)w + i);
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)w + i));
    if (dt == SM_DTYPE_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* The first n < 8 weights from element i (mask m = those lanes), zeros after. */
static inline __attribute__((always_inline)) __m256
load_w_tail(sm_dtype dt, const void *w, size_t i, size_t n, __m256i m) {
    if (dt == SM_DTYPE_F32) return _mm256_maskload_ps((const float *)w + i, m);
    uint16_t buf[8] = {0};
    memcpy(buf, (const uint16_t *)w + i, n * sizeof *buf);
    return load_w(dt, buf, 0);
}

#endif
