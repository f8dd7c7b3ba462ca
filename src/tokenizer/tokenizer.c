/*
** tokenizer.c -- the byte, SentencePiece-style and GPT-2 BPE tokenizers.
**
** Both BPE kinds share one merge engine: the symbols of a text segment are
** a linked list over a byte buffer, candidate pairs sit in a binary heap
** ordered by priority (sentencepiece: the merged piece's score; gpt2: minus
** the merge rank) then by leftmost position, and a popped pair that no
** longer matches its symbols (one of them merged since) is skipped. That is
** the "best pair first, leftmost on ties" rule of llama2.c and of GPT-2's
** bpe(), in O(n log n) instead of a rescan per merge.
*/
#include "sm_tokenizer.h"

#include "json_internal.h"
#include "sm_half.h"
#include "unicode_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { KIND_NORMAL = 0, KIND_BYTE, KIND_CONTROL };

#define MAX_PIECE 4096 /* bytes of one piece, and sentencepiece's max_token_length cap */

struct sm_tok_merge {
    int32_t a, b;  /* left and right token, a = -1: empty slot */
    int32_t rank;
    int32_t out;   /* the merged token */
};

typedef struct {
    int32_t id;
    uint32_t start, len; /* bytes buf[start .. start + len) */
    int32_t prev, next;  /* -1 at the ends */
    bool fixed;          /* byte fallback: never merges */
} sym;

typedef struct {
    float pri;
    int32_t left, right;
    uint32_t len; /* bytes of the merged pair, to detect stale candidates */
    int32_t id;
} cand;

struct sm_tok_work {
    unsigned char *buf; /* (SM_TOK_SEGMENT + 1) a segment, with the prefixed space */
    sym *syms;          /* (SM_TOK_SEGMENT + 1) */
    cand *heap;         /* (3 * (SM_TOK_SEGMENT + 1)) */
    size_t n_heap;
};

/* ------------------------------------------------------------ hashing */

static uint32_t hash_bytes(const void *p, size_t n) {
    return (uint32_t)sm_hash_bytes(p, n);
}

static uint32_t hash_pair(int32_t a, int32_t b) {
    uint64_t x = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (uint32_t)x;
}

static uint32_t table_size(size_t n) {
    uint32_t sz = 16;
    while (sz < 2 * n) sz <<= 1;
    return sz;
}

static const char *piece_of(const sm_tokenizer *t, int32_t id, size_t *len) {
    *len = t->off[id + 1] - t->off[id];
    return t->text + t->off[id];
}

/* The normal piece with these bytes, or -1. */
static int32_t map_find(const sm_tokenizer *t, const void *p, size_t n) {
    for (uint32_t i = hash_bytes(p, n) & t->map_mask;; i = (i + 1) & t->map_mask) {
        int32_t id = t->map[i];
        if (id < 0) return -1;
        size_t l;
        const char *q = piece_of(t, id, &l);
        if (l == n && memcmp(q, p, n) == 0) return id;
    }
}

/* Indexes every normal piece; the first of equal pieces wins. */
static sm_status build_map(sm_tokenizer *t, sm_error *err) {
    t->map_mask = table_size((size_t)t->n_vocab) - 1;
    t->map = malloc(((size_t)t->map_mask + 1) * sizeof *t->map);
    if (!t->map) return sm_error_set(err, SM_ERR_NOMEM, "out of memory for the vocabulary");
    memset(t->map, 0xff, ((size_t)t->map_mask + 1) * sizeof *t->map);
    for (int32_t id = 0; id < t->n_vocab; id++) {
        size_t n;
        const char *p = piece_of(t, id, &n);
        if (t->kind[id] != KIND_NORMAL || n == 0 || map_find(t, p, n) >= 0) continue;
        uint32_t i = hash_bytes(p, n) & t->map_mask;
        while (t->map[i] >= 0) i = (i + 1) & t->map_mask;
        t->map[i] = id;
    }
    for (int b = 0; b < 256; b++)
        if (t->byte_id[b] < 0) t->byte_id[b] = map_find(t, &(unsigned char){(unsigned char)b}, 1);
    return SM_OK;
}

