/*
** gpt2.c -- the GPT-2 architecture's tensors.
**
** Block (pre-LayerNorm):  x += proj(attn(ln1(x)));  x += down(gelu(up(ln2(x))))
** then ln_f and the output layer, with learned position embeddings and
** biases everywhere. forward.c runs it: what it binds here (biases, the
** LayerNorms' b, no gate) is what makes the shared steps GPT-2's.
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
