/*
** hf.c -- a Hugging Face tokenizer.json read as it is.
**
** The BPE model (vocabulary, ranked merges, byte_fallback, unk_token,
** ignore_merges), the added tokens, the normalizer, the pre-tokenizer, the
** post-processor (the BOS/EOS it adds) and the decoder (how pieces show)
** become the tables tokenizer.c encodes with and pretok.c's steps. Words
** start as bytes when a ByteLevel pre-tokenizer or decoder says the pieces
** are in GPT-2's byte alphabet (stored here as their bytes), else as
** characters with <0xNN> byte fallback (SentencePiece-made BPE: Gemma,
** Llama 2). Anything else a tokenizer.json can hold is refused by its name.
*/
#include "tokenizer_internal.h"

#include "json_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_IDS (1 << 24)

static const char GPT2_PATTERN[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

typedef struct {
    sm_tokenizer *t;
    const char *path;
    sm_error *err;
    bool byte_level;
    int32_t prefix_id;            /* post-processor: the token before the text, */
    int32_t suffix[SM_TOK_SUFFIX_MAX]; /* those after it */
    int n_suffix;
    bool mark_to_space;           /* decoder: "\xe2\x96\x81" shows as a space */
    bool strip_first;             /* decoder: the first piece's leading space is dropped */
} ctx;

static const char *jstr(const cJSON *o, const char *key) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(x) ? x->valuestring : NULL;
}

static bool is_type(const cJSON *o, const char *type) {
    const char *t = jstr(o, "type");
    return t && strcmp(t, type) == 0;
}

static sm_status refuse(ctx *c, const char *what, const cJSON *o) {
    const char *ty = jstr(o, "type");
    return sm_error_set(c->err, SM_ERR_UNSUPPORTED, "%s: %s type \"%.40s\" is not supported", c->path,
                        what, ty ? ty : "(none)");
}

/* A string pattern {"String": s} or {"Regex": r}; *regex says which. */
static const char *pattern_of(const cJSON *o, bool *regex) {
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "pattern");
    const char *s = jstr(p, "String");
    *regex = !s;
    return s ? s : jstr(p, "Regex");
}

/* One part of the pipeline (normalizer, pre-tokenizer, post-processor, decoder), read into c. */
typedef sm_status (*part_fn)(ctx *c, const cJSON *n, int depth);

/* A Sequence of parts: each element of n[key] in turn (nesting bounded by the callers). */
static sm_status sequence(ctx *c, const cJSON *n, const char *what, const char *key, part_fn fn,
                          int depth) {
    const cJSON *l = cJSON_GetObjectItemCaseSensitive(n, key);
    if (!cJSON_IsArray(l))
        return sm_error_set(c->err, SM_ERR_FORMAT, "%s: %s Sequence needs \"%s\"", c->path, what, key);
    sm_status st = SM_OK;
    for (const cJSON *e = l->child; e && !st; e = e->next) st = fn(c, e, depth + 1);
    return st;
}

/* ----------------------------------------------------------- normalizer */

static sm_status normalizer(ctx *c, const cJSON *n, int depth) {
    if (!n || cJSON_IsNull(n)) return SM_OK;
    sm_tok_pre *p = c->t->pre;
    static const char *const forms[] = {"NFC", "NFKC", "NFD", "NFKD"};
    for (int k = 0; k < 4; k++)
        if (is_type(n, forms[k])) return sm_tok_pre_norm(p, SM_NORM_NFC + k, NULL, 0, NULL, 0, false, c->path, c->err);
    if (is_type(n, "Replace")) {
        bool regex;
        const char *from = pattern_of(n, &regex), *to = jstr(n, "content");
        if (!from || !to || regex)
            return sm_error_set(c->err, SM_ERR_UNSUPPORTED, "%s: normalizer Replace needs a String "
                                "pattern and a content (a Regex pattern is not supported)", c->path);
        return sm_tok_pre_norm(p, SM_NORM_REPLACE, from, strlen(from), to, strlen(to), false, c->path, c->err);
    }
    if (is_type(n, "Prepend")) {
        const char *s = jstr(n, "prepend");
        if (!s) return sm_error_set(c->err, SM_ERR_FORMAT, "%s: normalizer Prepend needs \"prepend\"", c->path);
        return sm_tok_pre_norm(p, SM_NORM_PREPEND, s, strlen(s), NULL, 0, false, c->path, c->err);
    }
    if (is_type(n, "Sequence") && depth < 4) return sequence(c, n, "normalizer", "normalizers", normalizer, depth);
    return refuse(c, "normalizer", n);
}

