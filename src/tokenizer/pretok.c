/*
** pretok.c -- what happens to text before BPE merges it: normalizers
** (Unicode NFC/NFKC/NFD/NFKD from utf8proc, literal replace, prepend) and
** pre-tokenizer steps that cut it into words (a regex split with PCRE2,
** GPT-2's pattern by hand, ASCII digits), as a Hugging Face tokenizer.json
** or a GGUF tokenizer.ggml.pre names them.
**
** A plain span of text (no added tokens in it) streams through a window:
** the input is normalized a segment of about `chunk` bytes at a time, each
** segment ending before a character that no normalizer joins to what
** precedes it (see cut_at), so normalizing segments gives what normalizing
** the whole text does. The first step splits the window as far as it is
** sure of (a match PCRE2's hard partial matching says more text could not
** change, a GPT-2 word that ends well before the window does); those words
** go through the other steps and are handed on, the rest waits for the next
** segment. The words are those of the whole text at once, whatever the
** text's length, and memory is what the longest unsure stretch needs (one
** segment for text in words; the whole text where the first step finds
** nothing to split). Buffers grow only when a text needs more than any text
** before it. Invalid UTF-8 bytes are words of their own (the regex engine and
** utf8proc take only valid text).
*/
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer_internal.h"

#include "unicode_internal.h"

#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#define CHUNK 16384        /* input bytes normalized at once, about */
#define MAX_GROWTH 64      /* how many times longer the normalizers may make a text (bytes) */
#define DECOMPOSE_GROWTH 11 /* the most NFD/NFKD makes of a character (U+FDFA: 3 bytes -> 33); NFC 3 */
#define MAX_OPS 8
#define MAX_STEPS 8

typedef struct {
    uint8_t op;      /* SM_NORM_* */
    bool only_start; /* prepend: only to the span that starts the text (Metaspace "first") */
    char *str, *to;  /* replace: str -> to; prepend: str */
    size_t ns, nt;
    size_t growth;   /* the most this op makes of a byte */
} norm_op;

typedef struct {
    uint8_t kind;     /* SM_STEP_* */
    uint8_t behavior; /* SM_SPLIT_* */
    bool individual;  /* digits: each digit alone */
    pcre2_code *re;
    pcre2_match_data *md;
} step;

typedef struct {
    uint32_t start, len;
} span;

struct sm_tok_pre {
    norm_op op[MAX_OPS];
    int n_op;
    size_t growth;     /* the most the ops make of a byte (their factors multiplied) */
    step st[MAX_STEPS];
    int n_st;
    size_t chunk;      /* input bytes of a segment, about (CHUNK) */
    size_t behind;     /* characters before the window's text the first step may look at */
    int32_t *cps;      /* code points of a segment being normalized */
    unsigned char *nb[2]; /* the ops write a segment into these in turn */
    unsigned char *win;   /* the window: normalized text not yet handed on as words */
    span *sp[2];       /* the window's spans, one list per step in turn */
    size_t n_cps, n_nb[2], n_win, n_sp[2];
};

/* Makes the array *buf points to hold at least need items of size bytes (doubling); false: out of memory. */
static bool reserve(void *buf, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 1024;
    while (c < need) c *= 2;
    void *old, *nb;
    memcpy(&old, buf, sizeof old); /* any array's pointer, read and written as bytes */
    nb = c <= SIZE_MAX / size ? realloc(old, c * size) : NULL;
    if (!nb) return false;
    memcpy(buf, &nb, sizeof nb);
    *cap = c;
    return true;
}

