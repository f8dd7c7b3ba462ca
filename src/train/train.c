/*
** train.c -- forward, backward and AdamW for GPT-2-shaped byte models.
**
** Every operation is one pool run over the trainer's threads, split so that
** each output element is computed by one thread in a fixed order: matrix
** products by (row block, column block) tiles through the same kernels as
** inference, row-wise ops by rows, reductions over rows (bias and norm
** gradients, position embeddings) by columns, token-embedding gradients by
** vocabulary rows. Results therefore do not depend on the thread count.
**
** The matrix kernel computes out = x . w^T with x's inner dimension
** contiguous; w may be held transposed (SM_DTYPE_F32_T: the kernel packs
** its panels from there). Backward products take that form:
**   d_in (BT, K) = d_out (BT, N) . W (N, K)  ->  x = d_out, w = W^T: W as stored, f32_t
**   d_W  (N, K)  = d_out^T . in              ->  x = d_out^T (transposed), w = in^T: in, f32_t
*/
#include "train_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MM_ROWS_MIN 256  /* rows of x per tile, at least (a 256 x 256 block stays in L2) */
#define MM_ROWS_MAX 1024 /* and at most: the kernel packs each panel of w once per tile, */
                         /* so taller tiles pack less (the kernel blocks the rows for L2) */
#define MM_COLS 128      /* output columns per tile: a multiple of every panel width */

/* ---- parallel building blocks ---------------------------------------- */

typedef struct mm_job {
    const sm_trainer *t;
    float *out;
    const float *x, *w, *bias, *add;
    size_t T, N, K;
    sm_dtype wt; /* f32, or f32_t: w held transposed */
} mm_job;

/* Rows of a tile: the tallest that still gives every thread two tiles (each output's sums are
   the same whatever the tiles: only how often the panels are packed changes). */
static size_t tile_rows(size_t T, size_t cb, int nth) {
    size_t r = MM_ROWS_MAX;
    while (r > MM_ROWS_MIN && (T + r - 1) / r * cb < 2 * (size_t)nth) r /= 2;
    return r;
}

static void mm_task(void *arg, int ith, int nth) {
    const mm_job *j = arg;
    size_t cb = (j->N + MM_COLS - 1) / MM_COLS, tr = tile_rows(j->T, cb, nth);
    size_t rb = (j->T + tr - 1) / tr, i0, i1;
    sm_pool_split(rb * cb, 1, ith, nth, &i0, &i1);
    float *scr = j->t->scratch + (size_t)ith * j->t->scratch_floats;
    for (size_t it = i0; it < i1; it++) {
        size_t r0 = it / cb * tr, c0 = it % cb * MM_COLS;
        size_t rows = j->T - r0 < tr ? j->T - r0 : tr;
        size_t c1 = c0 + MM_COLS < j->N ? c0 + MM_COLS : j->N;
        j->t->k->matmul(j->t->k, j->out + r0 * j->N, j->x + r0 * j->K, j->w, j->wt, j->bias, rows,
                        j->N, j->K, c0, c1, scr);
        if (j->add)
            for (size_t r = r0; r < r0 + rows; r++)
                for (size_t c = c0; c < c1; c++) j->out[r * j->N + c] += j->add[r * j->N + c];
    }
}

/* out (T, N) = x (T, K) . w (N, K)^T (+ bias) (+ add, same shape as out). */
static void mm(const sm_trainer *t, float *out, const float *x, const float *w, const float *bias,
               const float *add, size_t T, size_t N, size_t K) {
    mm_job j = {t, out, x, w, bias, add, T, N, K, SM_DTYPE_F32};
    sm_pool_run(t->pool, mm_task, &j);
}

/* out (T, N) = x (T, K) . w^T for w (N, K) held transposed: wt (K, N). */
static void mm_t(const sm_trainer *t, float *out, const float *x, const float *wt, size_t T, size_t N,
                 size_t K) {
    mm_job j = {t, out, x, wt, NULL, NULL, T, N, K, SM_DTYPE_F32_T};
    sm_pool_run(t->pool, mm_task, &j);
}

typedef struct tr_job {
    const sm_kernels *k;
    float *out;
    const float *in;
    size_t R, C;
} tr_job;

static void tr_task(void *arg, int ith, int nth) {
    const tr_job *j = arg;
    size_t c0, c1;
    sm_pool_split(j->C, 32, ith, nth, &c0, &c1);
    if (c0 < c1) j->k->transpose(j->out, j->R, j->in, j->C, j->R, c0, c1);
}

/* out (C, R) = in (R, C)^T */
static void transpose(const sm_trainer *t, float *out, const float *in, size_t R, size_t C) {
    tr_job j = {t->k, out, in, R, C};
    sm_pool_run(t->pool, tr_task, &j);
}

