/*
** forward.c -- tensor binding and the forward pass of every architecture.
**
** A call is T token rows in runs, a run being consecutive positions of one
** sequence: one run (prefill, or decode alone), one-row runs of several
** sequences (batched decode, rows computed independently with matmul_rows so
** each equals its sequence decoded alone), or prompts prefilled together.
** The whole call is one pool task (sm_forward_task); every thread walks the
** same steps: embeddings and norm, then per block Q/K/V, attention, the
** output projection added to the residual, norm, the MLP's input products
** and activation, its output added; then the final norm and the output
** layer. What tells GPT-2 from Llama is data: biases and norms' b present
** or NULL, a gate matrix or none, rotary angles or learned positions.
**
** Every step splits its work so that each output element is computed by
** exactly one thread in a fixed order: matmuls by chunks of output columns
** and attention by key/value heads, both handed out by the pool's counter
** (sm_pool_next), row-wise steps by rows (sm_pool_split). Which thread takes
** a chunk never changes how its elements are computed, so results do not
** depend on the thread count or on timing. Each step ends with the barrier
** that completes it and, when profiling, thread 0's mark of its time.
*/
#include "model_internal.h"
#include "sm_half.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
** Tensor `name` checked against its spec; marks it used and stores its data
** at dst: a matrix (d1 > 0) as an sm_mat with its dtype, a vector (f32 only)
** as a const float pointer.
*/
static sm_status bind_tensor(const sm_model *m, bool *used, const char *name, int64_t d0,
                             int64_t d1, void *dst, sm_error *err) {
    long i = sm_weights_find(m->w, name);
    if (i < 0)
        return sm_error_set(err, SM_ERR_FORMAT, "model is missing required tensor %s", name);
    const sm_tensor_desc *d = &m->cfg->tensors[i];
    int nd = d1 ? 2 : 1;
    if (d->ndim != nd || d->shape[0] != d0 || (nd == 2 && d->shape[1] != d1)) {
        char have[96] = "", want[64];
        size_t len = 0;
        for (int k = 0; k < d->ndim && len < sizeof have - 24; k++)
            len += (size_t)snprintf(have + len, sizeof have - len, "%s%lld", k ? "," : "",
                                    (long long)d->shape[k]);
        if (nd == 2)
            snprintf(want, sizeof want, "%lld,%lld", (long long)d0, (long long)d1);
        else
            snprintf(want, sizeof want, "%lld", (long long)d0);
        return sm_error_set(err, SM_ERR_FORMAT, "tensor %s has [%s], expected [%s]", name, have,
                            want);
    }
    used[i] = true;
    if (nd == 2) {
        *(sm_mat *)dst = (sm_mat){m->w->data[i], d->dtype, NULL};
        return SM_OK;
    }
    if (d->dtype != SM_DTYPE_F32)
        return sm_error_set(err, SM_ERR_UNSUPPORTED,
                            "tensor %s has dtype %s; vectors (norms, biases) must be f32", name,
                            sm_dtype_name(d->dtype));
    *(const float **)dst = m->w->data[i];
    return SM_OK;
}

static sm_status bind_spec(sm_model *m, bool *used, const sm_bind_spec *sp, int layer,
                           sm_error *err) {
    if (sp->is_bias && !m->cfg->bias) return SM_OK;
    char nm[SM_NAME_MAX];
    char *base = layer < 0 ? (char *)m : (char *)&m->layers[layer];
    if (layer < 0)
        snprintf(nm, sizeof nm, "%s", sp->name);
    else
        snprintf(nm, sizeof nm, "blk.%d.%s", layer, sp->name);
    return bind_tensor(m, used, nm, sp->d0, sp->d1, base + sp->off, err);
}

