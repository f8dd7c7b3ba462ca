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
**
** A group is 4 consecutive queries of one head, or, for a query that would
** be alone in its group (a decoded token, a prompt's last T % 4 == 1), the
** same position in 4 heads that read this key/value head (grouped-query
** attention): they share every key and value load, where a lone query's
** tile loads 4 keys per 4 multiply-adds. Which group a query lands in
** depends only on T and nh, never on the other queries' values, so a row is
** the same bits whatever is decoded beside it.
**
** attention_rows takes lone queries of several sequences (decoding, one
** query head per key/value head): those that read the same shared prefix
** go through its blocks as one group, each row's steps still the lone
** query's (its score sums, its softmax, the lone P.V's partial sums:
** pv_lone), so a decoded row is the same bits in a group or alone; past
** the prefix each row goes on alone through its own keys.
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

/*
** A block's score rows [0, rows) become probabilities: row i's keys are [ra[i], rn[i]) (none:
** zeros, its accumulator kept, corr 1). The table's softmax_group takes a whole group where it
** has one; its steps are online_softmax_row's, the same bits (the kernels are built without
** floating-point contraction, so l * corr + sum is two roundings in either).
*/
static void softmax_step(const sm_attn_kernel *ak, float *p, const size_t *ra, const size_t *rn,
                         size_t rows, size_t nk, float *m, float *l, float *corr) {
    if (ak->softmax_group && rows == GQ) {
        ak->softmax_group(p, ra, rn, nk, m, l, corr);
        return;
    }
    for (size_t i = 0; i < rows; i++) {
        if (rn[i] == ra[i]) { /* no keys here: probabilities 0, accumulator kept */
            memset(p + i * KB, 0, KB * sizeof *p);
            corr[i] = 1.0f;
            continue;
        }
        corr[i] = online_softmax_row(ak, p + i * KB, ra[i], rn[i], nk, &m[i], &l[i]);
    }
}

/* A call's fixed arguments (sm_kernels_attention's). */
typedef struct {
    const sm_attn_kernel *ak;
    float *out;
    const float *q;
    const sm_kv_head *kv;
    float *scratch;
    size_t pos, hs, q_stride, out_stride, window;
    float scale;
} call;

/*
** ni queries qr (rows: 1, or GQ with the rows past ni repeating the last), query i seeing keys
** [L[i] - window, L[i]) (L ascending), over the key blocks from j0 on: each block's scores, the
** softmax step and P.V into acc (rows x SM_ATTN_ACC_STRIDE(hs)), m and l carried in and out.
** A lone query (rows = 1) takes the pieces' one-query tiles.
*/
static void blocks(const call *c, const float *const *qr, const size_t *L, size_t ni, size_t rows,
                   size_t j0, float *acc, float *m, float *l) {
    const sm_attn_kernel *ak = c->ak;
    const size_t hs = c->hs, window = c->window, ring = c->kv->ring, as = SM_ATTN_ACC_STRIDE(hs);
    float *p = c->scratch, *kw = p + GQ * KB + GQ * as, *vw = kw + KB * hs, corr[GQ];
    const size_t Lmax = L[ni - 1];
    for (; j0 < Lmax; j0 += KB) {
        size_t nk = Lmax - j0 < KB ? Lmax - j0 : KB;
        const float *kb, *vb; /* this block's keys (hs, KB) and values (nk, hs) */
        sm_kernels_kv_block(&kb, &vb, kw, vw, c->kv, ring ? j0 % ring : j0, nk, hs, ak->widen);
        size_t ra[GQ], rn[GQ], low = 0; /* each row's keys in this block: [a, n); none past ni */
        for (size_t i = 0; i < rows; i++) {
            if (i >= ni) {
                ra[i] = rn[i] = 0;
                continue;
            }
            size_t n = L[i] > j0 ? (L[i] - j0 < nk ? L[i] - j0 : nk) : 0;
            size_t lo = window && L[i] > window ? L[i] - window : 0, a = lo > j0 ? lo - j0 : 0;
            ra[i] = a < n ? a : n, rn[i] = n;
            low |= ra[i];
        }
        if (ak->scores_softmax && rows == GQ && !low) { /* the group's keys from the block's first */
            ak->scores_softmax(p, qr, kb, hs, nk, c->scale, rn, m, l, corr);
        } else {
            ak->scores(p, qr, rows, kb, hs, nk, c->scale);
            softmax_step(ak, p, ra, rn, rows, nk, m, l, corr);
        }
        ak->pv(acc, as, p, corr, vb, rows, hs, nk);
    }
}

/* ni rows' outputs: accumulator row i over its sum l[i]. */
static void finish(float *const *o, const float *acc, size_t as, const float *l, size_t ni, size_t hs) {
    for (size_t i = 0; i < ni; i++) {
        float inv = 1.0f / l[i];
        for (size_t d = 0; d < hs; d++) o[i][d] = acc[i * as + d] * inv;
    }
}

