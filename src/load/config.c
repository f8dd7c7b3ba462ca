/*
** config.c -- config.json -> sm_config, read with json.c's strict parser.
**
** cJSON's number handling is loose (valueint saturates, 768.5 is a number),
** and it accepts duplicate keys, so every value is checked here: integers
** must be whole and in range, keys unique, unknown keys are refused rather
** than ignored. Errors name the key path, e.g. "tensors[3].shape[1]".
*/
#include "sm_config.h"

#include "json_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *sm_tokenizer_type_name(sm_tokenizer_type t) {
    static const char *const types[] = {"byte", "sentencepiece", "gpt2", "huggingface"};
    return (unsigned)t <= SM_TOKENIZER_HF ? types[t] : "?";
}

const char *sm_arch_name(sm_arch a) {
    return a == SM_ARCH_GPT2 ? "gpt2" : a == SM_ARCH_LLAMA ? "llama" : "?";
}

const char *sm_activation_name(sm_activation a) {
    return a == SM_ACT_GELU_TANH ? "gelu_tanh"
           : a == SM_ACT_GELU_ERF ? "gelu_erf"
           : a == SM_ACT_SILU     ? "silu"
                                  : "?";
}

/* Parsing context: the file name for messages and the error sink. */
typedef struct {
    const char *path;
    sm_error *err;
} pctx;

#define FAIL(pc, ...) sm_error_set((pc)->err, SM_ERR_FORMAT, __VA_ARGS__)

/* Refuses keys not in `allowed` (NULL-terminated) so typos are not ignored. */
static sm_status check_keys(pctx *pc, const cJSON *obj, const char *where,
                            const char *const *allowed) {
    for (const cJSON *c = obj->child; c; c = c->next) {
        bool ok = false;
        for (const char *const *k = allowed; *k; k++)
            if (strcmp(c->string, *k) == 0) ok = true;
        if (!ok)
            return sm_error_set(pc->err, SM_ERR_UNSUPPORTED,
                                "%s: unsupported key \"%s%s%s\"", pc->path, where,
                                *where ? "." : "", c->string);
    }
    return SM_OK;
}

static const cJSON *get(pctx *pc, const cJSON *obj, const char *key, sm_status *st) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v) *st = FAIL(pc, "%s: missing key \"%s\"", pc->path, key);
    return v;
}

/* A whole number in [lo, hi]. `name` is the key path for messages. */
static sm_status number_to_i64(pctx *pc, const cJSON *v, const char *name, int64_t lo,
                               int64_t hi, int64_t *out) {
    if (!cJSON_IsNumber(v))
        return FAIL(pc, "%s: \"%s\" must be a number", pc->path, name);
    double d = v->valuedouble;
    if (!isfinite(d) || d != floor(d))
        return FAIL(pc, "%s: \"%s\" must be a whole number, got %.15g", pc->path, name, d);
    if (d < (double)lo || d > (double)hi)
        return FAIL(pc, "%s: \"%s\" is %.15g, expected %lld to %lld", pc->path, name, d,
                    (long long)lo, (long long)hi);
    *out = (int64_t)d;
    return SM_OK;
}

static sm_status get_int(pctx *pc, const cJSON *obj, const char *key, int lo, int hi,
                         int *out) {
    sm_status st = SM_OK;
    const cJSON *v = get(pc, obj, key, &st);
    if (!v) return st;
    int64_t x;
    st = number_to_i64(pc, v, key, lo, hi, &x);
    if (!st) *out = (int)x;
    return st;
}

static sm_status get_bool(pctx *pc, const cJSON *obj, const char *key, bool *out) {
    sm_status st = SM_OK;
    const cJSON *v = get(pc, obj, key, &st);
    if (!v) return st;
    if (!cJSON_IsBool(v)) return FAIL(pc, "%s: \"%s\" must be true or false", pc->path, key);
    *out = cJSON_IsTrue(v);
    return SM_OK;
}

static sm_status get_string(pctx *pc, const cJSON *obj, const char *key, const char **out) {
    sm_status st = SM_OK;
    const cJSON *v = get(pc, obj, key, &st);
    if (!v) return st;
    if (!cJSON_IsString(v) || !v->valuestring)
        return FAIL(pc, "%s: \"%s\" must be a string", pc->path, key);
    *out = v->valuestring;
    return SM_OK;
}