sm_status sm_bind_model(sm_model *m, const sm_bind_spec *spec, size_t n, sm_error *err) {
    const sm_config *c = m->cfg;
    bool *used = calloc(c->n_tensors, sizeof *used);
    m->layers = calloc((size_t)c->n_layer, sizeof *m->layers);
    sm_status st = SM_OK;
    if (!used || !m->layers) {
        free(used);
        return sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    }
    size_t first = 0, last = 0; /* the per-layer specs are spec[first .. last) */
    while (first < n && !spec[first].per_layer) first++;
    for (last = first; last < n && spec[last].per_layer;) last++;
    for (size_t k = 0; k < first && !st; k++) st = bind_spec(m, used, &spec[k], -1, err);
    for (int l = 0; l < c->n_layer && !st; l++)
        for (size_t k = first; k < last && !st; k++) st = bind_spec(m, used, &spec[k], l, err);
    for (size_t k = last; k < n && !st; k++) st = bind_spec(m, used, &spec[k], -1, err);
    if (!st && c->tied_output)
        m->out_w = m->tok_embd;
    else if (!st)
        st = bind_tensor(m, used, "output.weight", c->n_vocab, c->n_embd, &m->out_w, err);
    for (size_t i = 0; i < c->n_tensors && !st; i++)
        if (!used[i])
            st = sm_error_set(err, SM_ERR_FORMAT, "unexpected tensor %s for a %s model%s",
                              c->tensors[i].name, sm_arch_name(c->arch),
                              strcmp(c->tensors[i].name, "output.weight") == 0
                                  ? " with tied_output true"
                                  : "");
    free(used);
    return st;
}

/*
** Matmul output columns are split between threads in multiples of the
** widest micro-kernel panel (64) for packed products, and of one vector
** (16) for matrix-vector rows: a 288-wide layer split by 64 would give one
** thread 256 columns and the other 32. Every element is computed the same
** way whatever the split, so the split never changes results.
*/
static size_t col_align(const sm_state *s) {
    return s->n_packed >= 4 ? 64 : s->p.repack ? SM_R32 : 16;
}

/* ---- profiling (no-op unless s->prof): thread 0 marks the end of each step ---- */

/* The time since the last mark goes to op, with its arithmetic and bytes. */
static void mark(sm_state *s, int ith, sm_op op, double flops, double bytes) {
    if (!s->prof || ith != 0) return;
    double now = sm_time_now();
    s->prof->s[op] += now - s->prof_t;
    s->prof->flops[op] += flops;
    s->prof->bytes[op] += bytes;
    s->prof_t = now;
}

/* A product of `rows` rows through w [N, K]: 2 flops per multiply-add, w read once. */
static void mark_mm(sm_state *s, int ith, sm_op op, sm_mat w, size_t rows, size_t N, size_t K) {
    mark(s, ith, op, 2.0 * (double)rows * (double)N * (double)K,
         (double)N * (double)sm_dtype_row_bytes(w.dt, K));
}

/* This call's attention in one layer: QK^T and PV over each row's keys, K and V read once. */
static void mark_attention(sm_state *s, int ith) {
    if (!s->prof || ith != 0) return;
    const sm_config *c = s->m->cfg;
    double flops = 0, bytes = 0, hd = (double)c->head_dim;
    for (size_t g = 0; g < s->n_runs; g++) {
        const sm_run *ru = &s->runs[g];
        double keys = (double)(ru->pos + ru->len); /* each query sees pos + t + 1 of them */
        flops += (double)c->n_head * 4.0 * hd *
                 ((double)ru->len * (double)ru->pos + (double)ru->len * (double)(ru->len + 1) / 2);
        bytes += (double)c->n_kv_head * 2.0 * keys * hd * sizeof(float);
    }
    mark(s, ith, SM_OP_ATTENTION, flops, bytes);
}

void sm_fwd_prof_output(sm_state *s) {
    const sm_config *c = s->m->cfg;
    mark_mm(s, 0, SM_OP_OUTPUT, s->m->out_w, s->every_row ? s->n : s->n_runs,
            (size_t)c->n_vocab, (size_t)c->n_embd);
}

/* ---- the steps ---- */

