/*
** gpt2.c -- the GPT-2 architecture: tensor binding and the forward pass.
**
** A call is T token rows in runs, a run being consecutive positions of one
** sequence: one run (prefill, or decode alone), one-row runs of several
** sequences (batched decode, rows computed independently with matmul_rows so
** each equals its sequence decoded alone), or prompts prefilled together.
**
** Block (pre-LayerNorm):  x += proj(attn(ln1(x)));  x += down(gelu(up(ln2(x))))
** then ln_f and the output layer. The whole forward call is one pool task;
** every thread walks the same steps and meets the others at barriers. Work
** is split so that each output element is computed by exactly one thread in
** a fixed order, so results do not depend on the thread count:
**   matmuls by output columns (multiples of 64), attention by heads,
**   row-wise ops (embedding, LayerNorm) by tokens.
*/
#include "model_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Splits matmul output columns in multiples of the widest micro-kernel panel. */
#define COL_ALIGN 64

/* Tensor `name` checked to be f32 of shape (d0[, d1]); marks it used. */
static sm_status bind(const sm_model *m, bool *used, const char *name, int64_t d0, int64_t d1,
                      const float **out, sm_error *err) {
    long i = sm_weights_find(&m->w, name);
    if (i < 0)
        return sm_error_set(err, SM_ERR_FORMAT, "model is missing required tensor %s", name);
    const sm_tensor_desc *d = &m->cfg.tensors[i];
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
    if (d->dtype != SM_DTYPE_F32)
        return sm_error_set(err, SM_ERR_UNSUPPORTED,
                            "tensor %s has dtype %s; this build runs f32 weights only", name,
                            sm_dtype_name(d->dtype));
    used[i] = true;
    *out = m->w.data[i];
    return SM_OK;
}

sm_status sm_gpt2_bind(sm_model *m, sm_error *err) {
    const sm_config *c = &m->cfg;
    int64_t C = c->n_embd, V = c->n_vocab;
    bool *used = calloc(c->n_tensors, sizeof *used);
    m->layers = calloc((size_t)c->n_layer, sizeof *m->layers);
    sm_status st = SM_OK;
    if (!used || !m->layers) {
        st = sm_error_set(err, SM_ERR_NOMEM, "out of memory");
        goto done;
    }
#define BIND(name, d0, d1, dst)                                                  \
    do {                                                                         \
        if ((st = bind(m, used, name, d0, d1, dst, err))) goto done;             \
    } while (0)
    BIND("tok_embd", V, C, &m->tok_embd);
    BIND("pos_embd", c->n_ctx, C, &m->pos_embd);
    char nm[SM_NAME_MAX];
    for (int l = 0; l < c->n_layer; l++) {
        gpt2_layer *L = &m->layers[l];
        const struct {
            const char *suffix;
            int64_t d0, d1;
            const float **dst;
            bool is_bias;
        } t[] = {
            {"ln1.weight", C, 0, &L->ln1_g, false},      {"ln1.bias", C, 0, &L->ln1_b, true},
            {"attn_qkv.weight", 3 * C, C, &L->qkv_w, false},
            {"attn_qkv.bias", 3 * C, 0, &L->qkv_b, true},
            {"attn_out.weight", C, C, &L->proj_w, false}, {"attn_out.bias", C, 0, &L->proj_b, true},
            {"ln2.weight", C, 0, &L->ln2_g, false},      {"ln2.bias", C, 0, &L->ln2_b, true},
            {"mlp_up.weight", 4 * C, C, &L->up_w, false}, {"mlp_up.bias", 4 * C, 0, &L->up_b, true},
            {"mlp_down.weight", C, 4 * C, &L->down_w, false},
            {"mlp_down.bias", C, 0, &L->down_b, true},
        };
        for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
            if (t[k].is_bias && !c->bias) continue;
            snprintf(nm, sizeof nm, "blk.%d.%s", l, t[k].suffix);
            BIND(nm, t[k].d0, t[k].d1, t[k].dst);
        }
    }
    BIND("ln_f.weight", C, 0, &m->lnf_g);
    if (c->bias) BIND("ln_f.bias", C, 0, &m->lnf_b);
    if (c->tied_output)
        m->out_w = m->tok_embd;
    else
        BIND("output.weight", V, C, &m->out_w);
