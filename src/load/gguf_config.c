/*
** gguf_config.c -- a GGUF file's metadata and tensor infos as an sm_config
** (sm_gguf_config): the architecture's hyperparameters from the <arch>.*
** keys, GGUF tensor names mapped to smallmind's, shapes outermost first,
** offsets into the file itself, so the tensors are used where they lie.
*/
#include "sm_gguf.h"
#include "sm_config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
** GGUF's tensor names and ours, per architecture (after any "blk.N."
** prefix); an entry with needs exists only in a model with those features
** (sm_config flags: qkv_bias, qk_norm, gate_up, post_norms; NEED_SPLIT: gate
** and up apart).
*/
enum { NEED_BIAS = 1, NEED_NORM = 2, NEED_GATE_UP = 4, NEED_SPLIT = 8, NEED_POST = 16 };
typedef struct {
    const char *gguf, *ours;
    int needs;
} name_pair;
static const name_pair llama_names[] = {
    {"token_embd.weight", "tok_embd", 0},        {"output_norm.weight", "norm_f.weight", 0},
    {"output.weight", "output.weight", 0},       {"attn_norm.weight", "attn_norm.weight", 0},
    {"attn_q.weight", "attn_q.weight", 0},       {"attn_k.weight", "attn_k.weight", 0},
    {"attn_v.weight", "attn_v.weight", 0},       {"attn_qkv.weight", "attn_qkv.weight", 0},
    {"attn_output.weight", "attn_out.weight", 0}, {"ffn_norm.weight", "ffn_norm.weight", 0},
    {"ffn_gate.weight", "ffn_gate.weight", NEED_SPLIT},
    {"ffn_up.weight", "ffn_up.weight", NEED_SPLIT},
    {"ffn_up.weight", "ffn_gate_up.weight", NEED_GATE_UP}, /* phi3: gate | up */
    {"ffn_down.weight", "ffn_down.weight", 0},   {"attn_q.bias", "attn_q.bias", NEED_BIAS},
    {"attn_k.bias", "attn_k.bias", NEED_BIAS},   {"attn_v.bias", "attn_v.bias", NEED_BIAS},
    {"attn_q_norm.weight", "attn_q_norm.weight", NEED_NORM},
    {"attn_k_norm.weight", "attn_k_norm.weight", NEED_NORM},
    {"rope_freqs.weight", "rope_freqs", 0},
    {"post_attention_norm.weight", "attn_post_norm.weight", NEED_POST}, /* gemma3 */
    {"post_ffw_norm.weight", "ffn_post_norm.weight", NEED_POST},
};
static const name_pair gpt2_names[] = {
    {"token_embd.weight", "tok_embd", 0},         {"position_embd.weight", "pos_embd", 0},
    {"output_norm.weight", "ln_f.weight", 0},     {"output_norm.bias", "ln_f.bias", 0},
    {"output.weight", "output.weight", 0},        {"attn_norm.weight", "ln1.weight", 0},
    {"attn_norm.bias", "ln1.bias", 0},            {"attn_qkv.weight", "attn_qkv.weight", 0},
    {"attn_qkv.bias", "attn_qkv.bias", 0},        {"attn_output.weight", "attn_out.weight", 0},
    {"attn_output.bias", "attn_out.bias", 0},     {"ffn_norm.weight", "ln2.weight", 0},
    {"ffn_norm.bias", "ln2.bias", 0},             {"ffn_up.weight", "mlp_up.weight", 0},
    {"ffn_up.bias", "mlp_up.bias", 0},            {"ffn_down.weight", "mlp_down.weight", 0},
    {"ffn_down.bias", "mlp_down.bias", 0},
};

bool sm_gguf_tensor_name(const sm_config *c, const char *name, bool to_ours, char out[SM_NAME_MAX]) {
    const char *rest = name;
    int layer = -1, used = 0;
    if (sscanf(name, "blk.%d.%n", &layer, &used) == 1 && used > 0 && layer >= 0)
        rest = name + used;
    else
        layer = -1;
    bool llama = c->arch == SM_ARCH_LLAMA;
    int has = (c->qkv_bias ? NEED_BIAS : 0) | (c->qk_norm ? NEED_NORM : 0) | (c->post_norms ? NEED_POST : 0) |
              (c->gate_up ? NEED_GATE_UP : NEED_SPLIT);
    size_t n = llama ? sizeof llama_names / sizeof *llama_names : sizeof gpt2_names / sizeof *gpt2_names;
    for (size_t i = 0; i < n; i++) {
        const name_pair *e = llama ? &llama_names[i] : &gpt2_names[i];
        const char *from = to_ours ? e->gguf : e->ours, *to = to_ours ? e->ours : e->gguf;
        bool per_layer = strncmp(e->gguf, "attn_", 5) == 0 || strncmp(e->gguf, "ffn_", 4) == 0 ||
                         strncmp(e->gguf, "post_", 5) == 0;
        if (per_layer != (layer >= 0) || strcmp(rest, from) != 0 || (e->needs & ~has)) continue;
        if (layer >= 0)
            snprintf(out, SM_NAME_MAX, "blk.%d.%s", layer, to);
        else
            snprintf(out, SM_NAME_MAX, "%s", to);
        return true;
    }
    return false;
}