/*
** Columns [n0, n1) of out (T rows of N) = x (T rows of K) . w^T + b for this call's rows:
** the packed rows by matmul, the one-row runs after them by matmul_rows. In a call with
** both, by 64 columns at a time, so the one-row runs read the weights the packed rows
** just brought into the cache. Repacked weights take every row in one product where its rows
** are each the same whatever rows it is given (sm_kernels_rows_alike).
*/
#define SM_FWD_MIXED_COLS 64
static void product(const sm_state *s, float *out, const float *x, const sm_mat *m,
                    const float *b, size_t N, size_t K, size_t n0, size_t n1, float *scr) {
    const sm_mat v = sm_fwd_weights(s, m);
    const void *w = v.data;
    const sm_dtype dt = v.dt;
    const size_t P = s->n_packed, T = s->n;
    if (sm_kernels_rows_alike(s->k, dt)) { /* repacked: every row the same product, whatever the call */
        s->k->matmul(s->k, out, x, w, dt, b, T, N, K, n0, n1, scr);
        return;
    }
    const size_t step = P && P < T ? SM_FWD_MIXED_COLS : n1 - n0;
    for (size_t c = n0; c < n1; c += step) {
        size_t c1 = n1 - c < step ? n1 : c + step;
        if (P) s->k->matmul(s->k, out, x, w, dt, b, P, N, K, c, c1, scr);
        if (P < T) s->k->matmul_rows(s->k, out + P * N, x + P * K, w, dt, b, T - P, N, K, c, c1, scr);
    }
    sm_kernels_reuse_begin(scr, s->scratch_rows); /* those wrote over the repacked products' memo */
}

static void norm_one(const sm_state *s, float *out, const float *x, const float *g,
                     const float *b) {
    const sm_config *c = s->m->cfg;
    if (c->arch == SM_ARCH_LLAMA)
        s->k->rmsnorm(out, x, g, (size_t)c->n_embd, c->norm_eps);
    else
        s->k->layernorm(out, x, g, b, (size_t)c->n_embd, c->norm_eps);
}

/* Rows [r0, r1) of out = norm(x) with (g, b): LayerNorm (gpt2) or RMSNorm (llama). */
static void norm_rows(const sm_state *s, float *out, const float *x, const float *g,
                      const float *b, size_t r0, size_t r1) {
    const size_t C = (size_t)s->m->cfg->n_embd;
    for (size_t t = r0; t < r1; t++) norm_one(s, out + t * C, x + t * C, g, b);
}

/* Row r of a matrix with C columns. */
static const void *row_of(const sm_mat *w, size_t r, size_t C) {
    return (const char *)w->data + r * sm_dtype_row_bytes(w->dt, C);
}

/* Row r of w as f32: the row itself when w is f32, else widened into buf (C floats). */
static const float *row_f32(const sm_state *s, const sm_mat *w, size_t r, size_t C, float *buf) {
    if (w->dt == SM_DTYPE_F32) return row_of(w, r, C);
    s->k->to_f32(buf, row_of(w, r, C), w->dt, C);
    return buf;
}

/*
** xn = norm(x) with (g, b) before the next products, once x is complete:
** all rows into the thread's own copy (small calls), else rows [r0, r1) of
** the shared xn and a barrier.
*/
static void norm_next(sm_state *s, const float *g, const float *b, int ith, size_t r0, size_t r1) {
    if (s->n <= SM_FWD_OWN_ROWS) {
        norm_rows(s, sm_fwd_xn(s, ith), s->x, g, b, 0, s->n);
    } else {
        norm_rows(s, s->xn, s->x, g, b, r0, r1);
        sm_pool_barrier(s->pool);
    }
    mark(s, ith, SM_OP_NORM, 0, 0);
}

/* cos and sin of pos times each of the half rotary frequencies. */
static void angles(float *cs, float *sn, const float *freq, float pos, size_t half) {
    for (size_t i = 0; i < half; i++) {
        float a = pos * freq[i];
        cs[i] = cosf(a);
        sn[i] = sinf(a);
    }
}

