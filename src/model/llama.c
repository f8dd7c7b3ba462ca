/*
** llama.c -- the Llama architecture: tensor binding and the forward pass.
**
** Block (pre-RMSNorm):  x += wo(attn(rope(q), rope(k), v));  x += down(silu(gate(n)) * up(n))
** with n = rmsnorm(x), then a final RMSNorm and the output layer (tied to
** the token embedding or not). Grouped-query attention: n_head query heads
** share n_kv_head key/value heads, group by group. Rotary embeddings rotate
** pairs (2i, 2i+1) of each head (llama2.c's layout; `convert` permutes
** Hugging Face's rotate-halves Q and K rows into it). The call structure,
** runs and thread split are those of gpt2.c (forward.c).
*/
#include "model_internal.h"

#include <stddef.h>

#define M(field) offsetof(sm_model, field)
#define L(field) offsetof(sm_layer, field)

sm_status sm_llama_bind(sm_model *m, sm_error *err) {
    const sm_config *c = m->cfg;
    int64_t C = c->n_embd, F = c->n_ff;
    m->q_dim = (size_t)c->n_head * (size_t)c->head_dim;
    m->kv_dim = (size_t)c->n_kv_head * (size_t)c->head_dim;
    int64_t Q = (int64_t)m->q_dim, W = (int64_t)(m->q_dim + 2 * m->kv_dim);
    int64_t KV = (int64_t)m->kv_dim;
    /* Q, K and V fused in one matrix (smallmind directories) or three (GGUF, Hugging Face) */
    bool fused = sm_weights_find(m->w, "blk.0.attn_q.weight") < 0;
    sm_bind_spec spec[20];
    size_t n = 0;
    spec[n++] = (sm_bind_spec){"tok_embd", c->n_vocab, C, M(tok_embd), false, false};
    spec[n++] = (sm_bind_spec){"attn_norm.weight", C, 0, L(ln1_g), true, false};
    if (fused) {
        spec[n++] = (sm_bind_spec){"attn_qkv.weight", W, C, L(qkv_w), true, false};
    } else {
        spec[n++] = (sm_bind_spec){"attn_q.weight", Q, C, L(q_w), true, false};
        spec[n++] = (sm_bind_spec){"attn_k.weight", KV, C, L(k_w), true, false};
        spec[n++] = (sm_bind_spec){"attn_v.weight", KV, C, L(v_w), true, false};
        if (c->qkv_bias) {
            spec[n++] = (sm_bind_spec){"attn_q.bias", Q, 0, L(q_b), true, false};
            spec[n++] = (sm_bind_spec){"attn_k.bias", KV, 0, L(k_b), true, false};
            spec[n++] = (sm_bind_spec){"attn_v.bias", KV, 0, L(v_b), true, false};
        }
    }
    if (c->qk_norm) {
        spec[n++] = (sm_bind_spec){"attn_q_norm.weight", c->head_dim, 0, L(q_norm), true, false};
        spec[n++] = (sm_bind_spec){"attn_k_norm.weight", c->head_dim, 0, L(k_norm), true, false};
    }
    spec[n++] = (sm_bind_spec){"attn_out.weight", C, Q, L(proj_w), true, false};
    spec[n++] = (sm_bind_spec){"ffn_norm.weight", C, 0, L(ln2_g), true, false};
    if (c->post_norms) {
        spec[n++] = (sm_bind_spec){"attn_post_norm.weight", C, 0, L(attn_post), true, false};
        spec[n++] = (sm_bind_spec){"ffn_post_norm.weight", C, 0, L(ffn_post), true, false};
    }
    if (c->gate_up) { /* one (2F, C) matrix: up_w is its second half, set below */
        spec[n++] = (sm_bind_spec){"ffn_gate_up.weight", 2 * F, C, L(gate_w), true, false};
    } else {
        spec[n++] = (sm_bind_spec){"ffn_gate.weight", F, C, L(gate_w), true, false};
        spec[n++] = (sm_bind_spec){"ffn_up.weight", F, C, L(up_w), true, false};
    }
    spec[n++] = (sm_bind_spec){"ffn_down.weight", C, F, L(down_w), true, false};
    spec[n++] = (sm_bind_spec){"norm_f.weight", C, 0, M(lnf_g), false, false};
    if (sm_weights_find(m->w, "rope_freqs") >= 0) /* GGUF: Llama 3.1's scaling as divisors */
        spec[n++] = (sm_bind_spec){"rope_freqs", c->head_dim / 2, 0, M(rope_div), false, false};
    sm_status st = sm_bind_model(m, spec, n, err);
    for (int l = 0; !st && c->gate_up && l < c->n_layer; l++) {
        sm_layer *ly = &m->layers[l];
        ly->up_w = (sm_mat){(const char *)ly->gate_w.data + (size_t)F * sm_dtype_row_bytes(ly->gate_w.dt, (size_t)C),
                            ly->gate_w.dt};
    }
    return st;
}

