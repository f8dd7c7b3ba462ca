/*
** llama.c -- the Llama architecture's tensors (and its relatives': Qwen,
** Mistral, Phi-3, Gemma 3, SmolLM), bound for forward.c's shared steps.
**
** Block (pre-RMSNorm):  x += wo(attn(rope(q), rope(k), v));  x += down(silu(gate(n)) * up(n))
** with n = rmsnorm(x), then a final RMSNorm and the output layer (tied to
** the token embedding or not). Grouped-query attention: n_head query heads
** share n_kv_head key/value heads, group by group. Rotary embeddings rotate
** pairs (2i, 2i+1) of each head (llama2.c's layout; `convert` permutes
** Hugging Face's rotate-halves Q and K rows into it, or the config says
** rope_halves).
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
                            ly->gate_w.dt, NULL};
    }
    return st;
}