static sm_status int_key(const sm_gguf *g, const char *arch, const char *key, bool required,
                         int64_t lo, int64_t hi, int dflt, int *out, const char *path, sm_error *err) {
    char k[128];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    int64_t v = dflt;
    bool found;
    sm_status st = sm_gguf_int(g, k, lo, hi, &v, &found, path, err);
    if (st) return st;
    if (!found && required) return sm_error_set(err, SM_ERR_FORMAT, "%s: metadata %s is missing", path, k);
    *out = (int)v;
    return SM_OK;
}

/* The tokenizer's kind and special ids (its tables are read by sm_tokenizer_init). */
static sm_status tokenizer_kind(sm_config *cfg, const sm_gguf *g, const char *path, sm_error *err) {
    const char *s;
    size_t sl;
    bool found;
    sm_status st = sm_gguf_string(g, "tokenizer.ggml.model", &s, &sl, &found, path, err);
    if (st) return st;
    if (!found)
        cfg->tokenizer = SM_TOKENIZER_BYTE;
    else if (sl == 5 && memcmp(s, "llama", 5) == 0)
        cfg->tokenizer = SM_TOKENIZER_SENTENCEPIECE;
    else if (sl == 4 && memcmp(s, "gpt2", 4) == 0)
        cfg->tokenizer = SM_TOKENIZER_GPT2;
    else
        return sm_error_set(err, SM_ERR_UNSUPPORTED, "%s: tokenizer.ggml.model %.*s is not supported "
                            "(supported: llama, gpt2)", path, (int)(sl < 40 ? sl : 40), s);
    if ((st = sm_gguf_token_id(g, "tokenizer.ggml.bos_token_id", cfg->n_vocab, &cfg->tok_bos, path, err)) ||
        (st = sm_gguf_token_id(g, "tokenizer.ggml.eos_token_id", cfg->n_vocab, &cfg->tok_eos, path, err)))
        return st;
    /* the chat template, kept as text (parsed when a chat needs it) */
    if ((st = sm_gguf_string(g, "tokenizer.chat_template", &s, &sl, &found, path, err))) return st;
    if (found && sl) {
        if (memchr(s, 0, sl))
            return sm_error_set(err, SM_ERR_FORMAT, "%s: tokenizer.chat_template holds a NUL byte", path);
        if (!(cfg->chat_template = strndup(s, sl)))
            return sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    }
    return SM_OK;
}

sm_status sm_gguf_vocab_config(sm_config *cfg, const sm_gguf *g, const char *path, sm_error *err) {
    memset(cfg, 0, sizeof *cfg);
    cfg->tok_bos = cfg->tok_eos = -1;
    const sm_gguf_tensor *te = sm_gguf_tensor_find(g, "token_embd.weight");
    const sm_gguf_kv *tok = sm_gguf_find(g, "tokenizer.ggml.tokens");
    uint64_t n = te && te->ndim == 2 ? te->ne[1] : tok && tok->type == SM_GGUF_ARRAY ? tok->n : 0;
    if (n == 0 || n > (1 << 24))
        return sm_error_set(err, SM_ERR_FORMAT, "%s: no vocabulary (tokenizer.ggml.tokens) of 1 to %d "
                            "tokens", path, 1 << 24);
    cfg->n_vocab = (int)n;
    return tokenizer_kind(cfg, g, path, err);
}