/* The value the model holds is a float: a positive double under its range (1e-66) would be 0,
   which the config written back refuses. */
static sm_status norm_eps(pctx *pc, const cJSON *v, float *out) {
    if (!cJSON_IsNumber(v) || !(v->valuedouble > 0 && v->valuedouble < 1) || !((float)v->valuedouble > 0))
        return FAIL(pc, "%s: \"norm_eps\" must be a number in (0, 1) (at least 1e-45, a float's smallest)",
                    pc->path);
    *out = (float)v->valuedouble;
    return SM_OK;
}

/* A plain file name in the model directory (no '/', not "." or ".."). */
static bool plain_name(const char *f) {
    size_t n = strlen(f);
    return n > 0 && n < SM_FILE_NAME_MAX && !strchr(f, '/') && strcmp(f, ".") != 0 &&
           strcmp(f, "..") != 0;
}

static sm_status tok_file(pctx *pc, const cJSON *tok, const char *key, char *dst) {
    const char *f;
    sm_status st = get_string(pc, tok, key, &f);
    if (st) return st;
    if (!plain_name(f))
        return FAIL(pc, "%s: tokenizer.%s \"%s\" must be a plain file name in the model directory",
                    pc->path, key, f);
    snprintf(dst, SM_FILE_NAME_MAX, "%s", f);
    return SM_OK;
}

/* An optional token id key: -1 when absent. */
static sm_status tok_id(pctx *pc, const cJSON *tok, const char *key, int32_t *out) {
    *out = -1;
    if (!cJSON_GetObjectItemCaseSensitive(tok, key)) return SM_OK;
    int v;
    sm_status st = get_int(pc, tok, key, 0, (1 << 24) - 1, &v);
    if (!st) *out = v;
    return st;
}

static sm_status parse_tokenizer(pctx *pc, const cJSON *root, sm_config *cfg) {
    sm_status st = SM_OK;
    const cJSON *tok = get(pc, root, "tokenizer", &st);
    if (!tok) return st;
    if (!cJSON_IsObject(tok)) return FAIL(pc, "%s: \"tokenizer\" must be an object", pc->path);
    const char *type;
    if ((st = get_string(pc, tok, "type", &type))) return st;
    static const char *const byte_keys[] = {"type", NULL};
    static const char *const sp_keys[] = {"type", "file", "bos", "eos", NULL};
    static const char *const bpe_keys[] = {"type", "vocab", "merges", "bos", "eos", NULL};
    cfg->tok_bos = cfg->tok_eos = -1;
    if (strcmp(type, "byte") == 0) {
        cfg->tokenizer = SM_TOKENIZER_BYTE;
        return check_keys(pc, tok, "tokenizer", byte_keys);
    }
    if (strcmp(type, "sentencepiece") == 0 || strcmp(type, "huggingface") == 0) {
        cfg->tokenizer = type[0] == 's' ? SM_TOKENIZER_SENTENCEPIECE : SM_TOKENIZER_HF;
        if ((st = check_keys(pc, tok, "tokenizer", sp_keys)) ||
            (st = tok_file(pc, tok, "file", cfg->tok_file[0])))
            return st;
    } else if (strcmp(type, "gpt2") == 0) {
        cfg->tokenizer = SM_TOKENIZER_GPT2;
        if ((st = check_keys(pc, tok, "tokenizer", bpe_keys)) ||
            (st = tok_file(pc, tok, "vocab", cfg->tok_file[0])) ||
            (st = tok_file(pc, tok, "merges", cfg->tok_file[1])))
            return st;
    } else {
        return sm_error_set(pc->err, SM_ERR_UNSUPPORTED,
                            "%s: unsupported tokenizer.type \"%s\" (supported: byte, "
                            "sentencepiece, gpt2, huggingface)",
                            pc->path, type);
    }
    if ((st = tok_id(pc, tok, "bos", &cfg->tok_bos)) || (st = tok_id(pc, tok, "eos", &cfg->tok_eos)))
        return st;
    if (cfg->tok_bos >= cfg->n_vocab || cfg->tok_eos >= cfg->n_vocab)
        return FAIL(pc, "%s: tokenizer.%s is outside the model's vocabulary (n_vocab %d)",
                    pc->path, cfg->tok_bos >= cfg->n_vocab ? "bos" : "eos", cfg->n_vocab);
    return SM_OK;
}