#undef BIND
    for (size_t i = 0; i < c->n_tensors; i++)
        if (!used[i]) {
            st = sm_error_set(err, SM_ERR_FORMAT, "unexpected tensor %s for a gpt2 model%s",
                              c->tensors[i].name,
                              strcmp(c->tensors[i].name, "output.weight") == 0
                                  ? " with tied_output true"
                                  : "");
            goto done;
        }
done:
    free(used);
    return st;
}

/* Rows [r0, r1) of out = LayerNorm(x) with (g, b). */
static void norm_rows(const sm_kernels *K, float *out, const float *x, const float *g,
                      const float *b, size_t r0, size_t r1, size_t C, float eps) {
    for (size_t t = r0; t < r1; t++) K->layernorm(out + t * C, x + t * C, g, b, C, eps);
}

/*
** The product for this call's linear layers: one-row runs of several
** sequences are computed apart, as each is alone (matmul_rows); longer runs
** take the packed product, which is what a prompt of 4+ tokens gets alone.
*/
static sm_matmul_fn call_matmul(const sm_state *s) {
    return s->rows_apart ? s->k->matmul_rows : s->k->matmul;
}

/*
** x (T, C) += in (T, K) . w^T + b for this thread's output columns: each
** thread adds exactly the columns it computed, so no barrier is needed
** between the product and the residual add.
*/
static void residual_matmul(sm_state *s, const float *in, const float *w, const float *b,
                            size_t K, int ith, int nth, float *scr) {
    const size_t T = s->n, C = (size_t)s->m->cfg.n_embd;
    size_t n0, n1;
    sm_pool_split(C, COL_ALIGN, ith, nth, &n0, &n1);
    if (n0 == n1) return;
    call_matmul(s)(s->tmp, in, w, b, T, C, K, n0, n1, scr);
    for (size_t t = 0; t < T; t++)
        for (size_t i = n0; i < n1; i++) s->x[t * C + i] += s->tmp[t * C + i];
}