sm_status sm_gguf_config(sm_config *cfg, const sm_gguf *g, const char *path, sm_error *err) {
    memset(cfg, 0, sizeof *cfg);
    cfg->tok_bos = cfg->tok_eos = -1;
    const char *a;
    size_t al;
    bool found;
    sm_status st = sm_gguf_string(g, "general.architecture", &a, &al, &found, path, err);
    if (st) return st;
    if (!found) return sm_error_set(err, SM_ERR_FORMAT, "%s: metadata general.architecture is missing", path);
    char arch[64];
    snprintf(arch, sizeof arch, "%.*s", (int)(al < 63 ? al : 63), a);
    bool qwen = strcmp(arch, "qwen2") == 0 || strcmp(arch, "qwen3") == 0;
    bool phi3 = strcmp(arch, "phi3") == 0, gemma = strcmp(arch, "gemma3") == 0;
    if (strcmp(arch, "llama") == 0 || qwen || phi3 || gemma)
        cfg->arch = SM_ARCH_LLAMA;
    else if (strcmp(arch, "gpt2") == 0)
        cfg->arch = SM_ARCH_GPT2;
    else
        return sm_error_set(err, SM_ERR_UNSUPPORTED,
                            "%s: architecture %s is not supported (supported: llama, gemma3, phi3, qwen2, qwen3, "
                            "gpt2)", path,
                            arch);
    /* qwen2/3: Q and K rows as Hugging Face stores them (pairs i, i + hd/2); qwen2 has biases on
       Q, K, V, qwen3 norms each head of Q and K */
    cfg->rope_halves = qwen || phi3 || gemma; /* phi3: fused Q|K|V, rotated by halves; gate|up fused */
    cfg->gate_up = phi3;
    /* gemma3 as llama.cpp runs it: norm gains stored as 1 + w, Q/K norms, norms after attention and
       the MLP, GELU-gated MLP, embeddings times sqrt(n_embd), a window on 5 layers of 6 with rope
       base 10000 there */
    cfg->post_norms = gemma;
    cfg->qkv_bias = qwen && sm_gguf_tensor_find(g, "blk.0.attn_q.bias");
    cfg->qk_norm = gemma || (qwen && sm_gguf_tensor_find(g, "blk.0.attn_q_norm.weight"));
    bool llama = cfg->arch == SM_ARCH_LLAMA;
    const sm_gguf_tensor *te = sm_gguf_tensor_find(g, "token_embd.weight");
    if (!te || te->ndim != 2)
        return sm_error_set(err, SM_ERR_FORMAT, "%s: tensor token_embd.weight is %s", path,
                            te ? "not a matrix" : "missing");
    if (te->ne[1] > (1 << 24))
        return sm_error_set(err, SM_ERR_FORMAT, "%s: token_embd.weight has %llu rows (at most %d)",
                            path, (unsigned long long)te->ne[1], 1 << 24);
    cfg->n_vocab = (int)te->ne[1];
    if ((st = int_key(g, arch, "embedding_length", true, 1, 65536, 0, &cfg->n_embd, path, err)) ||
        (st = int_key(g, arch, "block_count", true, 1, 1024, 0, &cfg->n_layer, path, err)) ||
        (st = int_key(g, arch, "context_length", true, 1, 1 << 20, 0, &cfg->n_ctx, path, err)) ||
        (st = int_key(g, arch, "feed_forward_length", true, 1, 1 << 20, 0, &cfg->n_ff, path, err)) ||
        (st = int_key(g, arch, "attention.head_count", true, 1, 1024, 0, &cfg->n_head, path, err)) ||
        (st = int_key(g, arch, "attention.head_count_kv", false, 1, 1024, cfg->n_head, &cfg->n_kv_head,
                      path, err)))
        return st;
    if ((int64_t)te->ne[0] != cfg->n_embd)
        return sm_error_set(err, SM_ERR_FORMAT, "%s: token_embd.weight rows are %llu wide, but %s."
                            "embedding_length is %d", path, (unsigned long long)te->ne[0], arch, cfg->n_embd);
    char kl[128];
    snprintf(kl, sizeof kl, "%s.attention.key_length", arch);
    if (cfg->n_embd % cfg->n_head && (!llama || !sm_gguf_find(g, kl))) /* heads sized by key_length */
        return sm_error_set(err, SM_ERR_FORMAT, "%s: %s.embedding_length %d is not a multiple of "
                            "the %d heads (and %s.attention.key_length does not size them)", path, arch,
                            cfg->n_embd, cfg->n_head, arch);
    int hd = cfg->n_embd / cfg->n_head, vd = 0, rd = 0;
    if ((st = int_key(g, arch, "attention.key_length", false, 1, 4096, hd, &cfg->head_dim, path, err)) ||
        (st = int_key(g, arch, "attention.value_length", false, 1, 4096, cfg->head_dim, &vd, path, err)) ||
        (st = int_key(g, arch, "rope.dimension_count", false, 1, 4096, cfg->head_dim, &rd, path, err)))
        return st;
    if (vd != cfg->head_dim)
        return sm_error_set(err, SM_ERR_UNSUPPORTED, "%s: %s.attention.value_length %d differs from "
                            "the key length %d (not supported)", path, arch, vd, cfg->head_dim);
    if (cfg->n_head % cfg->n_kv_head)
        return sm_error_set(err, SM_ERR_FORMAT, "%s: %s.attention.head_count %d is not a multiple of "
                            "head_count_kv %d", path, arch, cfg->n_head, cfg->n_kv_head);
    if (!llama && (cfg->n_kv_head != cfg->n_head || cfg->head_dim != hd))
        return sm_error_set(err, SM_ERR_UNSUPPORTED, "%s: a gpt2 model with grouped or resized heads "
                            "(not supported)", path);
    if (llama && (rd != cfg->head_dim || cfg->head_dim % 2))
        return sm_error_set(err, SM_ERR_UNSUPPORTED, "%s: %s.rope.dimension_count %d with heads of %d "
                            "(partial or odd rotary embeddings are not supported)", path, arch, rd,
                            cfg->head_dim);
    char k[128];
    const char *s;
    size_t sl;
    snprintf(k, sizeof k, "%s.rope.scaling.type", arch);
    if ((st = sm_gguf_string(g, k, &s, &sl, &found, path, err))) return st;
    if (found && !(sl == 4 && memcmp(s, "none", 4) == 0))
        return sm_error_set(err, SM_ERR_UNSUPPORTED, "%s: %s %.*s is not supported", path, k,
                            (int)(sl < 40 ? sl : 40), s);
    double v = 10000.0;
    snprintf(k, sizeof k, "%s.rope.freq_base", arch);
    if ((st = sm_gguf_float(g, k, &v, NULL, path, err))) return st;
    if (!(v >= 1 && v <= 1e12))
        return sm_error_set(err, SM_ERR_FORMAT, "%s: %s is %g, expected 1 to 1e12", path, k, v);
    cfg->rope_theta = (float)v;
    if ((st = int_key(g, arch, "attention.sliding_window", false, 0, 1 << 24, 0, &cfg->sliding_window,
                      path, err)))
        return st;
    if (gemma) {
        cfg->swa_pattern = 6, cfg->rope_local_theta = 10000.0f;
        cfg->embd_scale = sqrtf((float)cfg->n_embd), cfg->attn_scale = 1.0f / sqrtf((float)cfg->head_dim);
    }
    v = 1e-5;
    snprintf(k, sizeof k, "%s.attention.%s", arch, llama ? "layer_norm_rms_epsilon" : "layer_norm_epsilon");
    if ((st = sm_gguf_float(g, k, &v, NULL, path, err))) return st;
    if (!(v > 0 && v < 1) || !((float)v > 0)) /* a float64 key under a float's range would be 0 */
        return sm_error_set(err, SM_ERR_FORMAT, "%s: %s is %g, expected between 0 and 1 (at least 1e-45)", path,
                            k, v);
    cfg->norm_eps = (float)v;
    cfg->activation = llama && !gemma ? SM_ACT_SILU : SM_ACT_GELU_TANH;
    cfg->bias = !llama;
    cfg->tied_output = !sm_gguf_tensor_find(g, "output.weight");

    if ((st = tokenizer_kind(cfg, g, path, err))) return st;

    /* tensors: every one mapped to a name of ours, shapes outermost first */
    const char *slash = strrchr(path, '/');
    snprintf(cfg->files[0], SM_FILE_NAME_MAX, "%s", slash ? slash + 1 : path);
    cfg->n_files = 1;
    cfg->tensors = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *cfg->tensors);
    if (!cfg->tensors) return sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    cfg->n_tensors = g->n_tensors;
    for (size_t i = 0; i < g->n_tensors; i++) {
        const sm_gguf_tensor *t = &g->tensors[i];
        sm_tensor_desc *d = &cfg->tensors[i];
        char nm[SM_NAME_MAX];
        snprintf(nm, sizeof nm, "%.*s", (int)t->name_len, t->name);
        if (!sm_gguf_tensor_name(cfg, nm, true, d->name))
            return sm_error_set(err, SM_ERR_UNSUPPORTED, "%s: tensor %.*s is not part of a %s model "
                                "smallmind runs", path, (int)t->name_len, t->name, arch);
        d->dtype = t->dtype;
        d->ndim = t->ndim;
        for (int j = 0; j < t->ndim; j++) d->shape[j] = (int64_t)t->ne[t->ndim - 1 - j];
        d->nelem = t->nelem, d->nbytes = t->nbytes;
        d->file = 0, d->offset = t->offset;
    }
    return SM_OK;
}