/* out[r] = sum of row r of in (R, C) (the table's vector sum), rows split over threads. */
static void rowsum_task(void *arg, int ith, int nth) {
    const tr_job *j = arg;
    size_t r0, r1;
    sm_pool_split(j->R, 1, ith, nth, &r0, &r1);
    for (size_t r = r0; r < r1; r++) j->out[r] = j->k->sum(j->in + r * j->C, j->C);
}

/*
** d_in (BT, K) (+)= d_out (BT, N) . W (N, K); dW (N, K) = d_out^T . in; db = sum of d_out rows.
** The weight gradient's product reads one side transposed, the narrower: d_out^T when N <= K,
** else in^T, then dW^T (K, N) = in^T . d_out transposed into place (K N floats against BT
** (N - K) fewer: qkv's and the MLP's up projection transpose BT x C, not BT x 3C and BT x 4C).
** There in^T gets a row of ones, so the product's row K is db (its sums over BT in the
** product's order), not a pass of its own over d_out.
*/
static void linear_backward(sm_trainer *t, float *d_in, const float *d_out, const float *in,
                            size_t W, size_t b, size_t N, size_t K) {
    size_t BT = t->B * t->T;
    if (d_in) mm_t(t, d_in, d_out, t->params + W, BT, K, N); /* W (N, K) is W^T held transposed */
    if (N <= K) {
        transpose(t, t->ta, d_out, BT, N);
        mm_t(t, t->grads + W, t->ta, in, N, K, BT); /* in (BT, K) is in^T held transposed */
        if (b != SM_NO_TENSOR) { /* the bias gradient: row sums of d_out^T (N, BT) */
            tr_job j = {t->k, t->grads + b, t->ta, N, BT};
            sm_pool_run(t->pool, rowsum_task, &j);
        }
        return;
    }
    bool bias = b != SM_NO_TENSOR;
    transpose(t, t->ta, in, BT, K);
    if (bias)
        for (size_t i = 0; i < BT; i++) t->ta[K * BT + i] = 1.0f;
    mm_t(t, t->tw, t->ta, d_out, K + bias, N, BT); /* d_out (BT, N) is d_out^T held transposed */
    transpose(t, t->grads + W, t->tw, K, N);
    if (bias) memcpy(t->grads + b, t->tw + K * N, N * sizeof(float));
}

/* ---- LayerNorm -------------------------------------------------------- */

typedef struct ln_job {
    float *out, *mu, *rs;           /* forward outputs */
    const float *x, *g, *b;         /* input and parameters */
    const float *dout;              /* backward: gradient of out */
    float *dx, *dg, *db;            /* backward: dx accumulates unless overwrite */
    bool overwrite;
    size_t rows, C;
    float eps;
    float *part;    /* backward: partial sums of dg, db per block of rows */
    sm_pool *pool;
} ln_job;

