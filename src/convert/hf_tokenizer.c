/*
** hf_tokenizer.c -- Hugging Face tokenizer.json -> smallmind's tokenizer files.
**
** tokenizer.json holds a model (here BPE: a vocabulary {piece: id} and a
** ranked list of merges "a b" or ["a", "b"]), added tokens, and the
** normalizer and pre-tokenizer that say how text becomes pieces. Two kinds
** map onto smallmind's tokenizers exactly:
**   byte-level BPE with GPT-2's pattern -> vocab.json + merges.txt as GPT-2
**       ships them (the same vocabulary and ranks);
**   BPE with byte fallback and "▁" for spaces (SentencePiece models that
**       Hugging Face converted: Llama 2, TinyLlama, Mistral) -> llama2.c's
**       tokenizer.bin. Hugging Face lists the merges of each piece in
**       score order, so minus the rank of a piece's first merge is a score
**       under which best-score-first merging (llama2.c) is lowest-rank-first
**       merging (tokenizers).
** The vocabulary is indexed by an open-addressed hash; the JSON tree's
** strings are borrowed, not copied.
*/
#include "convert_internal.h"
#include "json_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_IDS (1 << 24)

static const char SPACE_MARK[] = "\xe2\x96\x81"; /* U+2581, SentencePiece's space */

typedef struct {
    const char **piece; /* (n) by id; borrowed from the JSON tree */
    size_t n;
    int32_t *slot; /* (mask + 1) ids, -1 empty */
    size_t mask;
} vocab;

static void vocab_free(vocab *v) {
    free(v->piece);
    free(v->slot);
}

/* The id of piece s[0..n), or -1. */
static int32_t vocab_find(const vocab *v, const char *s, size_t n) {
    for (size_t i = sm_hash_bytes(s, n) & v->mask;; i = (i + 1) & v->mask) {
        int32_t id = v->slot[i];
        if (id < 0) return -1;
        if (strlen(v->piece[id]) == n && memcmp(v->piece[id], s, n) == 0) return id;
    }
}

static const char *jstr(const cJSON *o, const char *key) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(x) ? x->valuestring : NULL;
}

/* A whole-number id in [0, MAX_IDS) from x, else -1. */
static int64_t id_of(const cJSON *x) {
    if (!cJSON_IsNumber(x)) return -1;
    double d = x->valuedouble;
    return d >= 0 && d < MAX_IDS && d == floor(d) ? (int64_t)d : -1;
}

static sm_status set_piece(vocab *v, int64_t id, const char *s, const char *path,
                           const char *where, sm_error *err) {
    if (!*s) return sm_error_set(err, SM_ERR_FORMAT, "%s: %s: token %lld is empty", path, where,
                                 (long long)id);
    if (v->piece[id] && strcmp(v->piece[id], s) != 0)
        return sm_error_set(err, SM_ERR_FORMAT, "%s: %s: id %lld is both \"%.40s\" and \"%.40s\"",
                            path, where, (long long)id, v->piece[id], s);
    v->piece[id] = s;
    return SM_OK;
}

/* model.vocab and added_tokens by id, checked to cover 0..n-1 with distinct pieces. */
static sm_status load_vocab(const cJSON *root, const char *path, vocab *v, sm_error *err) {
    memset(v, 0, sizeof *v);
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *voc = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (!cJSON_IsObject(voc) || !voc->child)
        return sm_error_set(err, SM_ERR_FORMAT, "%s: model.vocab must be a non-empty object", path);
    if (added && !cJSON_IsArray(added) && !cJSON_IsNull(added))
        return sm_error_set(err, SM_ERR_FORMAT, "%s: added_tokens must be an array", path);
    int64_t max = -1;
    for (const cJSON *e = voc->child; e; e = e->next) {
        int64_t id = id_of(e);
        if (id < 0)
            return sm_error_set(err, SM_ERR_FORMAT,
                                "%s: model.vocab[\"%.40s\"] must be a whole number from 0 to %d",
                                path, e->string, MAX_IDS - 1);
        if (id > max) max = id;
    }
    size_t k = 0;
    for (const cJSON *e = added ? added->child : NULL; e; e = e->next, k++) {
        int64_t id = id_of(cJSON_GetObjectItemCaseSensitive(e, "id"));
        if (id < 0 || !jstr(e, "content"))
            return sm_error_set(err, SM_ERR_FORMAT,
                                "%s: added_tokens[%zu] needs \"id\" (0 to %d) and \"content\"", path,
                                k, MAX_IDS - 1);
        if (id > max) max = id;
    }
    v->n = (size_t)max + 1;
    size_t cap = 16;
    while (cap < 2 * v->n) cap *= 2;
    v->mask = cap - 1;
    v->piece = calloc(v->n, sizeof *v->piece);
    v->slot = malloc(cap * sizeof *v->slot);
    if (!v->piece || !v->slot) return sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    sm_status st = SM_OK;
    for (const cJSON *e = voc->child; e && !st; e = e->next)
        st = set_piece(v, id_of(e), e->string, path, "model.vocab", err);
    for (const cJSON *e = added ? added->child : NULL; e && !st; e = e->next)
        st = set_piece(v, id_of(cJSON_GetObjectItemCaseSensitive(e, "id")), jstr(e, "content"),
                       path, "added_tokens", err);
    if (st) return st;
    memset(v->slot, 0xFF, cap * sizeof *v->slot);
    for (size_t id = 0; id < v->n; id++) {
        if (!v->piece[id])
            return sm_error_set(err, SM_ERR_FORMAT, "%s: no token has id %zu (ids run 0 to %zu)",
                                path, id, v->n - 1);
        size_t len = strlen(v->piece[id]);
        int32_t other = vocab_find(v, v->piece[id], len);
        if (other >= 0)
            return sm_error_set(err, SM_ERR_FORMAT, "%s: token \"%.40s\" has ids %d and %zu", path,
                                v->piece[id], other, id);
        size_t i = sm_hash_bytes(v->piece[id], len) & v->mask;
        while (v->slot[i] >= 0) i = (i + 1) & v->mask;
        v->slot[i] = (int32_t)id;
    }
    return SM_OK;
}