/* -------------------------------------------------------- pre-tokenizer */

static int behavior_of(const char *b) {
    static const char *const names[] = {"Isolated", "Removed", "MergedWithPrevious", "MergedWithNext",
                                        "Contiguous"};
    for (int k = 0; b && k < 5; k++)
        if (strcmp(b, names[k]) == 0) return k;
    return -1;
}

static sm_status metaspace(ctx *c, const cJSON *m) {
    const char *rep = jstr(m, "replacement");
    const char *scheme = jstr(m, "prepend_scheme");
    const cJSON *aps = cJSON_GetObjectItemCaseSensitive(m, "add_prefix_space");
    if (!rep) rep = "\xe2\x96\x81";
    if (!scheme) scheme = cJSON_IsFalse(aps) ? "never" : "always";
    bool always = strcmp(scheme, "always") == 0, first = strcmp(scheme, "first") == 0;
    if (!always && !first && strcmp(scheme, "never") != 0)
        return sm_error_set(c->err, SM_ERR_UNSUPPORTED, "%s: Metaspace prepend_scheme \"%.20s\" is not "
                            "supported", c->path, scheme);
    sm_tok_pre *p = c->t->pre;
    sm_status st = sm_tok_pre_norm(p, SM_NORM_REPLACE, " ", 1, rep, strlen(rep), false, c->path, c->err);
    if (!st && (always || first))
        st = sm_tok_pre_norm(p, SM_NORM_PREPEND, rep, strlen(rep), NULL, 0, first, c->path, c->err);
    if (!st && !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(m, "split")))
        st = sm_tok_pre_step(p, SM_STEP_REGEX, SM_SPLIT_MERGED_NEXT, false, rep, strlen(rep), true,
                             c->path, c->err);
    return st;
}

static sm_status pre_tokenizer(ctx *c, const cJSON *n, int depth) {
    if (!n || cJSON_IsNull(n)) return SM_OK;
    sm_tok_pre *p = c->t->pre;
    if (is_type(n, "Split")) {
        bool regex;
        const char *pat = pattern_of(n, &regex);
        int b = behavior_of(jstr(n, "behavior"));
        if (!pat || b < 0)
            return sm_error_set(c->err, SM_ERR_UNSUPPORTED, "%s: pre_tokenizer Split needs a pattern and "
                                "a behavior (Isolated, Removed, MergedWithPrevious, MergedWithNext, "
                                "Contiguous)", c->path);
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(n, "invert"))) b |= SM_SPLIT_INVERT;
        if (regex && b == SM_SPLIT_ISOLATED && strcmp(pat, GPT2_PATTERN) == 0) /* the faster exact path */
            return sm_tok_pre_step(p, SM_STEP_GPT2, b, false, NULL, 0, false, c->path, c->err);
        return sm_tok_pre_step(p, SM_STEP_REGEX, b, false, pat, strlen(pat), !regex, c->path, c->err);
    }
    if (is_type(n, "ByteLevel")) {
        c->byte_level = true;
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(n, "add_prefix_space"))) {
            if (sm_tok_pre_has_steps(p))
                return sm_error_set(c->err, SM_ERR_UNSUPPORTED, "%s: pre_tokenizer ByteLevel with "
                                    "add_prefix_space after another step is not supported", c->path);
            sm_status st = sm_tok_pre_norm(p, SM_NORM_PREFIX_SPACE, " ", 1, NULL, 0, false, c->path, c->err);
            if (st) return st;
        }
        if (cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(n, "use_regex"))) return SM_OK;
        return sm_tok_pre_step(p, SM_STEP_GPT2, SM_SPLIT_ISOLATED, false, NULL, 0, false, c->path, c->err);
    }
    if (is_type(n, "Digits"))
        return sm_tok_pre_step(p, SM_STEP_DIGITS, SM_SPLIT_ISOLATED,
                               cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(n, "individual_digits")),
                               NULL, 0, false, c->path, c->err);
    if (is_type(n, "Metaspace")) return metaspace(c, n);
    if (is_type(n, "Sequence") && depth < 4) return sequence(c, n, "pre_tokenizer", "pretokenizers", pre_tokenizer, depth);
    return refuse(c, "pre_tokenizer", n);
}