/*
** One group: ni queries, query i at position t + i dt of head h + i dh (the
** group's rows past ni repeat its last query), seeing keys [L - window, L)
** for L = pos + its t + 1.
*/
static void group(const call *c, size_t t, size_t h, size_t dt, size_t dh, size_t ni) {
    const size_t hs = c->hs, window = c->window, as = SM_ATTN_ACC_STRIDE(hs);
    const size_t rows = ni == 1 ? 1 : GQ;
    float *acc = c->scratch + GQ * KB;
    const float *qr[GQ];
    float *o[GQ], m[GQ], l[GQ];
    size_t L[GQ];
    for (size_t i = 0; i < GQ; i++) {
        size_t k = i < ni ? i : ni - 1, tk = t + k * dt, hk = h + k * dh;
        qr[i] = c->q + tk * c->q_stride + hk * hs, o[i] = c->out + tk * c->out_stride + hk * hs;
        L[i] = c->pos + tk + 1;
        m[i] = -INFINITY, l[i] = 0.0f;
    }
    memset(acc, 0, rows * as * sizeof *acc);
    /* the first block any query of the group sees (sliding window) */
    size_t first = window && L[0] > window ? (L[0] - window) / KB * KB : 0;
    blocks(c, qr, L, ni, rows, first, acc, m, l);
    finish(o, acc, as, l, ni, hs);
}

void sm_kernels_attention(const sm_attn_kernel *ak, float *restrict out, const float *restrict q,
                          const sm_kv_head *kv, float *restrict scratch, size_t T, size_t pos,
                          size_t hs, size_t nh, size_t q_stride, size_t out_stride, float scale,
                          size_t window) {
    const call c = {ak, out, q, kv, scratch, pos, hs, q_stride, out_stride, window, scale};
    /* a last lone query goes with its neighbours in the other heads */
    const size_t lone = nh > 1 && T % GQ == 1, Tg = T - lone;
    for (size_t h = 0; h < nh; h++)
        for (size_t t0 = 0; t0 < Tg; t0 += GQ) group(&c, t0, h, 1, 0, Tg - t0 < GQ ? Tg - t0 : GQ);
    if (lone)
        for (size_t h0 = 0; h0 < nh; h0 += GQ) group(&c, T - 1, h0, 0, 1, nh - h0 < GQ ? nh - h0 : GQ);
}

/* The whole key blocks of r's cache read from its shared prefix (all of them below its query). */
static size_t shared_of(const sm_attn_row *r) {
    size_t whole = (r->pos + 1) / KB * KB;
    return r->kv.shared < whole ? r->kv.shared : whole;
}

void sm_kernels_attention_rows(const sm_attn_kernel *ak, const sm_attn_row *const *rows, size_t n,
                               float *restrict scratch, size_t hs, float scale) {
    const size_t as = SM_ATTN_ACC_STRIDE(hs);
    float *p = scratch, *acc = p + GQ * KB, *kw = acc + GQ * as, *vw = kw + KB * hs;
    for (size_t i0 = 0; i0 < n;) {
        /* the group: this row and its next neighbours that read the same prefix, up to GQ; S the
           blocks they all read there */
        const sm_attn_row *const *g = rows + i0;
        size_t ni = 1, S = shared_of(g[0]), sh;
        for (; S && ni < GQ && i0 + ni < n && g[ni]->kv.kt0 == g[0]->kv.kt0 &&
               g[ni]->kv.v0 == g[0]->kv.v0 && g[ni]->kv.type == g[0]->kv.type && (sh = shared_of(g[ni])) > 0;
             ni++)
            if (sh < S) S = sh;
        if (ni == 1) S = 0; /* alone: its own blocks from the first */
        const float *qr[GQ];
        float m[GQ], l[GQ], corr[GQ];
        size_t ra[GQ] = {0}, rn[GQ];
        for (size_t i = 0; i < GQ; i++)
            qr[i] = g[i < ni ? i : ni - 1]->q, m[i] = -INFINITY, l[i] = 0.0f, rn[i] = i < ni ? KB : 0;
        memset(acc, 0, GQ * as * sizeof *acc);
        for (size_t j0 = 0; j0 < S; j0 += KB) {
            const float *kb, *vb;
            sm_kernels_kv_block(&kb, &vb, kw, vw, &g[0]->kv, j0, KB, hs, ak->widen);
            ak->scores(p, qr, GQ, kb, hs, KB, scale);
            softmax_step(ak, p, ra, rn, GQ, KB, m, l, corr);
            if (ak->pv_lone)
                ak->pv_lone(acc, as, p, corr, vb, hs, KB);
            else
                for (size_t i = 0; i < ni; i++) ak->pv(acc + i * as, as, p + i * KB, &corr[i], vb, 1, hs, KB);
        }
        /* past the blocks they share, each row alone through its own keys, as group() runs it */
        for (size_t i = 0; i < ni; i++) {
            const sm_attn_row *r = g[i];
            const call c = {ak, r->out, r->q, &r->kv, scratch, r->pos, hs, 0, 0, 0, scale};
            const float *q1[1] = {r->q};
            float *o1[1] = {r->out};
            size_t L1[1] = {r->pos + 1};
            blocks(&c, q1, L1, 1, 1, S, acc + i * as, &m[i], &l[i]);
            finish(o1, acc + i * as, as, &l[i], 1, hs);
        }
        i0 += ni;
    }
}