/* One merge of model.merges: a + b makes the token `made`. */
typedef struct {
    const char *a, *b;
    size_t al, bl;
    int32_t made;
} merge;

/*
** Merge i of model.merges: "a b" (one space) or ["a", "b"], each side and
** their concatenation in the vocabulary.
*/
static sm_status merge_at(const vocab *v, const cJSON *m, size_t i, const char *path, merge *g,
                          sm_error *err) {
    if (cJSON_IsString(m)) {
        const char *s = m->valuestring, *sp = strchr(s, ' ');
        if (!sp || sp == s || !sp[1] || strchr(sp + 1, ' '))
            return sm_error_set(err, SM_ERR_FORMAT,
                                "%s: model.merges[%zu] \"%.40s\" is not two tokens with one space",
                                path, i, s);
        *g = (merge){s, sp + 1, (size_t)(sp - s), strlen(sp + 1), -1};
    } else if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 && cJSON_IsString(m->child) &&
               cJSON_IsString(m->child->next)) {
        const char *a = m->child->valuestring, *b = m->child->next->valuestring;
        *g = (merge){a, b, strlen(a), strlen(b), -1};
    } else {
        return sm_error_set(err, SM_ERR_FORMAT,
                            "%s: model.merges[%zu] must be \"a b\" or [\"a\", \"b\"]", path, i);
    }
    bool a_known = vocab_find(v, g->a, g->al) >= 0;
    if (!a_known || vocab_find(v, g->b, g->bl) < 0) {
        const char *u = a_known ? g->b : g->a;
        size_t ul = a_known ? g->bl : g->al;
        return sm_error_set(err, SM_ERR_FORMAT,
                            "%s: model.merges[%zu] names \"%.*s\", which is not in the vocabulary",
                            path, i, (int)(ul < 40 ? ul : 40), u);
    }
    char buf[1024];
    if (g->al + g->bl >= sizeof buf || !g->al || !g->bl)
        return sm_error_set(err, SM_ERR_FORMAT, "%s: model.merges[%zu] is too long", path, i);
    memcpy(buf, g->a, g->al);
    memcpy(buf + g->al, g->b, g->bl);
    g->made = vocab_find(v, buf, g->al + g->bl);
    if (g->made < 0)
        return sm_error_set(err, SM_ERR_FORMAT,
                            "%s: model.merges[%zu] makes \"%.*s\", which is not in the vocabulary",
                            path, i, (int)(g->al + g->bl < 40 ? g->al + g->bl : 40), buf);
    return SM_OK;
}

/* ------------------------------------------------------------ kind */

/* o[key] is the string want. */
static bool str_is(const cJSON *o, const char *key, const char *want) {
    const char *t = jstr(o, key);
    return t && strcmp(t, want) == 0;
}

static bool is_type(const cJSON *o, const char *type) {
    return str_is(o, "type", type);
}

/* A normalizer that prepends "▁" and replaces " " with "▁" (Llama 2's), alone or in a Sequence. */
static bool spm_normalizer(const cJSON *n) {
    bool replace = false, prepend = false;
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(n, "normalizers");
    const cJSON *one = is_type(n, "Sequence") ? (list ? list->child : NULL) : n;
    for (; one; one = is_type(n, "Sequence") ? one->next : NULL) {
        prepend = prepend || (is_type(one, "Prepend") && str_is(one, "prepend", SPACE_MARK));
        replace = replace || (is_type(one, "Replace") &&
                              str_is(cJSON_GetObjectItemCaseSensitive(one, "pattern"), "String", " ") &&
                              str_is(one, "content", SPACE_MARK));
    }
    return replace && prepend;
}

