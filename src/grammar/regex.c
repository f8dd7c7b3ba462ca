/*
** regex.c -- a JSON Schema "pattern" (an ECMA-262 regular expression, the
** subset sm_regex_gbnf documents) as GBNF over the JSON text of a string's
** contents: each character the pattern takes is written as JSON writes it
** (raw, or escaped: \" \\ \n \t \r \b \f \u00XX), so the decoded value
** matches. Also the text buffer the schema compiler writes with.
*/
#include "schema_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the text buffer */

void sb_add(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->s = p, b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}

void sb_puts(sbuf *b, const char *s) {
    sb_add(b, s, strlen(s));
}

void sb_printf(sbuf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) {
        sb_add(b, tmp, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) {
        b->oom = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb_add(b, big, (size_t)n);
    free(big);
}

void sb_literal(sbuf *b, const char *s, size_t n) {
    sb_puts(b, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') sb_printf(b, "\\%c", c);
        else if (c < 0x20 || c == 0x7F) sb_printf(b, "\\x%02X", c);
        else sb_add(b, (const char *)&c, 1);
    }
    sb_puts(b, "\"");
}

/* ---- character sets */

#define MAXR 64 /* ranges in one class */

typedef struct {
    unsigned r[MAXR][2];
    size_t n;
} cset;

static int cmp_r(const void *a, const void *b) {
    const unsigned *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

static void cs_norm(cset *s) {
    qsort(s->r, s->n, sizeof s->r[0], cmp_r);
    size_t m = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (m && s->r[i][0] <= s->r[m - 1][1] + 1) {
            if (s->r[i][1] > s->r[m - 1][1]) s->r[m - 1][1] = s->r[i][1];
        } else {
            s->r[m][0] = s->r[i][0], s->r[m][1] = s->r[i][1];
            m++;
        }
    }
    s->n = m;
}

static bool cs_add(cset *s, unsigned lo, unsigned hi) {
    if (s->n == MAXR) {
        cs_norm(s);
        if (s->n == MAXR) return false;
    }
    s->r[s->n][0] = lo, s->r[s->n][1] = hi;
    s->n++;
    return true;
}

static void cs_invert(cset *s) {
    cs_norm(s);
    cset c = {.n = 0};
    unsigned next = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (s->r[i][0] > next) c.r[c.n][0] = next, c.r[c.n][1] = s->r[i][0] - 1, c.n++;
        next = s->r[i][1] + 1;
    }
    if (next <= 0x10FFFF) c.r[c.n][0] = next, c.r[c.n][1] = 0x10FFFF, c.n++;
    *s = c;
}


/* A code point in a GBNF class: printable ASCII as itself (escaped where GBNF needs), else \u/\U. */
static void class_char(sbuf *b, unsigned c) {
    if (c >= 0x20 && c < 0x7F && c != ']' && c != '[' && c != '\\' && c != '-' && c != '^' && c != '"')
        sb_printf(b, "%c", (char)c);
    else if (c <= 0xFFFF)
        sb_printf(b, "\\u%04X", c);
    else
        sb_printf(b, "\\U%08X", c);
}

static void raw_range(sbuf *raw, size_t *n_raw, unsigned lo, unsigned hi) {
    class_char(raw, lo);
    if (hi > lo) {
        sb_puts(raw, "-");
        class_char(raw, hi);
    }
    ++*n_raw;
}

