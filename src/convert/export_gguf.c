/*
** export_gguf.c -- a smallmind model directory as a GGUF v3 file that
** llama.cpp runs (sm_convert writes OUT.gguf this way, from a temporary
** directory of the types asked for).
**
** Metadata: general.*, the architecture's hyperparameters under <arch>.*,
** and the tokenizer as tokenizer.ggml.*: a SentencePiece-style vocabulary
** as "llama" (spaces written as U+2581, byte pieces <0xNN>, scores, token
** types), a byte-level BPE as "gpt2" (tokens and merges in GPT-2's byte
** alphabet), the byte tokenizer as a "gpt2" vocabulary of its 256 bytes
** and no merges (so every byte is its own token, id = byte); the chat
** template, if the model has one, as tokenizer.chat_template. Tensors under
** GGUF's names, dims innermost first, data 32-byte aligned, the bytes copied
** as they are (smallmind's types are GGUF's, byte for byte); a Llama's fused
** Q/K/V matrix is written as attn_q, attn_k and attn_v (row ranges); a tied
** GPT-2 gets output.weight, a copy of the embedding (llama.cpp's gpt2
** requires it).
*/
#include "convert_internal.h"

#include "sm_gguf.h"
#include "sm_half.h"
#include "sm_source.h"
#include "sm_tokenizer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    unsigned char *p;
    size_t n, cap;
    bool nomem;
} buf;