static const sm_tok_merge *merge_find(const sm_tokenizer *t, int32_t a, int32_t b) {
    for (uint32_t i = hash_pair(a, b) & t->merge_mask;; i = (i + 1) & t->merge_mask) {
        const sm_tok_merge *m = &t->merges[i];
        if (m->a < 0) return NULL;
        if (m->a == a && m->b == b) return m;
    }
}

/* ------------------------------------------------------- merge engine */

static bool cand_before(const cand *x, const cand *y) {
    return x->pri > y->pri || (x->pri == y->pri && x->left < y->left);
}

static void heap_push(sm_tok_work *w, cand c) {
    size_t i = w->n_heap++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!cand_before(&c, &w->heap[up])) break;
        w->heap[i] = w->heap[up];
        i = up;
    }
    w->heap[i] = c;
}

static cand heap_pop(sm_tok_work *w) {
    cand top = w->heap[0], last = w->heap[--w->n_heap];
    size_t i = 0, n = w->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && cand_before(&w->heap[c + 1], &w->heap[c])) c++;
        if (!cand_before(&w->heap[c], &last)) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n) w->heap[i] = last;
    return top;
}

/* Queues the pair (l, r) if it merges into a token. */
static void try_pair(const sm_tokenizer *t, sm_tok_work *w, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const sym *a = &w->syms[l], *b = &w->syms[r];
    cand c = {.left = l, .right = r, .len = a->len + b->len};
    if (t->type == SM_TOKENIZER_SENTENCEPIECE) {
        if (a->fixed || b->fixed) return;
        c.id = map_find(t, w->buf + a->start, c.len);
        if (c.id < 0) return;
        c.pri = t->score[c.id];
    } else {
        const sm_tok_merge *m = merge_find(t, a->id, b->id);
        if (!m) return;
        c.id = m->out;
        c.pri = -(float)m->rank;
    }
    heap_push(w, c);
}

/* Merges the n symbols of w (linked 0..n-1) and emits the result. */
typedef struct {
    int32_t *out;
    size_t cap, n;
} sink;

static void emit(sink *k, int32_t id) {
    if (k->n < k->cap) k->out[k->n] = id;
    k->n++;
}

static void merge_and_emit(const sm_tokenizer *t, sm_tok_work *w, size_t n, sink *k) {
    if (n == 0) return;
    w->n_heap = 0;
    for (size_t i = 0; i + 1 < n; i++) try_pair(t, w, (int32_t)i, (int32_t)i + 1);
    while (w->n_heap) {
        cand c = heap_pop(w);
        sym *a = &w->syms[c.left];
        if (a->len == 0 || a->next != c.right || a->len + w->syms[c.right].len != c.len)
            continue; /* stale: one side merged since */
        sym *b = &w->syms[c.right];
        a->id = c.id;
        a->len = c.len;
        a->next = b->next;
        if (b->next >= 0) w->syms[b->next].prev = c.left;
        b->len = 0;
        try_pair(t, w, a->prev, c.left);
        try_pair(t, w, c.left, a->next);
    }
    for (int32_t i = 0; i >= 0; i = w->syms[i].next) emit(k, w->syms[i].id);
}

/* ---------------------------------------------------------- UTF-8 */

/* One code point at s (n > 0 bytes left); an invalid byte is its own unit, cp = -1. */
static size_t utf8_next(const unsigned char *s, size_t n, int32_t *cp) {
    unsigned c = s[0];
    size_t need = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3
                : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (need == 1) {
        *cp = (int32_t)c;
        return 1;
    }
    if (need == 0 || need > n) {
        *cp = -1;
        return 1;
    }
    uint32_t v = c & (0x7Fu >> need);
    for (size_t i = 1; i < need; i++) {
        if ((s[i] & 0xC0) != 0x80) {
            *cp = -1;
            return 1;
        }
        v = v << 6 | (s[i] & 0x3F);
    }
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < min[need] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
        *cp = -1;
        return 1;
    }
    *cp = (int32_t)v;
    return need;
}

size_t sm_utf8_complete(const unsigned char *s, size_t n) {
    /* Look back at most 3 bytes for the lead byte of the last character. */
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        unsigned char c = s[n - back];
        if ((c & 0xC0) == 0x80) continue; /* continuation byte: keep looking */
        size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
        return need > back ? n - back : n;
    }
    return n;
}

