/*
** avx512_attn.c -- the AVX-512 table's attention tiles (sm_attn_kernel's
** scores, pv and pv_lone; the streaming loop is attention.c's, the
** online-softmax step avx512.c's). Compiled with -mavx512f -mfma.
*/
#if defined(__x86_64__) || defined(__i386__)
#include "kernels_internal.h"
#include "avx512_tile.h"

#include <immintrin.h>
#include <math.h>

/*
** The attention pieces (sm_attn_kernel; the streaming loop is attention.c's)
** on 16 lanes. Tiles keep up to 8 independent accumulators: prefill 4
** queries x 2 chunks (queries share each key and value load), decode 1 query
** x 4 key chunks for the scores and 4 interleaved key partial sums x 2
** chunks for P.V.
*/
#define KB SM_ATTN_KBLOCK

/*
** The group's scores (row i's chunk c in x[i * nc + c]) to their online-softmax step, row i's
** keys [0, rn[i]): what attention.c's step does with hmax and exp_sum (avx512.c's
** softmax_group), bit for bit: the maximum over the row's keys, exp(x - m_new) summed chunk by
** chunk in the same order and reduced the same way, zeros past rn[i]; m, l and corr updated.
** The rows go through each phase together, and expf (a call: every vector register is the
** caller's to save) only once no vector is live.
*/
static inline __attribute__((always_inline)) void
softmax_rows(size_t nq, size_t nc, __m512 *x, float *restrict s, const size_t *rn, float *m, float *l,
             float *corr) {
    float mnew[4], sum[4];
    for (size_t i = 0; i < nq; i++) {
        const size_t n = rn[i];
        __m512 vmax = _mm512_set1_ps(-INFINITY);
        for (size_t c = 0; c < nc; c++)
            vmax = _mm512_mask_max_ps(vmax, tail_mask(n > c * 16 ? n - c * 16 : 0), vmax, x[i * nc + c]);
        mnew[i] = n ? fmaxf(m[i], _mm512_reduce_max_ps(vmax)) : m[i];
    }
    for (size_t i = 0; i < nq; i++) {
        const size_t n = rn[i];
        __m512 vm = _mm512_set1_ps(mnew[i]), vsum = _mm512_setzero_ps();
        for (size_t c = 0; c < nc; c++) {
            __mmask16 mc = tail_mask(n > c * 16 ? n - c * 16 : 0);
            __m512 e = mc ? exp16(_mm512_sub_ps(x[i * nc + c], vm)) : _mm512_setzero_ps();
            vsum = _mm512_mask_add_ps(vsum, mc, vsum, e);
            _mm512_storeu_ps(s + i * KB + c * 16, _mm512_maskz_mov_ps(mc, e));
        }
        sum[i] = _mm512_reduce_add_ps(vsum);
    }
    for (size_t i = 0; i < nq; i++) {
        if (rn[i] == 0) { /* no keys here: probabilities 0 (stored above), accumulator kept */
            corr[i] = 1.0f;
            continue;
        }
        float cf = expf(m[i] - mnew[i]); /* 0 for the first block (m_old = -inf) */
        l[i] = l[i] * cf + sum[i];
        m[i] = mnew[i];
        corr[i] = cf;
    }
}

/* s[i, c*16 + lane] = scale * q_i . key (j + c*16 + lane) of key block kb, 0 past nk
** keys; i < nq, c < nc. With rn (nq = SM_ATTN_QGROUP, j = 0), row i's scores go on to its
** online-softmax step over keys [0, rn[i]) (softmax_rows) and s holds the probabilities. */
static inline __attribute__((always_inline)) void
score_tile(size_t nq, size_t nc, float *restrict s, const float *const *qr,
           const float *restrict kb, size_t hs, size_t j, size_t nk, __m512 vs,
           const size_t *rn, float *rm, float *rl, float *corr) {
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
    if (rn) {
        __m512 x[16];
        for (size_t i = 0; i < nq * nc; i++) x[i] = _mm512_mul_ps(ACC(i), vs);
        softmax_rows(nq, nc, x, s, rn, rm, rl, corr);
        return;
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
/* 4 queries' scores over the key chunks that hold keys (a block on the causal diagonal: ceil(nk /
   16) of them; the rest of the row is never read: the softmax and P.V stop at nk), going on to
   the softmax step where rn is given (sm_avx512_attn_scores_softmax). */
#define SCORE_4(nc)                                                                                     \
    static __attribute__((noinline)) void score_4x##nc(float *restrict s, const float *const *qr,     \
                                                       const float *restrict kb, size_t hs, size_t nk, \
                                                       __m512 vs, const size_t *rn, float *m,          \
                                                       float *l, float *corr) {                        \
        score_tile(4, nc, s, qr, kb, hs, 0, nk, vs, rn, m, l, corr);                                   \
    }
SCORE_4(1)
SCORE_4(2)
SCORE_4(3)
SCORE_4(4)
#undef SCORE_4
static void score_4(float *restrict s, const float *const *qr, const float *restrict kb, size_t hs, size_t nk,
                    __m512 vs, const size_t *rn, float *m, float *l, float *corr) {
    switch ((nk + 15) / 16) {
    case 1: score_4x1(s, qr, kb, hs, nk, vs, rn, m, l, corr); break;
    case 2: score_4x2(s, qr, kb, hs, nk, vs, rn, m, l, corr); break;
    case 3: score_4x3(s, qr, kb, hs, nk, vs, rn, m, l, corr); break;
    default: score_4x4(s, qr, kb, hs, nk, vs, rn, m, l, corr); break;
    }
}
static inline __attribute__((always_inline)) void
score_1x4(float *restrict s, const float *const *qr, const float *restrict kb, size_t hs, size_t nk,
          __m512 vs) {
    score_tile(1, 4, s, qr, kb, hs, 0, nk, vs, NULL, NULL, NULL, NULL);
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
        score_4(p, qr, kb, hs, nk, vs, NULL, NULL, NULL, NULL);
    }
}

void sm_avx512_attn_scores_softmax(float *restrict p, const float *const *qr, const float *restrict kb, size_t hs,
                                   size_t nk, float scale, const size_t *rn, float *m, float *l, float *corr) {
    score_4(p, qr, kb, hs, nk, _mm512_set1_ps(scale), rn, m, l, corr);
}

void sm_avx512_attn_pv(float *restrict acc, size_t as, const float *restrict p, const float *corr,
                    const float *restrict v, size_t nq, size_t hs, size_t nk) {
    if (nq == 1)
        for (size_t d0 = 0; d0 < hs; d0 += 32) pv_1x4(acc, as, p, corr, v, hs, nk, d0);
    else
        for (size_t d0 = 0; d0 < hs; d0 += 64) pv_4x1(acc, as, p, corr, v, hs, nk, d0);
}

#endif