/* ------------------------------------------------- post-processor, decoder */

/* The one id special_tokens[name] stands for. */
static sm_status special_id(ctx *c, const cJSON *pp, const char *name, int32_t *id) {
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pp, "special_tokens"), name);
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(sp, "ids");
    if (!cJSON_IsArray(ids) || cJSON_GetArraySize(ids) != 1 || !cJSON_IsNumber(ids->child) ||
        ids->child->valuedouble < 0 || ids->child->valuedouble >= c->t->n_vocab)
        return sm_error_set(c->err, SM_ERR_UNSUPPORTED, "%s: post_processor special token \"%.40s\" "
                            "must stand for one id of the vocabulary", c->path, name);
    *id = (int32_t)ids->child->valuedouble;
    return SM_OK;
}

_Static_assert(SM_TOK_SUFFIX_MAX == 4, "post_processor's message says four");

static sm_status post_processor(ctx *c, const cJSON *n, int depth) {
    if (!n || cJSON_IsNull(n) || is_type(n, "ByteLevel")) return SM_OK;
    if (is_type(n, "TemplateProcessing")) {
        const cJSON *single = cJSON_GetObjectItemCaseSensitive(n, "single");
        if (!cJSON_IsArray(single))
            return sm_error_set(c->err, SM_ERR_FORMAT, "%s: post_processor needs \"single\"", c->path);
        int seen = 0;
        for (const cJSON *e = single->child; e; e = e->next) {
            const cJSON *sp = cJSON_GetObjectItemCaseSensitive(e, "SpecialToken");
            if (cJSON_GetObjectItemCaseSensitive(e, "Sequence")) {
                seen++;
                continue;
            }
            const char *name = jstr(sp, "id");
            int32_t id = -1;
            sm_status st;
            if (!name) return sm_error_set(c->err, SM_ERR_FORMAT, "%s: post_processor.single has an item "
                                           "that is neither SpecialToken nor Sequence", c->path);
            if ((st = special_id(c, n, name, &id))) return st;
            if (seen ? c->n_suffix == SM_TOK_SUFFIX_MAX : c->prefix_id >= 0)
                return sm_error_set(c->err, SM_ERR_UNSUPPORTED, "%s: post_processor adds more than %s the text",
                                    c->path, seen ? "four tokens after" : "one token before");
            if (seen) c->suffix[c->n_suffix++] = id;
            else c->prefix_id = id;
        }
        if (seen != 1)
            return sm_error_set(c->err, SM_ERR_UNSUPPORTED, "%s: post_processor.single must hold the "
                                "text once", c->path);
        return SM_OK;
    }
    if (is_type(n, "Sequence") && depth < 4) return sequence(c, n, "post_processor", "processors", post_processor, depth);
    return refuse(c, "post_processor", n);
}

static sm_status decoder(ctx *c, const cJSON *n, int depth) {
    if (!n || cJSON_IsNull(n)) return SM_OK;
    if (is_type(n, "ByteLevel")) {
        c->byte_level = true;
        return SM_OK;
    }
    if (is_type(n, "ByteFallback") || is_type(n, "Fuse")) return SM_OK;
    if (is_type(n, "Replace")) {
        bool regex;
        const char *from = pattern_of(n, &regex), *to = jstr(n, "content");
        if (!regex && from && to && strcmp(from, "\xe2\x96\x81") == 0 && strcmp(to, " ") == 0) {
            c->mark_to_space = true;
            return SM_OK;
        }
    }
    if (is_type(n, "Strip")) {
        const char *what = jstr(n, "content");
        const cJSON *start = cJSON_GetObjectItemCaseSensitive(n, "start");
        const cJSON *stop = cJSON_GetObjectItemCaseSensitive(n, "stop");
        if (what && strcmp(what, " ") == 0 && cJSON_IsNumber(start) && start->valuedouble == 1 &&
            (!stop || (cJSON_IsNumber(stop) && stop->valuedouble == 0))) {
            c->strip_first = true;
            return SM_OK;
        }
    }
    if (is_type(n, "Metaspace")) {
        const char *scheme = jstr(n, "prepend_scheme");
        c->mark_to_space = true;
        c->strip_first = scheme ? strcmp(scheme, "never") != 0
                                : !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(n, "add_prefix_space"));
        return SM_OK;
    }
    if (is_type(n, "Sequence") && depth < 4) return sequence(c, n, "decoder", "decoders", decoder, depth);
    return refuse(c, "decoder", n);
}