static int file_index(sm_config *cfg, const char *name) {
    for (int i = 0; i < cfg->n_files; i++)
        if (strcmp(cfg->files[i], name) == 0) return i;
    if (cfg->n_files == SM_MAX_FILES) return -1;
    snprintf(cfg->files[cfg->n_files], SM_FILE_NAME_MAX, "%s", name);
    return cfg->n_files++;
}

static sm_status parse_tensor(pctx *pc, const cJSON *t, size_t i, sm_config *cfg) {
    sm_tensor_desc *d = &cfg->tensors[i];
    char where[64];
    snprintf(where, sizeof where, "tensors[%zu]", i);
    if (!cJSON_IsObject(t)) return FAIL(pc, "%s: \"%s\" must be an object", pc->path, where);
    static const char *const keys[] = {"name", "dtype", "shape", "file", "offset", NULL};
    sm_status st = check_keys(pc, t, where, keys);
    if (st) return st;

    const char *name, *dtype, *file;
    if ((st = get_string(pc, t, "name", &name))) return st;
    size_t nlen = strlen(name);
    if (nlen == 0 || nlen >= SM_NAME_MAX)
        return FAIL(pc, "%s: %s.name must be 1 to %d bytes", pc->path, where, SM_NAME_MAX - 1);
    memcpy(d->name, name, nlen + 1);

    if ((st = get_string(pc, t, "dtype", &dtype))) return st;
    d->dtype = sm_dtype_parse(dtype);
    if (d->dtype == SM_DTYPE_COUNT)
        return sm_error_set(pc->err, SM_ERR_UNSUPPORTED,
                            "%s: tensor %s has unknown dtype \"%s\" (known: f32, f16, bf16, "
                            "q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_nl, iq4_xs)",
                            pc->path, d->name, dtype);

    const cJSON *shape = get(pc, t, "shape", &st);
    if (!shape) return st;
    if (!cJSON_IsArray(shape))
        return FAIL(pc, "%s: tensor %s: shape must be an array", pc->path, d->name);
    int nd = cJSON_GetArraySize(shape);
    if (nd < 1 || nd > SM_MAX_DIMS)
        return FAIL(pc, "%s: tensor %s has %d dimensions, expected 1 to %d", pc->path,
                    d->name, nd, SM_MAX_DIMS);
    d->ndim = nd;
    size_t n = 1;
    int k = 0;
    for (const cJSON *e = shape->child; e; e = e->next, k++) {
        char key[160];
        snprintf(key, sizeof key, "%s.shape[%d]", d->name, k);
        int64_t dim;
        if ((st = number_to_i64(pc, e, key, 1, INT32_MAX, &dim))) return st;
        d->shape[k] = dim;
        if (!sm_size_mul(&n, n, (size_t)dim))
            return FAIL(pc, "%s: tensor %s: shape product overflows", pc->path, d->name);
    }
    size_t blk = sm_dtype_block(d->dtype), row = (size_t)d->shape[nd - 1];
    if (row % blk)
        return FAIL(pc, "%s: tensor %s: dtype %s needs rows of whole %zu-weight blocks, not %zu",
                    pc->path, d->name, dtype, blk, row);
    if (!sm_size_mul(&d->nbytes, n / blk, sm_dtype_row_bytes(d->dtype, blk)))
        return FAIL(pc, "%s: tensor %s: shape product overflows", pc->path, d->name);
    d->nelem = n;

    if ((st = get_string(pc, t, "file", &file))) return st;
    if (!plain_name(file))
        return FAIL(pc, "%s: tensor %s: file \"%s\" must be a plain file name in the model directory",
                    pc->path, d->name, file);
    d->file = file_index(cfg, file);
    if (d->file < 0)
        return sm_error_set(pc->err, SM_ERR_UNSUPPORTED, "%s: more than %d weight files",
                            pc->path, SM_MAX_FILES);

    const cJSON *off = get(pc, t, "offset", &st);
    if (!off) return st;
    char key[160];
    snprintf(key, sizeof key, "%s.offset", d->name);
    int64_t o;
    /* 2^53: the largest offset a JSON double represents exactly. */
    if ((st = number_to_i64(pc, off, key, 0, INT64_C(1) << 53, &o))) return st;
    if (o % 64 != 0)
        return FAIL(pc, "%s: tensor %s: offset %lld is not 64-byte aligned", pc->path, d->name,
                    (long long)o);
    d->offset = (uint64_t)o;
    for (size_t j = 0; j < i; j++)
        if (strcmp(cfg->tensors[j].name, d->name) == 0)
            return FAIL(pc, "%s: duplicate tensor name \"%s\"", pc->path, d->name);
    return SM_OK;
}