/* Where to cut a text longer than a segment: after the last newline, else at a character start. */
static size_t segment_end(const unsigned char *s, size_t n) {
    if (n <= SM_TOK_SEGMENT) return n;
    for (size_t i = SM_TOK_SEGMENT; i > SM_TOK_SEGMENT / 2; i--)
        if (s[i - 1] == '\n') return i;
    size_t i = SM_TOK_SEGMENT;
    while (i > 1 && (s[i] & 0xC0) == 0x80) i--;
    return i;
}

/* ---------------------------------------------------- sentencepiece */

static void sp_segment(const sm_tokenizer *t, const unsigned char *s, size_t n, bool prefix,
                       sink *k) {
    sm_tok_work *w = t->work;
    size_t nb = 0, ns = 0;
    if (prefix && t->space_id >= 0) {
        w->buf[nb] = ' ';
        w->syms[ns++] = (sym){.id = t->space_id, .start = 0, .len = 1};
        nb = 1;
    }
    memcpy(w->buf + nb, s, n);
    for (size_t i = 0; i < n;) {
        int32_t cp;
        size_t cl = utf8_next(s + i, n - i, &cp);
        int32_t id = map_find(t, s + i, cl);
        if (id >= 0) {
            w->syms[ns++] = (sym){.id = id, .start = (uint32_t)(nb + i), .len = (uint32_t)cl};
        } else { /* byte fallback; the unknown token if there is no byte piece */
            for (size_t j = 0; j < cl; j++) {
                int32_t b = t->byte_id[s[i + j]];
                w->syms[ns++] = (sym){.id = b >= 0 ? b : 0, .start = (uint32_t)(nb + i + j),
                                      .len = 1, .fixed = true};
            }
        }
        i += cl;
    }
    for (size_t i = 0; i < ns; i++) {
        w->syms[i].prev = (int32_t)i - 1;
        w->syms[i].next = i + 1 < ns ? (int32_t)i + 1 : -1;
    }
    merge_and_emit(t, w, ns, k);
}

/* ------------------------------------------------------------- gpt2 */

static char uclass(int32_t cp) {
    if (cp < 0) return 'O';
    const struct {
        const sm_urange *r;
        size_t n;
        char c;
    } cls[] = {{sm_uni_letter, sm_uni_letter_len, 'L'},
               {sm_uni_number, sm_uni_number_len, 'N'},
               {sm_uni_space, sm_uni_space_len, 'S'}};
    for (size_t k = 0; k < 3; k++) {
        size_t lo = 0, hi = cls[k].n;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if ((uint32_t)cp > cls[k].r[mid].hi)
                lo = mid + 1;
            else if ((uint32_t)cp < cls[k].r[mid].lo)
                hi = mid;
            else
                return cls[k].c;
        }
    }
    return 'O';
}

/*
** End of the pre-token starting at i, as GPT-2's pattern
**   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
** matches it (first alternative that matches, each greedy).
*/
static size_t gpt2_word(const unsigned char *s, size_t n, size_t i) {
    if (s[i] == '\'' && i + 1 < n) {
        unsigned char a = s[i + 1], b = i + 2 < n ? s[i + 2] : 0;
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
            return i + 3;
    }
    int32_t cp;
    size_t j = i, l = utf8_next(s + i, n - i, &cp);
    char c = uclass(cp);
    if (cp == ' ' && i + 1 < n) {
        int32_t cp2;
        utf8_next(s + i + 1, n - i - 1, &cp2);
        char c2 = uclass(cp2);
        if (c2 != 'S') { /* the optional space of a letter, number or other run */
            j = i + 1;
            c = c2;
            l = utf8_next(s + j, n - j, &cp);
        }
    }
    if (c != 'S') {
        while (j < n) {
            l = utf8_next(s + j, n - j, &cp);
            if (uclass(cp) != c) break;
            j += l;
        }
        return j;
    }
    /* white space: all of it at the end of the text, else all but its last character */
    size_t last = j;
    while (j < n) {
        l = utf8_next(s + j, n - j, &cp);
        if (uclass(cp) != 'S') break;
        last = j;
        j += l;
    }
    if (j == n || last == i) return j;
    return last;
}

