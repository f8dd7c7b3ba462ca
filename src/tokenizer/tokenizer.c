/*
** tokenizer.c -- encoding and decoding with the byte, SentencePiece-style
** and GPT-2 BPE tokenizers (their files are read by load.c).
**
** Both BPE kinds share one merge engine: the symbols of a text segment are
** a linked list over a byte buffer, candidate pairs sit in a binary heap
** ordered by priority (sentencepiece: the merged piece's score; gpt2: minus
** the merge rank) then by leftmost position, and a popped pair that no
** longer matches its symbols (one of them merged since) is skipped. That is
** the "best pair first, leftmost on ties" rule of llama2.c and of GPT-2's
** bpe(), in O(n log n) instead of a rescan per merge.
*/
#include "tokenizer_internal.h"

#include "unicode_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

uint32_t sm_tok_table_size(size_t n) {
    uint32_t sz = 16;
    while (sz < 2 * n) sz <<= 1;
    return sz;
}

static const char *piece_of(const sm_tokenizer *t, int32_t id, size_t *len) {
    *len = t->off[id + 1] - t->off[id];
    return t->text + t->off[id];
}

/*
** Open-addressed tables of ids keyed by their pieces' bytes (the vocabulary
** map, the added tokens): at least 2n slots, -1 empty.
*/
static int32_t *text_table_new(size_t n, uint32_t *mask) {
    *mask = sm_tok_table_size(n) - 1;
    int32_t *tab = malloc(((size_t)*mask + 1) * sizeof *tab);
    if (tab) memset(tab, 0xff, ((size_t)*mask + 1) * sizeof *tab);
    return tab;
}

/* The id in tab whose piece is p[0..n), or -1. */
static int32_t text_find(const sm_tokenizer *t, const int32_t *tab, uint32_t mask, const void *p,
                         size_t n) {
    for (uint32_t i = hash_bytes(p, n) & mask;; i = (i + 1) & mask) {
        int32_t id = tab[i];
        if (id < 0) return -1;
        size_t l;
        const char *q = piece_of(t, id, &l);
        if (l == n && memcmp(q, p, n) == 0) return id;
    }
}

/* Adds id unless a piece of the same bytes is in tab already (the first wins); true if added. */
static bool text_add(const sm_tokenizer *t, int32_t *tab, uint32_t mask, int32_t id) {
    size_t n;
    const char *p = piece_of(t, id, &n);
    uint32_t i = hash_bytes(p, n) & mask;
    for (; tab[i] >= 0; i = (i + 1) & mask) {
        size_t l;
        const char *q = piece_of(t, tab[i], &l);
        if (l == n && memcmp(q, p, n) == 0) return false;
    }
    tab[i] = id;
    return true;
}

/* The normal piece with these bytes, or -1. */
int32_t sm_tok_map_find(const sm_tokenizer *t, const void *p, size_t n) {
    return text_find(t, t->map, t->map_mask, p, n);
}

/* Indexes every normal piece; the first of equal pieces wins. */
sm_status sm_tok_build_map(sm_tokenizer *t, sm_error *err) {
    if (!(t->map = text_table_new((size_t)t->n_vocab, &t->map_mask)))
        return sm_error_set(err, SM_ERR_NOMEM, "out of memory for the vocabulary");
    for (int32_t id = 0; id < t->n_vocab; id++)
        if (t->kind[id] == KIND_NORMAL && t->off[id + 1] > t->off[id]) text_add(t, t->map, t->map_mask, id);
    for (int b = 0; b < 256; b++)
        if (t->byte_id[b] < 0) t->byte_id[b] = sm_tok_map_find(t, &(unsigned char){(unsigned char)b}, 1);
    return SM_OK;
}

sm_status sm_tok_merges_new(sm_tokenizer *t, size_t n, sm_error *err) {
    t->merge_mask = sm_tok_table_size(n) - 1;
    t->merges = malloc(((size_t)t->merge_mask + 1) * sizeof *t->merges);
    if (!t->merges) return sm_error_set(err, SM_ERR_NOMEM, "out of memory for the merges");
    for (size_t i = 0; i <= t->merge_mask; i++) t->merges[i].a = -1;
    return SM_OK;
}

