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

uint32_t sm_tok_hash_pair(int32_t a, int32_t b) {
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

/* The normal piece with these bytes, or -1. */
int32_t sm_tok_map_find(const sm_tokenizer *t, const void *p, size_t n) {
    for (uint32_t i = hash_bytes(p, n) & t->map_mask;; i = (i + 1) & t->map_mask) {
        int32_t id = t->map[i];
        if (id < 0) return -1;
        size_t l;
        const char *q = piece_of(t, id, &l);
        if (l == n && memcmp(q, p, n) == 0) return id;
    }
}

/* Indexes every normal piece; the first of equal pieces wins. */
sm_status sm_tok_build_map(sm_tokenizer *t, sm_error *err) {
    t->map_mask = sm_tok_table_size((size_t)t->n_vocab) - 1;
    t->map = malloc(((size_t)t->map_mask + 1) * sizeof *t->map);
    if (!t->map) return sm_error_set(err, SM_ERR_NOMEM, "out of memory for the vocabulary");
    memset(t->map, 0xff, ((size_t)t->map_mask + 1) * sizeof *t->map);
    for (int32_t id = 0; id < t->n_vocab; id++) {
        size_t n;
        const char *p = piece_of(t, id, &n);
        if (t->kind[id] != KIND_NORMAL || n == 0 || sm_tok_map_find(t, p, n) >= 0) continue;
        uint32_t i = hash_bytes(p, n) & t->map_mask;
        while (t->map[i] >= 0) i = (i + 1) & t->map_mask;
        t->map[i] = id;
    }
    for (int b = 0; b < 256; b++)
        if (t->byte_id[b] < 0) t->byte_id[b] = sm_tok_map_find(t, &(unsigned char){(unsigned char)b}, 1);
    return SM_OK;
}

const sm_tok_merge *sm_tok_merge_find(const sm_tokenizer *t, int32_t a, int32_t b) {
    for (uint32_t i = sm_tok_hash_pair(a, b) & t->merge_mask;; i = (i + 1) & t->merge_mask) {
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
    size_t j = i, l = sm_tok_utf8_next(s + i, n - i, &cp);
    char c = uclass(cp);
    if (cp == ' ' && i + 1 < n) {
        int32_t cp2;
        sm_tok_utf8_next(s + i + 1, n - i - 1, &cp2);
        char c2 = uclass(cp2);
        if (c2 != 'S') { /* the optional space of a letter, number or other run */
            j = i + 1;
            c = c2;
            l = sm_tok_utf8_next(s + j, n - j, &cp);
        }
    }
    if (c != 'S') {
        while (j < n) {
            l = sm_tok_utf8_next(s + j, n - j, &cp);
            if (uclass(cp) != c) break;
            j += l;
        }
        return j;
    }
    /* white space: all of it at the end of the text, else all but its last character */
    size_t last = j;
    while (j < n) {
        l = sm_tok_utf8_next(s + j, n - j, &cp);
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
    if (t->add_eos && t->eos >= 0) emit(&k, t->eos);
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