static void gpt2_span(const sm_tokenizer *t, const unsigned char *s, size_t n, sink *k) {
    sm_tok_work *w = t->work;
    for (size_t i = 0; i < n;) {
        size_t e = gpt2_word(s, n, i);
        while (i < e) { /* a word longer than a segment is cut at a character boundary */
            size_t m = segment_end(s + i, e - i);
            memcpy(w->buf, s + i, m);
            for (size_t b = 0; b < m; b++) {
                int32_t id = t->byte_id[s[i + b]];
                w->syms[b] = (sym){.id = id >= 0 ? id : 0, .start = (uint32_t)b, .len = 1,
                                   .prev = (int32_t)b - 1, .next = b + 1 < m ? (int32_t)b + 1 : -1};
            }
            merge_and_emit(t, w, m, k);
            i += m;
        }
    }
}

/* --------------------------------------------------------- encoding */

/* The special token whose text starts at s, or -1; *n its length. */
static int32_t special_at(const sm_tokenizer *t, const char *s, size_t left, size_t *n) {
    const int32_t ids[2] = {t->bos, t->eos};
    for (int k = 0; k < 2; k++) {
        if (ids[k] < 0) continue;
        const char *p;
        size_t l;
        if (t->type == SM_TOKENIZER_SENTENCEPIECE) {
            p = k == 0 ? "<s>" : "</s>";
            l = strlen(p);
        } else {
            p = piece_of(t, ids[k], &l);
        }
        if (l && l <= left && memcmp(s, p, l) == 0) {
            *n = l;
            return ids[k];
        }
    }
    return -1;
}

/* Encodes s[0..n) without special tokens; prefix: sentencepiece's leading space. */
static void encode_plain(const sm_tokenizer *t, const unsigned char *s, size_t n, bool prefix,
                         sink *k) {
    if (t->type == SM_TOKENIZER_GPT2) {
        gpt2_span(t, s, n, k);
        return;
    }
    for (size_t i = 0; i < n;) {
        size_t m = segment_end(s + i, n - i);
        sp_segment(t, s + i, m, prefix && i == 0, k);
        i += m;
    }
}

size_t sm_tokenizer_encode(sm_tokenizer *t, const char *text, size_t len, int32_t *out,
                           size_t cap) {
    sink k = {out, cap, 0};
    if (t->type == SM_TOKENIZER_BYTE) {
        for (size_t i = 0; i < len; i++) emit(&k, (unsigned char)text[i]);
        return k.n;
    }
    if (t->add_bos && t->bos >= 0) emit(&k, t->bos);
    const unsigned char *s = (const unsigned char *)text;
    size_t start = 0;
    bool first = true;
    for (size_t i = 0; t->parse_special && i < len; i++) {
        size_t sl;
        int32_t id = special_at(t, text + i, len - i, &sl);
        if (id < 0) continue;
        encode_plain(t, s + start, i - start, first && i > start, &k);
        first = first && i == start;
        emit(&k, id);
        start = i + sl;
        i = start - 1;
    }
    encode_plain(t, s + start, len - start, first && len > start, &k);
    return k.n; /* an empty text has no tokens unless the tokenizer adds BOS */
}

const char *sm_tokenizer_piece(const sm_tokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->n_vocab) {
        *len = 0;
        return "";
    }
    if (t->type == SM_TOKENIZER_BYTE) {
        *len = 1;
        return t->bytes + id;
    }
    if (t->kind[id] == KIND_CONTROL) {
        *len = 0;
        return "";
    }
    return piece_of(t, id, len);
}

const char *sm_tokenizer_piece_after(const sm_tokenizer *t, int32_t prev, int32_t id,
                                     size_t *len) {
    const char *p = sm_tokenizer_piece(t, id, len);
    if (t->type == SM_TOKENIZER_SENTENCEPIECE && prev >= 0 && prev == t->bos && *len &&
        p[0] == ' ') {
        (*len)--;
        p++;
    }
    return p;
}

/* ------------------------------------------------------------ loading */