void sm_json_char_set(sbuf *out, const unsigned (*ranges)[2], size_t n) {
    /* raw: the set without '"', '\' and the controls 0x00-0x1F and 0x7F, which JSON escapes */
    static const unsigned cut[3] = {'"', '\\', 0x7F};
    sbuf raw = {0};
    size_t n_raw = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned a = ranges[i][0] < 0x20 ? 0x20 : ranges[i][0], hi = ranges[i][1];
        if (hi < a) continue;
        for (size_t k = 0; k < 3; k++) {
            if (cut[k] < a || cut[k] > hi) continue;
            if (cut[k] > a) raw_range(&raw, &n_raw, a, cut[k] - 1);
            a = cut[k] + 1;
        }
        if (a <= hi) raw_range(&raw, &n_raw, a, hi);
    }
    sbuf alt = {0};
    size_t n_alt = 0;
    if (n_raw) {
        sb_puts(&alt, "[");
        sb_add(&alt, raw.s, raw.n);
        sb_puts(&alt, "]");
        n_alt++;
    }
    free(raw.s);
    /* the escaped ones: JSON's short escapes where it has them, else \u00xx */
    for (unsigned c = 0; c < 0x80; c++) {
        if (!(c < 0x20 || c == '"' || c == '\\' || c == 0x7F)) continue;
        bool in = false;
        for (size_t i = 0; i < n && !in; i++) in = ranges[i][0] <= c && c <= ranges[i][1];
        if (!in) continue;
        if (n_alt++) sb_puts(&alt, " | ");
        /* the JSON text of c: a short escape where JSON has one, else \u00xx */
        char js[8];
        const char *e = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\t' ? "\\t"
                      : c == '\r' ? "\\r" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
        if (!e) snprintf(js, sizeof js, "\\u00%02x", c), e = js;
        sb_literal(&alt, e, strlen(e));
    }
    if (n_alt == 0) sb_puts(out, "[^\\x00-\\U0010FFFF]"); /* nothing (an empty class is not GBNF) */
    else if (n_alt == 1) sb_add(out, alt.s, alt.n);
    else {
        sb_puts(out, "(");
        sb_add(out, alt.s, alt.n);
        sb_puts(out, ")");
    }
    free(alt.s);
}

/* ---- the pattern */

typedef struct {
    const char *p, *start;
    sbuf *out;
    sm_error *err;
    bool failed;
    int depth;
} rx;

static sm_status rx_fail(rx *r, const char *what) {
    if (!r->failed)
        sm_error_set(r->err, SM_ERR_INPUT, "%s at offset %ld of the pattern", what, (long)(r->p - r->start));
    r->failed = true;
    return SM_ERR_INPUT;
}

static void cs_emit(rx *r, const cset *s) {
    sm_json_char_set(r->out, (const unsigned (*)[2])s->r, s->n);
}

/* \d \w \s and their complements into s. */
static bool class_escape(char e, cset *s) {
    cset t = {.n = 0};
    switch (e) {
    case 'd': case 'D': cs_add(&t, '0', '9'); break;
    case 'w': case 'W': cs_add(&t, '0', '9'), cs_add(&t, 'A', 'Z'), cs_add(&t, 'a', 'z'), cs_add(&t, '_', '_'); break;
    case 's': case 'S':
        cs_add(&t, 9, 13), cs_add(&t, ' ', ' '), cs_add(&t, 0xA0, 0xA0), cs_add(&t, 0x1680, 0x1680);
        cs_add(&t, 0x2000, 0x200A), cs_add(&t, 0x2028, 0x2029), cs_add(&t, 0x202F, 0x202F);
        cs_add(&t, 0x205F, 0x205F), cs_add(&t, 0x3000, 0x3000), cs_add(&t, 0xFEFF, 0xFEFF);
        break;
    default: return false;
    }
    if (e == 'D' || e == 'W' || e == 'S') cs_invert(&t);
    for (size_t i = 0; i < t.n; i++) cs_add(s, t.r[i][0], t.r[i][1]);
    return true;
}

