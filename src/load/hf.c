/*
** hf.c -- a Hugging Face directory into a plan (sm_plan.h): safetensors
** files (one, or shards named by model.safetensors.index.json), config.json
** mapped onto smallmind's config (GPT-2 and the Llama family: Llama,
** Mistral, Phi-3, Qwen 2/3, Gemma 3), tokenizer_config.json's chat
** template, and where the tokenizer is. Run in place (source.c) or written
** by the converter.
*/
#include "sm_plan.h"

#include "load_internal.h"

#include "json_internal.h"
#include "sm_tokenizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
** Keys of a Hugging Face config.json (cp: its path, for messages): absent
** or null takes the default (def < 0: required); present with the wrong
** type or out of range is an error naming the key.
*/
static sm_status hf_int(const cJSON *cfg, const char *cp, const char *key, int64_t def, int64_t lo,
                        int64_t hi, int64_t *out, sm_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (!v || cJSON_IsNull(v)) {
        if (def < 0) return sm_error_set(err, SM_ERR_FORMAT, "%s: missing key \"%s\"", cp, key);
        *out = def;
        return SM_OK;
    }
    double d = cJSON_IsNumber(v) ? v->valuedouble : -1;
    if (d != floor(d) || d < (double)lo || d > (double)hi)
        return sm_error_set(err, SM_ERR_FORMAT, "%s: \"%s\" must be a whole number from %lld to %lld",
                            cp, key, (long long)lo, (long long)hi);
    *out = (int64_t)d;
    return SM_OK;
}

/* A number in [lo, hi]. */
static sm_status hf_real(const cJSON *cfg, const char *cp, const char *key, double def, double lo,
                         double hi, double *out, sm_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (!v || cJSON_IsNull(v)) {
        *out = def;
        return SM_OK;
    }
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi))
        return sm_error_set(err, SM_ERR_FORMAT, "%s: \"%s\" must be a number from %g to %g", cp,
                            key, lo, hi);
    *out = v->valuedouble;
    return SM_OK;
}

static sm_status hf_bool(const cJSON *cfg, const char *cp, const char *key, bool def, bool *out,
                         sm_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    *out = def;
    if (!v || cJSON_IsNull(v)) return SM_OK;
    if (!cJSON_IsBool(v))
        return sm_error_set(err, SM_ERR_FORMAT, "%s: \"%s\" must be true or false", cp, key);
    *out = cJSON_IsTrue(v);
    return SM_OK;
}

/* A string key's value, "" when absent; *bad when present but not a string. */
static const char *hf_str(const cJSON *cfg, const char *key, bool *bad) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (v && !cJSON_IsNull(v) && !cJSON_IsString(v)) *bad = true;
    return cJSON_IsString(v) ? v->valuestring : "";
}

/*
** The tokenizer of Hugging Face directory dir, in this order: `tokenizer`
** (a llama2.c tokenizer.bin), tokenizer.json (read as it is), vocab.json +
** merges.txt (GPT-2's files).
*/
static sm_status plan_tokenizer(sm_plan *pl, const char *dir, const char *tokenizer, sm_error *err) {
    sm_config *c = &pl->cfg;
    char v[4400], m[4400], j[4400];
    snprintf(v, sizeof v, "%s/vocab.json", dir);
    snprintf(m, sizeof m, "%s/merges.txt", dir);
    snprintf(j, sizeof j, "%s/tokenizer.json", dir);
    if (tokenizer) {
        c->tokenizer = SM_TOKENIZER_SENTENCEPIECE;
        snprintf(c->tok_file[0], SM_FILE_NAME_MAX, "tokenizer.bin");
        snprintf(pl->tok_src[0], sizeof pl->tok_src[0], "%s", tokenizer);
    } else if (access(j, F_OK) == 0) {
        c->tokenizer = SM_TOKENIZER_HF;
        snprintf(c->tok_file[0], SM_FILE_NAME_MAX, "tokenizer.json");
        snprintf(pl->tok_src[0], sizeof pl->tok_src[0], "%s", j);
    } else if (access(v, F_OK) == 0 && access(m, F_OK) == 0) {
        c->tokenizer = SM_TOKENIZER_GPT2;
        snprintf(c->tok_file[0], SM_FILE_NAME_MAX, "vocab.json");
        snprintf(c->tok_file[1], SM_FILE_NAME_MAX, "merges.txt");
        snprintf(pl->tok_src[0], sizeof pl->tok_src[0], "%s", v);
        snprintf(pl->tok_src[1], sizeof pl->tok_src[1], "%s", m);
    } else {
        return sm_error_set(err, SM_ERR_IO,
                            "%s: no tokenizer (tokenizer.json, or vocab.json + merges.txt); give "
                            "a llama2.c tokenizer.bin with --tokenizer FILE",
                            dir);
    }
    return SM_OK;
}