static sm_status alloc_tables(sm_tokenizer *t, size_t n, size_t text_bytes, sm_error *err) {
    t->n_vocab = (int)n;
    t->text = malloc(text_bytes ? text_bytes : 1);
    t->off = calloc(n + 1, sizeof *t->off);
    t->kind = calloc(n, 1);
    bool scored = t->type == SM_TOKENIZER_SENTENCEPIECE;
    t->score = scored ? calloc(n, sizeof *t->score) : NULL;
    t->work = calloc(1, sizeof *t->work);
    if (t->work) {
        t->work->buf = malloc(SM_TOK_SEGMENT + 1);
        t->work->syms = malloc((SM_TOK_SEGMENT + 1) * sizeof(sym));
        t->work->heap = malloc(3 * (SM_TOK_SEGMENT + 1) * sizeof(cand));
    }
    if (!t->text || !t->off || !t->kind || (scored && !t->score) || !t->work || !t->work->buf ||
        !t->work->syms || !t->work->heap)
        return sm_error_set(err, SM_ERR_NOMEM, "out of memory for the tokenizer");
    return SM_OK;
}

/* "<0xNN>" -> 0..255; -1 if p is not shaped like a byte piece; -2 if it is but malformed. */
static int byte_piece(const char *p, size_t n) {
    if (n < 4 || memcmp(p, "<0x", 3) != 0 || p[n - 1] != '>') return -1;
    if (n != 6) return -2;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
              : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return -2;
        v = v * 16 + d;
    }
    return v;
}

/*
** llama2.c's tokenizer.bin: i32 max_token_length, then per token f32 score,
** i32 length, the bytes. The token count is what the file holds.
*/
static sm_status load_sentencepiece(sm_tokenizer *t, const sm_config *cfg, const char *path,
                                    sm_error *err) {
    char *buf;
    size_t len;
    sm_status st = sm_read_file(path, SM_TOK_FILE_MAX, &buf, &len, err);
    if (st) return st;
    const unsigned char *p = (const unsigned char *)buf;
    size_t n = 0, at = 4, text_bytes = 0;
    int32_t max_len = len >= 4 ? (int32_t)sm_read_u32le(p) : 0;
    if (len < 4) {
        st = sm_error_set(err, SM_ERR_FORMAT, "%s: %zu bytes, too short for a tokenizer", path, len);
        goto done;
    }
    if (max_len < 1 || max_len > MAX_PIECE) {
        st = sm_error_set(err, SM_ERR_FORMAT, "%s: max_token_length is %d, expected 1 to %d", path,
                          max_len, MAX_PIECE);
        goto done;
    }
    /* first pass: count and check every entry */
    while (at < len) {
        if (len - at < 8) {
            st = sm_error_set(err, SM_ERR_FORMAT, "%s: truncated at token %zu (byte %zu)", path, n,
                              at);
            goto done;
        }
        int32_t l = (int32_t)sm_read_u32le(p + at + 4);
        float score = sm_bits_to_f32(sm_read_u32le(p + at));
        if (l < 0 || l > max_len) {
            st = sm_error_set(err, SM_ERR_FORMAT,
                              "%s: token %zu has length %d, expected 0 to max_token_length %d",
                              path, n, l, max_len);
            goto done;
        }
        if (!isfinite(score)) {
            st = sm_error_set(err, SM_ERR_FORMAT, "%s: token %zu has a score that is not finite",
                              path, n);
            goto done;
        }
        if ((size_t)l > len - at - 8) {
            st = sm_error_set(err, SM_ERR_FORMAT,
                              "%s: truncated in token %zu (%d bytes announced, %zu left)", path, n,
                              l, len - at - 8);
            goto done;
        }
        at += 8 + (size_t)l;
        text_bytes += (size_t)l;
        n++;
    }
    if (n == 0 || n > (size_t)cfg->n_vocab) {
        st = sm_error_set(err, SM_ERR_FORMAT, "%s: %zu tokens; the model's vocabulary (n_vocab) is %d",
                          path, n, cfg->n_vocab);
        goto done;
    }
    if (cfg->tok_bos >= (int32_t)n || cfg->tok_eos >= (int32_t)n) {
        st = sm_error_set(err, SM_ERR_FORMAT, "%s: %zu tokens, but the config's bos/eos is %d/%d",
                          path, n, cfg->tok_bos, cfg->tok_eos);
        goto done;
    }
    if ((st = alloc_tables(t, n, text_bytes, err))) goto done;
    at = 4;
    size_t o = 0;
    for (size_t id = 0; id < n; id++) {
        size_t l = sm_read_u32le(p + at + 4);
        t->score[id] = sm_bits_to_f32(sm_read_u32le(p + at));
        const char *piece = buf + at + 8;
        at += 8 + l;
        t->off[id] = (uint32_t)o;
        int b = byte_piece(piece, l);
        if (b == -2) {
            st = sm_error_set(err, SM_ERR_FORMAT,
                              "%s: token %zu \"%.*s\" is not a valid byte token <0xNN>", path, id,
                              (int)(l < 16 ? l : 16), piece);
            goto done;
        }
        if (b >= 0) {
            t->kind[id] = KIND_BYTE;
            if (t->byte_id[b] < 0) t->byte_id[b] = (int32_t)id;
            t->text[o++] = (char)b;
        } else {
            if ((int32_t)id == cfg->tok_bos || (int32_t)id == cfg->tok_eos ||
                (l == 5 && memcmp(piece, "<unk>", 5) == 0))
                t->kind[id] = KIND_CONTROL;
            memcpy(t->text + o, piece, l);
            o += l;
        }
    }
    t->off[n] = (uint32_t)o;
    if ((st = build_map(t, err))) goto done;
    t->space_id = map_find(t, " ", 1);
done:
    free(buf);
    return st;
}

