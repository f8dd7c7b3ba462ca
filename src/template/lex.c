/*
** lex.c -- template text to tokens: the whitespace rules of transformers.js
** (lstrip_blocks, trim_blocks, one final newline dropped, '-' trimming),
** string escapes, numbers, names and operators, each token with its line;
** and the bump pool templates and renders allocate from.
*/
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template_internal.h"

/* ---- pool */
struct tpl_chunk {
    tpl_chunk *next;
    max_align_t data[];
};

void *tpl_pool_alloc(tpl_pool *p, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (!p->head || p->cap - p->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        if (p->limit && p->total + cap > p->limit) return NULL;
        tpl_chunk *c = malloc(sizeof *c + cap);
        if (!c) return NULL;
        c->next = p->head;
        p->head = c;
        p->cap = cap;
        p->used = 0;
        p->total += cap;
    }
    void *r = (char *)p->head->data + p->used;
    p->used += n;
    return r;
}

void tpl_pool_free(tpl_pool *p) {
    for (tpl_chunk *c = p->head, *nx; c; c = nx) {
        nx = c->next;
        free(c);
    }
    memset(p, 0, sizeof *p);
}

/* ---- lexer */
typedef struct lexer {
    sm_template *t;
    sm_error *err;
    const char *src; /* after the whitespace rules */
    size_t len, pos;
    size_t *gone; /* offsets in src where trim_blocks removed a newline */
    size_t n_gone;
    size_t line_pos, line, gone_i; /* line_at's cursor */
    ltok *tok;
    size_t n, cap;
    int curly; /* { depth inside {{ }} */
    bool failed;
} lexer;

static sm_status lex_fail(lexer *L, uint32_t line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static sm_status lex_fail(lexer *L, uint32_t line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    L->failed = true;
    sm_status st = tpl_error(L->err, SM_ERR_FORMAT, L->t->name, line, fmt, ap);
    va_end(ap);
    return st;
}

static uint32_t line_at(lexer *L, size_t pos) {
    if (pos < L->line_pos) L->line_pos = 0, L->line = 1, L->gone_i = 0;
    for (; L->line_pos < pos && L->line_pos < L->len; L->line_pos++)
        if (L->src[L->line_pos] == '\n') L->line++;
    while (L->gone_i < L->n_gone && L->gone[L->gone_i] <= pos) L->gone_i++, L->line++;
    return (uint32_t)L->line;
}

static bool push(lexer *L, int k, int op, size_t at, const char *s, size_t n) {
    if (L->n == L->cap) {
        size_t cap = L->cap ? 2 * L->cap : 256;
        ltok *nt = realloc(L->tok, cap * sizeof *nt);
        if (!nt) return false;
        L->tok = nt;
        L->cap = cap;
    }
    L->tok[L->n++] = (ltok){(uint8_t)k, (uint16_t)op, line_at(L, at), s, n};
    return true;
}

static int last_kind(const lexer *L) { return L->n ? L->tok[L->n - 1].k : -1; }

/* {%- {{- {#-: the text before loses its trailing white space (and goes if empty). */
static void strip_prev_text(lexer *L) {
    if (!L->n || L->tok[L->n - 1].k != K_TEXT) return;
    ltok *t = &L->tok[L->n - 1];
    t->n -= tpl_space_back(t->s, t->n);
    if (!t->n) L->n--;
}

static void skip_space(lexer *L) { L->pos += tpl_space_front(L->src + L->pos, L->len - L->pos); }

static void put_utf8(char *o, size_t *k, uint32_t c) {
    if (c < 0x80) o[(*k)++] = (char)c;
    else if (c < 0x800) o[(*k)++] = (char)(0xC0 | c >> 6), o[(*k)++] = (char)(0x80 | (c & 63));
    else if (c < 0x10000) {
        o[(*k)++] = (char)(0xE0 | c >> 12);
        o[(*k)++] = (char)(0x80 | ((c >> 6) & 63));
        o[(*k)++] = (char)(0x80 | (c & 63));
    } else {
        o[(*k)++] = (char)(0xF0 | c >> 18);
        o[(*k)++] = (char)(0x80 | ((c >> 12) & 63));
        o[(*k)++] = (char)(0x80 | ((c >> 6) & 63));
        o[(*k)++] = (char)(0x80 | (c & 63));
    }
}

static int hexval(const char *s, size_t n, uint32_t *v) {
    *v = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        *v = *v * 16 + (uint32_t)d;
    }
    return 0;
}