/* A Metaspace pre-tokenizer with "▁" that prefixes one (Llama's newer tokenizer.json). */
static bool spm_metaspace(const cJSON *pre) {
    return is_type(pre, "Metaspace") && str_is(pre, "replacement", SPACE_MARK) &&
           !str_is(pre, "prepend_scheme", "never") &&
           !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(pre, "add_prefix_space"));
}

/* At most one added token (GPT-2's <|endoftext|>): GPT-2's files hold no others. */
static bool added_plain(const cJSON *root) {
    return cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(root, "added_tokens")) <= 1;
}

/* A decoder GPT-2's files imply: none, ByteLevel, or a Sequence of ByteLevel alone. */
static bool gpt2_decoder(const cJSON *d) {
    if (!d || cJSON_IsNull(d) || is_type(d, "ByteLevel")) return true;
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(d, "decoders");
    return is_type(d, "Sequence") && cJSON_GetArraySize(list) == 1 && is_type(list->child, "ByteLevel");
}

/* Whether a token of root holds a NUL (C0 80 as sm_json_read_file_nul keeps it). */
static bool has_nul_token(const cJSON *root) {
    const cJSON *voc = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "model"), "vocab");
    for (const cJSON *e = voc ? voc->child : NULL; e; e = e->next)
        if (e->string && strstr(e->string, "\xC0\x80")) return true;
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    for (const cJSON *e = cJSON_IsArray(added) ? added->child : NULL; e; e = e->next)
        if (jstr(e, "content") && strstr(jstr(e, "content"), "\xC0\x80")) return true;
    return false;
}

sm_status sm_hf_tok_kind(const cJSON *root, const char *path, sm_tokenizer_type *type,
                         sm_error *err) {
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!cJSON_IsObject(model))
        return sm_error_set(err, SM_ERR_FORMAT, "%s: missing object \"model\"", path);
    if (!is_type(model, "BPE"))
        return sm_error_set(err, SM_ERR_UNSUPPORTED,
                            "%s: model.type \"%s\" is not supported (BPE tokenizers only)", path,
                            jstr(model, "type") ? jstr(model, "type") : "");
    const char *fix[2] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++)
        if (jstr(model, fix[i]) && *jstr(model, fix[i]))
            return sm_error_set(err, SM_ERR_UNSUPPORTED, "%s: model.%s \"%s\" is not supported",
                                path, fix[i], jstr(model, fix[i]));
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    const cJSON *norm = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
    bool has_pre = pre && !cJSON_IsNull(pre), has_norm = norm && !cJSON_IsNull(norm);
    /* what maps exactly onto llama2.c's tokenizer.bin or GPT-2's files is written as those;
       everything else is read as it is (SM_TOKENIZER_HF), as is a vocabulary with a NUL in a
       token (read as C0 80: see sm_json_read_file_nul) */
    *type = SM_TOKENIZER_HF;
    if (has_nul_token(root)) return SM_OK;
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "byte_fallback"))) {
        if ((spm_normalizer(norm) && !has_pre) || (spm_metaspace(pre) && !has_norm))
            *type = SM_TOKENIZER_SENTENCEPIECE;
        return SM_OK;
    }
    /* (a decoder or added tokens GPT-2's files cannot say: read as it is, checked there) */
    if (!is_type(pre, "ByteLevel") || cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(pre, "use_regex")) ||
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(pre, "add_prefix_space")) || has_norm ||
        !added_plain(root) || !gpt2_decoder(cJSON_GetObjectItemCaseSensitive(root, "decoder")))
        return SM_OK;
    *type = SM_TOKENIZER_GPT2;
    return SM_OK;
}

/* ------------------------------------------------------------ writing */

/* Closes mem (a memory stream over *buf, *len) and, when st is SM_OK, writes it to dir/name. */
static sm_status save(FILE *mem, char **buf, size_t *len, const char *dir, const char *name,
                      sm_status st, sm_error *err) {
    bool ok = fclose(mem) == 0;
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!st && !ok) st = sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    if (!st) st = sm_write_file(path, &(sm_piece){*buf, *len}, 1, err);
    free(*buf);
    return st;
}