/* GPT-2's bytes <-> printable code points: 256 characters stand for the 256 bytes. */
static void byte_alphabet(int32_t cp_of[256]) {
    int extra = 0;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        cp_of[b] = printable ? b : 256 + extra++;
    }
}

/* A vocab.json / merges.txt token text -> its bytes in out (at least n bytes); -1 if invalid. */
static long unalphabet(const int32_t byte_of_cp[324], const char *s, size_t n, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        int32_t cp;
        i += utf8_next((const unsigned char *)s + i, n - i, &cp);
        if (cp < 0 || cp >= 324 || byte_of_cp[cp] < 0) return -1;
        out[o++] = (char)byte_of_cp[cp];
    }
    return (long)o;
}

/*
** Every multi-byte token of a BPE vocabulary must be made by some merge,
** else encoding can never produce it and ids come out byte by byte: an
** empty or truncated merges.txt. Control tokens (bos/eos) and added tokens
** written <...> are exempt.
*/
static sm_status check_reachable(const sm_tokenizer *t, size_t n, const char *vocab_path,
                                 const char *merges_path, sm_error *err) {
    bool *made = calloc(n, sizeof *made);
    if (!made) return sm_error_set(err, SM_ERR_NOMEM, "out of memory for the tokenizer");
    for (size_t i = 0; i <= t->merge_mask; i++)
        if (t->merges[i].a >= 0) made[t->merges[i].out] = true;
    size_t lost = 0, first = 0;
    for (size_t id = 0; id < n; id++) {
        const char *s = t->text + t->off[id];
        size_t len = t->off[id + 1] - t->off[id];
        bool added = len >= 3 && s[0] == '<' && s[len - 1] == '>';
        if (len > 1 && !made[id] && t->kind[id] != KIND_CONTROL && !added && !lost++) first = id;
    }
    free(made);
    if (!lost) return SM_OK;
    size_t fl = t->off[first + 1] - t->off[first];
    return sm_error_set(err, SM_ERR_FORMAT,
                        "%s: %zu multi-byte tokens of %s (the first: id %zu, \"%.*s\") are made "
                        "by no merge; the merges are missing or cut short",
                        merges_path, lost, vocab_path, first, (int)(fl < 40 ? fl : 40),
                        t->text + t->off[first]);
}

