/*
** avx512_attn.c -- the AVX-512 table's attention tiles (sm_attn_kernel's
** scores, pv and pv_lone; the streaming loop is attention.c's, the
** online-softmax step avx512.c's). Compiled with -mavx512f -mfma.
*/
#if defined(__x86_64__) || defined(__i386__)
#include "kernels_internal.h"
#include "avx512_tile.h"

#include <immintrin.h>

/*
** The attention pieces (sm_attn_kernel; the streaming loop is attention.c's)
** on 16 lanes. Tiles keep up to 8 independent accumulators: prefill 4
** queries x 2 chunks (queries share each key and value load), decode 1 query
** x 4 key chunks for the scores and 4 interleaved key partial sums x 2
** chunks for P.V.
*/
#define KB SM_ATTN_KBLOCK

/* s[i, c*16 + lane] = scale * q_i . key (j + c*16 + lane) of key block kb, 0 past nk
** keys; i < nq, c < nc. */
static inline __attribute__((always_inline)) void
score_tile(size_t nq, size_t nc, float *restrict s, const float *const *qr,
           const float *restrict kb, size_t hs, size_t j, size_t nk, __m512 vs) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    __m512 a8 = a0, a9 = a0, a10 = a0, a11 = a0, a12 = a0, a13 = a0, a14 = a0, a15 = a0;
    /* accumulator i * nc + c, a named variable: GCC kept an array's elements on the stack
       too, storing all of them in every step of the loop */
#define ACC(n) (*((n) == 0 ? &a0 : (n) == 1 ? &a1 : (n) == 2 ? &a2 : (n) == 3 ? &a3 \
                  : (n) == 4 ? &a4 : (n) == 5 ? &a5 : (n) == 6 ? &a6 : (n) == 7 ? &a7 \
                  : (n) == 8 ? &a8 : (n) == 9 ? &a9 : (n) == 10 ? &a10 : (n) == 11 ? &a11 \
                  : (n) == 12 ? &a12 : (n) == 13 ? &a13 : (n) == 14 ? &a14 : &a15))
    __mmask16 m[4];
    for (size_t c = 0; c < nc; c++) m[c] = tail_mask(nk > c * 16 ? nk - c * 16 : 0);
    for (size_t d = 0; d < hs; d++) {
        __m512 kv[4];
        for (size_t c = 0; c < nc; c++)
            kv[c] = _mm512_maskz_loadu_ps(m[c], kb + d * KB + j + c * 16);
        for (size_t i = 0; i < nq; i++) {
            __m512 qv = _mm512_set1_ps(qr[i][d]);
            for (size_t c = 0; c < nc; c++) ACC(i * nc + c) = _mm512_fmadd_ps(qv, kv[c], ACC(i * nc + c));
        }
    }
    for (size_t i = 0; i < nq; i++)
        for (size_t c = 0; c < nc; c++) _mm512_storeu_ps(s + i * KB + c * 16, _mm512_mul_ps(ACC(i * nc + c), vs));
#undef ACC
}

/*
** acc[i, d0 .. d0 + 16 nv) = corr[i] * acc[i, ...] + sum_{j < nk} p[i, j] v[j, ...]
** for i < nq; the keys are summed in np interleaved partial sums (nq np nv <= 16).
*/
static inline __attribute__((always_inline)) void
pv_tile(size_t nq, size_t np, size_t nv, float *restrict acc, size_t as, const float *restrict p,
        const float *corr, const float *restrict v, size_t hs, size_t nk, size_t d0) {
    __mmask16 m[4];
    for (size_t h = 0; h < nv; h++) m[h] = tail_mask(hs - d0 > 16 * h ? hs - d0 - 16 * h : 0);
    /* partial sum r of query i, vector h: accumulator (r * nq + i) * nv + h, a named variable
       (see score_tile) */
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    __m512 a8 = a0, a9 = a0, a10 = a0, a11 = a0, a12 = a0, a13 = a0, a14 = a0, a15 = a0;
#define ACC(n) (*((n) == 0 ? &a0 : (n) == 1 ? &a1 : (n) == 2 ? &a2 : (n) == 3 ? &a3 \
                  : (n) == 4 ? &a4 : (n) == 5 ? &a5 : (n) == 6 ? &a6 : (n) == 7 ? &a7 \
                  : (n) == 8 ? &a8 : (n) == 9 ? &a9 : (n) == 10 ? &a10 : (n) == 11 ? &a11 \
                  : (n) == 12 ? &a12 : (n) == 13 ? &a13 : (n) == 14 ? &a14 : &a15))