/* A token's text in tokenizer_config.json: a string or {"content": string}. */
static const char *token_text(const cJSON *v) {
    if (cJSON_IsObject(v)) v = cJSON_GetObjectItemCaseSensitive(v, "content");
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static sm_status from_hf_gpt2(sm_plan *pl, st_set *set, const cJSON *hc, const char *cp, sm_error *err) {
    int64_t C, L, H, ctx, V, F;
    sm_status st;
    if ((st = hf_int(hc, cp, "n_embd", -1, 1, 65536, &C, err)) ||
        (st = hf_int(hc, cp, "n_layer", -1, 1, 1024, &L, err)) ||
        (st = hf_int(hc, cp, "n_head", -1, 1, 1024, &H, err)) ||
        (st = hf_int(hc, cp, "n_positions", 1024, 1, 1 << 20, &ctx, err)) ||
        (st = hf_int(hc, cp, "vocab_size", -1, 1, 1 << 24, &V, err)) ||
        (st = hf_int(hc, cp, "n_inner", 4 * C, 1, 1 << 20, &F, err)))
        return st;
    if (C % H)
        return sm_error_set(err, SM_ERR_FORMAT, "%s: n_embd (%lld) is not a multiple of n_head (%lld)",
                            cp, (long long)C, (long long)H);
    bool bad = false;
    double eps;
    const char *act = hf_str(hc, "activation_function", &bad);
    if (bad) return sm_error_set(err, SM_ERR_FORMAT, "%s: \"activation_function\" must be a string", cp);
    if ((st = hf_real(hc, cp, "layer_norm_epsilon", 1e-5, 1e-30, 0.999, &eps, err))) return st;
    sm_config *c = &pl->cfg;
    c->arch = SM_ARCH_GPT2;
    if (strcmp(act, "gelu_new") == 0 || strcmp(act, "gelu_pytorch_tanh") == 0 || !*act)
        c->activation = SM_ACT_GELU_TANH;
    else if (strcmp(act, "gelu") == 0)
        c->activation = SM_ACT_GELU_ERF;
    else
        return sm_error_set(err, SM_ERR_UNSUPPORTED,
                            "%s: activation_function \"%s\" is not supported", cp, act);
    /* options that change every logit: refused, never run as plain GPT-2 */
    const cJSON *inv = cJSON_GetObjectItemCaseSensitive(hc, "scale_attn_by_inverse_layer_idx");
    if (inv && !cJSON_IsBool(inv) && !cJSON_IsNull(inv))
        return sm_error_set(err, SM_ERR_FORMAT, "%s: \"scale_attn_by_inverse_layer_idx\" must be true or false", cp);
    if (cJSON_IsTrue(inv))
        return sm_error_set(err, SM_ERR_UNSUPPORTED, "%s: scale_attn_by_inverse_layer_idx true is not "
                            "supported (it scales each layer's attention by 1 / (layer + 1))", cp);
    const cJSON *sa = cJSON_GetObjectItemCaseSensitive(hc, "scale_attn_weights");
    if (cJSON_IsFalse(sa))
        return sm_error_set(err, SM_ERR_UNSUPPORTED, "%s: scale_attn_weights false is not supported", cp);
    c->n_layer = (int)L, c->n_head = (int)H, c->n_embd = (int)C, c->n_ctx = (int)ctx;
    c->n_vocab = (int)V, c->n_ff = (int)F, c->n_kv_head = (int)H, c->head_dim = (int)(C / H);
    c->norm_eps = (float)eps;
    c->bias = true;
    int64_t eos;
    if ((st = hf_int(hc, cp, "eos_token_id", 50256, 0, V - 1, &eos, err))) return st;
    c->tok_bos = c->tok_eos = (int32_t)eos;

    const char *pre = "transformer.";
    st_tensor *x;
    char src[SM_NAME_MAX], dst[SM_NAME_MAX];
#define TAKE(name, d0, d1) if ((st = sm_st_take(set, pre, name, d0, d1, &x, err))) return st
    TAKE("wte.weight", V, C);
    sm_plan_add_whole(pl, "tok_embd", V, C, x->data, x->dt, SM_OP_COPY);
    TAKE("wpe.weight", ctx, C);
    sm_plan_add_whole(pl, "pos_embd", ctx, C, x->data, x->dt, SM_OP_COPY);
    static const struct {
        const char *from, *to;
        int kind; /* 0 vector of C, 1 conv weight, 2 bias of rows */
        int rows;  /* output rows: 1 = C, 3 = 3C, 4 = F */
        int cols;  /* input: 1 = C, 4 = F */
    } map[] = {
        {"ln_1.weight", "ln1.weight", 0, 1, 0},        {"ln_1.bias", "ln1.bias", 0, 1, 0},
        {"attn.c_attn.weight", "attn_qkv.weight", 1, 3, 1},
        {"attn.c_attn.bias", "attn_qkv.bias", 2, 3, 0},
        {"attn.c_proj.weight", "attn_out.weight", 1, 1, 1},
        {"attn.c_proj.bias", "attn_out.bias", 2, 1, 0},
        {"ln_2.weight", "ln2.weight", 0, 1, 0},        {"ln_2.bias", "ln2.bias", 0, 1, 0},
        {"mlp.c_fc.weight", "mlp_up.weight", 1, 4, 1}, {"mlp.c_fc.bias", "mlp_up.bias", 2, 4, 0},
        {"mlp.c_proj.weight", "mlp_down.weight", 1, 1, 4},
        {"mlp.c_proj.bias", "mlp_down.bias", 2, 1, 0},
    };
    for (int64_t l = 0; l < L; l++) {
        for (size_t k = 0; k < sizeof map / sizeof map[0]; k++) {
            int64_t rows = map[k].rows == 1 ? C : map[k].rows == 3 ? 3 * C : F;
            int64_t in = map[k].cols == 4 ? F : C;
            snprintf(src, sizeof src, "h.%lld.%s", (long long)l, map[k].from);
            snprintf(dst, sizeof dst, "blk.%lld.%s", (long long)l, map[k].to);
            if (map[k].kind == 1) {
                TAKE(src, in, rows); /* Conv1D: [in, out] */
                sm_plan_add_whole(pl, dst, rows, in, x->data, x->dt, SM_OP_TRANSPOSE);
            } else {
                TAKE(src, rows, 0);
                sm_plan_add_whole(pl, dst, rows, 0, x->data, x->dt, SM_OP_COPY);
            }
        }
    }
    TAKE("ln_f.weight", C, 0);
    sm_plan_add_whole(pl, "ln_f.weight", C, 0, x->data, x->dt, SM_OP_COPY);
    TAKE("ln_f.bias", C, 0);
    sm_plan_add_whole(pl, "ln_f.bias", C, 0, x->data, x->dt, SM_OP_COPY);
    c->tied_output = true;
    st_tensor *head = sm_st_find(set, "lm_head.weight");
    if (head) { /* saved beside a tied wte: the same values, or a separate layer */
        st_tensor *wte = sm_st_find(set, "transformer.wte.weight");
        if (!wte) wte = sm_st_find(set, "wte.weight");
        if ((st = sm_st_take(set, "", "lm_head.weight", V, C, &x, err))) return st;
        bool same = x->dt == wte->dt && memcmp(x->data, wte->data, (size_t)V * sm_dtype_row_bytes(x->dt, (size_t)C)) == 0;
        if (!same) {
            c->tied_output = false;
            sm_plan_add_whole(pl, "output.weight", V, C, x->data, x->dt, SM_OP_COPY);
        }
    }
#undef TAKE
    /* buffers some files carry: the causal mask (attn.bias) and masked_bias */
    for (size_t i = 0; i < set->n; i++) {
        const char *nm = set->t[i].name;
        size_t n = strlen(nm);
        if ((n > 10 && strcmp(nm + n - 10, ".attn.bias") == 0) ||
            (n > 17 && strcmp(nm + n - 17, ".attn.masked_bias") == 0))
            set->t[i].used = true;
    }
    return SM_OK;
}

/* A Llama-family directory: Llama, or Qwen 2 (biases on Q, K and V; run in place only). */
/* eos_token_id: one id, or a list (Llama 3.1: end of text, of message, of turn) */
static sm_status hf_eos(const cJSON *hc, const char *cp, int64_t V, sm_config *c, sm_error *err) {
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(hc, "eos_token_id");
    if (!cJSON_IsArray(e)) {
        int64_t eos;
        sm_status st = hf_int(hc, cp, "eos_token_id", 2, 0, V - 1, &eos, err);
        c->tok_eos = (int32_t)eos;
        return st;
    }
    int n = 0;
    for (const cJSON *x = e->child; x; x = x->next, n++) {
        double d = cJSON_IsNumber(x) ? x->valuedouble : -1;
        if (d != floor(d) || d < 0 || d >= (double)V || n > SM_MAX_STOP)
            return sm_error_set(err, SM_ERR_FORMAT, "%s: \"eos_token_id\" must be an id from 0 to %lld or "
                                "a list of at most %d", cp, (long long)V - 1, SM_MAX_STOP + 1);
        if (n == 0) c->tok_eos = (int32_t)d;
        else c->tok_stop[c->n_stop++] = (int32_t)d;
    }
    if (n == 0) return sm_error_set(err, SM_ERR_FORMAT, "%s: \"eos_token_id\" is an empty list", cp);
    return SM_OK;
}

/* rope_scaling: none, "default", or "llama3" (its four numbers); other kinds refused by name. */
static sm_status hf_rope_scaling(const cJSON *hc, const char *cp, sm_config *c, sm_error *err) {
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(hc, "rope_scaling");
    if (!rs || cJSON_IsNull(rs)) return SM_OK;
    bool bad = false;
    const char *ty = hf_str(rs, "rope_type", &bad);
    if (!*ty) ty = hf_str(rs, "type", &bad);
    if (bad || !cJSON_IsObject(rs))
        return sm_error_set(err, SM_ERR_FORMAT, "%s: rope_scaling must be an object with a rope_type", cp);
    if (strcmp(ty, "default") == 0) return SM_OK;
    if (strcmp(ty, "llama3") != 0)
        return sm_error_set(err, SM_ERR_UNSUPPORTED, "%s: rope_scaling type \"%.20s\" is not supported "
                            "(supported: llama3)", cp, ty);
    double f, lo, hi;
    int64_t octx;
    sm_status st;
    if ((st = hf_real(rs, cp, "factor", -1, 1, 1e6, &f, err)) ||
        (st = hf_real(rs, cp, "low_freq_factor", -1, 1e-6, 1e6, &lo, err)) ||
        (st = hf_real(rs, cp, "high_freq_factor", -1, 1e-6, 1e6, &hi, err)) ||
        (st = hf_int(rs, cp, "original_max_position_embeddings", -1, 1, 1 << 24, &octx, err)))
        return st;
    if (f < 1 || lo < 1e-6 || hi <= lo)
        return sm_error_set(err, SM_ERR_FORMAT, "%s: rope_scaling needs factor >= 1 and high_freq_factor > "
                            "low_freq_factor > 0", cp);
    c->rope_factor = (float)f, c->rope_low_freq = (float)lo, c->rope_high_freq = (float)hi;
    c->rope_orig_ctx = (int)octx;
    return SM_OK;
}

/*
** Gemma 3's text model: embeddings times sqrt(hidden), attention scaled by
** query_pre_attn_scalar, a window on all layers but each
** sliding_window_pattern-th (or as layer_types lists them) with its own
** rope base, norms after attention and the MLP. Logit soft-capping refused.
*/
static sm_status hf_gemma(const cJSON *hc, const char *cp, int64_t L, sm_config *c, sm_error *err) {
    int64_t C, w, pat;
    double qs, local;
    sm_status st;
    static const char *const caps[] = {"final_logit_softcapping", "attn_logit_softcapping"};
    for (int i = 0; i < 2; i++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(hc, caps[i]);
        if (x && !cJSON_IsNull(x))
            return sm_error_set(err, SM_ERR_UNSUPPORTED, "%s: %s is not supported", cp, caps[i]);
    }
    if ((st = hf_int(hc, cp, "hidden_size", -1, 1, 65536, &C, err)) ||
        (st = hf_int(hc, cp, "sliding_window", 4096, 1, 1 << 24, &w, err)) ||
        (st = hf_int(hc, cp, "sliding_window_pattern", 6, 1, 1024, &pat, err)) ||
        (st = hf_real(hc, cp, "query_pre_attn_scalar", 256, 1, 1e6, &qs, err)) ||
        (st = hf_real(hc, cp, "rope_local_base_freq", 10000.0, 1, 1e12, &local, err)))
        return st;
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(hc, "layer_types");
    if (cJSON_IsArray(lt)) { /* the pattern the list follows: full attention on each pat-th layer */
        int64_t i = 0, first_full = -1;
        for (const cJSON *e = lt->child; e; e = e->next, i++)
            if (cJSON_IsString(e) && strcmp(e->valuestring, "full_attention") == 0 && first_full < 0) first_full = i;
        pat = first_full >= 0 ? first_full + 1 : L + 1;
        i = 0;
        for (const cJSON *e = lt->child; e; e = e->next, i++) {
            bool full = (i + 1) % pat == 0;
            if (!cJSON_IsString(e) || strcmp(e->valuestring, full ? "full_attention" : "sliding_attention") != 0)
                return sm_error_set(err, SM_ERR_UNSUPPORTED, "%s: layer_types[%lld] breaks the pattern of one "
                                    "full_attention layer in %lld (not supported)", cp, (long long)i, (long long)pat);
        }
        if (i != L) return sm_error_set(err, SM_ERR_FORMAT, "%s: layer_types has %lld entries for %lld layers",
                                        cp, (long long)i, (long long)L);
    }
    c->sliding_window = (int)w, c->swa_pattern = (int)pat;
    c->embd_scale = sqrtf((float)C), c->attn_scale = (float)(1.0 / sqrt(qs));
    c->rope_local_theta = (float)local, c->post_norms = true;
    return SM_OK;
}

/* A fused matrix x (C columns) as n tensors blk.l.names[k].weight of rows[k] rows each, in order. */
static void add_row_ranges(sm_plan *pl, int64_t l, const st_tensor *x, int64_t C, const char *const *names,
                           const int64_t *rows, int n) {
    const unsigned char *at = x->data;
    for (int k = 0; k < n; k++) {
        char d[SM_NAME_MAX];
        snprintf(d, sizeof d, "blk.%lld.%s.weight", (long long)l, names[k]);
        sm_plan_add_whole(pl, d, rows[k], C, at, x->dt, SM_OP_COPY);
        at += sm_dtype_row_bytes(x->dt, (size_t)C) * (size_t)rows[k];
    }
}

static sm_status from_hf_llama(sm_plan *pl, st_set *set, const cJSON *hc, const char *cp, const char *type,
                               sm_error *err) {
    bool qwen2 = strcmp(type, "qwen2") == 0, qwen3 = strcmp(type, "qwen3") == 0;
    bool mistral = strcmp(type, "mistral") == 0, phi3 = strcmp(type, "phi3") == 0;
    bool gemma = strcmp(type, "gemma3_text") == 0;
    int64_t C, L, H, KVH, hd, F, ctx, V, bos;
    sm_status st;
    if ((st = hf_int(hc, cp, "hidden_size", -1, 1, 65536, &C, err)) ||
        (st = hf_int(hc, cp, "num_hidden_layers", -1, 1, 1024, &L, err)) ||
        (st = hf_int(hc, cp, "num_attention_heads", -1, 1, 1024, &H, err)) ||
        (st = hf_int(hc, cp, "num_key_value_heads", H, 1, 1024, &KVH, err)))
        return st;
    const cJSON *hdv = cJSON_GetObjectItemCaseSensitive(hc, "head_dim");
    if ((!hdv || cJSON_IsNull(hdv)) && (C % H || C / H < 2))
        return sm_error_set(err, SM_ERR_FORMAT,
                            "%s: hidden_size (%lld) / num_attention_heads (%lld) is not a whole "
                            "head size of at least 2, and there is no head_dim",
                            cp, (long long)C, (long long)H);
    if ((st = hf_int(hc, cp, "head_dim", C / H, 2, 4096, &hd, err)) ||
        (st = hf_int(hc, cp, "intermediate_size", -1, 1, 1 << 20, &F, err)) ||
        (st = hf_int(hc, cp, "max_position_embeddings", 2048, 1, 1 << 20, &ctx, err)) ||
        (st = hf_int(hc, cp, "vocab_size", -1, 1, 1 << 24, &V, err)) ||
        (st = hf_int(hc, cp, "bos_token_id", gemma ? 2 : 1, 0, V - 1, &bos, err)) ||
        (st = hf_eos(hc, cp, V, &pl->cfg, err)) || (st = hf_rope_scaling(hc, cp, &pl->cfg, err)))
        return st;
    bool abias, mbias, tied, bad = false;
    double eps, theta, prf;
    if ((st = hf_real(hc, cp, "partial_rotary_factor", 1.0, 0, 1, &prf, err))) return st;
    if (prf != 1.0)
        return sm_error_set(err, SM_ERR_UNSUPPORTED, "%s: partial_rotary_factor %g is not supported (RoPE "
                            "over whole heads only)", cp, prf);
    if ((st = hf_bool(hc, cp, "attention_bias", false, &abias, err)) ||
        (st = hf_bool(hc, cp, "mlp_bias", false, &mbias, err)) ||
        (st = hf_real(hc, cp, "rms_norm_eps", 1e-6, 1e-30, 0.999, &eps, err)) ||
        (st = hf_real(hc, cp, "rope_theta", 10000.0, 1, 1e12, &theta, err)) ||
        (st = hf_bool(hc, cp, "tie_word_embeddings", gemma, &tied, err)))
        return st;
    if (abias || mbias)
        return sm_error_set(err, SM_ERR_UNSUPPORTED,
                            "%s: attention_bias / mlp_bias are not supported", cp);
    if (gemma && (st = hf_gemma(hc, cp, L, &pl->cfg, err))) return st;
    if (qwen2 || qwen3 || mistral || phi3 || gemma) {
        bool sliding = mistral || phi3;
        const cJSON *sw = cJSON_GetObjectItemCaseSensitive(hc, "sliding_window");
        if (!sliding && (st = hf_bool(hc, cp, "use_sliding_window", false, &sliding, err))) return st;
        if (sliding && sw && !cJSON_IsNull(sw)) {
            int64_t w;
            if (qwen2 || qwen3) /* Qwen's applies from max_window_layers on: not yet */
                return sm_error_set(err, SM_ERR_UNSUPPORTED, "%s: use_sliding_window true is not supported "
                                    "yet", cp);
            if ((st = hf_int(hc, cp, "sliding_window", -1, 1, 1 << 24, &w, err))) return st;
            pl->cfg.sliding_window = (int)w; /* every layer: each query sees its last w keys */
        }
        if (!pl->in_place)
            return sm_error_set(err, SM_ERR_UNSUPPORTED,
                                "%s: a %s model does not convert to a smallmind directory yet; run "
                                "the directory as it is (-m DIR)", cp, type);
    }
    if (pl->cfg.rope_factor > 0 && !pl->in_place)
        return sm_error_set(err, SM_ERR_UNSUPPORTED, "%s: a model with rope_scaling does not convert to a "
                            "smallmind directory yet; run the directory as it is (-m DIR)", cp);
    const char *act = hf_str(hc, gemma ? "hidden_activation" : "hidden_act", &bad);
    if (bad) return sm_error_set(err, SM_ERR_FORMAT, "%s: \"hidden_act\" must be a string", cp);
    if (gemma ? *act && strcmp(act, "gelu_pytorch_tanh") != 0 : *act && strcmp(act, "silu") != 0)
        return sm_error_set(err, SM_ERR_UNSUPPORTED, "%s: hidden_act \"%s\" is not supported", cp, act);
    if (H % KVH || hd % 2)
        return sm_error_set(err, SM_ERR_FORMAT,
                            "%s: num_attention_heads must be a multiple of "
                            "num_key_value_heads and head_dim even", cp);
    sm_config *c = &pl->cfg;
    c->arch = SM_ARCH_LLAMA;
    c->n_layer = (int)L, c->n_head = (int)H, c->n_kv_head = (int)KVH, c->n_embd = (int)C;
    c->head_dim = (int)hd, c->n_ff = (int)F, c->n_ctx = (int)ctx, c->n_vocab = (int)V;
    c->norm_eps = (float)eps;
    c->rope_theta = (float)theta;
    c->activation = gemma ? SM_ACT_GELU_TANH : SM_ACT_SILU, c->bias = false;
    c->tok_bos = (int32_t)bos;
    c->qk_norm = qwen3 || gemma;
    const int norm_op = gemma ? SM_OP_PLUS1 : SM_OP_COPY; /* Gemma's RMSNorm gains are 1 + w */

    const char *pre = "model.";
    int64_t Q = H * hd, KV = KVH * hd;
    st_tensor *x, *k, *v;
    sm_plan_tensor *t;
    char a[SM_NAME_MAX], b[SM_NAME_MAX], d[SM_NAME_MAX];
#define TAKE(name, d0, d1, var) if ((st = sm_st_take(set, pre, name, d0, d1, &var, err))) return st
    TAKE("embed_tokens.weight", V, C, x);
    sm_plan_add_whole(pl, "tok_embd", V, C, x->data, x->dt, SM_OP_COPY);
    static const struct {
        const char *from, *to;
        int rows, cols; /* 'C', 'F' or 'Q' */
    } map[] = {
        {"input_layernorm.weight", "attn_norm.weight", 'C', 0},
        {"self_attn.o_proj.weight", "attn_out.weight", 'C', 'Q'},
        {"post_attention_layernorm.weight", "ffn_norm.weight", 'C', 0},
        {"mlp.gate_proj.weight", "ffn_gate.weight", 'F', 'C'},
        {"mlp.up_proj.weight", "ffn_up.weight", 'F', 'C'},
        {"mlp.down_proj.weight", "ffn_down.weight", 'C', 'F'},
    };
    for (int64_t l = 0; l < L; l++) {
        for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
            if (phi3 && map[i].rows == 'F') continue; /* gate and up: one matrix, below */
            int64_t r = map[i].rows == 'C' ? C : map[i].rows == 'F' ? F : Q;
            int64_t cc = !map[i].cols ? 0 : map[i].cols == 'C' ? C : map[i].cols == 'F' ? F : Q;
            snprintf(a, sizeof a, "layers.%lld.%s", (long long)l, map[i].from);
            snprintf(d, sizeof d, "blk.%lld.%s", (long long)l, map[i].to);
            if (gemma && strcmp(map[i].to, "ffn_norm.weight") == 0) /* its post-attention norm */
                snprintf(d, sizeof d, "blk.%lld.attn_post_norm.weight", (long long)l);
            TAKE(a, r, cc, x);
            sm_plan_add_whole(pl, d, r, cc, x->data, x->dt, cc ? SM_OP_COPY : norm_op);
        }
        for (int j = 0; gemma && j < 2; j++) { /* the MLP's norms before and after it */
            snprintf(a, sizeof a, "layers.%lld.%s_feedforward_layernorm.weight", (long long)l, j ? "post" : "pre");
            snprintf(d, sizeof d, "blk.%lld.%s.weight", (long long)l, j ? "ffn_post_norm" : "ffn_norm");
            TAKE(a, C, 0, x);
            sm_plan_add_whole(pl, d, C, 0, x->data, x->dt, SM_OP_PLUS1);
        }
        if (phi3) { /* Phi-3: rows gate | up and q | k | v fused, used in place as row ranges */
            static const char *const gu[] = {"ffn_gate", "ffn_up"}, *const qkv[] = {"attn_q", "attn_k", "attn_v"};
            snprintf(a, sizeof a, "layers.%lld.mlp.gate_up_proj.weight", (long long)l);
            TAKE(a, 2 * F, C, x);
            add_row_ranges(pl, l, x, C, gu, (const int64_t[]){F, F}, 2);
            snprintf(a, sizeof a, "layers.%lld.self_attn.qkv_proj.weight", (long long)l);
            TAKE(a, Q + 2 * KV, C, x);
            add_row_ranges(pl, l, x, C, qkv, (const int64_t[]){Q, KV, KV}, 3);
            c->rope_halves = true;
            continue;
        }
        snprintf(a, sizeof a, "layers.%lld.self_attn.q_proj.weight", (long long)l);
        TAKE(a, Q, C, x);
        snprintf(b, sizeof b, "layers.%lld.self_attn.k_proj.weight", (long long)l);
        TAKE(b, KV, C, k);
        snprintf(b, sizeof b, "layers.%lld.self_attn.v_proj.weight", (long long)l);
        TAKE(b, KV, C, v);
        if (pl->in_place) { /* three matrices as stored; the forward rotates halves */
            const st_tensor *qkv[3] = {x, k, v};
            for (int j = 0; j < 3; j++) {
                snprintf(d, sizeof d, "blk.%lld.attn_%c.weight", (long long)l, "qkv"[j]);
                sm_plan_add_whole(pl, d, j ? KV : Q, C, qkv[j]->data, qkv[j]->dt, SM_OP_COPY);
                if (!qwen2) continue;
                snprintf(a, sizeof a, "layers.%lld.self_attn.%c_proj.bias", (long long)l, "qkv"[j]);
                TAKE(a, j ? KV : Q, 0, x);
                snprintf(d, sizeof d, "blk.%lld.attn_%c.bias", (long long)l, "qkv"[j]);
                sm_plan_add_whole(pl, d, j ? KV : Q, 0, x->data, x->dt, SM_OP_COPY);
            }
            for (int j = 0; c->qk_norm && j < 2; j++) { /* each head of Q and K normalised */
                snprintf(a, sizeof a, "layers.%lld.self_attn.%c_norm.weight", (long long)l, "qk"[j]);
                TAKE(a, hd, 0, x);
                snprintf(d, sizeof d, "blk.%lld.attn_%c_norm.weight", (long long)l, "qk"[j]);
                sm_plan_add_whole(pl, d, hd, 0, x->data, x->dt, norm_op);
            }
            c->rope_halves = true;
            c->qkv_bias = qwen2;
            continue;
        }
        snprintf(d, sizeof d, "blk.%lld.attn_qkv.weight", (long long)l);
        t = sm_plan_add_tensor(pl, d, Q + 2 * KV, C);
        sm_plan_add_part(t, x->data, x->dt, Q, C, SM_OP_ROPE, hd);
        sm_plan_add_part(t, k->data, k->dt, KV, C, SM_OP_ROPE, hd);
        sm_plan_add_part(t, v->data, v->dt, KV, C, SM_OP_COPY, 0);
    }
    TAKE("norm.weight", C, 0, x);
    sm_plan_add_whole(pl, "norm_f.weight", C, 0, x->data, x->dt, norm_op);
    c->tied_output = tied;
    st_tensor *head = sm_st_find(set, "lm_head.weight");
    if (!c->tied_output || head) {
        if ((st = sm_st_take(set, "", "lm_head.weight", V, C, &x, err))) return st;
        if (!c->tied_output) {
            sm_plan_add_whole(pl, "output.weight", V, C, x->data, x->dt, SM_OP_COPY);
        }
    }
#undef TAKE
    for (size_t i = 0; i < set->n; i++)
        if (strstr(set->t[i].name, "rotary_emb.inv_freq")) set->t[i].used = true;
    return SM_OK;
}