static sm_status load_gpt2(sm_tokenizer *t, const sm_config *cfg, const char *vocab_path,
                           const char *merges_path, sm_error *err) {
    int32_t cp_of[256], byte_of_cp[324];
    byte_alphabet(cp_of);
    for (int i = 0; i < 324; i++) byte_of_cp[i] = -1;
    for (int b = 0; b < 256; b++) byte_of_cp[cp_of[b]] = b;

    char *buf = NULL, *mbuf = NULL;
    size_t len, mlen;
    cJSON *root = NULL;
    sm_status st = sm_read_file(vocab_path, SM_TOK_FILE_MAX, &buf, &len, err);
    if (st) return st;
    if ((st = sm_json_parse_strict(buf, len, vocab_path, &root, err))) goto done;
    if (!cJSON_IsObject(root)) {
        st = sm_error_set(err, SM_ERR_FORMAT, "%s: expected an object of token -> id", vocab_path);
        goto done;
    }
    size_t n = (size_t)cJSON_GetArraySize(root), text_bytes = 0;
    if (n == 0 || n > (size_t)cfg->n_vocab) {
        st = sm_error_set(err, SM_ERR_FORMAT, "%s: %zu tokens; the model's vocabulary (n_vocab) is %d",
                          vocab_path, n, cfg->n_vocab);
        goto done;
    }
    for (const cJSON *e = root->child; e; e = e->next) text_bytes += strlen(e->string);
    if ((st = alloc_tables(t, n, text_bytes, err))) goto done;
    /* ids must be exactly 0..n-1; pieces are laid out in id order */
    const cJSON **by_id = calloc(n, sizeof *by_id);
    if (!by_id) {
        st = sm_error_set(err, SM_ERR_NOMEM, "out of memory for the tokenizer");
        goto done;
    }
    for (const cJSON *e = root->child; e && !st; e = e->next) {
        double d = cJSON_IsNumber(e) ? e->valuedouble : -1;
        if (d < 0 || d >= (double)n || d != floor(d) || by_id[(size_t)d])
            st = sm_error_set(err, SM_ERR_FORMAT,
                              "%s: token \"%.40s\" has id %s; ids must be 0 to %zu, each once",
                              vocab_path, e->string, cJSON_IsNumber(e) ? "out of range or repeated" : "that is not a number", n - 1);
        else
            by_id[(size_t)d] = e;
    }
    size_t o = 0;
    for (size_t id = 0; id < n && !st; id++) {
        const char *s = by_id[id]->string;
        size_t sl = strlen(s);
        t->off[id] = (uint32_t)o;
        long bl = sl > MAX_PIECE ? -1 : unalphabet(byte_of_cp, s, sl, t->text + o);
        if (bl <= 0)
            st = sm_error_set(err, SM_ERR_FORMAT,
                              "%s: token %zu \"%.40s\" is empty, too long or has a character "
                              "outside GPT-2's byte alphabet",
                              vocab_path, id, s);
        else
            o += (size_t)bl;
    }
    t->off[n] = (uint32_t)o;
    free(by_id);
    if (st) goto done;
    for (int k = 0; k < 2; k++) {
        int32_t id = k ? cfg->tok_eos : cfg->tok_bos;
        if (id >= (int32_t)n) {
            st = sm_error_set(err, SM_ERR_FORMAT, "%s: %zu tokens, but the config's %s is %d",
                              vocab_path, n, k ? "eos" : "bos", id);
            goto done;
        }
        if (id >= 0) t->kind[id] = KIND_CONTROL;
    }
    if ((st = build_map(t, err))) goto done;
    for (int b = 0; b < 256; b++)
        if (t->byte_id[b] < 0) {
            st = sm_error_set(err, SM_ERR_FORMAT, "%s: no token for byte 0x%02X", vocab_path, b);
            goto done;
        }

    /* merges.txt: "#version" line, then "LEFT RIGHT" per line, best first */
    if ((st = sm_read_file(merges_path, SM_TOK_FILE_MAX, &mbuf, &mlen, err))) goto done;
    size_t lines = 1;
    for (size_t i = 0; i < mlen; i++) lines += mbuf[i] == '\n';
    t->merge_mask = table_size(lines) - 1;
    t->merges = malloc(((size_t)t->merge_mask + 1) * sizeof *t->merges);
    if (!t->merges) {
        st = sm_error_set(err, SM_ERR_NOMEM, "out of memory for the merges");
        goto done;
    }
    for (size_t i = 0; i <= t->merge_mask; i++) t->merges[i].a = -1;
    int32_t rank = 0;
    size_t line = 0;
    char tmp[2 * MAX_PIECE];
    for (size_t at = 0; at < mlen;) {
        line++;
        char *eol = memchr(mbuf + at, '\n', mlen - at);
        size_t e = eol ? (size_t)(eol - mbuf) : mlen, ll = e - at;
        char *ln = mbuf + at;
        at = e + 1;
        if (ll && ln[ll - 1] == '\r') ll--;
        if (ll == 0 || (line == 1 && ll >= 8 && memcmp(ln, "#version", 8) == 0)) continue;
        char *sp = memchr(ln, ' ', ll);
        long la = -1, lb = -1;
        if (sp && sp > ln && (size_t)(sp - ln) < MAX_PIECE && ll - (size_t)(sp - ln) - 1 < MAX_PIECE &&
            !memchr(sp + 1, ' ', ll - (size_t)(sp - ln) - 1)) {
            la = unalphabet(byte_of_cp, ln, (size_t)(sp - ln), tmp);
            if (la > 0) lb = unalphabet(byte_of_cp, sp + 1, ll - (size_t)(sp - ln) - 1, tmp + la);
        }
        if (la <= 0 || lb <= 0) {
            st = sm_error_set(err, SM_ERR_FORMAT,
                              "%s: line %zu: expected two tokens separated by one space",
                              merges_path, line);
            goto done;
        }
        int32_t a = map_find(t, tmp, (size_t)la), b = map_find(t, tmp + la, (size_t)lb);
        int32_t m = map_find(t, tmp, (size_t)(la + lb));
        if (a < 0 || b < 0 || m < 0) {
            st = sm_error_set(err, SM_ERR_FORMAT, "%s: line %zu: merge \"%.*s\" names an unknown %s",
                              merges_path, line, (int)(ll < 60 ? ll : 60), ln,
                              a < 0 || b < 0 ? "token" : "merged token (not in the vocabulary)");
            goto done;
        }
        if (merge_find(t, a, b)) continue; /* a repeated merge keeps its first rank */
        uint32_t i = hash_pair(a, b) & t->merge_mask;
        while (t->merges[i].a >= 0) i = (i + 1) & t->merge_mask;
        t->merges[i] = (sm_tok_merge){a, b, rank++, m};
    }
    st = check_reachable(t, n, vocab_path, merges_path, err);
done:
    cJSON_Delete(root);
    free(buf);
    free(mbuf);
    return st;
}