void sm_gpt2_forward_task(void *arg, int ith, int nth) {
    sm_state *s = arg;
    const sm_model *m = s->m;
    const sm_config *c = &m->cfg;
    const sm_kernels *K = s->k;
    sm_pool *pool = s->pool;
    const size_t T = s->n, C = (size_t)c->n_embd, H = (size_t)c->n_head;
    const size_t hs = C / H, ctx = s->p.n_ctx, V = (size_t)c->n_vocab, C3 = 3 * C, C4 = 4 * C;
    const float eps = c->norm_eps, scale = 1.0f / sqrtf((float)hs);
    float *scr = s->scratch + (size_t)ith * s->scratch_floats;
    void (*gelu)(float *, size_t) = c->activation == SM_ACT_GELU_TANH ? K->gelu_tanh : K->gelu_erf;
    const sm_matmul_fn mm = call_matmul(s);
    const sm_run *runs = s->runs;
    const size_t n_runs = s->n_runs;
    size_t r0, r1, n0, n1;

    /* token + position embeddings, then the first LayerNorm (by rows) */
    sm_pool_split(T, 1, ith, nth, &r0, &r1);
    for (size_t g = 0; g < n_runs; g++) {
        const sm_run *ru = &runs[g];
        size_t t0 = ru->start > r0 ? ru->start : r0;
        size_t t1 = ru->start + ru->len < r1 ? ru->start + ru->len : r1;
        for (size_t t = t0; t < t1; t++) {
            const float *te = m->tok_embd + (size_t)s->tokens[t] * C;
            const float *pe = m->pos_embd + (ru->pos + t - ru->start) * C;
            float *x = s->x + t * C;
            for (size_t i = 0; i < C; i++) x[i] = te[i] + pe[i];
        }
    }
    norm_rows(K, s->xn, s->x, m->layers[0].ln1_g, m->layers[0].ln1_b, r0, r1, C, eps);
    sm_pool_barrier(pool);

    for (int l = 0; l < c->n_layer; l++) {
        const gpt2_layer *L = &m->layers[l];
        const size_t layer_off = (size_t)l * H * hs * ctx; /* (H, hs, ctx) and (H, ctx, hs) */

        sm_pool_split(C3, COL_ALIGN, ith, nth, &n0, &n1);
        if (n0 < n1) mm(s->qkv, s->xn, L->qkv_w, L->qkv_b, T, C3, C, n0, n1, scr);
        sm_pool_barrier(pool);

        /* by heads: append this call's keys and values, then attend */
        size_t h0, h1;
        sm_pool_split(H, 1, ith, nth, &h0, &h1);
        for (size_t h = h0; h < h1; h++) {
            for (size_t g = 0; g < n_runs; g++) {
                const sm_run *ru = &runs[g];
                float *kt = s->kt + ru->seq * s->kv_seq_floats + layer_off + h * hs * ctx;
                float *vh = s->v + ru->seq * s->kv_seq_floats + layer_off + h * ctx * hs;
                const float *qkv = s->qkv + ru->start * C3;
                for (size_t t = 0; t < ru->len; t++) {
                    const float *kr = qkv + t * C3 + C + h * hs;
                    const float *vr = kr + C;
                    for (size_t d = 0; d < hs; d++) kt[d * ctx + ru->pos + t] = kr[d];
                    memcpy(vh + (ru->pos + t) * hs, vr, hs * sizeof(float));
                }
                K->attention(s->att + ru->start * C + h * hs, qkv + h * hs, kt, vh, scr, ru->len,
                             ru->pos, hs, ctx, C3, C, scale);
            }
        }
        sm_pool_barrier(pool);

        residual_matmul(s, s->att, L->proj_w, L->proj_b, C, ith, nth, scr);
        sm_pool_barrier(pool);

        norm_rows(K, s->xn, s->x, L->ln2_g, L->ln2_b, r0, r1, C, eps);
        sm_pool_barrier(pool);

        sm_pool_split(C4, COL_ALIGN, ith, nth, &n0, &n1);
        if (n0 < n1) {
            mm(s->hid, s->xn, L->up_w, L->up_b, T, C4, C, n0, n1, scr);
            for (size_t t = 0; t < T; t++) gelu(s->hid + t * C4 + n0, n1 - n0);
        }
        sm_pool_barrier(pool);

        residual_matmul(s, s->hid, L->down_w, L->down_b, C4, ith, nth, scr);
        sm_pool_barrier(pool);

        if (l + 1 < c->n_layer) {
            norm_rows(K, s->xn, s->x, m->layers[l + 1].ln1_g, m->layers[l + 1].ln1_b, r0, r1, C,
                      eps);
        } else if (s->every_row) {
            norm_rows(K, s->xn, s->x, m->lnf_g, m->lnf_b, r0, r1, C, eps);
        } else { /* the last row of each run, packed: row g for run g */
            size_t g0, g1;
            sm_pool_split(n_runs, 1, ith, nth, &g0, &g1);
            for (size_t g = g0; g < g1; g++)
                K->layernorm(s->xn + g * C, s->x + (runs[g].start + runs[g].len - 1) * C,
                             m->lnf_g, m->lnf_b, C, eps);
        }
        sm_pool_barrier(pool);
    }

    /* output layer: every row, or each run's last row as a lone last token gets it */
    sm_pool_split(V, COL_ALIGN, ith, nth, &n0, &n1);
    if (n0 == n1) return;
    if (s->every_row)
        K->matmul(s->logits, s->xn, m->out_w, NULL, T, V, C, n0, n1, scr);
    else
        K->matmul_rows(s->logits, s->xn, m->out_w, NULL, n_runs, V, C, n0, n1, scr);
}