/* A quoted string from L->pos (at the quote), unescaped into the pool. */
static sm_status lex_string(lexer *L) {
    char q = L->src[L->pos];
    size_t start = L->pos++;
    uint32_t line = line_at(L, start);
    size_t end = L->pos;
    while (end < L->len && L->src[end] != q) end += L->src[end] == '\\' ? 2 : 1;
    if (end >= L->len) return lex_fail(L, line, "a string is not closed");
    char *o = tpl_pool_alloc(&L->t->pool, end - L->pos + 1);
    if (!o) return sm_error_set(L->err, SM_ERR_NOMEM, "%s: out of memory", L->t->name);
    size_t k = 0;
    while (L->pos < end) {
        char c = L->src[L->pos++];
        if (c != '\\') {
            o[k++] = c;
            continue;
        }
        char e = L->src[L->pos++];
        const char *map = "n\nt\tr\rb\bf\fv\va\a''\"\"\\\\";
        const char *m = strchr(map, e);
        if (e && m && (m - map) % 2 == 0) {
            o[k++] = m[1];
            continue;
        }
        if (e == '\n' || (e == '\r' && L->pos < end && L->src[L->pos] == '\n')) { /* a line continued */
            L->pos += e == '\r';
            continue;
        }
        if (e >= '0' && e <= '7') { /* octal, up to three digits */
            uint32_t v = (uint32_t)(e - '0');
            for (int d = 0; d < 2 && L->pos < end && L->src[L->pos] >= '0' && L->src[L->pos] <= '7'; d++)
                v = v * 8 + (uint32_t)(L->src[L->pos++] - '0');
            put_utf8(o, &k, v);
            continue;
        }
        if (e != 'x' && e != 'u' && e != 'U') { /* kept as written, as Python keeps "\d" */
            o[k++] = '\\';
            L->pos--;
            continue;
        }
        size_t w = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        uint32_t v;
        if (L->pos + w > end || hexval(L->src + L->pos, w, &v))
            return lex_fail(L, line, "bad \\%c escape in a string", e);
        if (v > 0x10FFFF) return lex_fail(L, line, "\\U%08X is not a character", v);
        L->pos += w;
        if (v >= 0xD800 && v < 0xDC00 && L->pos + 6 <= end && L->src[L->pos] == '\\' &&
            L->src[L->pos + 1] == 'u') { /* a surrogate pair */
            uint32_t lo;
            if (!hexval(L->src + L->pos + 2, 4, &lo) && lo >= 0xDC00 && lo < 0xE000) {
                v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
                L->pos += 6;
            }
        }
        put_utf8(o, &k, v); /* never longer than its escape */
    }
    L->pos = end + 1;
    return push(L, K_STR, 0, start, o, k) ? SM_OK
                                          : sm_error_set(L->err, SM_ERR_NOMEM, "out of memory");
}