static sm_status join(char *out, size_t cap, const char *dir, const char *file, sm_error *err) {
    if ((size_t)snprintf(out, cap, "%s/%s", dir ? dir : ".", file) >= cap)
        return sm_error_set(err, SM_ERR_IO, "cannot open '%s/%s': path too long", dir, file);
    return SM_OK;
}

sm_status sm_tokenizer_init(sm_tokenizer *t, const sm_config *cfg, const char *dir,
                            sm_error *err) {
    memset(t, 0, sizeof *t);
    t->type = cfg->tokenizer;
    t->bos = t->eos = t->space_id = -1;
    for (int b = 0; b < 256; b++) t->byte_id[b] = -1;
    if (cfg->tokenizer == SM_TOKENIZER_BYTE) {
        t->n_vocab = 256;
        for (int i = 0; i < 256; i++) t->bytes[i] = (char)i;
        if (cfg->n_vocab < t->n_vocab)
            return sm_error_set(err, SM_ERR_FORMAT,
                                "config.json: n_vocab is %d but the byte tokenizer needs %d ids",
                                cfg->n_vocab, t->n_vocab);
        return SM_OK;
    }
    char p0[4400], p1[4400];
    sm_status st;
    if (cfg->tokenizer == SM_TOKENIZER_SENTENCEPIECE) {
        if (!(st = join(p0, sizeof p0, dir, cfg->tok_file[0], err)))
            st = load_sentencepiece(t, cfg, p0, err);
        t->add_bos = true;
    } else if (cfg->tokenizer == SM_TOKENIZER_GPT2) {
        if (!(st = join(p0, sizeof p0, dir, cfg->tok_file[0], err)) &&
            !(st = join(p1, sizeof p1, dir, cfg->tok_file[1], err)))
            st = load_gpt2(t, cfg, p0, p1, err);
    } else {
        st = sm_error_set(err, SM_ERR_UNSUPPORTED, "unsupported tokenizer");
    }
    t->bos = cfg->tok_bos;
    t->eos = cfg->tok_eos;
    if (st) sm_tokenizer_free(t);
    return st;
}

void sm_tokenizer_free(sm_tokenizer *t) {
    if (t->work) {
        free(t->work->buf);
        free(t->work->syms);
        free(t->work->heap);
        free(t->work);
    }
    free(t->text);
    free(t->off);
    free(t->score);
    free(t->kind);
    free(t->map);
    free(t->merges);
    sm_tokenizer_type type = t->type;
    memset(t, 0, sizeof *t);
    t->type = type;
    t->bos = t->eos = -1;
}