#define A(r, i, h) ACC(((r) * nq + (i)) * nv + (h))
    for (size_t i = 0; i < nq; i++) {
        __m512 cf = _mm512_set1_ps(corr[i]);
        for (size_t h = 0; h < nv; h++) {
            A(0, i, h) = _mm512_mul_ps(_mm512_maskz_loadu_ps(m[h], acc + i * as + d0 + 16 * h), cf);
            for (size_t r = 1; r < np; r++) A(r, i, h) = _mm512_setzero_ps();
        }
    }
    size_t j = 0;
    for (; j + np <= nk; j += np)
        for (size_t r = 0; r < np; r++) {
            const float *vr = v + (j + r) * hs + d0;
            __m512 vv[4];
            for (size_t h = 0; h < nv; h++) vv[h] = _mm512_maskz_loadu_ps(m[h], vr + 16 * h);
            for (size_t i = 0; i < nq; i++) {
                __m512 pv = _mm512_set1_ps(p[i * KB + j + r]);
                for (size_t h = 0; h < nv; h++) A(r, i, h) = _mm512_fmadd_ps(pv, vv[h], A(r, i, h));
            }
        }
    for (; j < nk; j++) {
        const float *vr = v + j * hs + d0;
        __m512 vv[4];
        for (size_t h = 0; h < nv; h++) vv[h] = _mm512_maskz_loadu_ps(m[h], vr + 16 * h);
        for (size_t i = 0; i < nq; i++) {
            __m512 pv = _mm512_set1_ps(p[i * KB + j]);
            for (size_t h = 0; h < nv; h++) A(0, i, h) = _mm512_fmadd_ps(pv, vv[h], A(0, i, h));
        }
    }
    for (size_t i = 0; i < nq; i++)
        for (size_t h = 0; h < nv; h++) {
            for (size_t r = 1; r < np; r++) A(0, i, h) = _mm512_add_ps(A(0, i, h), A(r, i, h));
            _mm512_mask_storeu_ps(acc + i * as + d0 + 16 * h, m[h], A(0, i, h));
        }
#undef A
#undef ACC
}

/*
** Each tile shape compiled on its own: inlined together into one function,
** GCC kept the accumulators in a stack array as well as in registers (eight
** stores in every step of the FMA loop).
*/
static __attribute__((noinline)) void
score_4x4(float *restrict s, const float *const *qr, const float *restrict kb, size_t hs, size_t nk,
          __m512 vs) {
    score_tile(4, 4, s, qr, kb, hs, 0, nk, vs);
}
static inline __attribute__((always_inline)) void
score_1x4(float *restrict s, const float *const *qr, const float *restrict kb, size_t hs, size_t nk,
          __m512 vs) {
    score_tile(1, 4, s, qr, kb, hs, 0, nk, vs);
}
static __attribute__((noinline)) void
pv_4x1(float *restrict acc, size_t as, const float *restrict p, const float *corr,
       const float *restrict v, size_t hs, size_t nk, size_t d0) {
    pv_tile(4, 1, 4, acc, as, p, corr, v, hs, nk, d0);
}
static inline __attribute__((always_inline)) void
pv_1x4(float *restrict acc, size_t as, const float *restrict p, const float *corr,
       const float *restrict v, size_t hs, size_t nk, size_t d0) {
    pv_tile(1, 4, 2, acc, as, p, corr, v, hs, nk, d0);
}

/* 4 lone queries' P.V (sm_attn_kernel's pv_lone): pv_1x4's partial sums for each row, 16 lanes
   of the head at a time, each value load serving the 4 rows. */
void sm_avx512_pv_lone(float *restrict acc, size_t as, const float *restrict p, const float *corr, const float *restrict v,
        size_t hs, size_t nk) {
    for (size_t d0 = 0; d0 < hs; d0 += 16) pv_tile(4, 4, 1, acc, as, p, corr, v, hs, nk, d0);
}

void sm_avx512_attn_scores(float *restrict p, const float *const *qr, size_t nq,
                        const float *restrict kb, size_t hs, size_t nk, float scale) {
    const __m512 vs = _mm512_set1_ps(scale);
    if (nq == 1) {
        score_1x4(p, qr, kb, hs, nk, vs);
    } else {
        score_4x4(p, qr, kb, hs, nk, vs);
    }
}

void sm_avx512_attn_pv(float *restrict acc, size_t as, const float *restrict p, const float *corr,
                    const float *restrict v, size_t nq, size_t hs, size_t nk) {
    if (nq == 1)
        for (size_t d0 = 0; d0 < hs; d0 += 32) pv_1x4(acc, as, p, corr, v, hs, nk, d0);
    else
        for (size_t d0 = 0; d0 < hs; d0 += 64) pv_4x1(acc, as, p, corr, v, hs, nk, d0);
}

#endif