/*
** n_kv_head, head_dim, n_ff, rope_theta: required for llama (head_dim
** defaults to n_embd / n_head); for gpt2 only n_ff may be given.
*/
static sm_status parse_heads(pctx *pc, const cJSON *root, sm_config *cfg) {
    bool llama = cfg->arch == SM_ARCH_LLAMA;
    sm_status st;
    if (!llama) {
        static const char *const llama_only[] = {"n_kv_head", "head_dim", "rope_theta", NULL};
        for (const char *const *k = llama_only; *k; k++)
            if (cJSON_GetObjectItemCaseSensitive(root, *k))
                return sm_error_set(pc->err, SM_ERR_UNSUPPORTED,
                                    "%s: \"%s\" is not supported for gpt2 models", pc->path, *k);
        if (cfg->n_embd % cfg->n_head != 0)
            return FAIL(pc, "%s: n_embd (%d) is not a multiple of n_head (%d)", pc->path,
                        cfg->n_embd, cfg->n_head);
        cfg->n_kv_head = cfg->n_head;
        cfg->head_dim = cfg->n_embd / cfg->n_head;
        cfg->n_ff = 4 * cfg->n_embd;
        if (cJSON_GetObjectItemCaseSensitive(root, "n_ff"))
            return get_int(pc, root, "n_ff", 1, 1 << 20, &cfg->n_ff);
        return SM_OK;
    }
    if ((st = get_int(pc, root, "n_kv_head", 1, 1024, &cfg->n_kv_head)) ||
        (st = get_int(pc, root, "n_ff", 1, 1 << 20, &cfg->n_ff)))
        return st;
    if (cJSON_GetObjectItemCaseSensitive(root, "head_dim")) {
        if ((st = get_int(pc, root, "head_dim", 1, 4096, &cfg->head_dim))) return st;
    } else {
        if (cfg->n_embd % cfg->n_head != 0)
            return FAIL(pc, "%s: n_embd (%d) is not a multiple of n_head (%d); give head_dim",
                        pc->path, cfg->n_embd, cfg->n_head);
        cfg->head_dim = cfg->n_embd / cfg->n_head;
    }
    if (cfg->n_head % cfg->n_kv_head != 0)
        return FAIL(pc, "%s: n_head (%d) is not a multiple of n_kv_head (%d)", pc->path,
                    cfg->n_head, cfg->n_kv_head);
    if (cfg->head_dim % 2 != 0)
        return FAIL(pc, "%s: head_dim (%d) must be even for rotary embeddings", pc->path,
                    cfg->head_dim);
    const cJSON *th = get(pc, root, "rope_theta", &st);
    if (!th) return st;
    if (!cJSON_IsNumber(th) || !(th->valuedouble >= 1 && th->valuedouble <= 1e12))
        return FAIL(pc, "%s: \"rope_theta\" must be a number in [1, 1e12]", pc->path);
    cfg->rope_theta = (float)th->valuedouble;
    return SM_OK;
}

