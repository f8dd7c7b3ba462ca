/*
** attention.c -- streaming causal attention (online softmax), written once
** in plain C for the SIMD tables; each table supplies the pieces that touch
** vectors (sm_attn_kernel: a block's scores, its P.V, the row maximum and
** exponentials, the f16 widening), as pack.c's loop takes micro-kernels.
**
** Queries go in groups of SM_ATTN_QGROUP, keys in blocks of
** SM_ATTN_KBLOCK. For each block the group's scores go to a QGROUP x KBLOCK
** scratch block, each query's running maximum m and sum l are updated, and
** its output accumulator (QGROUP x hs, scratch) is rescaled by exp(m_old -
** m_new) and gets the block's P.V. No score row longer than KBLOCK exists,
** so the scratch does not grow with the context (SM_ATTN_SCRATCH).
*/
#include "kernels_internal.h"

#include <math.h>
#include <string.h>

#define GQ SM_ATTN_QGROUP
#define KB SM_ATTN_KBLOCK

/*
** Row s (nk scores, those in [a, n) this query's keys) becomes the
** probabilities exp(s - m_new), zeros outside; updates m and l and returns
** the factor exp(m_old - m_new) for the accumulator.
*/
static float online_softmax_row(const sm_attn_kernel *ak, float *s, size_t a, size_t n, size_t nk,
                                float *m, float *l) {
    float mnew = fmaxf(*m, ak->max(s + a, n - a));
    float sum = ak->exp_sum(s + a, n - a, mnew);
    memset(s, 0, a * sizeof *s);
    memset(s + n, 0, (nk - n) * sizeof *s);
    float corr = expf(*m - mnew); /* 0 for the first block (m_old = -inf) */
    *l = *l * corr + sum;
    *m = mnew;
    return corr;
}

void sm_kernels_attention(const sm_attn_kernel *ak, float *restrict out, const float *restrict q,
                          const sm_kv_head *kv, float *restrict scratch, size_t T, size_t pos,
                          size_t hs, size_t q_stride, size_t out_stride, float scale,
                          size_t window) {
    const size_t ring = kv->ring;
    const size_t as = SM_ATTN_ACC_STRIDE(hs);
    float *p = scratch, *acc = scratch + GQ * KB, *kw = acc + GQ * as, *vw = kw + KB * hs;
    for (size_t t0 = 0; t0 < T; t0 += GQ) {
        size_t ni = T - t0 < GQ ? T - t0 : GQ, Lmax = pos + t0 + ni;
        const float *qr[GQ];
        float m[GQ], l[GQ], corr[GQ];
        for (size_t i = 0; i < GQ; i++) {
            qr[i] = q + (t0 + (i < ni ? i : ni - 1)) * q_stride;
            m[i] = -INFINITY, l[i] = 0.0f, corr[i] = 1.0f;
        }
        size_t rows = ni == 1 ? 1 : GQ; /* rows of p and acc the pieces read */
        memset(acc, 0, rows * as * sizeof *acc);
        /* the first block any query of the group sees (sliding window) */
        size_t L0 = pos + t0 + 1, first = window && L0 > window ? (L0 - window) / KB * KB : 0;
        for (size_t j0 = first; j0 < Lmax; j0 += KB) {
            size_t nk = Lmax - j0 < KB ? Lmax - j0 : KB;
            const float *kb, *vb; /* this block's keys (hs, KB) and values (nk, hs) */
            sm_kernels_kv_block(&kb, &vb, kw, vw, kv, ring ? j0 % ring : j0, nk, hs, ak->widen);
            ak->scores(p, qr, rows, kb, hs, nk, scale);
            size_t ra[GQ], rn[GQ]; /* each row's keys in this block: [a, n); none past ni */
            for (size_t i = 0; i < rows; i++) {
                size_t L = pos + t0 + i + 1, n = L > j0 ? (L - j0 < nk ? L - j0 : nk) : 0;
                size_t lo = window && L > window ? L - window : 0, a = lo > j0 ? lo - j0 : 0;
                ra[i] = i < ni && a < n ? a : n, rn[i] = i < ni ? n : ra[i];
            }
            if (ak->softmax_group && rows == GQ) {
                ak->softmax_group(p, ra, rn, nk, m, l, corr);
                ak->pv(acc, as, p, corr, vb, rows, hs, nk);
                continue;
            }
            for (size_t i = 0; i < rows; i++) {
                size_t a = ra[i], n = rn[i];
                if (n == a) { /* no keys here: probabilities 0, accumulator kept */
                    memset(p + i * KB, 0, KB * sizeof *p);
                    corr[i] = 1.0f;
                    continue;
                }
                corr[i] = online_softmax_row(ak, p + i * KB, a, n, nk, &m[i], &l[i]);
            }
            ak->pv(acc, as, p, corr, vb, rows, hs, nk);
        }
        for (size_t i = 0; i < ni; i++) {
            float inv = 1.0f / l[i], *o = out + (t0 + i) * out_stride;
            for (size_t d = 0; d < hs; d++) o[d] = acc[i * as + d] * inv;
        }
    }
}