static sm_status write_gpt2(const vocab *v, const cJSON *merges, const char *path,
                            const char *dir, sm_error *err) {
    cJSON *obj = cJSON_CreateObject();
    bool ok = obj != NULL;
    for (size_t id = 0; id < v->n && ok; id++) {
        cJSON *num = cJSON_CreateNumber((double)id);
        ok = num && cJSON_AddItemToObject(obj, v->piece[id], num);
    }
    char *text = ok ? cJSON_PrintUnformatted(obj) : NULL, out[4400], *buf;
    cJSON_Delete(obj);
    if (!text) return sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    snprintf(out, sizeof out, "%s/vocab.json", dir);
    sm_status st = sm_write_file(out, &(sm_piece){text, strlen(text)}, 1, err);
    free(text);
    size_t len, i = 0;
    FILE *f = st ? NULL : open_memstream(&buf, &len);
    if (st || !f) return st ? st : sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    fputs("#version: 0.2\n", f);
    for (const cJSON *m = merges ? merges->child : NULL; m && !st; m = m->next, i++) {
        merge g;
        st = merge_at(v, m, i, path, &g, err);
        if (!st && (memchr(g.a, '\n', g.al) || memchr(g.b, '\n', g.bl) || memchr(g.a, ' ', g.al) ||
                    memchr(g.b, ' ', g.bl)))
            st = sm_error_set(err, SM_ERR_UNSUPPORTED,
                              "%s: model.merges[%zu] has a token with a space or newline, which "
                              "merges.txt cannot hold",
                              path, i);
        if (!st) fprintf(f, "%.*s %.*s\n", (int)g.al, g.a, (int)g.bl, g.b);
    }
    return save(f, &buf, &len, dir, "merges.txt", st, err);
}

/* Piece id for tokenizer.bin: "▁" -> " ", llama2.c's text for BOS and EOS. */
static size_t spm_piece(const vocab *v, size_t id, int32_t bos, int32_t eos, char *out,
                        size_t cap) {
    const char *s = v->piece[id];
    if ((int32_t)id == bos) s = "\n<s>\n";
    if ((int32_t)id == eos) s = "\n</s>\n";
    size_t n = 0;
    for (; *s && n < cap; n++) {
        bool mark = strncmp(s, SPACE_MARK, 3) == 0 && (int32_t)id != bos && (int32_t)id != eos;
        out[n] = mark ? ' ' : *s;
        s += mark ? 3 : 1;
    }
    return n;
}

static sm_status write_spm(const vocab *v, const cJSON *merges, const char *path,
                           const char *dir, int32_t bos, int32_t eos, sm_error *err) {
    float *score = malloc(v->n * sizeof *score);
    char piece[1024], *buf;
    size_t len, n_merges = (size_t)(merges ? cJSON_GetArraySize(merges) : 0), i = 0;
    FILE *f = score ? open_memstream(&buf, &len) : NULL;
    if (!f) {
        free(score);
        return sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    }
    for (size_t id = 0; id < v->n; id++) score[id] = NAN;
    sm_status st = SM_OK;
    for (const cJSON *m = merges ? merges->child : NULL; m && !st; m = m->next, i++) {
        merge g;
        st = merge_at(v, m, i, path, &g, err);
        if (!st && isnan(score[g.made])) score[g.made] = -(float)i;
    }
    int32_t maxlen = 1; /* the header: the longest piece */
    for (size_t id = 0; id < v->n && !st; id++) {
        size_t n = spm_piece(v, id, bos, eos, piece, sizeof piece);
        if (n == sizeof piece)
            st = sm_error_set(err, SM_ERR_UNSUPPORTED, "%s: token %zu is longer than %zu bytes",
                              path, id, sizeof piece - 1);
        if ((int32_t)n > maxlen) maxlen = (int32_t)n;
    }
    fwrite(&maxlen, 4, 1, f); /* little-endian hosts, as the weight files */
    for (size_t id = 0; id < v->n && !st; id++) {
        int32_t n = (int32_t)spm_piece(v, id, bos, eos, piece, sizeof piece);
        float s = isnan(score[id]) ? -(float)n_merges - 1.0f : score[id]; /* made by no merge */
        fwrite(&s, 4, 1, f);
        fwrite(&n, 4, 1, f);
        fwrite(piece, 1, (size_t)n, f);
    }
    free(score);
    return save(f, &buf, &len, dir, "tokenizer.bin", st, err);
}

sm_status sm_hf_tok_write(const cJSON *root, const char *path, sm_tokenizer_type type,
                          const char *dir, int32_t bos, int32_t eos, sm_error *err) {
    vocab v;
    sm_status st = load_vocab(root, path, &v, err);
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    if (!st && merges && !cJSON_IsArray(merges))
        st = sm_error_set(err, SM_ERR_FORMAT, "%s: model.merges must be an array", path);
    if (!st)
        st = type == SM_TOKENIZER_GPT2 ? write_gpt2(&v, merges, path, dir, err)
                                       : write_spm(&v, merges, path, dir, bos, eos, err);
    vocab_free(&v);
    return st;
}