static sm_status parse_root(pctx *pc, const cJSON *root, sm_config *cfg) {
    if (!cJSON_IsObject(root)) return FAIL(pc, "%s: expected a JSON object at the top", pc->path);
    const cJSON *hf = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    if (hf && !cJSON_GetObjectItemCaseSensitive(root, "format"))
        return FAIL(pc,
                    "%s: a Hugging Face model (model_type \"%s\"); convert it once with "
                    "'smallmind convert DIR OUT' and run OUT",
                    pc->path, cJSON_IsString(hf) ? hf->valuestring : "?");
    static const char *const keys[] = {
        "format", "format_version", "architecture", "n_layer", "n_head", "n_embd",
        "n_ctx", "n_vocab", "norm_eps", "activation", "tied_output", "bias",
        "tokenizer", "tensors", "n_kv_head", "head_dim", "n_ff", "rope_theta", "chat_template",
        NULL};
    sm_status st = check_keys(pc, root, "", keys);
    if (st) return st;

    const char *s;
    if ((st = get_string(pc, root, "format", &s))) return st;
    if (strcmp(s, SM_FORMAT_NAME) != 0)
        return FAIL(pc, "%s: \"format\" is \"%s\", expected \"%s\"", pc->path, s, SM_FORMAT_NAME);
    int version;
    if ((st = get_int(pc, root, "format_version", 1, 1000000, &version))) return st;
    if (version != SM_FORMAT_VERSION)
        return sm_error_set(pc->err, SM_ERR_UNSUPPORTED,
                            "%s: format_version %d is not supported (this build reads %d)",
                            pc->path, version, SM_FORMAT_VERSION);

    if ((st = get_string(pc, root, "architecture", &s))) return st;
    if (strcmp(s, "gpt2") == 0)
        cfg->arch = SM_ARCH_GPT2;
    else if (strcmp(s, "llama") == 0)
        cfg->arch = SM_ARCH_LLAMA;
    else
        return sm_error_set(pc->err, SM_ERR_UNSUPPORTED,
                            "%s: unsupported architecture \"%s\" (supported: gpt2, llama)",
                            pc->path, s);

    if ((st = get_int(pc, root, "n_layer", 1, 1024, &cfg->n_layer)) ||
        (st = get_int(pc, root, "n_head", 1, 1024, &cfg->n_head)) ||
        (st = get_int(pc, root, "n_embd", 1, 65536, &cfg->n_embd)) ||
        (st = get_int(pc, root, "n_ctx", 1, 1 << 20, &cfg->n_ctx)) ||
        (st = get_int(pc, root, "n_vocab", 1, 1 << 24, &cfg->n_vocab)))
        return st;
    if ((st = parse_heads(pc, root, cfg))) return st;

    const cJSON *eps = get(pc, root, "norm_eps", &st);
    if (!eps) return st;
    if ((st = norm_eps(pc, eps, &cfg->norm_eps))) return st;

    if ((st = get_string(pc, root, "activation", &s))) return st;
    if (strcmp(s, "gelu_tanh") == 0)
        cfg->activation = SM_ACT_GELU_TANH;
    else if (strcmp(s, "gelu_erf") == 0)
        cfg->activation = SM_ACT_GELU_ERF;
    else if (strcmp(s, "silu") == 0)
        cfg->activation = SM_ACT_SILU;
    else
        return sm_error_set(pc->err, SM_ERR_UNSUPPORTED,
                            "%s: unsupported activation \"%s\" (supported: gelu_tanh, "
                            "gelu_erf, silu)",
                            pc->path, s);
    if ((cfg->arch == SM_ARCH_LLAMA) != (cfg->activation == SM_ACT_SILU))
        return sm_error_set(pc->err, SM_ERR_UNSUPPORTED,
                            "%s: activation \"%s\" is not supported with architecture %s "
                            "(llama uses silu, gpt2 a gelu)",
                            pc->path, s, sm_arch_name(cfg->arch));
    if ((st = get_bool(pc, root, "tied_output", &cfg->tied_output)) ||
        (st = get_bool(pc, root, "bias", &cfg->bias)))
        return st;
    if (cfg->arch == SM_ARCH_LLAMA && cfg->bias)
        return sm_error_set(pc->err, SM_ERR_UNSUPPORTED,
                            "%s: \"bias\": true is not supported for llama models", pc->path);
    if ((st = parse_tokenizer(pc, root, cfg))) return st;
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(root, "chat_template");
    if (ct) {
        if (!cJSON_IsString(ct) || !ct->valuestring[0])
            return FAIL(pc, "%s: \"chat_template\" must be a non-empty string (a Jinja template)",
                        pc->path);
        if (!(cfg->chat_template = strdup(ct->valuestring)))
            return sm_error_set(pc->err, SM_ERR_NOMEM, "out of memory");
    }

    const cJSON *tensors = get(pc, root, "tensors", &st);
    if (!tensors) return st;
    if (!cJSON_IsArray(tensors)) return FAIL(pc, "%s: \"tensors\" must be an array", pc->path);
    int n = cJSON_GetArraySize(tensors);
    if (n < 1 || n > SM_MAX_TENSORS)
        return FAIL(pc, "%s: \"tensors\" has %d entries, expected 1 to %d", pc->path, n,
                    SM_MAX_TENSORS);
    cfg->tensors = calloc((size_t)n, sizeof *cfg->tensors);
    if (!cfg->tensors) return sm_error_set(pc->err, SM_ERR_NOMEM, "out of memory");
    cfg->n_tensors = (size_t)n;
    size_t i = 0;
    for (const cJSON *t = tensors->child; t; t = t->next, i++)
        if ((st = parse_tensor(pc, t, i, cfg))) return st;
    return SM_OK;
}