/*
** A row's sums in 8 lanes (element i into lane i % 8), then the lanes pairwise: a fixed order,
** whatever the thread count, that the compiler keeps in vector registers (one chain of
** dependent adds was a row's whole time).
*/
#define LANES 8
static float lanes_sum(const float s[LANES]) {
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

static void ln_fwd_task(void *arg, int ith, int nth) {
    const ln_job *j = arg;
    size_t r0, r1, C = j->C, c8 = C / LANES * LANES;
    sm_pool_split(j->rows, 1, ith, nth, &r0, &r1);
    for (size_t r = r0; r < r1; r++) {
        const float *x = j->x + r * C;
        float *o = j->out + r * C;
        float s[LANES] = {0}, q[LANES] = {0};
        for (size_t i = 0; i < c8; i += LANES)
            for (size_t l = 0; l < LANES; l++) s[l] += x[i + l];
        for (size_t i = c8; i < C; i++) s[i - c8] += x[i];
        float mean = lanes_sum(s) / (float)C;
        for (size_t i = 0; i < c8; i += LANES)
            for (size_t l = 0; l < LANES; l++) q[l] += (x[i + l] - mean) * (x[i + l] - mean);
        for (size_t i = c8; i < C; i++) q[i - c8] += (x[i] - mean) * (x[i] - mean);
        float var = lanes_sum(q) / (float)C;
        float rs = 1.0f / sqrtf(var + j->eps);
        for (size_t i = 0; i < C; i++)
            o[i] = (x[i] - mean) * rs * j->g[i] + (j->b ? j->b[i] : 0.0f);
        j->mu[r] = mean;
        j->rs[r] = rs;
    }
}

/*
** dx, and dg, db as sums over rows: each block of LN_ROWS rows (fixed, whatever the thread count)
** sums its rows' terms into its own partials while the rows are in L1 (part: 2C floats a
** block), then, past a barrier, each thread adds its columns' partials block by block. One pass
** over x and dout instead of two.
*/
#define LN_ROWS 64
static void ln_bwd_task(void *arg, int ith, int nth) {
    const ln_job *j = arg;
    size_t C = j->C, c8 = C / LANES * LANES, nb = (j->rows + LN_ROWS - 1) / LN_ROWS, b0, b1;
    const float *restrict g = j->g;
    sm_pool_split(nb, 1, ith, nth, &b0, &b1);
    for (size_t blk = b0; blk < b1; blk++) {
        float *restrict pg = j->part + blk * 2 * C, *restrict pb = pg + C;
        memset(pg, 0, 2 * C * sizeof *pg);
        size_t r1 = (blk + 1) * LN_ROWS < j->rows ? (blk + 1) * LN_ROWS : j->rows;
        for (size_t r = blk * LN_ROWS; r < r1; r++) {
            const float *restrict x = j->x + r * C, *restrict d = j->dout + r * C;
            float *restrict dx = j->dx + r * C;
            float mu = j->mu[r], rs = j->rs[r], s[LANES] = {0}, sx[LANES] = {0};
            for (size_t i = 0; i < c8; i += LANES)
                for (size_t l = 0; l < LANES; l++) {
                    float dn = d[i + l] * g[i + l], xh = (x[i + l] - mu) * rs;
                    s[l] += dn;
                    sx[l] += dn * xh;
                }
            for (size_t i = c8; i < C; i++) {
                float dn = d[i] * g[i], xh = (x[i] - mu) * rs;
                s[i - c8] += dn;
                sx[i - c8] += dn * xh;
            }
            float mdn = lanes_sum(s) / (float)C, mdnx = lanes_sum(sx) / (float)C;
            if (j->overwrite) /* loops of one store each: vector code */
                for (size_t i = 0; i < C; i++) dx[i] = rs * (d[i] * g[i] - mdn - (x[i] - mu) * rs * mdnx);
            else
                for (size_t i = 0; i < C; i++) dx[i] += rs * (d[i] * g[i] - mdn - (x[i] - mu) * rs * mdnx);
            for (size_t i = 0; i < C; i++) pg[i] += d[i] * ((x[i] - mu) * rs);
            for (size_t i = 0; i < C; i++) pb[i] += d[i];
        }
    }
    sm_pool_barrier(j->pool);
    size_t c0, c1;
    sm_pool_split(C, 16, ith, nth, &c0, &c1);
    for (size_t i = c0; i < c1; i++) {
        float sg = 0, sb = 0;
        for (size_t blk = 0; blk < nb; blk++) sg += j->part[blk * 2 * C + i], sb += j->part[blk * 2 * C + C + i];
        j->dg[i] = sg;
        if (j->db) j->db[i] = sb;
    }
}

static float *P(const sm_trainer *t, size_t off) {
    return off == SM_NO_TENSOR ? NULL : t->params + off;
}
static float *G(const sm_trainer *t, size_t off) {
    return off == SM_NO_TENSOR ? NULL : t->grads + off;
}

static void layernorm_fwd(const sm_trainer *t, float *out, float *mu, float *rs, const float *x,
                          size_t g, size_t b) {
    ln_job j = {.out = out, .mu = mu, .rs = rs, .x = x, .g = P(t, g), .b = P(t, b),
                .rows = t->B * t->T, .C = (size_t)t->cfg.n_embd, .eps = t->cfg.norm_eps};
    sm_pool_run(t->pool, ln_fwd_task, &j);
}

static void layernorm_bwd(sm_trainer *t, float *dx, bool overwrite, const float *dout,
                          const float *x, const float *mu, const float *rs, size_t g, size_t b) {
    ln_job j = {.mu = (float *)mu, .rs = (float *)rs, .x = x, .g = P(t, g),
                .dout = dout, .dx = dx, .dg = G(t, g), .db = G(t, b), .overwrite = overwrite,
                .rows = t->B * t->T, .C = (size_t)t->cfg.n_embd, .eps = t->cfg.norm_eps,
                .part = t->ta, .pool = t->pool}; /* ta is free between linear layers */
    sm_pool_run(t->pool, ln_bwd_task, &j);
}

/* ---- attention --------------------------------------------------------- */

/* Per-thread attention scratch, carved from the thread's scratch slice. */
typedef struct att_scr {
    float *qh, *kh, *vh, *dyh, *dqh, *dkh, *dvh; /* (T, hs) */
    float *s1, *s2;                              /* causal matrices, by blocks */
    float *mm;                                   /* matmul panel scratch */
} att_scr;

static att_scr att_scratch(const sm_trainer *t, int ith) {
    size_t T = t->T, hs = (size_t)(t->cfg.n_embd / t->cfg.n_head), tri = sm_train_causal_floats(T);
    float *p = t->scratch + (size_t)ith * t->scratch_floats;
    att_scr a;
    float **slots[] = {&a.qh, &a.kh, &a.vh, &a.dyh, &a.dqh, &a.dkh, &a.dvh};
    for (size_t i = 0; i < sizeof slots / sizeof slots[0]; i++) {
        *slots[i] = p;
        p += (T * hs + 15) & ~(size_t)15;
    }
    a.s1 = p;
    p += (tri + 15) & ~(size_t)15;
    a.s2 = p;
    p += (tri + 15) & ~(size_t)15;
    a.mm = p;
    return a;
}

typedef struct att_job {
    sm_trainer *t;
    int l;
    bool backward;
} att_job;

#define AR SM_TRAIN_ATT_ROWS

/* Where row block [r0, r0 + AR) starts in a causal matrix by row blocks (the blocks before it
   are whole: r0 / AR of them, block b holding AR x (b + 1) AR floats). */
static size_t row_block(size_t r0) {
    return AR * AR * (r0 / AR) * (r0 / AR + 1) / 2;
}

/* Where column block [c0, c0 + AR) starts in the transposed matrix by column blocks (block b
   holding AR x (T - b AR) floats). */
static size_t col_block(size_t c0, size_t T) {
    size_t b = c0 / AR;
    return AR * (b * T - AR * (b * b - b) / 2);
}

/* out = in^T, in a causal (T, T) matrix by row blocks, out by column blocks: column block
   [c0, c1) of in is rows [c0, T) of row blocks c0 / AR on, transposed by the table. */
static void causal_transpose(const sm_kernels *k, float *out, const float *in, size_t T) {
    for (size_t c0 = 0; c0 < T; c0 += AR) {
        size_t c1 = sm_train_att_end(c0, T);
        float *ob = out + col_block(c0, T);
        for (size_t r0 = c0; r0 < T; r0 += AR) {
            size_t r1 = sm_train_att_end(r0, T);
            k->transpose(ob + (r0 - c0), T - c0, in + row_block(r0) + c0, r1, r1 - r0, 0, c1 - c0);
        }
    }
}

/* Copies head h of sequence b out of a (BT, stride) matrix at column col into (T, hs). */
static void gather(float *dst, const float *src, size_t b, size_t T, size_t stride, size_t col,
                   size_t hs) {
    for (size_t i = 0; i < T; i++) memcpy(dst + i * hs, src + (b * T + i) * stride + col, hs * 4);
}

static void scatter(float *dst, const float *src, size_t b, size_t T, size_t stride, size_t col,
                    size_t hs) {
    for (size_t i = 0; i < T; i++) memcpy(dst + (b * T + i) * stride + col, src + i * hs, hs * 4);
}

/*
** P = causal softmax(scale Q.K^T) into p (by row blocks); Y = P.V into the head's columns of
** atty. Row block [r0, r1) multiplies only the columns [0, r1) its rows may attend to, so the
** two products do (T + AR) / 2T of the full square's work (9/16 at T = 256; the rest is
** zeros). V's first r1 rows are the second product's weights held transposed (SM_DTYPE_F32_T).
*/
static void head_forward(const sm_trainer *t, const att_scr *s, float *atty, float *p, size_t b,
                         size_t col, size_t hs, float scale) {
    size_t T = t->T, C = (size_t)t->cfg.n_embd;
    for (size_t r0 = 0; r0 < T; r0 += AR) {
        size_t r1 = sm_train_att_end(r0, T);
        float *pb = p + row_block(r0);
        t->k->matmul(t->k, pb, s->qh + r0 * hs, s->kh, SM_DTYPE_F32, NULL, r1 - r0, r1, hs, 0, r1,
                     s->mm);
        for (size_t i = r0; i < r1; i++) {
            float *row = pb + (i - r0) * r1;
            for (size_t k = 0; k <= i; k++) row[k] *= scale;
            t->k->softmax(row, i + 1);
            memset(row + i + 1, 0, (r1 - i - 1) * sizeof(float));
        }
        t->k->matmul(t->k, s->dqh + r0 * hs, pb, s->vh, SM_DTYPE_F32_T, NULL, r1 - r0, hs, r1, 0,
                     hs, s->mm);
    }
    scatter(atty, s->dqh, b, T, C, col, hs);
}

/*
** From dY (the head's columns of datty) to dQ, dK, dV in the head's columns of dqkv, over the
** same causal blocks: dP and dQ by row blocks, dV = P^T.dY and dK = dS^T.Q by column blocks of
** the transposed matrices (column block [c0, c1) meets rows [c0, T) only). The softmax's
** backward takes sum_k P_ik dP_ik as dY_i . Y_i (the same sum: dP_ik = dY_i . V_k and
** Y_i = sum_k P_ik V_k), hs products a row instead of up to T.
*/
static void head_backward(sm_trainer *t, const att_scr *s, const float *p, const float *atty,
                          size_t b, size_t col, size_t hs, float scale) {
    size_t T = t->T, C = (size_t)t->cfg.n_embd;
    gather(s->dyh, t->datty, b, T, C, col, hs);
    float *ds = s->s1, *tr = s->s2;
    for (size_t r0 = 0; r0 < T; r0 += AR) {
        size_t r1 = sm_train_att_end(r0, T);
        const float *pb = p + row_block(r0);
        float *db = ds + row_block(r0);
        t->k->matmul(t->k, db, s->dyh + r0 * hs, s->vh, SM_DTYPE_F32, NULL, r1 - r0, r1, hs, 0,
                     r1, s->mm);
        for (size_t i = r0; i < r1; i++) {
            const float *pr = pb + (i - r0) * r1, *y = atty + (b * T + i) * C + col;
            const float *dy = s->dyh + i * hs;
            float *dr = db + (i - r0) * r1, dot = 0;
            for (size_t d = 0; d < hs; d++) dot += dy[d] * y[d];
            for (size_t k = 0; k <= i; k++) dr[k] = pr[k] * (dr[k] - dot) * scale;
            memset(dr + i + 1, 0, (r1 - i - 1) * sizeof(float));
        }
        /* dQ = dS . K over the block's columns: K's first r1 rows held transposed */
        t->k->matmul(t->k, s->dqh + r0 * hs, db, s->kh, SM_DTYPE_F32_T, NULL, r1 - r0, hs, r1, 0,
                     hs, s->mm);
    }
    causal_transpose(t->k, tr, p, T); /* dV = P^T . dY */
    for (size_t c0 = 0; c0 < T; c0 += AR)
        t->k->matmul(t->k, s->dvh + c0 * hs, tr + col_block(c0, T), s->dyh + c0 * hs, SM_DTYPE_F32_T,
                     NULL, sm_train_att_end(c0, T) - c0, hs, T - c0, 0, hs, s->mm);
    causal_transpose(t->k, tr, ds, T); /* dK = dS^T . Q */
    for (size_t c0 = 0; c0 < T; c0 += AR)
        t->k->matmul(t->k, s->dkh + c0 * hs, tr + col_block(c0, T), s->qh + c0 * hs, SM_DTYPE_F32_T,
                     NULL, sm_train_att_end(c0, T) - c0, hs, T - c0, 0, hs, s->mm);
    scatter(t->dqkv, s->dqh, b, T, 3 * C, col, hs);
    scatter(t->dqkv, s->dkh, b, T, 3 * C, C + col, hs);
    scatter(t->dqkv, s->dvh, b, T, 3 * C, 2 * C + col, hs);
}

/* Attention of layer j->l, forward or backward, one (sequence, head) at a time. */
static void att_task(void *arg, int ith, int nth) {
    const att_job *j = arg;
    sm_trainer *t = j->t;
    const train_acts *A = &t->acts[j->l];
    size_t T = t->T, C = (size_t)t->cfg.n_embd, H = (size_t)t->cfg.n_head, hs = C / H;
    float scale = 1.0f / sqrtf((float)hs);
    att_scr s = att_scratch(t, ith);
    size_t i0, i1, tri = sm_train_causal_floats(T);
    sm_pool_split(t->B * H, 1, ith, nth, &i0, &i1);
    for (size_t it = i0; it < i1; it++) {
        size_t b = it / H, col = it % H * hs;
        float *p = A->probs + it * tri;
        gather(s.qh, A->qkv, b, T, 3 * C, col, hs);
        gather(s.kh, A->qkv, b, T, 3 * C, C + col, hs);
        gather(s.vh, A->qkv, b, T, 3 * C, 2 * C + col, hs);
        if (j->backward)
            head_backward(t, &s, p, A->atty, b, col, hs, scale);
        else
            head_forward(t, &s, A->atty, p, b, col, hs, scale);
    }
}

/* ---- element-wise and row-wise steps ----------------------------------- */

typedef struct row_job {
    sm_trainer *t;
    int l;
    bool backward; /* loss: also write d_logits */
} row_job;

static void embed_task(void *arg, int ith, int nth) {
    const row_job *j = arg;
    const sm_trainer *t = j->t;
    size_t C = (size_t)t->cfg.n_embd, r0, r1;
    sm_pool_split(t->B * t->T, 1, ith, nth, &r0, &r1);
    for (size_t r = r0; r < r1; r++) {
        const float *te = t->params + t->wte + (size_t)t->tokens[r] * C;
        const float *pe = t->params + t->wpe + (r % t->T) * C;
        float *x = t->res + r * C;
        for (size_t i = 0; i < C; i++) x[i] = te[i] + pe[i];
    }
}

static void gelu_fwd_task(void *arg, int ith, int nth) {
    const row_job *j = arg;
    const train_acts *A = &j->t->acts[j->l];
    size_t n = 4 * (size_t)j->t->cfg.n_embd, r0, r1;
    sm_pool_split(j->t->B * j->t->T, 1, ith, nth, &r0, &r1);
    for (size_t r = r0; r < r1; r++) { /* row by row: the copy is in L1 when the GELU reads it */
        memcpy(A->fchg + r * n, A->fch + r * n, n * sizeof(float));
        j->t->k->gelu_tanh(A->fchg + r * n, n);
    }
}

/* dfch = dfch * gelu'(fch) (the table's). */
static void gelu_bwd_task(void *arg, int ith, int nth) {
    const row_job *j = arg;
    const sm_trainer *t = j->t;
    size_t n = 4 * (size_t)t->cfg.n_embd, r0, r1;
    sm_pool_split(t->B * t->T, 1, ith, nth, &r0, &r1);
    if (r0 < r1) t->k->gelu_tanh_grad(t->dfch + r0 * n, t->acts[j->l].fch + r0 * n, (r1 - r0) * n);
}

/* Softmax cross-entropy per row; with backward, logits become d_logits. */
static void loss_task(void *arg, int ith, int nth) {
    const row_job *j = arg;
    sm_trainer *t = j->t;
    size_t V = (size_t)t->cfg.n_vocab, BT = t->B * t->T, r0, r1;
    float *e = t->scratch + (size_t)ith * t->scratch_floats;
    sm_pool_split(BT, 1, ith, nth, &r0, &r1);
    for (size_t r = r0; r < r1; r++) {
        float *x = t->logits + r * V;
        float mx = x[0];
        for (size_t i = 1; i < V; i++) mx = x[i] > mx ? x[i] : mx;
        for (size_t i = 0; i < V; i++) x[i] -= mx;
        t->k->exp(e, x, V);
        float sum = 0;
        for (size_t i = 0; i < V; i++) sum += e[i];
        int y = t->targets[r];
        t->losses[r] = logf(sum) - x[y];
        if (j->backward) {
            float inv = 1.0f / (sum * (float)BT);
            for (size_t i = 0; i < V; i++) x[i] = e[i] * inv;
            x[y] -= 1.0f / (float)BT;
        }
    }
}

static void embed_bwd_task(void *arg, int ith, int nth) {
    const row_job *j = arg;
    sm_trainer *t = j->t;
    size_t C = (size_t)t->cfg.n_embd, V = (size_t)t->cfg.n_vocab, BT = t->B * t->T;
    size_t v0, v1, p0, p1;
    /* token rows: each thread owns a range of ids, so no two add to one row */
    sm_pool_split(V, 1, ith, nth, &v0, &v1);
    float *gw = t->grads + t->wte;
    if (!t->cfg.tied_output) memset(gw + v0 * C, 0, (v1 - v0) * C * sizeof(float));
    for (size_t r = 0; r < BT; r++) {
        size_t id = (size_t)t->tokens[r];
        if (id < v0 || id >= v1) continue;
        const float *d = t->dres + r * C;
        float *g = gw + id * C;
        for (size_t i = 0; i < C; i++) g[i] += d[i];
    }
    sm_pool_split(t->T, 1, ith, nth, &p0, &p1);
    float *gp = t->grads + t->wpe;
    for (size_t p = p0; p < p1; p++) {
        float *g = gp + p * C;
        memset(g, 0, C * sizeof(float));
        for (size_t b = 0; b < t->B; b++) {
            const float *d = t->dres + (b * t->T + p) * C;
            for (size_t i = 0; i < C; i++) g[i] += d[i];
        }
    }
}

/* ---- forward and backward ---------------------------------------------- */

static double forward(sm_trainer *t, bool backward) {
    const sm_config *c = &t->cfg;
    size_t C = (size_t)c->n_embd, BT = t->B * t->T, V = (size_t)c->n_vocab;
    row_job rj = {t, 0, backward};
    sm_pool_run(t->pool, embed_task, &rj);
    for (int l = 0; l < c->n_layer; l++) {
        const train_layer *L = &t->layers[l];
        train_acts *A = &t->acts[l];
        float *x = t->res + (size_t)l * BT * C;
        layernorm_fwd(t, A->ln1, A->ln1_mu, A->ln1_rs, x, L->ln1_g, L->ln1_b);
        mm(t, A->qkv, A->ln1, P(t, L->qkv_w), P(t, L->qkv_b), NULL, BT, 3 * C, C);
        att_job aj = {t, l, false};
        sm_pool_run(t->pool, att_task, &aj);
        mm(t, A->resm, A->atty, P(t, L->proj_w), P(t, L->proj_b), x, BT, C, C);
        layernorm_fwd(t, A->ln2, A->ln2_mu, A->ln2_rs, A->resm, L->ln2_g, L->ln2_b);
        mm(t, A->fch, A->ln2, P(t, L->up_w), P(t, L->up_b), NULL, BT, 4 * C, C);
        rj.l = l;
        sm_pool_run(t->pool, gelu_fwd_task, &rj);
        mm(t, x + BT * C, A->fchg, P(t, L->down_w), P(t, L->down_b), A->resm, BT, C, 4 * C);
    }
    float *xl = t->res + (size_t)c->n_layer * BT * C;
    layernorm_fwd(t, t->lnf, t->lnf_mu, t->lnf_rs, xl, t->lnf_g, t->lnf_b);
    mm(t, t->logits, t->lnf, t->params + t->out_w, NULL, NULL, BT, V, C);
    sm_pool_run(t->pool, loss_task, &rj);
    double sum = 0;
    for (size_t r = 0; r < BT; r++) sum += t->losses[r];
    return sum / (double)BT;
}

static void backward(sm_trainer *t) {
    const sm_config *c = &t->cfg;
    size_t C = (size_t)c->n_embd, BT = t->B * t->T, V = (size_t)c->n_vocab;
    /* output layer: its weight gradient lands in wte's when tied; the
       embedding scatter adds to it at the end */
    linear_backward(t, t->dln, t->logits, t->lnf, t->out_w, SM_NO_TENSOR, V, C);
    float *xl = t->res + (size_t)c->n_layer * BT * C;
    layernorm_bwd(t, t->dres, true, t->dln, xl, t->lnf_mu, t->lnf_rs, t->lnf_g, t->lnf_b);
    for (int l = c->n_layer - 1; l >= 0; l--) {
        const train_layer *L = &t->layers[l];
        train_acts *A = &t->acts[l];
        float *x = t->res + (size_t)l * BT * C;
        row_job rj = {t, l, true};
        /* MLP */
        linear_backward(t, t->dfch, t->dres, A->fchg, L->down_w, L->down_b, C, 4 * C);
        sm_pool_run(t->pool, gelu_bwd_task, &rj);
        linear_backward(t, t->dln, t->dfch, A->ln2, L->up_w, L->up_b, 4 * C, C);
        layernorm_bwd(t, t->dres, false, t->dln, A->resm, A->ln2_mu, A->ln2_rs, L->ln2_g,
                      L->ln2_b);
        /* attention */
        linear_backward(t, t->datty, t->dres, A->atty, L->proj_w, L->proj_b, C, C);
        att_job aj = {t, l, true};
        sm_pool_run(t->pool, att_task, &aj);
        linear_backward(t, t->dln, t->dqkv, A->ln1, L->qkv_w, L->qkv_b, 3 * C, C);
        layernorm_bwd(t, t->dres, false, t->dln, x, A->ln1_mu, A->ln1_rs, L->ln1_g, L->ln1_b);
    }
    row_job rj = {t, 0, true};
    sm_pool_run(t->pool, embed_bwd_task, &rj);
}

/* ---- AdamW -------------------------------------------------------------- */

typedef struct adam_job {
    sm_trainer *t;
    double lr, norm;
    float clip;
} adam_job;

static void adam_task(void *arg, int ith, int nth) {
    adam_job *j = arg;
    sm_trainer *t = j->t;
    const sm_train_hparams *hp = &t->hp;
    size_t c0, c1;
    sm_pool_split(t->n_chunks, 1, ith, nth, &c0, &c1);
    for (size_t ch = c0; ch < c1; ch++) {
        size_t a = ch * SM_TRAIN_NORM_CHUNK, e = a + SM_TRAIN_NORM_CHUNK < t->n_floats ? a + SM_TRAIN_NORM_CHUNK : t->n_floats;
        double s = 0;
        for (size_t i = a; i < e; i++) s += (double)t->grads[i] * t->grads[i];
        t->norm_part[ch] = s;
    }
    sm_pool_barrier(t->pool);
    if (ith == 0) {
        double s = 0;
        for (size_t ch = 0; ch < t->n_chunks; ch++) s += t->norm_part[ch];
        j->norm = sqrt(s);
        double coef = hp->grad_clip > 0 ? hp->grad_clip / (j->norm + 1e-6) : 1.0;
        j->clip = (float)(coef < 1 ? coef : 1.0);
    }
    sm_pool_barrier(t->pool);
    int step = t->step + 1;
    float lr = (float)j->lr, b1 = hp->beta1, b2 = hp->beta2;
    float bc1 = (float)(1 - pow(hp->beta1, step));
    float bc2s = (float)sqrt(1 - pow(hp->beta2, step));
    float step_size = lr / bc1, clip = j->clip;
    for (size_t ti = 0; ti < t->cfg.n_tensors; ti++) {
        size_t n = t->cfg.tensors[ti].nbytes / sizeof(float), i0, i1;
        sm_pool_split(n, 16, ith, nth, &i0, &i1);
        float *p = t->params + t->offset[ti], *g = t->grads + t->offset[ti];
        float *m = t->m + t->offset[ti], *v = t->v + t->offset[ti];
        float decay = t->decay[ti] ? 1 - lr * hp->weight_decay : 1.0f;
        for (size_t i = i0; i < i1; i++) {
            float gi = g[i] * clip;
            p[i] *= decay;
            m[i] = m[i] * b1 + gi * (1 - b1);
            v[i] = v[i] * b2 + gi * gi * (1 - b2);
            p[i] -= step_size * m[i] / (sqrtf(v[i]) / bc2s + hp->adam_eps);
        }
    }
}

/* ---- batches and the public API ---------------------------------------- */

/* Sequence b of the batch: the T bytes at text[off], targets shifted by one. */
static void load_window(sm_trainer *t, size_t b, const uint8_t *text) {
    for (size_t i = 0; i < t->T; i++) {
        t->tokens[b * t->T + i] = text[i];
        t->targets[b * t->T + i] = text[i + 1];
    }
}

static void load_batch(sm_trainer *t, int step) {
    size_t span = t->n_train - t->T;
    for (size_t b = 0; b < t->B; b++)
        load_window(t, b, t->text + sm_train_splitmix(t->hp.seed, (uint64_t)step * t->B + b) % span);
}

sm_status sm_trainer_step(sm_trainer *t, sm_train_stats *stats, sm_error *err) {
    if (t->step >= t->hp.steps)
        return sm_error_set(err, SM_ERR_INPUT, "all %d steps are done", t->hp.steps);
    load_batch(t, t->step);
    double loss = forward(t, true);
    if (!isfinite(loss))
        return sm_error_set(err, SM_ERR_RUNTIME,
                            "loss is not finite at step %d; lower --lr or raise --grad-clip",
                            t->step + 1);
    backward(t);
    adam_job j = {t, sm_train_lr(&t->hp, t->step), 0, 1};
    sm_pool_run(t->pool, adam_task, &j);
    t->step++;
    stats->step = t->step;
    stats->loss = loss;
    stats->grad_norm = j.norm;
    stats->lr = j.lr;
    return SM_OK;
}

double sm_trainer_eval(sm_trainer *t, int n_seq) {
    if (t->n_val < t->T + 1 || n_seq < 1) return -1;
    const uint8_t *val = t->text + t->n_train;
    size_t span = t->n_val - t->T - 1;
    double sum = 0;
    for (size_t s0 = 0, n = (size_t)n_seq; s0 < n; s0 += t->B) {
        size_t use = n - s0 < t->B ? n - s0 : t->B;
        /* window k at an even share of the span; a short last batch repeats its last window */
        for (size_t b = 0; b < t->B; b++) {
            size_t k = s0 + (b < use ? b : use - 1);
            load_window(t, b, val + (n > 1 ? span * k / (n - 1) : 0));
        }
        forward(t, false);
        for (size_t r = 0; r < use * t->T; r++) sum += t->losses[r];
    }
    return sum / ((double)n_seq * (double)t->T);
}

sm_status sm_trainer_grad(sm_trainer *t, const int32_t *tokens, const int32_t *targets,
                          double *loss, sm_error *err) {
    size_t BT = t->B * t->T;
    for (size_t i = 0; i < BT; i++) {
        if (tokens[i] < 0 || tokens[i] >= t->cfg.n_vocab || targets[i] < 0 ||
            targets[i] >= t->cfg.n_vocab)
            return sm_error_set(err, SM_ERR_INPUT, "token %zu is outside the vocabulary", i);
        t->tokens[i] = tokens[i];
        t->targets[i] = targets[i];
    }
    *loss = forward(t, true);
    backward(t);
    return SM_OK;
}

float *sm_trainer_tensor(sm_trainer *t, const char *name, bool grad, size_t *n) {
    for (size_t i = 0; i < t->cfg.n_tensors; i++)
        if (strcmp(t->cfg.tensors[i].name, name) == 0) {
            *n = t->cfg.tensors[i].nbytes / sizeof(float);
            return (grad ? t->grads : t->params) + t->offset[i];
        }
    return NULL;
}