/* ---------------------------------------------------------------- model */

static int64_t id_of(const cJSON *x) {
    if (!cJSON_IsNumber(x)) return -1;
    double d = x->valuedouble;
    return d >= 0 && d < MAX_IDS && d == floor(d) ? (int64_t)d : -1;
}

/* The vocabulary and added tokens as the tables: text by id, kinds, the map of the model's pieces. */
static sm_status tables(ctx *c, const cJSON *voc, const cJSON *added, bool fallback) {
    sm_tokenizer *t = c->t;
    int64_t max = -1;
    size_t k = 0;
    for (const cJSON *e = voc->child; e; e = e->next) {
        int64_t id = id_of(e);
        if (id < 0)
            return sm_error_set(c->err, SM_ERR_FORMAT, "%s: model.vocab[\"%.40s\"] must be a whole number "
                                "from 0 to %d", c->path, e->string, MAX_IDS - 1);
        if (id > max) max = id;
    }
    for (const cJSON *e = added ? added->child : NULL; e; e = e->next, k++) {
        int64_t id = id_of(cJSON_GetObjectItemCaseSensitive(e, "id"));
        const char *s = jstr(e, "content");
        if (id < 0 || !s || !*s)
            return sm_error_set(c->err, SM_ERR_FORMAT, "%s: added_tokens[%zu] needs \"id\" (0 to %d) and "
                                "a non-empty \"content\"", c->path, k, MAX_IDS - 1);
        if (id > max) max = id;
    }
    size_t n = (size_t)max + 1;
    if (n > (size_t)c->t->n_vocab)
        return sm_error_set(c->err, SM_ERR_FORMAT, "%s: %zu tokens; the model's vocabulary (n_vocab) is %d",
                            c->path, n, c->t->n_vocab);
    const char **str = calloc(n, sizeof *str);
    uint8_t *is_added = calloc(n, 1);
    sm_status st = SM_OK;
    if (!str || !is_added) st = sm_error_set(c->err, SM_ERR_NOMEM, "out of memory for the tokenizer");
    for (const cJSON *e = voc->child; e && !st; e = e->next) {
        size_t id = (size_t)id_of(e);
        if (str[id])
            st = sm_error_set(c->err, SM_ERR_FORMAT, "%s: id %zu is both \"%.40s\" and \"%.40s\"", c->path,
                              id, str[id], e->string);
        str[id] = e->string;
    }
    k = 0;
    for (const cJSON *e = added ? added->child : NULL; e && !st; e = e->next, k++) {
        size_t id = (size_t)id_of(cJSON_GetObjectItemCaseSensitive(e, "id"));
        if (is_added[id]) {
            st = sm_error_set(c->err, SM_ERR_FORMAT, "%s: added_tokens[%zu] has id %zu, as an added "
                              "token before it does", c->path, k, id);
            break;
        }
        str[id] = jstr(e, "content"); /* its text as written, even where the vocabulary spells it in bytes */
        is_added[id] = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "special")) ? 2 : 1;
    }
    size_t text_bytes = 0; /* an id no token has (cl100k, o200k) is unused: no text, never made */
    for (size_t id = 0; id < n && !st; id++) text_bytes += str[id] ? strlen(str[id]) : 0;
    if (!st) st = sm_tok_alloc_tables(t, n, text_bytes, c->err);
    int32_t byte_of_cp[324];
    sm_tok_byte_inverse(byte_of_cp);
    size_t o = 0;
    for (size_t id = 0; id < n && !st; id++) {
        const char *s = str[id];
        t->off[id] = (uint32_t)o;
        if (!s) {
            t->kind[id] = KIND_UNUSED;
            continue;
        }
        size_t sl = strlen(s);
        int b = fallback ? sm_tok_byte_piece(s, sl) : -1; /* < 0: not a byte piece */
        if (is_added[id] || (!c->byte_level && b < 0)) { /* its text as written, a NUL (C0 80) made NUL */
            o += sm_json_unnul(s, sl, t->text + o);
        } else if (b >= 0) {
            t->kind[id] = KIND_BYTE;
            if (t->byte_id[b] < 0) t->byte_id[b] = (int32_t)id;
            t->text[o++] = (char)b;
        } else {
            long bl = sm_tok_byte_level_text(byte_of_cp, s, sl, t->text + o, &t->kind[id]);
            if (bl < 0)
                st = sm_error_set(c->err, SM_ERR_FORMAT, "%s: token %zu \"%.40s\" is empty or longer than "
                                  "%d bytes", c->path, id, s, MAX_PIECE);
            else if (t->kind[id] == KIND_UNREACHABLE) /* its own text: a NUL in it made NUL again */
                o += sm_json_unnul(t->text + o, (size_t)bl, t->text + o);
            else
                o += (size_t)bl;
        }
    }
    if (!st) {
        t->off[n] = (uint32_t)o;
        st = sm_tok_build_map(t, c->err); /* every model piece, added ones too: merges may make them */
    }
    for (size_t id = 0; id < n && !st; id++)
        if (is_added[id]) t->kind[id] = is_added[id] == 2 ? KIND_CONTROL : KIND_USER;
    free(str);
    free(is_added);
    return st;
}