static bool is_word(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* Whether s[at..] is the tag {% word %} (a '-' at either end: *lead, *trail); *end after it. */
static bool raw_tag(const char *s, size_t len, size_t at, const char *word, size_t *end, bool *lead,
                    bool *trail) {
    size_t i = at + 2, wl = strlen(word);
    if (at + 1 >= len || s[at] != '{' || s[at + 1] != '%') return false;
    if ((*lead = i < len && s[i] == '-')) i++;
    while (i < len && strchr(" \t\r\n", s[i]) && s[i]) i++;
    if (i + wl > len || memcmp(s + i, word, wl) || (i + wl < len && is_word(s[i + wl]))) return false;
    i += wl;
    while (i < len && strchr(" \t\r\n", s[i]) && s[i]) i++;
    if ((*trail = i < len && s[i] == '-')) i++;
    if (i + 1 >= len || s[i] != '%' || s[i + 1] != '}') return false;
    *end = i + 2;
    return true;
}

/* {% raw %}text{% endraw %}: the text as it is; false when L->pos is not at a raw tag. */
static sm_status lex_raw(lexer *L, bool *done) {
    size_t end, stop, after;
    bool lead, trail, lead2, trail2;
    *done = raw_tag(L->src, L->len, L->pos, "raw", &end, &lead, &trail);
    if (!*done) return SM_OK;
    const char *s = L->src;
    for (stop = end;; stop++) {
        if (stop + 1 >= L->len) return lex_fail(L, line_at(L, L->pos), "a {%% raw %%} block is not closed");
        if (raw_tag(s, L->len, stop, "endraw", &after, &lead2, &trail2)) break;
    }
    if (lead) strip_prev_text(L);
    size_t a = end, b = stop;
    if (trail) a += tpl_space_front(s + a, b - a);
    if (lead2) b -= tpl_space_back(s + a, b - a);
    if ((b > a && !push(L, K_TEXT, 0, a, s + a, b - a)) || !push(L, K_SCLOSE, 1, after, NULL, 0))
        return sm_error_set(L->err, SM_ERR_NOMEM, "%s: out of memory", L->t->name);
    L->pos = after;
    if (trail2) skip_space(L);
    return SM_OK;
}

static sm_status lex(lexer *L) {
    static const struct { const char *s; int op; } ops[] = {
        {"<=", Q_LE}, {">=", Q_GE}, {"==", Q_EQ}, {"!=", Q_NE}, {"**", Q_POW}, {"//", Q_FLOORDIV}};
    const char *s = L->src;
    while (L->pos < L->len) {
        int lk = last_kind(L);
        if (lk == -1 || lk == K_SCLOSE || lk == K_ECLOSE || lk == K_TEXT) {
            size_t a = L->pos;
            while (L->pos < L->len && !(s[L->pos] == '{' && L->pos + 1 < L->len &&
                                        strchr("%{#", s[L->pos + 1])))
                L->pos++;
            if (L->pos > a) {
                if (!push(L, K_TEXT, 0, a, s + a, L->pos - a)) goto nomem;
                continue;
            }
        }
        bool raw;
        sm_status rst = lex_raw(L, &raw);
        if (rst) return rst;
        if (raw) continue;
        if (s[L->pos] == '{' && L->pos + 1 < L->len && s[L->pos + 1] == '#') {
            uint32_t line = line_at(L, L->pos);
            L->pos += 2;
            bool before = L->pos < L->len && s[L->pos] == '-';
            const char *e = NULL;
            for (size_t i = L->pos; i + 1 < L->len; i++)
                if (s[i] == '#' && s[i + 1] == '}') {
                    e = s + i;
                    break;
                }
            if (!e) return lex_fail(L, line, "a comment {# is not closed");
            bool after = e > s + L->pos && e[-1] == '-';
            if (before) strip_prev_text(L);
            L->pos = (size_t)(e - s) + 2;
            if (after) skip_space(L);
            /* text may follow a comment: mark it as a statement end */
            if (!push(L, K_SCLOSE, 1, L->pos, NULL, 0)) goto nomem;
            continue;
        }
        if (L->pos + 2 < L->len && s[L->pos] == '{' && (s[L->pos + 1] == '%' || s[L->pos + 1] == '{') &&
            s[L->pos + 2] == '-') {
            strip_prev_text(L);
            if (!push(L, s[L->pos + 1] == '%' ? K_SOPEN : K_EOPEN, 0, L->pos, NULL, 0)) goto nomem;
            L->curly = 0;
            L->pos += 3;
            continue;
        }
        skip_space(L);
        if (L->pos >= L->len) break;
        if (L->pos + 2 < L->len && s[L->pos] == '-' && s[L->pos + 2] == '}' &&
            (s[L->pos + 1] == '%' || (s[L->pos + 1] == '}' && L->curly == 0))) {
            if (!push(L, s[L->pos + 1] == '%' ? K_SCLOSE : K_ECLOSE, 0, L->pos, NULL, 0)) goto nomem;
            L->pos += 3;
            skip_space(L);
            continue;
        }
        char c = s[L->pos];
        char d = L->pos + 1 < L->len ? s[L->pos + 1] : 0;
        int k = -1;
        if (c == '{' && d == '%') k = K_SOPEN;
        else if (c == '%' && d == '}') k = K_SCLOSE;
        else if (c == '{' && d == '{') k = K_EOPEN;
        else if (c == '}' && d == '}' && L->curly == 0) k = K_ECLOSE;
        if (k >= 0) {
            if (!push(L, k, 0, L->pos, NULL, 0)) goto nomem;
            if (k == K_EOPEN) L->curly = 0;
            L->pos += 2;
            continue;
        }
        int op = 0;
        for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
            if (c == ops[i].s[0] && d == ops[i].s[1]) op = ops[i].op;
        if (op) {
            if (!push(L, K_OP, op, L->pos, NULL, 0)) goto nomem;
            L->pos += 2;
            continue;
        }
        if (strchr("()[]{},.:|<>+-~*/%=", c) && c) {
            if (c == '{') L->curly++;
            if (c == '}') L->curly--;
            if (!push(L, K_OP, (unsigned char)c, L->pos, NULL, 0)) goto nomem;
            L->pos++;
            continue;
        }
        if (c == '\'' || c == '"') {
            sm_status st = lex_string(L);
            if (st) return st;
            continue;
        }
        if (is_digit(c)) {
            size_t a = L->pos;
            while (L->pos < L->len && is_digit(s[L->pos])) L->pos++;
            bool after_dot = L->n && L->tok[L->n - 1].k == K_OP && L->tok[L->n - 1].op == '.';
            if (!after_dot && L->pos + 1 < L->len && s[L->pos] == '.' && is_digit(s[L->pos + 1])) {
                L->pos++;
                while (L->pos < L->len && is_digit(s[L->pos])) L->pos++;
            }
            size_t e = L->pos; /* an exponent (1e3, 2.5E-4): a float, as Jinja reads it */
            if (!after_dot && e < L->len && (s[e] == 'e' || s[e] == 'E')) {
                e++;
                if (e < L->len && (s[e] == '+' || s[e] == '-')) e++;
                if (e < L->len && is_digit(s[e])) {
                    while (e < L->len && is_digit(s[e])) e++;
                    L->pos = e;
                }
            }
            if (!push(L, K_NUM, 0, a, s + a, L->pos - a)) goto nomem;
            continue;
        }
        if (is_word(c)) {
            size_t a = L->pos;
            while (L->pos < L->len && is_word(s[L->pos])) L->pos++;
            if (!push(L, K_NAME, 0, a, s + a, L->pos - a)) goto nomem;
            continue;
        }
        return lex_fail(L, line_at(L, L->pos), "unexpected character '%c' (0x%02x)",
                        c >= 32 && c < 127 ? c : '?', (unsigned char)c);
    }
    if (!push(L, K_EOF, 0, L->len, NULL, 0)) goto nomem;
    return SM_OK;
nomem:
    return sm_error_set(L->err, SM_ERR_NOMEM, "%s: out of memory", L->t->name);
}

/*
** transformers.js's preprocessing: one final newline dropped; spaces and
** tabs from a line's start to a {%, {# or {- removed (lstrip_blocks); the
** newline right after %}, #} or -} removed (trim_blocks; its offset kept in
** gone so that lines are still counted).
*/
/* Whether a[..i) ends in {% raw %}, whose newline Jinja keeps. */
static bool after_raw(const char *a, size_t i) {
    size_t end;
    bool x, y;
    for (size_t k = i >= 2 ? i - 2 : 0; k-- > 0 && i - k < 64;)
        if (a[k] == '{' && a[k + 1] == '%') return raw_tag(a, i, k, "raw", &end, &x, &y) && end == i;
    return false;
}

static sm_status preprocess(lexer *L, const char *src, size_t len) {
    if (len && src[len - 1] == '\n') len--;
    char *a = malloc(len + 1), *b = malloc(len + 1);
    L->gone = malloc((len + 1) * sizeof *L->gone);
    if (!a || !b || !L->gone) {
        free(a);
        free(b);
        return sm_error_set(L->err, SM_ERR_NOMEM, "%s: out of memory", L->t->name);
    }
    size_t na = 0;
    for (size_t i = 0; i < len;) {
        if (i == 0 || src[i - 1] == '\n' || src[i - 1] == '\r') {
            size_t j = i;
            while (j < len && (src[j] == ' ' || src[j] == '\t')) j++;
            if (j + 1 < len && src[j] == '{' && strchr("#%-", src[j + 1])) i = j;
        }
        a[na++] = src[i++];
    }
    size_t nb = 0;
    for (size_t i = 0; i < na; i++) {
        if (a[i] == '\n' && i >= 2 && a[i - 1] == '}' && strchr("#%-", a[i - 2]) && !after_raw(a, i)) {
            L->gone[L->n_gone++] = nb;
            continue;
        }
        b[nb++] = a[i];
    }
    free(a);
    b[nb] = 0;
    L->src = b;
    L->len = nb;
    return SM_OK;
}

sm_status tpl_lex(sm_template *t, const char *src, size_t len, ltok **toks, size_t *n_toks,
                  sm_error *err) {
    *toks = NULL;
    *n_toks = 0;
    lexer L = {.t = t, .err = err, .line = 1};
    sm_status st = memchr(src, 0, len)
                       ? sm_error_set(err, SM_ERR_FORMAT, "%s: a NUL byte in the template", t->name)
                       : preprocess(&L, src, len);
    if (!st) st = lex(&L);
    if (!st) { /* the tokens' texts move into the template's pool */
        char *keep = tpl_pool_alloc(&t->pool, L.len + 1);
        if (!keep) st = sm_error_set(err, SM_ERR_NOMEM, "%s: out of memory", t->name);
        else {
            memcpy(keep, L.src, L.len + 1);
            for (size_t i = 0; i < L.n; i++)
                if (L.tok[i].s >= L.src && L.tok[i].s <= L.src + L.len)
                    L.tok[i].s = keep + (L.tok[i].s - L.src);
        }
    }
    free(L.gone);
    free((char *)L.src);
    if (st) {
        free(L.tok);
        return st;
    }
    *toks = L.tok;
    *n_toks = L.n;
    return SM_OK;
}