/* Token (+ learned position) embeddings of rows [r0, r1), with their rotary angles. */
static void embed(sm_state *s, size_t r0, size_t r1) {
    const sm_model *m = s->m;
    const size_t C = (size_t)m->cfg->n_embd;
    for (size_t g = 0; g < s->n_runs; g++) {
        const sm_run *ru = &s->runs[g];
        size_t t0 = ru->start > r0 ? ru->start : r0;
        size_t t1 = ru->start + ru->len < r1 ? ru->start + ru->len : r1;
        for (size_t t = t0; t < t1; t++) {
            const sm_mat *te = &m->tok_embd, *pe = &m->pos_embd;
            float *x = s->x + t * C;
            s->k->to_f32(x, row_of(te, (size_t)s->tokens[t], C), te->dt, C);
            if (m->cfg->embd_scale > 0)
                for (size_t i = 0; i < C; i++) x[i] *= m->cfg->embd_scale;
            if (s->rope_freq) { /* this row's rotary angles, as the tables had them */
                size_t half = (size_t)m->cfg->head_dim / 2;
                float pos = (float)(ru->pos + t - ru->start);
                angles(s->rope_cos + t * half, s->rope_sin + t * half, s->rope_freq, pos, half);
                if (s->rope_freq_l) /* windowed layers' own base */
                    angles(s->rope_cos_l + t * half, s->rope_sin_l + t * half, s->rope_freq_l, pos, half);
            }
            if (!pe->data) continue;
            const float *p = row_f32(s, pe, ru->pos + t - ru->start, C, s->tmp + t * C);
            for (size_t i = 0; i < C; i++) x[i] += p[i];
        }
    }
}

/*
** The forward pass's start: token (+ learned position) embeddings of rows
** [r0, r1) by thread ith, then the first layer's norm (g, b) of all rows
** into sm_fwd_xn, barriers included.
*/
static void embed_norm(sm_state *s, const float *g, const float *b, int ith, size_t r0,
                       size_t r1) {
    embed(s, r0, r1);
    if (s->n <= SM_FWD_OWN_ROWS) { /* every thread normalises all rows, once all are embedded */
        sm_pool_barrier(s->pool);
        norm_rows(s, sm_fwd_xn(s, ith), s->x, g, b, 0, s->n);
        mark(s, ith, SM_OP_NORM, 0, 0);
        return;
    }
    norm_next(s, g, b, ith, r0, r1);
}

/*
** The next chunk [*n0, *n1) of the N output columns of a product, taken
** from the pool's counters (sm_pool_next: one loop per barrier phase);
** false when all are taken. SM_FWD_CHUNKS chunks per thread, in multiples
** of col_align, so a thread slowed down leaves its later chunks to
** the others.
*/
#define SM_FWD_CHUNKS 2
static bool next_cols(sm_state *s, size_t N, int ith, int nth, size_t *n0, size_t *n1) {
    size_t align = col_align(s), per = N / ((size_t)nth * SM_FWD_CHUNKS);
    size_t chunk = (per + align - 1) / align * align;
    if (chunk == 0) chunk = align;
    size_t n = (N + chunk - 1) / chunk, c = sm_pool_next(s->pool, ith, n);
    if (c == n) return false;
    *n0 = c * chunk;
    *n1 = *n0 + chunk < N ? *n0 + chunk : N;
    return true;
}

/*
** Opens the thread's reuse window for products on x (T rows of K) with w
** first: where the kernels take shared rows (repacked quantized weights,
** many rows), each thread quantizes its share of x's rows once into the
** shared buffer and, after a barrier, every thread's products read them all
** (not each thread every row for its own columns).
*/
static void reuse_open(sm_state *s, const float *x, const sm_mat *w, size_t K, int ith, int nth, float *scr) {
    if (sm_kernels_share_open(s->k, s->xshared, scr, s->scratch_rows, x, sm_fwd_weights(s, w).dt, s->n, K, ith, nth))
        sm_pool_barrier(s->pool);
}