/* One (possibly escaped) literal character at r->p; false on an unsupported escape. */
static bool rx_char(rx *r, unsigned *c) {
    const unsigned char *p = (const unsigned char *)r->p;
    if (*p != '\\') {
        size_t need = p[0] < 0x80 ? 1 : (p[0] & 0xE0) == 0xC0 ? 2 : (p[0] & 0xF0) == 0xE0 ? 3 : 4;
        unsigned v = need == 1 ? p[0] : need == 2 ? p[0] & 0x1Fu : need == 3 ? p[0] & 0x0Fu : p[0] & 0x07u;
        for (size_t k = 1; k < need; k++) {
            if ((p[k] & 0xC0) != 0x80) return false;
            v = v << 6 | (p[k] & 0x3Fu);
        }
        r->p += need;
        *c = v;
        return true;
    }
    char e = r->p[1];
    r->p += 2;
    switch (e) {
    case 'n': *c = '\n'; return true;
    case 't': *c = '\t'; return true;
    case 'r': *c = '\r'; return true;
    case 'f': *c = '\f'; return true;
    case 'v': *c = '\v'; return true;
    case '0': *c = 0; return true;
    case 'x': case 'u': {
        int digits = e == 'x' ? 2 : 4;
        unsigned v = 0;
        for (int i = 0; i < digits; i++) {
            char h = r->p[i];
            int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
            if (d < 0) return false;
            v = v << 4 | (unsigned)d;
        }
        r->p += digits;
        *c = v;
        return true;
    }
    default:
        if (e && strchr("\\^$.|?*+()[]{}/-", e)) {
            *c = (unsigned char)e;
            return true;
        }
        r->p -= 2;
        return false;
    }
}

static sm_status rx_alt(rx *r);

/* [...] */
static sm_status rx_class(rx *r) {
    r->p++;
    cset s = {.n = 0};
    bool neg = *r->p == '^';
    if (neg) r->p++;
    bool first = true;
    while (*r->p && (*r->p != ']' || first)) {
        first = false;
        unsigned lo, hi;
        if (r->p[0] == '\\' && class_escape(r->p[1], &s)) {
            r->p += 2;
            continue;
        }
        if (!rx_char(r, &lo)) return rx_fail(r, "an unsupported escape in a class");
        hi = lo;
        if (r->p[0] == '-' && r->p[1] && r->p[1] != ']') {
            r->p++;
            if (!rx_char(r, &hi)) return rx_fail(r, "an unsupported escape in a class");
            if (hi < lo) return rx_fail(r, "a class range out of order");
        }
        if (!cs_add(&s, lo, hi)) return rx_fail(r, "a class with too many ranges");
    }
    if (*r->p != ']') return rx_fail(r, "an unclosed '['");
    r->p++;
    if (neg) cs_invert(&s);
    else cs_norm(&s);
    cs_emit(r, &s);
    return SM_OK;
}

static sm_status rx_quant(rx *r) {
    char q = *r->p;
    if (q == '*' || q == '+' || q == '?') {
        sb_add(r->out, r->p, 1);
        r->p++;
    } else if (q == '{') {
        const char *close = strchr(r->p, '}');
        unsigned lo = 0, hi = 0;
        int used = 0;
        char comma = 0;
        if (!close) return rx_fail(r, "an unclosed '{'");
        if (sscanf(r->p, "{%u%n", &lo, &used) == 1 && r->p[used] == '}') {
            sb_printf(r->out, "{%u}", lo);
        } else if (sscanf(r->p, "{%u%c%n", &lo, &comma, &used) == 2 && comma == ',' && r->p[used] == '}') {
            sb_printf(r->out, "{%u,}", lo);
        } else if (sscanf(r->p, "{%u,%u}%n", &lo, &hi, &used) == 2 && used && hi >= lo) {
            sb_printf(r->out, "{%u,%u}", lo, hi);
        } else {
            return rx_fail(r, "a bad repetition {m,n}");
        }
        if (lo > 10000 || hi > 10000) return rx_fail(r, "a repetition count above 10000");
        r->p = close + 1;
    } else {
        return SM_OK;
    }
    if (*r->p == '?') r->p++; /* a lazy quantifier matches the same texts */
    if (*r->p == '*' || *r->p == '+' || *r->p == '?' || *r->p == '{') return rx_fail(r, "a repeated quantifier");
    return SM_OK;
}

