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
** every thread walks the same steps and meets the others at barriers (the
** shared steps are in forward.c).
*/
#include "model_internal.h"

#include <stddef.h>

#define M(field) offsetof(sm_model, field)
#define L(field) offsetof(sm_layer, field)

sm_status sm_gpt2_bind(sm_model *m, sm_error *err) {
    const sm_config *c = m->cfg;
    int64_t C = c->n_embd, F = c->n_ff;
    m->q_dim = m->kv_dim = (size_t)C;
    const sm_bind_spec spec[] = {
        {"tok_embd", c->n_vocab, C, M(tok_embd), false, false},
        {"pos_embd", c->n_ctx, C, M(pos_embd), false, false},
        {"ln1.weight", C, 0, L(ln1_g), true, false},
        {"ln1.bias", C, 0, L(ln1_b), true, true},
        {"attn_qkv.weight", 3 * C, C, L(qkv_w), true, false},
        {"attn_qkv.bias", 3 * C, 0, L(qkv_b), true, true},
        {"attn_out.weight", C, C, L(proj_w), true, false},
        {"attn_out.bias", C, 0, L(proj_b), true, true},
        {"ln2.weight", C, 0, L(ln2_g), true, false},
        {"ln2.bias", C, 0, L(ln2_b), true, true},
        {"mlp_up.weight", F, C, L(up_w), true, false},
        {"mlp_up.bias", F, 0, L(up_b), true, true},
        {"mlp_down.weight", C, F, L(down_w), true, false},
        {"mlp_down.bias", C, 0, L(down_b), true, true},
        {"ln_f.weight", C, 0, M(lnf_g), false, false},
        {"ln_f.bias", C, 0, M(lnf_b), false, true},
    };
    return sm_bind_model(m, spec, sizeof spec / sizeof spec[0], err);
}

void sm_gpt2_forward_task(void *arg, int ith, int nth) {
    sm_state *s = arg;
    const sm_model *m = s->m;
    const sm_config *c = m->cfg;
    sm_pool *pool = s->pool;
    const size_t T = s->n, C = (size_t)c->n_embd, C3 = 3 * C, F = (size_t)c->n_ff;
    float *scr = s->scratch + (size_t)ith * s->scratch_floats;
    void (*gelu)(float *, size_t) =
        c->activation == SM_ACT_GELU_TANH ? s->k->gelu_tanh : s->k->gelu_erf;
    const sm_matmul_fn mm = sm_fwd_matmul(s);
    size_t r0, r1, n0, n1;

    sm_pool_split(T, 1, ith, nth, &r0, &r1);
    float *xn = sm_fwd_xn(s, ith);
    sm_fwd_embed_norm(s, m->layers[0].ln1_g, m->layers[0].ln1_b, ith, r0, r1);
    sm_fwd_prof(s, ith, SM_OP_NORM, 0, 0);

    for (int l = 0; l < c->n_layer; l++) {
        const sm_layer *L = &m->layers[l];
        while (sm_fwd_next_cols(s, C3, ith, nth, &n0, &n1))
            mm(s->qkv, xn, L->qkv_w.data, L->qkv_w.dt, L->qkv_b, T, C3, C, n0, n1, scr);
        sm_pool_barrier(pool);
        sm_fwd_prof_mm(s, ith, SM_OP_MATMUL, L->qkv_w, C3, C);

        sm_fwd_attention(s, l, ith, scr);
        sm_pool_barrier(pool);
        sm_fwd_prof_attention(s, ith);

        sm_fwd_residual_matmul(s, s->att, L->proj_w, L->proj_b, C, ith, nth, scr);
        sm_pool_barrier(pool);
        sm_fwd_prof_mm(s, ith, SM_OP_MATMUL, L->proj_w, C, C);

        sm_fwd_norm_next(s, L->ln2_g, L->ln2_b, ith, r0, r1);
        sm_fwd_prof(s, ith, SM_OP_NORM, 0, 0);

        while (sm_fwd_next_cols(s, F, ith, nth, &n0, &n1)) {
            mm(s->hid, xn, L->up_w.data, L->up_w.dt, L->up_b, T, F, C, n0, n1, scr);
            sm_fwd_prof(s, ith, SM_OP_MATMUL, 0, 0); /* thread 0's chunks: product, then */
            for (size_t t = 0; t < T; t++) gelu(s->hid + t * F + n0, n1 - n0);
            sm_fwd_prof(s, ith, SM_OP_ACT, 0, 0); /* activation */
        }
        sm_pool_barrier(pool);
        sm_fwd_prof_mm(s, ith, SM_OP_MATMUL, L->up_w, F, C);

        sm_fwd_residual_matmul(s, s->hid, L->down_w, L->down_b, F, ith, nth, scr);
        sm_fwd_poll_cancel(s, ith);
        sm_pool_barrier(pool);
        sm_fwd_prof_mm(s, ith, SM_OP_MATMUL, L->down_w, C, F);
        if (s->stop) return; /* every thread read the same answer after the barrier */

        if (l + 1 < c->n_layer) {
            sm_fwd_norm_next(s, m->layers[l + 1].ln1_g, m->layers[l + 1].ln1_b, ith, r0, r1);
            sm_fwd_prof(s, ith, SM_OP_NORM, 0, 0);
        }
    }
    sm_fwd_output(s, m->lnf_g, m->lnf_b, ith, nth, scr);
}