/* A merge's side: its id, via the bytes the piece stands for. */
static int32_t side_id(ctx *c, const int32_t *byte_of_cp, const char *s, size_t n, char *buf) {
    if (!c->byte_level) return n > MAX_PIECE ? -1 : sm_tok_map_find(c->t, buf, sm_json_unnul(s, n, buf));
    long bl = n > MAX_PIECE ? -1 : sm_tok_unalphabet(byte_of_cp, s, n, buf);
    return bl > 0 ? sm_tok_map_find(c->t, buf, (size_t)bl) : -1;
}

static sm_status merges(ctx *c, const cJSON *ml) {
    sm_tokenizer *t = c->t;
    sm_status st = sm_tok_merges_new(t, ml ? (size_t)cJSON_GetArraySize(ml) : 0, c->err);
    char *buf = malloc(4 * MAX_PIECE);
    if (st || !buf) {
        free(buf);
        return st ? st : sm_error_set(c->err, SM_ERR_NOMEM, "out of memory for the merges");
    }
    int32_t byte_of_cp[324];
    sm_tok_byte_inverse(byte_of_cp);
    int32_t rank = 0;
    size_t k = 0;
    for (const cJSON *e = ml ? ml->child : NULL; e && !st; e = e->next, k++) {
        const char *l = NULL, *r = NULL;
        size_t ll = 0, rl = 0;
        if (cJSON_IsString(e)) { /* "left right" */
            const char *sp = strchr(e->valuestring, ' ');
            if (sp && !strchr(sp + 1, ' ')) l = e->valuestring, ll = (size_t)(sp - l), r = sp + 1, rl = strlen(r);
        } else if (cJSON_IsArray(e) && cJSON_GetArraySize(e) == 2 && cJSON_IsString(e->child) &&
                   cJSON_IsString(e->child->next)) { /* ["left", "right"] */
            l = e->child->valuestring, ll = strlen(l), r = e->child->next->valuestring, rl = strlen(r);
        }
        if (!l || !ll || !rl || ll >= MAX_PIECE || rl >= MAX_PIECE) {
            st = sm_error_set(c->err, SM_ERR_FORMAT, "%s: model.merges[%zu] must be \"left right\" or "
                              "[\"left\", \"right\"]", c->path, k);
            break;
        }
        int32_t a = side_id(c, byte_of_cp, l, ll, buf), b = side_id(c, byte_of_cp, r, rl, buf);
        int32_t m = -1;
        if (a >= 0 && b >= 0) { /* the merged piece: the two pieces' stored bytes */
            size_t al = t->off[a + 1] - t->off[a], bl = t->off[b + 1] - t->off[b];
            memcpy(buf, t->text + t->off[a], al);
            memcpy(buf + al, t->text + t->off[b], bl);
            m = sm_tok_map_find(t, buf, al + bl);
        }
        if (m < 0) {
            st = sm_error_set(c->err, SM_ERR_FORMAT, "%s: model.merges[%zu] \"%.*s\" + \"%.30s\" names "
                              "a token not in the vocabulary", c->path, k, (int)(ll < 30 ? ll : 30), l, r);
            break;
        }
        if (sm_tok_merge_add(t, a, b, rank, m)) rank++; /* a repeated merge keeps its first rank */
    }
    free(buf);
    return st;
}