bool sm_tok_merge_add(sm_tokenizer *t, int32_t a, int32_t b, int32_t rank, int32_t out) {
    uint32_t i = hash_pair(a, b) & t->merge_mask;
    for (; t->merges[i].a >= 0; i = (i + 1) & t->merge_mask)
        if (t->merges[i].a == a && t->merges[i].b == b) return false;
    t->merges[i] = (sm_tok_merge){a, b, rank, out};
    return true;
}

const sm_tok_merge *sm_tok_merge_find(const sm_tokenizer *t, int32_t a, int32_t b) {
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
    if (a->fixed || b->fixed) return;
    if (!t->merges) {
        c.id = sm_tok_map_find(t, w->buf + a->start, c.len);
        if (c.id < 0) return;
        c.pri = t->score[c.id];
    } else {
        const sm_tok_merge *m = sm_tok_merge_find(t, a->id, b->id);
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
    if (id < 0) return;
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
size_t sm_tok_utf8_next(const unsigned char *s, size_t n, int32_t *cp) {
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

bool sm_tok_work_fit(sm_tok_work *w, size_t n) {
    if (n + 1 <= w->cap) return true;
    size_t c = w->cap ? w->cap : n + 1; /* first exactly, then doubling */
    while (c < n + 1) c *= 2;
    unsigned char *b = realloc(w->buf, c);
    if (b) w->buf = b;
    sym *y = b ? realloc(w->syms, c * sizeof *y) : NULL;
    if (y) w->syms = y;
    cand *h = y ? realloc(w->heap, 3 * c * sizeof *h) : NULL;
    if (h) w->heap = h, w->cap = c;
    return h != NULL;
}

/*
** How much of s[0..n) is merged at once: all of it, the work memory grown
** to fit it (a word is merged whole, as every reference does); only where
** that memory cannot be had, a segment cut after its last newline, else at
** a character start.
*/
static size_t segment_end(sm_tok_work *w, const unsigned char *s, size_t n) {
    if (sm_tok_work_fit(w, n) || n <= SM_TOK_SEGMENT) return n;
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
        size_t cl = sm_tok_utf8_next(s + i, n - i, &cp);
        int32_t id = sm_tok_map_find(t, s + i, cl);
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

/* ---------------------------------------------------- ranked-merge BPE */

/* One word of a ranked-merge BPE: its bytes (byte-level) or characters (else) merged. */
typedef struct {
    const sm_tokenizer *t;
    sink *k;
} word_ctx;

static void bpe_word(void *vc, const unsigned char *s, size_t n) {
    word_ctx *c = vc;
    const sm_tokenizer *t = c->t;
    sm_tok_work *w = t->work;
    if (t->ignore_merges) {
        int32_t id = sm_tok_map_find(t, s, n);
        if (id >= 0) {
            emit(c->k, id);
            return;
        }
    }
    for (size_t i = 0; i < n;) {
        size_t m = segment_end(w, s + i, n - i), ns = 0;
        memcpy(w->buf, s + i, m);
        if (t->byte_level) {
            for (size_t b = 0; b < m; b++) { /* a byte without a token is dropped (llama.cpp) */
                int32_t id = t->byte_id[s[i + b]];
                w->syms[ns++] = (sym){.id = id, .start = (uint32_t)b, .len = 1, .fixed = id < 0};
            }
        } else {
            for (size_t j = 0; j < m;) {
                int32_t cp;
                size_t cl = sm_tok_utf8_next(s + i + j, m - j, &cp);
                int32_t id = sm_tok_map_find(t, s + i + j, cl);
                if (id >= 0) {
                    w->syms[ns++] = (sym){.id = id, .start = (uint32_t)j, .len = (uint32_t)cl};
                } else if (t->byte_id[s[i + j]] >= 0) { /* byte fallback */
                    for (size_t b = 0; b < cl; b++) {
                        int32_t bid = t->byte_id[s[i + j + b]];
                        w->syms[ns++] = (sym){.id = bid >= 0 ? bid : (t->unk >= 0 ? t->unk : 0),
                                              .start = (uint32_t)(j + b), .len = 1, .fixed = true};
                    }
                } else if (t->unk >= 0) { /* unknown: consecutive ones are one unk */
                    if (!(ns && w->syms[ns - 1].fixed && w->syms[ns - 1].id == t->unk))
                        w->syms[ns++] = (sym){.id = t->unk, .start = (uint32_t)j, .len = (uint32_t)cl,
                                              .fixed = true};
                    else
                        w->syms[ns - 1].len += (uint32_t)cl;
                }
                j += cl;
            }
        }
        for (size_t b = 0; b < ns; b++) {
            w->syms[b].prev = (int32_t)b - 1;
            w->syms[b].next = b + 1 < ns ? (int32_t)b + 1 : -1;
        }
        merge_and_emit(t, w, ns, c->k);
        i += m;
    }
}

/* --------------------------------------------------------- encoding */

/* llama2.c's tokenizer.bin spells BOS and EOS "\n<s>\n": text "<s>" and "</s>" stand for them. */
static int32_t spm_special_at(const sm_tokenizer *t, const char *s, size_t left, size_t *n) {
    const int32_t ids[2] = {t->bos, t->eos};
    for (int k = 0; k < 2; k++) {
        const char *p = k == 0 ? "<s>" : "</s>";
        size_t l = strlen(p);
        if (ids[k] >= 0 && l <= left && memcmp(s, p, l) == 0) {
            *n = l;
            return ids[k];
        }
    }
    return -1;
}

static bool added_ok(const sm_tokenizer *t, int32_t id, bool special) {
    return t->kind[id] == KIND_USER || (special && t->kind[id] == KIND_CONTROL);
}

/* The added token whose text starts at s (the longest), or -1; *n its length. */
static int32_t added_at(const sm_tokenizer *t, const char *s, size_t left, bool special,
                        size_t *n) {
    if (t->type == SM_TOKENIZER_SENTENCEPIECE && !t->added_map) return spm_special_at(t, s, left, n);
    if (!t->added_map) return -1;
    for (size_t k = 0; k < t->n_added_long; k++) { /* over 64 bytes: few, tried first (longest) */
        int32_t id = t->added_long[k];
        size_t l;
        const char *p = piece_of(t, id, &l);
        if (l <= left && memcmp(s, p, l) == 0 && added_ok(t, id, special)) {
            *n = l;
            return id;
        }
    }
    uint64_t lens = t->added_len[(unsigned char)s[0]];
    while (lens) {
        int b = 63 - __builtin_clzll(lens);
        size_t l = (size_t)b + 1;
        lens &= ~(1ull << b);
        if (l > left) continue;
        int32_t id = text_find(t, t->added_map, t->added_mask, s, l);
        if (id >= 0 && added_ok(t, id, special)) {
            *n = l;
            return id;
        }
    }
    return -1;
}

sm_status sm_tok_index_added(sm_tokenizer *t, sm_error *err) {
    size_t n = 0, nl = 0;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        size_t l = t->off[id + 1] - t->off[id];
        if ((t->kind[id] == KIND_CONTROL || t->kind[id] == KIND_USER) && l) n++, nl += l > 64;
    }
    memset(t->added_len, 0, sizeof t->added_len);
    if (!n) return SM_OK;
    t->added_map = text_table_new(n, &t->added_mask);
    t->added_long = malloc((nl ? nl : 1) * sizeof *t->added_long);
    if (!t->added_map || !t->added_long) return sm_error_set(err, SM_ERR_NOMEM, "out of memory for the added tokens");
    t->n_added_long = 0;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        size_t l;
        const char *p = piece_of(t, id, &l);
        if (!(t->kind[id] == KIND_CONTROL || t->kind[id] == KIND_USER) || !l) continue;
        if (l > 64) { /* kept longest first */
            size_t k = t->n_added_long++;
            while (k > 0 && t->off[t->added_long[k - 1] + 1] - t->off[t->added_long[k - 1]] < l)
                t->added_long[k] = t->added_long[k - 1], k--;
            t->added_long[k] = id;
            continue;
        }
        if (text_add(t, t->added_map, t->added_mask, id)) /* the first of equal texts wins */
            t->added_len[(unsigned char)p[0]] |= 1ull << (l - 1);
    }
    return SM_OK;
}

/*
** Encodes s[0..n), text without added tokens; start: it begins the text
** (sentencepiece's leading space, a normalizer's prepend).
*/
static void encode_plain(const sm_tokenizer *t, const unsigned char *s, size_t n, bool start,
                         sink *k) {
    if (t->pre) {
        word_ctx c = {t, k};
        sm_tok_pre_run(t->pre, s, n, start, bpe_word, &c);
        return;
    }
    for (size_t i = 0; i < n;) {
        size_t m = segment_end(t->work, s + i, n - i);
        sp_segment(t, s + i, m, start && t->space_prefix && i == 0, k);
        i += m;
    }
}

size_t sm_tokenizer_encode(sm_tokenizer *t, const char *text, size_t len, int32_t *out,
                           size_t cap) {
    unsigned how = (t->parse_special ? SM_ENCODE_SPECIAL : 0) | (t->add_bos ? SM_ENCODE_BOS : 0) |
                   (t->add_eos ? SM_ENCODE_EOS : 0);
    return sm_tokenizer_encode_as(t, text, len, out, cap, how);
}

const char *sm_tokenizer_special_text(const sm_tokenizer *t, int32_t id, size_t *len) {
    *len = 0;
    if (t->type == SM_TOKENIZER_BYTE || id < 0 || id >= t->n_vocab) return NULL;
    if (t->type == SM_TOKENIZER_SENTENCEPIECE && !t->added_map && (id == t->bos || id == t->eos)) {
        *len = id == t->bos ? 3 : 4; /* what spm_special_at matches */
        return id == t->bos ? "<s>" : "</s>";
    }
    return piece_of(t, id, len);
}

size_t sm_tokenizer_encode_as(sm_tokenizer *t, const char *text, size_t len, int32_t *out,
                              size_t cap, unsigned how) {
    bool special = how & SM_ENCODE_SPECIAL;
    sink k = {out, cap, 0};
    if (t->type == SM_TOKENIZER_BYTE) {
        for (size_t i = 0; i < len; i++) emit(&k, (unsigned char)text[i]);
        return k.n;
    }
    if ((how & SM_ENCODE_BOS) && t->bos >= 0) emit(&k, t->bos);
    const unsigned char *s = (const unsigned char *)text;
    size_t start = 0;
    /* sentencepiece prefixes its space to each text the special tokens leave (as llama.cpp and
       Hugging Face's Prepend do); a pre-tokenizer is told whether the text it gets starts the
       whole text */
    bool scan = t->added_map || (!t->pre && special);
    for (size_t i = 0; scan && i < len; i++) {
        size_t sl;
        int32_t id = added_at(t, text + i, len - i, special, &sl);
        if (id < 0) continue;
        if (i > start) encode_plain(t, s + start, i - start, !t->pre || start == 0, &k);
        emit(&k, id);
        start = i + sl;
        i = start - 1;
    }
    if (len > start) encode_plain(t, s + start, len - start, !t->pre || start == 0, &k);
    if ((how & SM_ENCODE_EOS) && t->n_suffix)
        for (int i = 0; i < t->n_suffix; i++) emit(&k, t->suffix[i]);
    else if ((how & SM_ENCODE_EOS) && t->eos >= 0)
        emit(&k, t->eos);
    return k.n; /* an empty text has no tokens unless the tokenizer adds BOS (or EOS) */
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
    if (t->kind[id] == KIND_CONTROL || t->kind[id] == KIND_UNUSED) {
        *len = 0;
        return "";
    }
    if (t->shown) {
        *len = t->shown_off[id + 1] - t->shown_off[id];
        return t->shown + t->shown_off[id];
    }
    return piece_of(t, id, len);
}

const char *sm_tokenizer_piece_after(const sm_tokenizer *t, int32_t prev, int32_t id,
                                     size_t *len) {
    const char *p = sm_tokenizer_piece(t, id, len);
    if (t->space_prefix && prev >= 0 && prev == t->bos && *len &&
        p[0] == ' ') {
        (*len)--;
        p++;
    }
    return p;
}

size_t sm_tokenizer_decode(const sm_tokenizer *t, int32_t prev, const int32_t *ids, size_t n, char *out,
                           size_t cap) {
    size_t len = 0;
    for (size_t i = 0; i < n; prev = ids[i++]) {
        size_t pl;
        const char *p = sm_tokenizer_piece_after(t, prev, ids[i], &pl);
        if (len < cap) memcpy(out + len, p, pl < cap - len ? pl : cap - len);
        len += pl;
    }
    return len;
}