sm_status sm_config_parse(sm_config *cfg, const char *json, size_t len, const char *path,
                          sm_error *err) {
    memset(cfg, 0, sizeof *cfg);
    pctx pc = {path, err};
    if (len == 0) return FAIL(&pc, "%s: file is empty", path);
    cJSON *root;
    sm_status st = sm_json_parse_strict(json, len, path, &root, err);
    if (st) return st;
    st = parse_root(&pc, root, cfg);
    cJSON_Delete(root);
    if (st) sm_config_free(cfg);
    return st;
}

sm_status sm_config_load(sm_config *cfg, const char *dir, sm_error *err) {
    memset(cfg, 0, sizeof *cfg);
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/config.json", dir) >= sizeof path)
        return sm_error_set(err, SM_ERR_IO, "cannot open '%s': path too long", dir);
    char *buf;
    size_t len;
    sm_status st = sm_read_file(path, SM_CONFIG_MAX_BYTES, &buf, &len, err);
    if (st) return st;
    st = sm_config_parse(cfg, buf, len, path, err);
    free(buf);
    return st;
}

void sm_config_free(sm_config *cfg) {
    free(cfg->tensors);
    free(cfg->chat_template);
    free(cfg->chat_bos);
    free(cfg->chat_eos);
    memset(cfg, 0, sizeof *cfg);
}

static bool add_heads(cJSON *root, const sm_config *c) {
    if (c->arch != SM_ARCH_LLAMA)
        return !c->n_ff || c->n_ff == 4 * c->n_embd || cJSON_AddNumberToObject(root, "n_ff", c->n_ff);
    return cJSON_AddNumberToObject(root, "n_kv_head", c->n_kv_head) &&
           cJSON_AddNumberToObject(root, "head_dim", c->head_dim) &&
           cJSON_AddNumberToObject(root, "n_ff", c->n_ff) &&
           cJSON_AddNumberToObject(root, "rope_theta", c->rope_theta);
}

static bool add_tokenizer(cJSON *tok, const sm_config *c) {
    bool ok = cJSON_AddStringToObject(tok, "type", sm_tokenizer_type_name(c->tokenizer));
    if (c->tokenizer == SM_TOKENIZER_BYTE) return ok;
    if (c->tokenizer == SM_TOKENIZER_SENTENCEPIECE || c->tokenizer == SM_TOKENIZER_HF)
        ok = ok && cJSON_AddStringToObject(tok, "file", c->tok_file[0]);
    else
        ok = ok && cJSON_AddStringToObject(tok, "vocab", c->tok_file[0]) &&
             cJSON_AddStringToObject(tok, "merges", c->tok_file[1]);
    if (ok && c->tok_bos >= 0) ok = cJSON_AddNumberToObject(tok, "bos", c->tok_bos);
    if (ok && c->tok_eos >= 0) ok = cJSON_AddNumberToObject(tok, "eos", c->tok_eos);
    return ok;
}