sm_status sm_tok_pre_new(sm_tok_pre **out, sm_error *err) {
    sm_tok_pre *p = calloc(1, sizeof *p);
    *out = p;
    if (!p) return sm_error_set(err, SM_ERR_NOMEM, "out of memory for the pre-tokenizer");
    p->growth = 1;
    p->chunk = CHUNK;
    p->behind = 1;
    size_t n = 4 * CHUNK; /* what a text in words needs: no text of them grows a buffer */
    if (!reserve(&p->cps, &p->n_cps, n, sizeof *p->cps) || !reserve(&p->nb[0], &p->n_nb[0], n, 1) ||
        !reserve(&p->nb[1], &p->n_nb[1], n, 1) || !reserve(&p->win, &p->n_win, 2 * n, 1) ||
        !reserve(&p->sp[0], &p->n_sp[0], 2 * n + 1, sizeof(span)) ||
        !reserve(&p->sp[1], &p->n_sp[1], 2 * n + 1, sizeof(span)))
        return sm_error_set(err, SM_ERR_NOMEM, "out of memory for the pre-tokenizer");
    return SM_OK;
}

void sm_tok_pre_chunk(sm_tok_pre *p, size_t bytes) { p->chunk = bytes ? bytes : CHUNK; }

void sm_tok_pre_free(sm_tok_pre *p) {
    if (!p) return;
    for (int i = 0; i < p->n_op; i++) free(p->op[i].str), free(p->op[i].to);
    for (int i = 0; i < p->n_st; i++) {
        pcre2_match_data_free(p->st[i].md);
        pcre2_code_free(p->st[i].re);
    }
    free(p->cps);
    free(p->win);
    for (int i = 0; i < 2; i++) free(p->nb[i]), free(p->sp[i]);
    free(p);
}

static char *dup_bytes(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) memcpy(d, s, n), d[n] = 0;
    return d;
}

sm_status sm_tok_pre_norm(sm_tok_pre *p, int op, const char *str, size_t ns, const char *to,
                          size_t nt, bool only_start, const char *where, sm_error *err) {
    if (p->n_op == MAX_OPS)
        return sm_error_set(err, SM_ERR_UNSUPPORTED, "%s: more than %d normalizers", where, MAX_OPS);
    if (op == SM_NORM_REPLACE && ns == 0)
        return sm_error_set(err, SM_ERR_FORMAT, "%s: Replace of an empty string", where);
    /* what this op can make of a byte: a replacement nt/ns times longer, a decomposition */
    size_t g = op == SM_NORM_REPLACE ? (nt + ns - 1) / ns
             : op == SM_NORM_NFD || op == SM_NORM_NFKD || op == SM_NORM_NFKC ? DECOMPOSE_GROWTH
             : op == SM_NORM_NFC ? 3 : 1;
    if (g < 1) g = 1;
    if (g > MAX_GROWTH || p->growth * g > MAX_GROWTH)
        return sm_error_set(err, SM_ERR_UNSUPPORTED,
                            "%s: the normalizers could make a text %zu times longer (a Replace of "
                            "%zu bytes by %zu); at most %d is supported",
                            where, p->growth * g, ns, nt, MAX_GROWTH);
    p->growth *= g;
    norm_op *o = &p->op[p->n_op];
    *o = (norm_op){.op = (uint8_t)op, .only_start = only_start, .ns = ns, .nt = nt, .growth = g};
    if ((str && !(o->str = dup_bytes(str, ns))) || (to && !(o->to = dup_bytes(to, nt))))
        return sm_error_set(err, SM_ERR_NOMEM, "out of memory for the normalizer");
    p->n_op++;
    return SM_OK;
}

bool sm_tok_pre_has_steps(const sm_tok_pre *p) { return p->n_st > 0; }