/*
** qkv (T, Q + 2 KV) = xn . [Q; K; V]^T (+ biases): from the fused matrix
** (with its bias) or from the three matrices in turn, each writing its
** columns of qkv (row stride W), by chunks of columns.
*/
static void qkv(sm_state *s, const sm_layer *L, int ith, int nth, float *scr) {
    const sm_model *m = s->m;
    const size_t T = s->n, C = (size_t)m->cfg->n_embd, W = m->q_dim + 2 * m->kv_dim;
    const float *xn = sm_fwd_xn(s, ith);
    const sm_mat *part[3] = {&L->q_w, &L->k_w, &L->v_w};
    const float *bias[3] = {L->q_b, L->k_b, L->v_b};
    const size_t start[4] = {0, m->q_dim, m->q_dim + m->kv_dim, W};
    size_t n0, n1;
    reuse_open(s, xn, L->qkv_w.data ? &L->qkv_w : &L->q_w, C, ith, nth, scr); /* xn quantized once for q, k, v
                                                                                 and every chunk */
    while (next_cols(s, W, ith, nth, &n0, &n1)) {
        if (L->qkv_w.data) {
            product(s, s->qkv, xn, &L->qkv_w, L->qkv_b, W, C, n0, n1, scr);
            continue;
        }
        for (int p = 0; p < 3; p++) {
            size_t lo = n0 > start[p] ? n0 : start[p], hi = n1 < start[p + 1] ? n1 : start[p + 1];
            if (lo < hi)
                product(s, s->qkv + start[p], xn, part[p], bias[p], W, C,
                        lo - start[p], hi - start[p], scr);
        }
    }
    sm_kernels_reuse_end(scr);
    sm_pool_barrier(s->pool);
    if (L->qkv_w.data) {
        mark_mm(s, ith, SM_OP_MATMUL, L->qkv_w, T, W, C);
    } else {
        mark_mm(s, ith, SM_OP_MATMUL, L->q_w, T, m->q_dim, C);
        mark_mm(s, ith, SM_OP_MATMUL, L->k_w, T, m->kv_dim, C);
        mark_mm(s, ith, SM_OP_MATMUL, L->v_w, T, m->kv_dim, C);
    }
}

/*
** x += in (T, K) . w^T + b, by chunks of output columns; with a post-norm
** gain g (Gemma's post-attention and post-MLP norms), x += rmsnorm(in .
** w^T) instead, each thread adding its own rows once whole rows are done.
** Thread 0 reads the cancel flag before the closing barrier; returns
** whether the call stops there (every thread gets the same answer).
*/
static bool residual(sm_state *s, const float *in, sm_mat w, const float *b, const float *g,
                     size_t K, int ith, int nth, float *scr) {
    const size_t T = s->n, C = (size_t)s->m->cfg->n_embd;
    size_t n0, n1, r0, r1;
    reuse_open(s, in, &w, K, ith, nth, scr); /* in quantized once for every chunk */
    while (next_cols(s, C, ith, nth, &n0, &n1)) {
        product(s, s->tmp, in, &w, b, C, K, n0, n1, scr);
        if (!g)
            for (size_t t = 0; t < T; t++) s->k->add(s->x + t * C + n0, s->tmp + t * C + n0, n1 - n0);
    }
    sm_kernels_reuse_end(scr);
    if (g) {
        sm_pool_barrier(s->pool); /* whole rows before their norm */
        sm_pool_split(T, 1, ith, nth, &r0, &r1);
        for (size_t t = r0; t < r1; t++) {
            float *y = s->tmp + t * C;
            s->k->rmsnorm(y, y, g, C, s->m->cfg->norm_eps);
            s->k->add(s->x + t * C, y, C);
        }
    }
    if (ith == 0 && s->cancel && *s->cancel) s->stop = true;
    sm_pool_barrier(s->pool);
    mark_mm(s, ith, SM_OP_MATMUL, w, T, C, K);
    return s->stop; /* thread 0 wrote it before the barrier; no one writes it until the next */
}