sm_status sm_plan_hf(sm_plan *pl, const char *dir, const char *tokenizer, sm_error *err) {
    /* the model types of the Llama family (from_hf_llama tells them apart) */
    static const char *const llamas[] = {"llama", "mistral", "phi3", "qwen2", "qwen3", "gemma3_text"};
    char path[4400], cp[4400];
    cJSON *hc = NULL, *idx = NULL;
    st_set set = {.where = dir};
    snprintf(cp, sizeof cp, "%s/config.json", dir);
    sm_status st = sm_json_read_file(cp, 1u << 20, &hc, err);
    if (st) goto done;
    bool bad = false;
    const char *type = hf_str(hc, "model_type", &bad);
    bool gpt2 = strcmp(type, "gpt2") == 0, llama = false;
    for (size_t i = 0; i < sizeof llamas / sizeof *llamas; i++) llama = llama || strcmp(type, llamas[i]) == 0;
    if (strcmp(type, "gemma3") == 0) {
        st = sm_error_set(err, SM_ERR_UNSUPPORTED, "%s: model_type \"gemma3\" (with a vision tower) is not "
                          "supported; the text-only models (gemma3_text: 270M, 1B) are", cp);
        goto done;
    }
    if (bad) {
        st = sm_error_set(err, SM_ERR_FORMAT, "%s: \"model_type\" must be a string", cp);
        goto done;
    }
    if (!gpt2 && !llama) {
        st = sm_error_set(err, SM_ERR_UNSUPPORTED,
                          "%s: model_type \"%s\" is not supported (supported: gpt2, llama, mistral, phi3, "
                          "qwen2, qwen3, gemma3_text)", cp,
                          type);
        goto done;
    }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (access(path, F_OK) == 0) {
        st = sm_st_read(pl, &set, path, err);
    } else { /* shards named by the index's weight_map */
        snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
        if (access(path, F_OK) != 0) {
            st = sm_error_set(err, SM_ERR_IO, "%s: no model.safetensors or model.safetensors.index.json",
                              dir);
            goto done;
        }
        if ((st = sm_json_read_file(path, 64u << 20, &idx, err))) goto done; /* names why */
        const cJSON *wm = cJSON_GetObjectItemCaseSensitive(idx, "weight_map");
        if (!cJSON_IsObject(wm)) {
            st = sm_error_set(err, SM_ERR_FORMAT, "%s: missing object \"weight_map\"", path);
            goto done;
        }
        char seen[SM_PLAN_FILES][256];
        int n_seen = 0;
        for (const cJSON *e = wm->child; e && !st; e = e->next) {
            const char *f = cJSON_IsString(e) ? e->valuestring : NULL;
            if (!f || strchr(f, '/') || strlen(f) >= 256 || !strcmp(f, ".") || !strcmp(f, "..")) {
                st = sm_error_set(err, SM_ERR_FORMAT, "%s: weight_map[\"%.60s\"] must be a file name",
                                  path, e->string);
                break;
            }
            bool dup = false;
            for (int i = 0; i < n_seen; i++) dup = dup || strcmp(seen[i], f) == 0;
            if (dup) continue;
            if (n_seen == SM_PLAN_FILES) {
                st = sm_error_set(err, SM_ERR_UNSUPPORTED, "%s: more than %d shards", path, SM_PLAN_FILES);
                break;
            }
            snprintf(seen[n_seen++], 256, "%s", f);
            char sp[4400];
            snprintf(sp, sizeof sp, "%s/%s", dir, f);
            st = sm_st_read(pl, &set, sp, err);
        }
    }
    if (st) goto done;
    st = gpt2 ? from_hf_gpt2(pl, &set, hc, cp, err) : from_hf_llama(pl, &set, hc, cp, type, err);
    if (!st) st = plan_tokenizer(pl, dir, tokenizer, err);
    if (!st) st = sm_plan_chat_config(dir, &pl->cfg, err);
    for (size_t i = 0; !st && i < set.n; i++)
        if (!set.t[i].used)
            st = sm_error_set(err, SM_ERR_UNSUPPORTED, "%s: unexpected tensor %s for %s", dir,
                              set.t[i].name, type);
done:
    free(set.t);
    cJSON_Delete(hc);
    cJSON_Delete(idx);
    return st;
}