sm_status sm_tok_pre_step(sm_tok_pre *p, int kind, int behavior, bool individual,
                          const char *pattern, size_t plen, bool literal, const char *where,
                          sm_error *err) {
    if (p->n_st == MAX_STEPS)
        return sm_error_set(err, SM_ERR_UNSUPPORTED, "%s: more than %d pre-tokenizer steps", where,
                            MAX_STEPS);
    step *s = &p->st[p->n_st];
    *s = (step){.kind = (uint8_t)kind, .behavior = (uint8_t)behavior, .individual = individual};
    if (kind == SM_STEP_REGEX) {
        int code;
        PCRE2_SIZE at;
        uint32_t opts = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP | PCRE2_DOLLAR_ENDONLY);
        s->re = pcre2_compile((PCRE2_SPTR)pattern, plen, opts, &code, &at, NULL);
        if (!s->re) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(code, msg, sizeof msg);
            return sm_error_set(err, SM_ERR_FORMAT, "%s: pattern \"%.60s\" at offset %zu: %s", where,
                                pattern, (size_t)at, (const char *)msg);
        }
        /* the interpreter runs where JIT cannot; hard partial matching splits a window */
        pcre2_jit_compile(s->re, PCRE2_JIT_COMPLETE | PCRE2_JIT_PARTIAL_HARD);
        s->md = pcre2_match_data_create_from_pattern(s->re, NULL);
        if (!s->md) {
            pcre2_code_free(s->re);
            return sm_error_set(err, SM_ERR_NOMEM, "out of memory for the pre-tokenizer");
        }
        uint32_t back = 0; /* a window keeps what the first step's lookbehind (and \b) looks at */
        if (p->n_st == 0 && !pcre2_pattern_info(s->re, PCRE2_INFO_MAXLOOKBEHIND, &back))
            p->behind = (size_t)back + 1;
    }
    p->n_st++;
    return SM_OK;
}

/* ------------------------------------------------------- GPT-2's pattern */