/* hid[t, n0..n1) <- the MLP's activation of its pre-activations, gated by up (NULL: none). */
static void activate(const sm_state *s, float *h, const float *up, size_t n) {
    const sm_kernels *k = s->k;
    bool tanh_form = s->m->cfg->activation == SM_ACT_GELU_TANH;
    if (!up) {
        (tanh_form ? k->gelu_tanh : k->gelu_erf)(h, n);
    } else if (tanh_form) { /* Gemma: GELU-gated */
        k->gelu_tanh(h, n);
        for (size_t i = 0; i < n; i++) h[i] *= up[i];
    } else {
        k->swiglu(h, up, n); /* Llama: SwiGLU */
    }
}

/*
** The MLP's input: hid (T, F) = act(xn . up^T + b) (GPT-2), or act(xn .
** gate^T) * (xn . up^T) (Llama: gate and up over the same chunk, so the
** activation needs no barrier), by chunks of columns.
*/
static void mlp_in(sm_state *s, const sm_layer *L, int ith, int nth, float *scr) {
    const size_t T = s->n, C = (size_t)s->m->cfg->n_embd, F = (size_t)s->m->cfg->n_ff;
    const float *xn = sm_fwd_xn(s, ith);
    const bool gated = L->gate_w.data != NULL;
    size_t n0, n1;
    reuse_open(s, xn, gated ? &L->gate_w : &L->up_w, C, ith, nth, scr); /* xn quantized once for gate, up and
                                                                           every chunk */
    while (next_cols(s, F, ith, nth, &n0, &n1)) {
        if (gated) {
            product(s, s->hid, xn, &L->gate_w, NULL, F, C, n0, n1, scr);
            product(s, s->up, xn, &L->up_w, NULL, F, C, n0, n1, scr);
        } else {
            product(s, s->hid, xn, &L->up_w, L->up_b, F, C, n0, n1, scr);
        }
        mark(s, ith, SM_OP_MATMUL, 0, 0); /* thread 0's chunks: products, then */
        for (size_t t = 0; t < T; t++)
            activate(s, s->hid + t * F + n0, gated ? s->up + t * F + n0 : NULL, n1 - n0);
        mark(s, ith, SM_OP_ACT, 0, 0); /* activation */
    }
    sm_kernels_reuse_end(scr);
    sm_pool_barrier(s->pool);
    if (gated) mark_mm(s, ith, SM_OP_MATMUL, L->gate_w, T, F, C);
    mark_mm(s, ith, SM_OP_MATMUL, L->up_w, T, F, C);
}

