/*
** avx2_load.h -- shared by the AVX2 files (avx2.c, avx2_rows.c, avx2_panels.c):
** tail masks, 8 weights of any 16/32-bit type widened to f32, the packed
** product's row store and micro-kernel; included only by files built with
** AVX2, FMA and F16C enabled.
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

/* An output row's columns [0, nr) (nr <= 16) get c0 (columns 0-7), c1 (8-15) added, or where
   first the bias (NULL: zero) plus them written. The tile passed by value, row by row: a
   micro-kernel that handed its accumulator arrays on by address kept them in memory, two
   stores per FMA (half the FMA rate). */
static inline __attribute__((always_inline)) void
sm_avx2_row_store(float *restrict o, __m256 c0, __m256 c1, const float *restrict bias, int first, size_t nr) {
    if (nr == 16) { /* a whole panel: plain loads and stores (masked stores are slow on AMD) */
        __m256 add0 = first ? (bias ? _mm256_loadu_ps(bias) : _mm256_setzero_ps()) : _mm256_loadu_ps(o);
        __m256 add1 = first ? (bias ? _mm256_loadu_ps(bias + 8) : _mm256_setzero_ps()) : _mm256_loadu_ps(o + 8);
        _mm256_storeu_ps(o, _mm256_add_ps(c0, add0));
        _mm256_storeu_ps(o + 8, _mm256_add_ps(c1, add1));
        return;
    }
    const __m256i m0 = tail_mask(nr), m1 = tail_mask(nr > 8 ? nr - 8 : 0);
    __m256 add0, add1;
    if (first) {
        add0 = bias ? _mm256_maskload_ps(bias, m0) : _mm256_setzero_ps();
        add1 = bias ? _mm256_maskload_ps(bias + 8, m1) : _mm256_setzero_ps();
    } else {
        add0 = _mm256_maskload_ps(o, m0);
        add1 = _mm256_maskload_ps(o + 8, m1);
    }
    _mm256_maskstore_ps(o, m0, _mm256_add_ps(c0, add0));
    _mm256_maskstore_ps(o + 8, m1, _mm256_add_ps(c1, add1));
}

#define SM_AVX2_MR 6 /* token rows of the packed product's full micro-kernel call */

/*
** The packed product's micro-kernel: out rows i < mr (mr <= SM_AVX2_MR, a constant at every
** call site), columns [0, nr) (nr <= 16), get x rows i (ldx apart) . the 16 columns of a panel
** of type pd whose k steps are ps elements apart (avx2.c's packed panels: 16; the 32-row
** panels laid out at load: 32, from a half's first column) added, or the bias plus them
** written (first). Each output one chain of FMAs over k. next (NULL: none) is the slice read
** after this one: its line of each k step (ps elements on) asked for into L2. Every loop over
** the rows unrolled and the tile stored by value, so the accumulators stay in registers (rolled,
** GCC kept them in memory: two stores an FMA); a function compiles one call of it (two inlined
** into one kept them in memory again).
*/
static inline __attribute__((always_inline)) void
sm_avx2_micro(sm_dtype pd, size_t mr, size_t ps, float *restrict out, size_t ldo, const float *restrict x,
              size_t ldx, const void *restrict panel, size_t kc, const float *restrict bias, int first,
              size_t nr, const void *restrict next) {
    __m256 c0[SM_AVX2_MR], c1[SM_AVX2_MR];
    SM_TILE_ROWS for (size_t i = 0; i < mr; i++) { /* the output tile, on its way meanwhile */
        _mm_prefetch((const char *)(out + i * ldo), _MM_HINT_T0);
        _mm_prefetch((const char *)(out + i * ldo + 15), _MM_HINT_T0);
        c0[i] = c1[i] = _mm256_setzero_ps();
    }
    for (size_t kk = 0; kk < kc; kk++) {
        __m256 b0 = load_w(pd, panel, kk * ps);
        __m256 b1 = load_w(pd, panel, kk * ps + 8);
        if (next) _mm_prefetch((const char *)sm_kernels_elem(next, pd, kk * ps), _MM_HINT_T1);
        SM_TILE_ROWS for (size_t i = 0; i < mr; i++) {
            __m256 a = _mm256_broadcast_ss(x + i * ldx + kk);
            c0[i] = _mm256_fmadd_ps(a, b0, c0[i]);
            c1[i] = _mm256_fmadd_ps(a, b1, c1[i]);
        }
    }
    SM_TILE_ROWS for (size_t i = 0; i < mr; i++)
        sm_avx2_row_store(out + i * ldo, c0[i], c1[i], bias, first, nr);
}

#endif