static sm_status rx_seq(rx *r) {
    size_t items = 0;
    while (*r->p && *r->p != '|' && *r->p != ')') {
        if (*r->p == '$' && (r->p[1] == '\0' || r->p[1] == ')' || r->p[1] == '|')) break;
        if (items++) sb_puts(r->out, " ");
        char c = *r->p;
        if (c == '(') {
            r->p++;
            if (r->p[0] == '?') {
                if (r->p[1] != ':') return rx_fail(r, "lookarounds and named groups are not supported");
                r->p += 2;
            }
            if (++r->depth > 100) return rx_fail(r, "groups nested too deeply");
            sb_puts(r->out, "(");
            if (rx_alt(r)) return SM_ERR_INPUT;
            if (*r->p != ')') return rx_fail(r, "an unclosed '('");
            r->p++;
            r->depth--;
            sb_puts(r->out, ")");
        } else if (c == '[') {
            if (rx_class(r)) return SM_ERR_INPUT;
        } else if (c == '.') {
            r->p++;
            cset s = {.n = 0};
            cs_add(&s, '\n', '\n'), cs_add(&s, '\r', '\r'), cs_add(&s, 0x2028, 0x2029);
            cs_invert(&s);
            cs_emit(r, &s);
        } else if (c == '^' || c == '$') {
            return rx_fail(r, "'^' or '$' inside the pattern is not supported (only at its ends)");
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            return rx_fail(r, "a quantifier with nothing before it");
        } else if (c == '\\' && class_escape(r->p[1], &(cset){.n = 0})) {
            cset s = {.n = 0};
            class_escape(r->p[1], &s);
            cs_norm(&s);
            r->p += 2;
            cs_emit(r, &s);
        } else if (c == '\\' && (r->p[1] == 'b' || r->p[1] == 'B')) {
            return rx_fail(r, "word boundaries are not supported");
        } else if (c == '\\' && r->p[1] >= '1' && r->p[1] <= '9') {
            return rx_fail(r, "back-references are not supported");
        } else if (c == '\\' && (r->p[1] == 'p' || r->p[1] == 'P')) {
            return rx_fail(r, "Unicode properties are not supported");
        } else {
            unsigned ch;
            if (!rx_char(r, &ch)) return rx_fail(r, "an unsupported escape");
            cset s = {.n = 0};
            cs_add(&s, ch, ch);
            cs_emit(r, &s);
        }
        if (rx_quant(r)) return SM_ERR_INPUT;
    }
    if (!items) sb_puts(r->out, "\"\"");
    return SM_OK;
}

static sm_status rx_alt(rx *r) {
    sb_puts(r->out, "(");
    if (rx_seq(r)) return SM_ERR_INPUT;
    while (*r->p == '|') {
        r->p++;
        sb_puts(r->out, " | ");
        if (rx_seq(r)) return SM_ERR_INPUT;
    }
    sb_puts(r->out, ")");
    return SM_OK;
}

sm_status sm_regex_gbnf(const char *pattern, sbuf *out, sm_error *err) {
    rx r = {.p = pattern, .start = pattern, .out = out, .err = err};
    bool head = *r.p == '^';
    if (head) r.p++;
    sb_puts(out, "(");
    if (!head) sb_puts(out, "char* ");
    if (rx_alt(&r)) return SM_ERR_INPUT;
    bool tail = *r.p == '$';
    if (tail) r.p++;
    if (*r.p) return rx_fail(&r, *r.p == ')' ? "an unmatched ')'" : "text after the end");
    if (!tail) sb_puts(out, " char*");
    sb_puts(out, ")");
    return out->oom ? sm_error_set(err, SM_ERR_NOMEM, "out of memory") : SM_OK;
}