void sm_llama_forward_task(void *arg, int ith, int nth) {
    sm_state *s = arg;
    const sm_model *m = s->m;
    const sm_config *c = m->cfg;
    sm_pool *pool = s->pool;
    const size_t T = s->n, C = (size_t)c->n_embd, F = (size_t)c->n_ff;
    const size_t Q = m->q_dim, W = m->q_dim + 2 * m->kv_dim;
    float *scr = s->scratch + (size_t)ith * s->scratch_floats;
    const sm_matmul_fn mm = sm_fwd_matmul(s);
    size_t r0, r1, n0, n1;

    sm_pool_split(T, 1, ith, nth, &r0, &r1);
    float *xn = sm_fwd_xn(s, ith);
    sm_fwd_embed_norm(s, m->layers[0].ln1_g, NULL, ith, r0, r1);
    sm_fwd_prof(s, ith, SM_OP_NORM, 0, 0);

    for (int l = 0; l < c->n_layer; l++) {
        const sm_layer *L = &m->layers[l];
        while (sm_fwd_next_cols(s, W, ith, nth, &n0, &n1))
            sm_fwd_qkv(s, L, xn, n0, n1, scr);
        sm_pool_barrier(pool);
        if (L->qkv_w.data) {
            sm_fwd_prof_mm(s, ith, SM_OP_MATMUL, L->qkv_w, W, C);
        } else {
            sm_fwd_prof_mm(s, ith, SM_OP_MATMUL, L->q_w, Q, C);
            sm_fwd_prof_mm(s, ith, SM_OP_MATMUL, L->k_w, m->kv_dim, C);
            sm_fwd_prof_mm(s, ith, SM_OP_MATMUL, L->v_w, m->kv_dim, C);
        }

        sm_fwd_attention(s, l, ith, scr);
        sm_pool_barrier(pool);
        sm_fwd_prof_attention(s, ith);

        if (L->attn_post) /* Gemma: the attention output normalised before it is added */
            sm_fwd_residual_matmul_norm(s, s->att, L->proj_w, L->attn_post, Q, ith, nth, scr);
        else
            sm_fwd_residual_matmul(s, s->att, L->proj_w, NULL, Q, ith, nth, scr);
        sm_pool_barrier(pool);
        sm_fwd_prof_mm(s, ith, SM_OP_MATMUL, L->proj_w, C, Q);

        sm_fwd_norm_next(s, L->ln2_g, NULL, ith, r0, r1);
        sm_fwd_prof(s, ith, SM_OP_NORM, 0, 0);

        /* gate and up over the same chunk, so the SwiGLU needs no barrier */
        while (sm_fwd_next_cols(s, F, ith, nth, &n0, &n1)) {
            mm(s->hid, xn, L->gate_w.data, L->gate_w.dt, NULL, T, F, C, n0, n1, scr);
            mm(s->up, xn, L->up_w.data, L->up_w.dt, NULL, T, F, C, n0, n1, scr);
            sm_fwd_prof(s, ith, SM_OP_MATMUL, 0, 0); /* thread 0's chunks: products, then */
            for (size_t t = 0; t < T; t++) {
                float *h = s->hid + t * F + n0;
                const float *u = s->up + t * F + n0;
                if (c->activation == SM_ACT_GELU_TANH) { /* Gemma: GELU-gated */
                    s->k->gelu_tanh(h, n1 - n0);
                    for (size_t i = 0; i < n1 - n0; i++) h[i] *= u[i];
                } else {
                    s->k->swiglu(h, u, n1 - n0);
                }
            }
            sm_fwd_prof(s, ith, SM_OP_ACT, 0, 0); /* activation */
        }
        sm_pool_barrier(pool);
        sm_fwd_prof_mm(s, ith, SM_OP_MATMUL, L->gate_w, F, C);
        sm_fwd_prof_mm(s, ith, SM_OP_MATMUL, L->up_w, F, C);

        if (L->ffn_post)
            sm_fwd_residual_matmul_norm(s, s->hid, L->down_w, L->ffn_post, F, ith, nth, scr);
        else
            sm_fwd_residual_matmul(s, s->hid, L->down_w, NULL, F, ith, nth, scr);
        sm_fwd_poll_cancel(s, ith);
        sm_pool_barrier(pool);
        sm_fwd_prof_mm(s, ith, SM_OP_MATMUL, L->down_w, C, F);
        if (s->stop) return; /* every thread read the same answer after the barrier */

        if (l + 1 < c->n_layer) {
            sm_fwd_norm_next(s, m->layers[l + 1].ln1_g, NULL, ith, r0, r1);
            sm_fwd_prof(s, ith, SM_OP_NORM, 0, 0);
        }
    }
    sm_fwd_output(s, m->lnf_g, NULL, ith, nth, scr);
}