static void put(buf *b, const void *p, size_t n) {
    if (b->nomem) return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 1 << 16;
        while (cap < b->n + n) cap *= 2;
        unsigned char *q = realloc(b->p, cap);
        if (!q) {
            b->nomem = true;
            return;
        }
        b->p = q, b->cap = cap;
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void put_u32(buf *b, uint32_t v) {
    unsigned char x[4];
    sm_write_u32le(x, v);
    put(b, x, 4);
}

static void put_u64(buf *b, uint64_t v) {
    unsigned char x[8];
    sm_write_u64le(x, v);
    put(b, x, 8);
}

static void put_str(buf *b, const char *s, size_t n) {
    put_u64(b, n);
    put(b, s, n);
}

static void key(buf *b, const char *k, uint32_t type) {
    put_str(b, k, strlen(k));
    put_u32(b, type);
}

static void kv_u32(buf *b, size_t *n, const char *k, uint32_t v) {
    key(b, k, SM_GGUF_U32), put_u32(b, v), (*n)++;
}

static void kv_f32(buf *b, size_t *n, const char *k, float v) {
    key(b, k, SM_GGUF_F32), put_u32(b, sm_f32_to_bits(v)), (*n)++;
}

static void kv_str(buf *b, size_t *n, const char *k, const char *v) {
    key(b, k, SM_GGUF_STRING), put_str(b, v, strlen(v)), (*n)++;
}

static void kv_bool(buf *b, size_t *n, const char *k, bool v) {
    unsigned char x = v;
    key(b, k, SM_GGUF_BOOL), put(b, &x, 1), (*n)++;
}

static void arr_head(buf *b, size_t *n, const char *k, uint32_t elem, size_t count) {
    key(b, k, SM_GGUF_ARRAY), put_u32(b, elem), put_u64(b, count), (*n)++;
}

/* n bytes as a GGUF string in GPT-2's byte alphabet. */
static void put_alphabet(buf *b, const char *p, size_t n) {
    char tmp[2 * 4096 + 8];
    if (n > 4096) n = 4096; /* pieces are at most MAX_PIECE bytes */
    put_str(b, tmp, sm_tokenizer_alphabet(p, n, tmp));
}

/* llama.cpp's token type: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte. A
   tokenizer.bin has no types: its unknown, BOS and EOS pieces are typed as SentencePiece's
   model types them, so parsing special text turns "</s>" into EOS as llama.cpp's files do. */
static uint32_t token_type(const sm_tokenizer *t, size_t id) {
    sm_tok_kind kd = sm_tokenizer_kind(t, (int32_t)id);
    if (kd == SM_TOK_BYTE) return 6;
    if (kd == SM_TOK_USER) return 4;
    if (kd == SM_TOK_UNUSED) return 5;
    bool bin = t->type == SM_TOKENIZER_SENTENCEPIECE, control = kd == SM_TOK_CONTROL;
    size_t len = t->off[id + 1] - t->off[id];
    bool unk = (int32_t)id == t->unk || (len == 5 && memcmp(t->text + t->off[id], "<unk>", 5) == 0);
    if (unk && (control || bin)) return 2;
    if (control || (bin && ((int32_t)id == t->bos || (int32_t)id == t->eos))) return 3;
    return 1;
}

/* A token's text as the GGUF vocabulary spells it (model "llama" or "gpt2"). */
static void put_token(buf *b, const sm_tokenizer *t, size_t id, bool spm) {
    const char *p = t->text + t->off[id];
    size_t len = t->off[id + 1] - t->off[id];
    sm_tok_kind kd = sm_tokenizer_kind(t, (int32_t)id);
    char tmp[3 * 4096 + 8];
    size_t o = 0;
    if (t->type == SM_TOKENIZER_SENTENCEPIECE && token_type(t, id) == 3 && len > 2 && p[0] == '\n' &&
        p[len - 1] == '\n') {
        put_str(b, p + 1, len - 2); /* llama2.c's tokenizer.bin spells BOS "\n<s>\n": SentencePiece's "<s>" */
    } else if (kd == SM_TOK_UNUSED && len == 0) { /* an id no token has: as llama.cpp's converter names it */
        put_str(b, tmp, (size_t)snprintf(tmp, sizeof tmp, "[PAD%zu]", id));
    } else if (kd == SM_TOK_CONTROL || kd == SM_TOK_USER || kd == SM_TOK_UNUSED || kd == SM_TOK_UNREACHABLE) {
        /* their text as it is: an unreachable token as tokenizer.json spells it, as llama.cpp's converter does */
        put_str(b, p, len);
    } else if (!spm) {
        put_alphabet(b, p, len);
    } else if (kd == SM_TOK_BYTE) {
        put_str(b, tmp, (size_t)snprintf(tmp, sizeof tmp, "<0x%02X>", (unsigned char)p[0]));
    } else if (t->type == SM_TOKENIZER_HF) { /* pieces as tokenizer.json spells them (U+2581) */
        put_str(b, p, len);
    } else { /* tokenizer.bin: spaces */
        for (size_t k = 0; k < len && o + 3 < sizeof tmp; k++) {
            if (p[k] == ' ') tmp[o++] = (char)0xE2, tmp[o++] = (char)0x96, tmp[o++] = (char)0x81;
            else tmp[o++] = p[k];
        }
        put_str(b, tmp, o);
    }
}

static sm_status put_merges(buf *b, size_t *n, const sm_tokenizer *t, sm_error *err) {
    size_t nm = sm_tokenizer_merges(t, NULL, 0);
    int32_t (*pairs)[2] = malloc((nm ? nm : 1) * sizeof *pairs);
    if (!pairs || sm_tokenizer_merges(t, pairs, nm) != nm) {
        free(pairs);
        return sm_error_set(err, SM_ERR_NOMEM, "out of memory writing the GGUF file");
    }
    arr_head(b, n, "tokenizer.ggml.merges", SM_GGUF_STRING, nm);
    char line[4 * 4096 + 8];
    for (size_t i = 0; i < nm; i++) { /* "A B" */
        size_t l = 0;
        for (int k = 0; k < 2; k++) {
            int32_t id = pairs[i][k];
            if (k) line[l++] = ' ';
            l += sm_tokenizer_alphabet(t->text + t->off[id], t->off[id + 1] - t->off[id], line + l);
        }
        put_str(b, line, l);
    }
    free(pairs);
    return SM_OK;
}

/*
** tokenizer.ggml.* from the loaded tokenizer, as llama.cpp reads it (see
** sm_tokenizer_gguf_kind): a tokenizer.json's byte-level BPE as "gpt2" with
** its merges and the name of the pre-tokenizer that splits as its own does;
** its SentencePiece-style BPE as "llama" with scores that order the merges
** by rank; anything else refused, naming what has no GGUF form.
*/
static sm_status put_tokenizer(buf *b, size_t *n, const sm_tokenizer *t, const sm_config *c,
                               const char *dir, bool *nfc_lost, sm_error *err) {
    sm_tokenizer_gguf k;
    sm_error e;
    if (sm_tokenizer_gguf_kind(t, &k, &e))
        return sm_error_set(err, SM_ERR_UNSUPPORTED, "%s: no GGUF vocabulary for this tokenizer: %s", dir,
                            e.msg);
    bool spm = strcmp(k.model, "llama") == 0;
    *nfc_lost = k.lossy_nfc;
    size_t V = t->type == SM_TOKENIZER_BYTE ? 256 : (size_t)t->n_vocab;
    kv_str(b, n, "tokenizer.ggml.model", k.model);
    kv_str(b, n, "tokenizer.ggml.pre", k.pre);
    arr_head(b, n, "tokenizer.ggml.tokens", SM_GGUF_STRING, V);
    for (size_t id = 0; id < V; id++) {
        if (t->type == SM_TOKENIZER_BYTE) {
            char ch = (char)id;
            put_alphabet(b, &ch, 1);
        } else {
            put_token(b, t, id, spm);
        }
    }
    if (spm) {
        float *score = t->type == SM_TOKENIZER_HF ? malloc(V * sizeof *score) : NULL;
        if (t->type == SM_TOKENIZER_HF && !score)
            return sm_error_set(err, SM_ERR_NOMEM, "out of memory writing the GGUF file");
        if (score) sm_tokenizer_rank_scores(t, score);
        arr_head(b, n, "tokenizer.ggml.scores", SM_GGUF_F32, V);
        for (size_t id = 0; id < V; id++) put_u32(b, sm_f32_to_bits(score ? score[id] : t->score[id]));
        free(score);
        kv_bool(b, n, "tokenizer.ggml.add_space_prefix", k.space_prefix);
    }
    arr_head(b, n, "tokenizer.ggml.token_type", SM_GGUF_I32, V);
    size_t unk = V; /* the first unknown piece */
    for (size_t id = 0; id < V; id++) {
        uint32_t ty = t->type == SM_TOKENIZER_BYTE ? 1 : token_type(t, id);
        if (ty == 2 && unk == V) unk = id;
        put_u32(b, ty);
    }
    sm_status st;
    if (!spm && (st = put_merges(b, n, t, err))) return st;
    int32_t bos = t->bos >= 0 ? t->bos : c->tok_bos, eos = t->eos >= 0 ? t->eos : c->tok_eos;
    if (bos >= 0) kv_u32(b, n, "tokenizer.ggml.bos_token_id", (uint32_t)bos);
    if (eos >= 0) kv_u32(b, n, "tokenizer.ggml.eos_token_id", (uint32_t)eos);
    if (unk < V) kv_u32(b, n, "tokenizer.ggml.unknown_token_id", (uint32_t)unk);
    kv_bool(b, n, "tokenizer.ggml.add_bos_token", t->add_bos && bos >= 0);
    /* llama.cpp appends eos only: a post-processor's several tokens after the text (Command R)
       are not kept, as llama.cpp's converter does not keep them */
    bool eos_only = !t->n_suffix || (t->n_suffix == 1 && t->suffix[0] == eos);
    kv_bool(b, n, "tokenizer.ggml.add_eos_token", t->add_eos && eos >= 0 && eos_only);
    return SM_OK;
}

typedef struct {
    char name[SM_NAME_MAX];
    int ndim;
    uint64_t ne[2];
    sm_dtype dt;
    const unsigned char *data;
    size_t nbytes, off;
} gtensor;

#define EXPORT_CHUNK (16u << 20) /* bytes written between looks at the cancel flag */

sm_status sm_export_gguf(const char *dir, const char *name, const char *out, const volatile int *cancel,
                         bool *nfc_lost, sm_error *err) {
    sm_source *src;
    sm_tokenizer tok;
    memset(&tok, 0, sizeof tok);
    sm_status st = sm_source_open(&src, dir, NULL, err);
    if (st) return st;
    const sm_config *c = &src->cfg;
    gtensor *gt = calloc(c->n_tensors * 3 + 1, sizeof *gt);
    buf b = {0};
    FILE *f = NULL;
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s.tmp-%ld", out, (long)getpid());
    if (!gt) st = sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    if (!st) st = sm_source_tokenizer(src, &tok, err);
    if (st) goto done;
    bool llama = c->arch == SM_ARCH_LLAMA;
    const char *arch = llama ? "llama" : "gpt2";
    size_t nkv = 0, nt = 0;
    char k[128];
    kv_str(&b, &nkv, "general.architecture", arch);
    kv_str(&b, &nkv, "general.name", "smallmind");
    kv_u32(&b, &nkv, "general.alignment", 32);
#define KEY(s) (snprintf(k, sizeof k, "%s.%s", arch, s), k)
    kv_u32(&b, &nkv, KEY("context_length"), (uint32_t)c->n_ctx);
    kv_u32(&b, &nkv, KEY("embedding_length"), (uint32_t)c->n_embd);
    kv_u32(&b, &nkv, KEY("block_count"), (uint32_t)c->n_layer);
    kv_u32(&b, &nkv, KEY("feed_forward_length"), (uint32_t)c->n_ff);
    kv_u32(&b, &nkv, KEY("attention.head_count"), (uint32_t)c->n_head);
    if (llama) {
        kv_u32(&b, &nkv, KEY("attention.head_count_kv"), (uint32_t)c->n_kv_head);
        kv_u32(&b, &nkv, KEY("attention.key_length"), (uint32_t)c->head_dim);
        kv_u32(&b, &nkv, KEY("attention.value_length"), (uint32_t)c->head_dim);
        kv_u32(&b, &nkv, KEY("rope.dimension_count"), (uint32_t)c->head_dim);
        kv_f32(&b, &nkv, KEY("rope.freq_base"), c->rope_theta);
        kv_f32(&b, &nkv, KEY("attention.layer_norm_rms_epsilon"), c->norm_eps);
    } else {
        kv_f32(&b, &nkv, KEY("attention.layer_norm_epsilon"), c->norm_eps);
    }
#undef KEY
    if ((st = put_tokenizer(&b, &nkv, &tok, c, name, nfc_lost, err))) goto done;
    if (c->chat_template) kv_str(&b, &nkv, "tokenizer.chat_template", c->chat_template);
    if (!llama && c->activation != SM_ACT_GELU_TANH) {
        st = sm_error_set(err, SM_ERR_UNSUPPORTED, "%s: a gpt2 model with activation %s has no GGUF "
                          "form llama.cpp runs (gelu_tanh only)", name, sm_activation_name(c->activation));
        goto done;
    }
    size_t Q = (size_t)c->n_head * (size_t)c->head_dim, KV = (size_t)c->n_kv_head * (size_t)c->head_dim;
    for (size_t i = 0; i < c->n_tensors; i++) {
        const sm_tensor_desc *d = &c->tensors[i];
        const unsigned char *data = src->w.data[i];
        size_t cols = d->ndim == 2 ? (size_t)d->shape[1] : (size_t)d->shape[0];
        size_t rb = sm_dtype_row_bytes(d->dtype, cols);
        const char *qkv = strstr(d->name, "attn_qkv.weight");
        if (llama && qkv) { /* rows q | k | v */
            size_t rows[3] = {Q, KV, KV}, r0 = 0;
            for (int p = 0; p < 3; p++) {
                gtensor *g = &gt[nt++];
                snprintf(g->name, sizeof g->name, "%.*sattn_%c.weight", (int)(qkv - d->name), d->name, "qkv"[p]);
                g->ndim = 2, g->ne[0] = cols, g->ne[1] = rows[p], g->dt = d->dtype;
                g->data = data + r0 * rb, g->nbytes = rows[p] * rb;
                r0 += rows[p];
            }
            continue;
        }
        gtensor *g = &gt[nt++];
        if (!sm_gguf_tensor_name(c, d->name, false, g->name)) {
            st = sm_error_set(err, SM_ERR_UNSUPPORTED, "%s: tensor %s has no GGUF name", name, d->name);
            goto done;
        }
        g->ndim = d->ndim, g->dt = d->dtype, g->data = data, g->nbytes = d->nbytes;
        g->ne[0] = cols, g->ne[1] = d->ndim == 2 ? (uint64_t)d->shape[0] : 1;
    }
    if (!llama && c->tied_output) { /* llama.cpp's gpt2 requires output.weight: the embedding again */
        for (size_t i = 0; i < nt; i++)
            if (strcmp(gt[i].name, "token_embd.weight") == 0) {
                gt[nt] = gt[i];
                snprintf(gt[nt++].name, SM_NAME_MAX, "output.weight");
                break;
            }
    }
    size_t off = 0;
    for (size_t i = 0; i < nt; i++) {
        gtensor *g = &gt[i];
        off = (off + 31) & ~(size_t)31;
        g->off = off;
        off += g->nbytes;
        put_str(&b, g->name, strlen(g->name));
        put_u32(&b, (uint32_t)g->ndim);
        for (int d = 0; d < g->ndim; d++) put_u64(&b, g->ne[d]);
        put_u32(&b, sm_gguf_type_of(g->dt));
        put_u64(&b, g->off);
    }
    if (b.nomem) {
        st = sm_error_set(err, SM_ERR_NOMEM, "out of memory writing the GGUF file");
        goto done;
    }
    unlink(tmp);
    if (!(f = fopen(tmp, "wb"))) {
        st = sm_error_set(err, SM_ERR_IO, "cannot create '%s': %s", tmp, strerror(errno));
        goto done;
    }
    unsigned char head[24], zero[32] = {0};
    memcpy(head, "GGUF", 4);
    sm_write_u32le(head + 4, 3);
    sm_write_u64le(head + 8, nt);
    sm_write_u64le(head + 16, nkv);
    size_t at = 24 + b.n, pad = (32 - at % 32) % 32;
    bool ok = fwrite(head, 1, 24, f) == 24 && fwrite(b.p, 1, b.n, f) == b.n && fwrite(zero, 1, pad, f) == pad;
    size_t pos = 0;
    bool stopped = false; /* the cancel flag, looked at every EXPORT_CHUNK bytes */
    for (size_t i = 0; i < nt && ok && !stopped; i++) {
        ok = fwrite(zero, 1, gt[i].off - pos, f) == gt[i].off - pos;
        for (size_t o = 0; o < gt[i].nbytes && ok && !stopped; o += EXPORT_CHUNK) {
            size_t n = gt[i].nbytes - o < EXPORT_CHUNK ? gt[i].nbytes - o : EXPORT_CHUNK;
            ok = fwrite((const unsigned char *)gt[i].data + o, 1, n, f) == n;
            stopped = cancel && *cancel;
        }
        pos = gt[i].off + gt[i].nbytes;
    }
    if (fflush(f) != 0) ok = false;
    if (fclose(f) != 0) ok = false;
    f = NULL;
    if (stopped || (cancel && *cancel)) st = sm_error_set(err, SM_ERR_CANCELLED, "interrupted");
    else if (!ok) st = sm_error_set(err, SM_ERR_IO, "cannot write '%s': %s", tmp, strerror(errno));
    else if (rename(tmp, out) != 0)
        st = sm_error_set(err, SM_ERR_IO, "cannot rename '%s' to '%s': %s", tmp, out, strerror(errno));
done:
    if (st) unlink(tmp);
    free(b.p);
    free(gt);
    sm_tokenizer_free(&tok);
    sm_source_close(src);
    return st;
}