sm_status sm_config_to_json(const sm_config *cfg, char **out, sm_error *err) {
    *out = NULL;
    cJSON *root = cJSON_CreateObject();
    cJSON *tok = cJSON_CreateObject(), *tensors = cJSON_CreateArray();
    bool ok = root && tok && tensors;
    if (ok) {
        ok = cJSON_AddStringToObject(root, "format", SM_FORMAT_NAME) &&
             cJSON_AddNumberToObject(root, "format_version", SM_FORMAT_VERSION) &&
             cJSON_AddStringToObject(root, "architecture", sm_arch_name(cfg->arch)) &&
             cJSON_AddNumberToObject(root, "n_layer", cfg->n_layer) &&
             cJSON_AddNumberToObject(root, "n_head", cfg->n_head) &&
             cJSON_AddNumberToObject(root, "n_embd", cfg->n_embd) &&
             cJSON_AddNumberToObject(root, "n_ctx", cfg->n_ctx) &&
             cJSON_AddNumberToObject(root, "n_vocab", cfg->n_vocab) &&
             cJSON_AddNumberToObject(root, "norm_eps", cfg->norm_eps) &&
             cJSON_AddStringToObject(root, "activation", sm_activation_name(cfg->activation)) &&
             cJSON_AddBoolToObject(root, "tied_output", cfg->tied_output) &&
             cJSON_AddBoolToObject(root, "bias", cfg->bias) && add_heads(root, cfg) &&
             add_tokenizer(tok, cfg) &&
             (!cfg->chat_template ||
              cJSON_AddStringToObject(root, "chat_template", cfg->chat_template));
        if (ok) {
            cJSON_AddItemToObject(root, "tokenizer", tok);
            tok = NULL;
        }
    }
    for (size_t i = 0; ok && i < cfg->n_tensors; i++) {
        const sm_tensor_desc *d = &cfg->tensors[i];
        cJSON *t = cJSON_CreateObject();
        cJSON *shape = cJSON_CreateArray();
        ok = t && shape;
        for (int k = 0; ok && k < d->ndim; k++) {
            cJSON *n = cJSON_CreateNumber((double)d->shape[k]);
            ok = n != NULL;
            if (ok) cJSON_AddItemToArray(shape, n);
        }
        if (ok) {
            ok = cJSON_AddStringToObject(t, "name", d->name) &&
                 cJSON_AddStringToObject(t, "dtype", sm_dtype_name(d->dtype));
            if (ok) {
                cJSON_AddItemToObject(t, "shape", shape);
                shape = NULL;
                ok = cJSON_AddStringToObject(t, "file", cfg->files[d->file]) &&
                     cJSON_AddNumberToObject(t, "offset", (double)d->offset);
            }
        }
        cJSON_Delete(shape);
        if (ok) {
            cJSON_AddItemToArray(tensors, t);
        } else {
            cJSON_Delete(t);
        }
    }
    if (ok) {
        cJSON_AddItemToObject(root, "tensors", tensors);
        tensors = NULL;
        *out = cJSON_Print(root);
        ok = *out != NULL;
    }
    cJSON_Delete(tok);
    cJSON_Delete(tensors);
    cJSON_Delete(root);
    return ok ? SM_OK : sm_error_set(err, SM_ERR_NOMEM, "out of memory writing config.json");
}

void sm_config_json_free(char *json) {
    cJSON_free(json);
}

sm_status sm_config_parse_shape(sm_config *cfg, const char *json, size_t len, const char *path,
                                sm_error *err) {
    pctx pc = {path, err};
    cJSON *root;
    sm_status st = sm_json_parse_strict(json, len, path, &root, err);
    if (st) return st;
    static const char *const keys[] = {"n_layer", "n_head", "n_embd", "n_ctx", "norm_eps",
                                       "tied_output", "bias", NULL};
    if (!cJSON_IsObject(root))
        st = FAIL(&pc, "%s: expected a JSON object at the top", path);
    if (!st) st = check_keys(&pc, root, "", keys);
    static const struct {
        const char *key;
        int hi;
    } ints[] = {{"n_layer", 1024}, {"n_head", 1024}, {"n_embd", 65536}, {"n_ctx", 1 << 20}};
    int *dst[] = {&cfg->n_layer, &cfg->n_head, &cfg->n_embd, &cfg->n_ctx};
    for (size_t i = 0; !st && i < 4; i++)
        if (cJSON_GetObjectItemCaseSensitive(root, ints[i].key))
            st = get_int(&pc, root, ints[i].key, 1, ints[i].hi, dst[i]);
    const cJSON *eps = cJSON_GetObjectItemCaseSensitive(root, "norm_eps");
    if (!st && eps) st = norm_eps(&pc, eps, &cfg->norm_eps);
    if (!st && cJSON_GetObjectItemCaseSensitive(root, "tied_output"))
        st = get_bool(&pc, root, "tied_output", &cfg->tied_output);
    if (!st && cJSON_GetObjectItemCaseSensitive(root, "bias"))
        st = get_bool(&pc, root, "bias", &cfg->bias);
    cJSON_Delete(root);
    return st;
}

bool sm_config_dup_chat(sm_config *c) {
    char **f[3] = {&c->chat_template, &c->chat_bos, &c->chat_eos};
    bool ok = true;
    for (int i = 0; i < 3; i++)
        if (*f[i] && !(*f[i] = strdup(*f[i]))) ok = false;
    return ok;
}