/*
** Layer l's attention by key/value heads (from the pool's counter): per-head
** norms of q and k (qk_norm), rotary embedding (llama), this call's keys and
** values appended to the cache, then each query head of the group attends.
** Reads s->qkv, writes s->att.
*/
static void attention(sm_state *s, int l, int ith, float *scr) {
    const sm_model *m = s->m;
    const sm_config *c = m->cfg;
    const sm_kernels *K = s->k;
    const size_t hs = (size_t)c->head_dim, ctx = s->kv_len[l];
    const size_t ring = ctx < sm_attn_ctx_padded(s->p.n_ctx) ? ctx : 0; /* a window's ring */
    const size_t KVH = (size_t)c->n_kv_head;
    const size_t group = (size_t)(c->n_head / c->n_kv_head);
    const size_t Q = m->q_dim, W = m->q_dim + 2 * m->kv_dim, half = hs / 2;
    const bool rope = c->arch == SM_ARCH_LLAMA;
    const sm_layer *L = &m->layers[l];
    const size_t window = sm_config_window(c, l);
    const size_t kvb = sm_dtype_row_bytes(s->p.kv_type, 1); /* bytes per cached element */
    const size_t bs = s->kv_bstride[l]; /* from one of the layer's blocks to the next */
    const float scale = c->attn_scale > 0 ? c->attn_scale : 1.0f / sqrtf((float)hs);
    /* decoding rows that read a shared prefix go to attention_rows together, sorted by prefix
       (one query head per key/value head, no window) */
    const size_t tr = (size_t)ith * (s->p.n_seq ? s->p.n_seq : 1);
    sm_attn_row *rows = K->attention_rows && group == 1 && !ring && !window ? s->att_rows + tr : NULL;
    const sm_attn_row **order = s->att_order + tr;
    for (size_t kh; (kh = sm_pool_next(s->pool, ith, KVH)) < KVH;) {
        size_t n_rows = 0;
        for (size_t g = 0; g < s->n_runs; g++) {
            const sm_run *ru = &s->runs[g];
            const size_t off = sm_kv_head_at(s, ru->seq, l, kh);
            char *kt = (char *)s->kt + off * kvb, *vh = (char *)s->v + off * kvb;
            float *qkv = s->qkv + ru->start * W;
            for (size_t t = 0; t < ru->len; t++) {
                float *kr = qkv + t * W + Q + kh * hs;
                const float *vr = kr + m->kv_dim;
                size_t p = ring ? (ru->pos + t) % ring : ru->pos + t; /* its slot */
                if (L->q_norm) { /* Qwen 3, Gemma 3: each head of Q and K RMS-normalised first */
                    K->rmsnorm(kr, kr, L->k_norm, hs, c->norm_eps);
                    for (size_t h = kh * group; h < (kh + 1) * group; h++)
                        K->rmsnorm(qkv + t * W + h * hs, qkv + t * W + h * hs, L->q_norm, hs, c->norm_eps);
                }
                if (rope) {
                    size_t row = ru->start + t;
                    const bool lw = window && s->rope_cos_l; /* a windowed layer's own base */
                    const float *cs = (lw ? s->rope_cos_l : s->rope_cos) + row * half;
                    const float *sn = (lw ? s->rope_sin_l : s->rope_sin) + row * half;
                    void (*rot)(float *restrict, const float *restrict, const float *restrict,
                                size_t) = c->rope_halves ? K->rope_halves : K->rope;
                    rot(kr, cs, sn, hs);
                    for (size_t h = kh * group; h < (kh + 1) * group; h++)
                        rot(qkv + t * W + h * hs, cs, sn, hs);
                }
                const size_t ko = sm_kv_key_at(bs, p, 0), vo = sm_kv_value_at(bs, p, hs);
                if (s->p.kv_type == SM_DTYPE_F16) { /* rounded to nearest even */
                    uint16_t *k16 = (uint16_t *)(void *)kt + ko, *v16 = (uint16_t *)(void *)vh + vo;
                    for (size_t d = 0; d < hs; d++) {
                        k16[d * SM_ATTN_KBLOCK] = sm_f32_to_f16(kr[d]);
                        v16[d] = sm_f32_to_f16(vr[d]);
                    }
                } else {
                    float *k32 = (float *)(void *)kt + ko;
                    for (size_t d = 0; d < hs; d++) k32[d * SM_ATTN_KBLOCK] = kr[d];
                    memcpy((float *)(void *)vh + vo, vr, hs * sizeof(float));
                }
            }
            sm_kv_head kv = {.kt = kt, .v = vh, .ring = ring, .bstride = bs, .type = s->p.kv_type,
                             .shared = s->kv_shared[ru->seq]};
            if (kv.shared) { /* a prefix another sequence holds (sm_state_kv_share) */
                const size_t o = sm_kv_head_at(s, s->kv_src[ru->seq], l, kh);
                kv.kt0 = (char *)s->kt + o * kvb, kv.v0 = (char *)s->v + o * kvb;
            }
            float *out = s->att + ru->start * Q + kh * group * hs;
            if (rows && ru->len == 1 && kv.shared) { /* after the others, beside its prefix's readers */
                sm_attn_row *r = &rows[n_rows];
                *r = (sm_attn_row){out, qkv + kh * hs, kv, ru->pos};
                size_t i = n_rows++; /* its place in the order: pointers move, not rows */
                for (; i > 0 && (uintptr_t)order[i - 1]->kv.kt0 > (uintptr_t)kv.kt0; i--) order[i] = order[i - 1];
                order[i] = r;
                continue;
            }
            K->attention(out, qkv + kh * group * hs, &kv, scr, ru->len, ru->pos, hs, group, W, Q, scale, window);
        }
        if (n_rows) K->attention_rows(order, n_rows, scr, hs, scale);
    }
    sm_pool_barrier(s->pool);
    mark_attention(s, ith);
}