static char uclass(int32_t cp) {
    if (cp < 0) return 'O';
    if (cp < 0x80) { /* ASCII without a search */
        if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return 'L';
        if (cp >= '0' && cp <= '9') return 'N';
        if (cp == ' ' || (cp >= '\t' && cp <= '\r')) return 'S';
        return 'O';
    }
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
** End of the word starting at i, as GPT-2's pattern
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

/* ----------------------------------------------------------- splitting */

typedef struct {
    span *v;
    size_t n;
} list;

static void push(list *l, size_t start, size_t end) {
    if (end > start) l->v[l->n++] = (span){(uint32_t)start, (uint32_t)(end - start)};
}

/*
** A span splits as Hugging Face's Split does it: into pieces, each match and
** each gap between matches a piece, the matches the delimiters (invert: the
** gaps), then by behavior: isolated (each piece a span), removed (the
** delimiters dropped), merged with the previous (a delimiter joins the span
** before it unless that one ends in a delimiter), with the next (a
** delimiter joins the text after it), contiguous (pieces of one kind in a
** row are one span).
*/
typedef struct {
    list *out;
    size_t base, first; /* first: out's first span of this split */
    size_t last;        /* where the gap after the last match starts */
    int behavior;
    bool invert, prev_delim, pending; /* pending: the last span is a delimiter waiting for text */
} splitter;

static void piece(splitter *z, size_t s, size_t e, bool delim) {
    if (e <= s) return;
    list *o = z->out;
    span *last = o->n > z->first ? &o->v[o->n - 1] : NULL;
    bool join = z->behavior == SM_SPLIT_MERGED_PREV  ? delim && !z->prev_delim
              : z->behavior == SM_SPLIT_MERGED_NEXT  ? z->pending && !delim
              : z->behavior == SM_SPLIT_CONTIGUOUS   ? delim == z->prev_delim
              : false;
    if (join && last)
        last->len = (uint32_t)(z->base + e - last->start);
    else if (!(delim && z->behavior == SM_SPLIT_REMOVED))
        push(o, z->base + s, z->base + e);
    z->pending = delim && !(join && last);
    z->prev_delim = delim;
}

static void on_match(splitter *z, size_t ms, size_t me) {
    piece(z, z->last, ms, z->invert);
    piece(z, ms, me, !z->invert);
    z->last = me;
}

/*
** Where the spans of an unfinished text are sure to be final: a later
** piece may join the last span (but isolated or removed), so that one is
** taken back and split again with what follows.
*/
static size_t sure_end(splitter *z, size_t from, size_t stop, size_t *resume) {
    *resume = stop;
    if (z->behavior == SM_SPLIT_ISOLATED || z->behavior == SM_SPLIT_REMOVED) return z->last;
    if (z->out->n == z->first) return from;
    *resume = z->out->v[--z->out->n].start - z->base;
    return *resume;
}

/*
** Splits s[from..n) by one step, pushing its spans (at base + offset) onto
** out. end: the text ends at n; else s[n..) is text not seen yet, and the
** split goes as far as more text could not change it: the return value is
** where the spans pushed end, *resume where to search again (the split goes
** on there with from = the return value). Searching starts at *resume.
*/
static size_t split(step *st, const unsigned char *s, size_t n, size_t from, size_t *resume,
                    bool end, size_t base, list *out) {
    splitter z = {.out = out, .base = base, .first = out->n, .last = from,
                  .behavior = st->behavior & ~SM_SPLIT_INVERT, .invert = st->behavior & SM_SPLIT_INVERT};
    size_t i = *resume, stop = n; /* stop: where a match not yet sure of starts */
    if (st->kind == SM_STEP_GPT2) {
        for (size_t e; i < n; i = e) {
            e = gpt2_word(s, n, i);
            if (!end && e + 8 > n) { /* it looked at most a character past its end */
                stop = i;
                break;
            }
            on_match(&z, i, e);
        }
    } else if (st->kind == SM_STEP_DIGITS) {
        for (size_t e; i < n; i = e) {
            e = i + 1;
            if (s[i] < '0' || s[i] > '9') continue;
            while (!st->individual && e < n && s[e] >= '0' && s[e] <= '9') e++;
            if (!end && e == n && !st->individual) {
                stop = i;
                break;
            }
            on_match(&z, i, e);
        }
    } else {
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(st->md);
        uint32_t how = PCRE2_NO_UTF_CHECK | (end ? 0 : PCRE2_PARTIAL_HARD);
        while (i < n) {
            int rc = pcre2_match(st->re, s, n, i, how, st->md, NULL);
            if (rc == PCRE2_ERROR_PARTIAL) { /* more text could make or change this match */
                stop = ov[0];
                break;
            }
            if (rc < 0) break; /* no more matches (or a match limit: the rest stays one span) */
            size_t ms = ov[0], me = ov[1];
            if (me <= ms) { /* an empty match splits there (as Hugging Face's does): go on a character later */
                int32_t cp;
                on_match(&z, ms, ms);
                if (ms >= n) break;
                i = ms + sm_tok_utf8_next(s + ms, n - ms, &cp);
                continue;
            }
            on_match(&z, ms, me);
            i = me;
        }
    }
    if (!end) return sure_end(&z, from, stop, resume);
    piece(&z, z.last, n, z.invert);
    *resume = n;
    return n;
}

/* ----------------------------------------------------------- normalizing */

static size_t put_cp(unsigned char *o, int32_t c) {
    return (size_t)utf8proc_encode_char(c, (utf8proc_uint8_t *)o);
}

/* One op applied to cur[0..len) into the buffer nb[w]; the length, or SIZE_MAX: out of memory. */
static size_t apply_op(sm_tok_pre *p, const norm_op *o, const unsigned char *cur, size_t len, int w) {
    unsigned char **d = &p->nb[w];
    size_t m = 0;
    if (o->op == SM_NORM_PREPEND || o->op == SM_NORM_PREFIX_SPACE) {
        if (!reserve(d, &p->n_nb[w], len + o->ns, 1)) return SIZE_MAX;
        memcpy(*d, o->str, o->ns);
        memcpy(*d + o->ns, cur, len);
        return o->ns + len;
    }
    if (o->op == SM_NORM_REPLACE) {
        if (!reserve(d, &p->n_nb[w], len * o->growth, 1)) return SIZE_MAX;
        for (size_t i = 0; i < len;) {
            if (len - i >= o->ns && memcmp(cur + i, o->str, o->ns) == 0) {
                memcpy(*d + m, o->to, o->nt);
                m += o->nt;
                i += o->ns;
            } else {
                (*d)[m++] = cur[i++];
            }
        }
        return m;
    }
    utf8proc_option_t f = UTF8PROC_STABLE;
    f |= o->op == SM_NORM_NFC || o->op == SM_NORM_NFKC ? UTF8PROC_COMPOSE : UTF8PROC_DECOMPOSE;
    if (o->op == SM_NORM_NFKC || o->op == SM_NORM_NFKD) f |= UTF8PROC_COMPAT;
    utf8proc_ssize_t c = 0;
    for (int pass = 0; pass < 2; pass++) { /* a second pass when it says it needs more room */
        c = utf8proc_decompose_custom(cur, (utf8proc_ssize_t)len, p->cps, (utf8proc_ssize_t)p->n_cps,
                                      f, NULL, NULL);
        if (c < 0 || (size_t)c <= p->n_cps) break;
        if (!reserve(&p->cps, &p->n_cps, (size_t)c, sizeof *p->cps)) return SIZE_MAX;
    }
    if (c >= 0) c = utf8proc_normalize_utf32(p->cps, c, f);
    if (c < 0 || !reserve(d, &p->n_nb[w], 4 * (size_t)c, 1)) return SIZE_MAX; /* c < 0: not for valid UTF-8 */
    for (utf8proc_ssize_t i = 0; i < c; i++) m += put_cp(*d + m, p->cps[i]);
    return m;
}

/*
** Applies the ops to s[0..n) (valid UTF-8; first: it starts the span, start:
** the span starts the text) and appends the result to the window at *len.
** false: out of memory.
*/
static bool normalize(sm_tok_pre *p, const unsigned char *s, size_t n, bool first, bool start,
                      size_t *len) {
    const unsigned char *cur = s;
    size_t m = n;
    int w = 0;
    for (int k = 0; k < p->n_op; k++) {
        const norm_op *o = &p->op[k];
        if ((o->op == SM_NORM_PREPEND || o->op == SM_NORM_PREFIX_SPACE) &&
            (!first || m == 0 || (o->only_start && !start) ||
             (o->op == SM_NORM_PREFIX_SPACE && cur[0] == ' ')))
            continue;
        m = apply_op(p, o, cur, m, w);
        if (m == SIZE_MAX) return false;
        cur = p->nb[w];
        w ^= 1;
    }
    size_t need = *len + m;
    if (!reserve(&p->win, &p->n_win, need, 1) || !reserve(&p->sp[0], &p->n_sp[0], need + 1, sizeof(span)) ||
        !reserve(&p->sp[1], &p->n_sp[1], need + 1, sizeof(span)))
        return false;
    memcpy(p->win + *len, cur, m);
    *len = need;
    return true;
}

/*
** Whether a segment may end before the character c: no normalizer joins it
** to what precedes it. Every op leaves it as it is (no decomposition, no
** Replace's text contains it) and it is a starter no composition takes as
** its second part (ccc 0; letters, numbers, punctuation, symbols and
** spaces with no decomposition never are, but Hangul's vowel and final
** jamo, composed by rule).
*/
static bool cut_before(const sm_tok_pre *p, const unsigned char *s, size_t l, int32_t cp) {
    for (int k = 0; k < p->n_op; k++) {
        const norm_op *o = &p->op[k];
        for (size_t i = 0; o->op == SM_NORM_REPLACE && i + l <= o->ns; i++)
            if (memcmp(o->str + i, s, l) == 0) return false;
    }
    if (cp < 0x80) return true;
    if (cp >= 0x1100 && cp <= 0x11FF) return false;
    const utf8proc_property_t *pr = utf8proc_get_property(cp);
    int c = pr->category;
    return pr->combining_class == 0 && pr->decomp_seqindex == UINT16_MAX &&
           ((c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO) ||
            (c >= UTF8PROC_CATEGORY_ND && c <= UTF8PROC_CATEGORY_ZS));
}

/* Where the segment of s[0..n) that starts at a ends: the first place cut_before allows from at. */
static size_t segment_end(const sm_tok_pre *p, const unsigned char *s, size_t n, size_t at) {
    for (; at < n; at++) {
        if ((s[at] & 0xC0) == 0x80) continue;
        int32_t cp;
        size_t l = sm_tok_utf8_next(s + at, n - at, &cp);
        if (!p->n_op || cut_before(p, s + at, l, cp)) return at;
    }
    return n;
}

/*
** Splits the window's text win[from..len) into words by the steps and hands
** on every word sure to be final (all when end: the text ends at len).
** Returns where the words not handed on start; *resume: see split.
*/
static size_t split_window(sm_tok_pre *p, size_t from, size_t *resume, size_t len, bool end,
                           sm_tok_word_fn word, void *ctx) {
    list a = {p->sp[0], 0}, b = {p->sp[1], 0};
    size_t done = len;
    if (p->n_st)
        done = split(&p->st[0], p->win, len, from, resume, end, 0, &a);
    else if (end)
        push(&a, from, len);
    else
        return from; /* one word: the whole text */
    for (int k = 1; k < p->n_st; k++) {
        b.n = 0;
        for (size_t i = 0; i < a.n; i++) {
            size_t r = 0;
            split(&p->st[k], p->win + a.v[i].start, a.v[i].len, 0, &r, true, a.v[i].start, &b);
        }
        list x = a;
        a = b;
        b = x;
    }
    for (size_t i = 0; i < a.n; i++) word(ctx, p->win + a.v[i].start, a.v[i].len);
    return done;
}

/* Normalizes and splits s[0..n) (valid UTF-8) a segment at a time; see the top of the file. */
static void run_valid(sm_tok_pre *p, const unsigned char *s, size_t n, bool first, bool text_start,
                      sm_tok_word_fn word, void *ctx) {
    size_t len = 0, from = 0, resume = 0;
    for (size_t a = 0; a < n;) {
        size_t c = segment_end(p, s, n, a + p->chunk < n ? a + p->chunk : n);
        bool end = c == n;
        if (!normalize(p, s + a, c - a, first && a == 0, text_start, &len)) {
            if (len == from) { /* out of memory for one segment: hand it on as one word */
                word(ctx, s + a, c - a);
                a = c;
                continue;
            }
            c = a, end = true; /* out of memory for the window: end the text here */
        }
        a = c;
        size_t done = split_window(p, from, &resume, len, end, word, ctx);
        if (end) {
            len = from = resume = 0;
            continue;
        }
        size_t keep = done; /* the unfinished text, and what the first step looks back at */
        for (size_t k = 0; k < p->behind && keep > 0; k++)
            while (keep > 0 && (p->win[--keep] & 0xC0) == 0x80) {}
        memmove(p->win, p->win + keep, len - keep);
        len -= keep, from = done - keep, resume -= keep;
    }
}

void sm_tok_pre_run(sm_tok_pre *p, const unsigned char *s, size_t n, bool text_start,
                    sm_tok_word_fn word, void *ctx) {
    size_t i = 0;
    bool first = true;
    while (i < n) {
        size_t v = i; /* the run of valid UTF-8 from i */
        while (v < n) {
            int32_t cp;
            size_t l = sm_tok_utf8_next(s + v, n - v, &cp);
            if (cp < 0) break;
            v += l;
        }
        if (v > i) run_valid(p, s + i, v - i, first, text_start, word, ctx);
        i = v;
        if (i < n) { /* an invalid byte is a word of its own */
            word(ctx, s + i, 1);
            i++;
        }
        first = false;
    }
}

int sm_tok_pre_op(const sm_tok_pre *p, int i, const char **str, size_t *ns, const char **to, size_t *nt) {
    if (i < 0 || i >= p->n_op) return 0;
    const norm_op *o = &p->op[i];
    *str = o->str, *ns = o->ns, *to = o->to, *nt = o->nt;
    return o->op;
}