/* Pieces as decoding shows them: "\xe2\x96\x81" as a space. */
static sm_status shown_text(sm_tokenizer *t, sm_error *err) {
    size_t n = (size_t)t->n_vocab;
    t->shown = malloc(t->off[n] ? t->off[n] : 1);
    t->shown_off = malloc((n + 1) * sizeof *t->shown_off);
    if (!t->shown || !t->shown_off) return sm_error_set(err, SM_ERR_NOMEM, "out of memory for the tokenizer");
    size_t o = 0;
    for (size_t id = 0; id < n; id++) {
        t->shown_off[id] = (uint32_t)o; /* a byte piece is one byte: nothing to replace */
        o += sm_tok_unmark(t->text + t->off[id], t->off[id + 1] - t->off[id], t->shown + o);
    }
    t->shown_off[n] = (uint32_t)o;
    return SM_OK;
}

sm_status sm_tok_load_hf(sm_tokenizer *t, const sm_config *cfg, const char *path, sm_error *err) {
    cJSON *root;
    sm_status st = sm_json_read_file_nul(path, SM_TOK_FILE_MAX, &root, err); /* a token may be NUL */
    if (st) return st;
    ctx c = {.t = t, .path = path, .err = err, .prefix_id = -1};
    t->n_vocab = cfg->n_vocab; /* the bound tables() checks; set to the real count by the tables */
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *voc = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    const cJSON *dropout = cJSON_GetObjectItemCaseSensitive(model, "dropout");
    const char *unk = jstr(model, "unk_token");
    bool fallback = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "byte_fallback"));
    if (!is_type(model, "BPE")) {
        st = sm_error_set(err, SM_ERR_UNSUPPORTED, "%s: model.type \"%.40s\" is not supported (BPE only)",
                          path, jstr(model, "type") ? jstr(model, "type") : "(none)");
        goto done;
    }
    if (!cJSON_IsObject(voc) || !voc->child || (added && !cJSON_IsArray(added) && !cJSON_IsNull(added))) {
        st = sm_error_set(err, SM_ERR_FORMAT, "%s: model.vocab must be a non-empty object and "
                          "added_tokens an array", path);
        goto done;
    }
    if (dropout && !cJSON_IsNull(dropout) && !(cJSON_IsNumber(dropout) && dropout->valuedouble == 0)) {
        st = sm_error_set(err, SM_ERR_UNSUPPORTED, "%s: model.dropout is not supported", path);
        goto done;
    }
    static const char *const fix[2] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++)
        if (jstr(model, fix[i]) && *jstr(model, fix[i])) {
            st = sm_error_set(err, SM_ERR_UNSUPPORTED, "%s: model.%s \"%.20s\" is not supported", path,
                              fix[i], jstr(model, fix[i]));
            goto done;
        }
    if ((st = sm_tok_pre_new(&t->pre, err)) ||
        (st = normalizer(&c, cJSON_GetObjectItemCaseSensitive(root, "normalizer"), 0)) ||
        (st = pre_tokenizer(&c, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), 0)) ||
        (st = decoder(&c, cJSON_GetObjectItemCaseSensitive(root, "decoder"), 0)))
        goto done;
    if (c.byte_level && fallback) {
        st = sm_error_set(err, SM_ERR_UNSUPPORTED, "%s: byte_fallback with a ByteLevel pre-tokenizer "
                          "is not supported", path);
        goto done;
    }
    t->byte_level = c.byte_level;
    t->ignore_merges = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "ignore_merges"));
    if ((st = tables(&c, voc, added, fallback)) ||
        (st = merges(&c, cJSON_GetObjectItemCaseSensitive(model, "merges"))) ||
        (st = post_processor(&c, cJSON_GetObjectItemCaseSensitive(root, "post_processor"), 0)))
        goto done;
    if (unk) t->unk = sm_tok_map_find(t, unk, strlen(unk)); /* the map holds added tokens too */
    if (c.mark_to_space && (st = shown_text(t, err))) goto done;
    t->space_prefix = c.strip_first;
    t->bos = c.prefix_id >= 0 ? c.prefix_id : cfg->tok_bos;
    t->add_bos = c.prefix_id >= 0;
    t->eos = cfg->tok_eos;
    if (c.n_suffix == 1) t->eos = c.suffix[0]; /* (several: Command R's end of turn and EOS) */
    memcpy(t->suffix, c.suffix, sizeof c.suffix);
    t->n_suffix = c.n_suffix;
    t->add_eos = c.n_suffix > 0;
    t->parse_special = true;
done:
    cJSON_Delete(root);
    return st;
}