/* After the last block: the final norm of the rows that need logits, then the output layer. */
static void output(sm_state *s, const float *g, const float *b, int ith, int nth, float *scr) {
    const sm_model *m = s->m;
    const size_t C = (size_t)m->cfg->n_embd, V = (size_t)m->cfg->n_vocab;
    size_t r0, r1, n0, n1;
    bool own = s->n <= SM_FWD_OWN_ROWS; /* every thread normalises every row itself */
    float *xn = sm_fwd_xn(s, ith);
    if (s->every_row) {
        sm_pool_split(s->n, 1, ith, nth, &r0, &r1);
        norm_rows(s, xn, s->x, g, b, own ? 0 : r0, own ? s->n : r1);
    } else { /* the last row of each run, packed: row k for run k */
        sm_pool_split(s->n_runs, 1, ith, nth, &r0, &r1);
        for (size_t k = own ? 0 : r0; k < (own ? s->n_runs : r1); k++) {
            const sm_run *ru = &s->runs[k];
            norm_one(s, xn + k * C, s->x + (ru->start + ru->len - 1) * C, g, b);
        }
    }
    if (!own) sm_pool_barrier(s->pool);
    mark(s, ith, SM_OP_NORM, 0, 0);
    /* every row, or each run's last row as a lone last token gets it */
    sm_matmul_fn mm = s->every_row ? s->k->matmul : s->k->matmul_rows;
    size_t rows = s->every_row ? s->n : s->n_runs;
    const sm_mat ow = sm_fwd_weights(s, &m->out_w);
    sm_kernels_reuse_begin(scr, s->scratch_rows); /* xn quantized once for every chunk (repacked weights) */
    while (next_cols(s, V, ith, nth, &n0, &n1))
        mm(s->k, s->logits, xn, ow.data, ow.dt, NULL, rows, V, C, n0, n1, scr);
    sm_kernels_reuse_end(scr);
}

void sm_forward_task(void *arg, int ith, int nth) {
    sm_state *s = arg;
    const sm_model *m = s->m;
    const sm_config *c = m->cfg;
    const size_t Q = m->q_dim, F = (size_t)c->n_ff;
    float *scr = s->scratch + (size_t)ith * s->scratch_floats;
    size_t r0, r1;

    sm_pool_split(s->n, 1, ith, nth, &r0, &r1);
    embed_norm(s, m->layers[0].ln1_g, m->layers[0].ln1_b, ith, r0, r1);
    for (int l = 0; l < c->n_layer; l++) {
        const sm_layer *L = &m->layers[l];
        qkv(s, L, ith, nth, scr);
        attention(s, l, ith, scr);
        if (residual(s, s->att, L->proj_w, L->proj_b, L->attn_post, Q, ith, nth, scr)) return;
        norm_next(s, L->ln2_g, L->ln2_b, ith, r0, r1);
        mlp_in(s, L, ith, nth, scr);
        if (residual(s, s->hid, L->down_w, L->down_b, L->ffn_post, F, ith, nth, scr)) return;
        if (l + 1 < c->n_layer)
            norm_next(s, m->layers[l + 1].ln1_g, m->layers[l + 1].ln1_b, ith, r0, r1);
    }
    output(s, m->lnf_g, m->lnf_b, ith, nth, scr);
}