sm_status sm_plan_chat_config(const char *dir, sm_config *c, sm_error *err) {
    char path[4400];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    if (access(path, F_OK) != 0) return SM_OK;
    cJSON *root;
    sm_status st = sm_json_read_file(path, SM_TOK_FILE_MAX, &root, err);
    if (st) return st;
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(root, "chat_template");
    const char *tpl = NULL;
    if (cJSON_IsString(ct)) tpl = ct->valuestring;
    else if (cJSON_IsArray(ct)) { /* named templates: the default one */
        for (const cJSON *e = ct->child; e; e = e->next) {
            const cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "name");
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(e, "template");
            if (cJSON_IsString(n) && cJSON_IsString(t) && !strcmp(n->valuestring, "default"))
                tpl = t->valuestring;
        }
        if (!tpl) st = sm_error_set(err, SM_ERR_FORMAT, "%s: chat_template lists no \"default\" template", path);
    } else if (ct && !cJSON_IsNull(ct))
        st = sm_error_set(err, SM_ERR_FORMAT, "%s: chat_template must be a string or a list of "
                          "{name, template}", path);
    if (!st && !cJSON_IsObject(root)) st = sm_error_set(err, SM_ERR_FORMAT, "%s: expected a JSON object", path);
    static const char *const toks[] = {"bos_token", "eos_token", "unk_token", "pad_token"};
    for (int i = 0; i < 4 && !st; i++) { /* a string, {"content": string}, or null */
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, toks[i]);
        if (v && !cJSON_IsNull(v) && !token_text(v))
            st = sm_error_set(err, SM_ERR_FORMAT, "%s: %s must be a string or {\"content\": string}",
                              path, toks[i]);
    }
    static const char *const flags[] = {"add_bos_token", "add_eos_token"};
    for (int i = 0; i < 2 && !st; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, flags[i]);
        if (v && !cJSON_IsNull(v) && !cJSON_IsBool(v))
            st = sm_error_set(err, SM_ERR_FORMAT, "%s: %s must be true or false", path, flags[i]);
    }
    const char *bos = token_text(cJSON_GetObjectItemCaseSensitive(root, "bos_token"));
    const char *eos = token_text(cJSON_GetObjectItemCaseSensitive(root, "eos_token"));
    if (!st && ((tpl && !(c->chat_template = strdup(tpl))) || (bos && !(c->chat_bos = strdup(bos))) ||
                (eos && !(c->chat_eos = strdup(eos)))))
        st = sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    cJSON_Delete(root);
    return st;
}
