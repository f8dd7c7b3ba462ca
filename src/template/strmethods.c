/*
** strmethods.c -- the rest of Python's str methods templates call (join,
** find, count, the is* tests, partition, rsplit, zfill, format, ...),
** list.index and list.count, and Python's two string formattings: '%'
** (printf style; the format filter too) and str.format. Each fails naming
** itself where Python raises.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "template_internal.h"

static bool is(const char *s, size_t n, const char *w) { return n == strlen(w) && !memcmp(s, w, n); }
static tpl_val integer(int64_t i) { return (tpl_val){.t = V_INT, .u.i = i}; }
static tpl_val boolean(bool b) { return (tpl_val){.t = V_BOOL, .u.b = b}; }
static void emits(tpl_run *r, const char *s) { tpl_emit(r, s, strlen(s)); }

/* Bytes of the code point at s[0..n) (an invalid byte: one). */
static size_t cp_at(const char *s, size_t n, int32_t *c) {
    utf8proc_int32_t v;
    utf8proc_ssize_t m = utf8proc_iterate((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &v);
    if (m < 1) {
        *c = (unsigned char)s[0];
        return 1;
    }
    *c = v;
    return (size_t)m;
}

/* The bytes of s's first prec characters (all of s when prec < 0): a precision on a string. */
static size_t first_chars(tpl_val s, int64_t prec) {
    if (prec < 0) return s.n;
    size_t b = 0;
    for (int64_t k = 0; k < prec && b < s.n; k++) {
        int32_t c;
        b += cp_at(s.u.s + b, s.n - b, &c);
    }
    return b;
}

static bool py_space(int32_t c) {
    return (c >= 9 && c <= 13) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
           c == 0x3000;
}

/* Python's str.isdigit / isalpha / isalnum / isspace / isupper / islower / isdecimal / isnumeric */
static bool char_class(const char *w, int32_t c) {
    utf8proc_category_t k = utf8proc_category(c);
    bool alpha = k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO;
    bool dec = k == UTF8PROC_CATEGORY_ND, num = dec || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
    if (!strcmp(w, "isalpha")) return alpha;
    if (!strcmp(w, "isdecimal")) return dec;
    if (!strcmp(w, "isdigit")) return dec || (k == UTF8PROC_CATEGORY_NO && utf8proc_get_property(c)->decomp_type);
    if (!strcmp(w, "isnumeric")) return num;
    if (!strcmp(w, "isalnum")) return alpha || num;
    return py_space(c); /* isspace */
}

static tpl_val str_is(tpl_val s, const char *w) {
    if (!s.n) return boolean(false);
    bool upper = !strcmp(w, "isupper"), lower = !strcmp(w, "islower");
    bool cased = false;
    for (size_t i = 0; i < s.n;) {
        int32_t c;
        i += cp_at(s.u.s + i, s.n - i, &c);
        if (upper || lower) { /* every cased character so, and at least one */
            bool up = utf8proc_tolower(c) != c, lo = utf8proc_toupper(c) != c;
            if ((upper && lo) || (lower && up)) return boolean(false);
            cased |= up || lo;
        } else if (!char_class(w, c))
            return boolean(false);
    }
    return boolean(upper || lower ? cased : true);
}

static const char *find_in(const char *h, size_t hn, const char *nd, size_t nn, bool last) {
    if (nn > hn) return NULL;
    for (size_t k = 0; k + nn <= hn; k++) {
        size_t i = last ? hn - nn - k : k;
        if (!memcmp(h + i, nd, nn)) return h + i;
    }
    return NULL;
}

/* A code point offset of byte offset b in s. */
static int64_t cp_index(tpl_val s, size_t b) { return (int64_t)tpl_utf8_count(s.u.s, b); }

static tpl_val need_str(tpl_run *r, const tpl_val *a, size_t na, size_t i, const char *m) {
    if (i >= na || a[i].t != V_STR) tpl_fail(r, "%s() takes a string argument", m);
    return a[i];
}

/* s padded to width code points by fill, the text placed as align says ('<', '>', '^'). */
static void pad(tpl_run *r, const char *s, size_t n, int64_t width, tpl_val fill, char align) {
    int64_t len = (int64_t)tpl_utf8_count(s, n), gap = width > len ? width - len : 0;
    int64_t left = align == '>' ? gap : align == '^' ? gap / 2 : 0;
    if (gap > (int64_t)r->max_output) tpl_fail(r, "a string longer than %zu bytes", r->max_output);
    for (int64_t i = 0; i < left; i++) tpl_emit(r, fill.u.s, fill.n);
    tpl_emit(r, s, n);
    for (int64_t i = left; i < gap; i++) tpl_emit(r, fill.u.s, fill.n);
}

static tpl_val justify(tpl_run *r, tpl_val s, const tpl_val *a, size_t na, char align, const char *m) {
    if (!na || a[0].t != V_INT) tpl_fail(r, "%s() takes an integer width", m);
    tpl_val fill = na > 1 ? a[1] : tpl_str(" ", 1);
    if (fill.t != V_STR || tpl_utf8_count(fill.u.s, fill.n) != 1)
        tpl_fail(r, "%s(): the fill character must be exactly one character long", m);
    size_t mark = r->out_n;
    int64_t len = (int64_t)tpl_utf8_count(s.u.s, s.n), gap = a[0].u.i - len;
    if (align == '^' && gap > 0) { /* Python's str.center: the odd one left when width is odd */
        int64_t left = gap / 2 + (gap & a[0].u.i & 1);
        if (gap > (int64_t)r->max_output) tpl_fail(r, "a string longer than %zu bytes", r->max_output);
        for (int64_t k = 0; k < left; k++) tpl_emit(r, fill.u.s, fill.n);
        tpl_emit(r, s.u.s, s.n);
        for (int64_t k = left; k < gap; k++) tpl_emit(r, fill.u.s, fill.n);
        return tpl_take(r, mark);
    }
    pad(r, s.u.s, s.n, a[0].u.i, fill, align);
    return tpl_take(r, mark);
}

static tpl_val three(tpl_run *r, tpl_val a, tpl_val b, tpl_val c) {
    tpl_val t = tpl_list_of(r, 3);
    t.u.items[0] = a, t.u.items[1] = b, t.u.items[2] = c;
    t.fn = TPL_TUPLE;
    return t;
}

/* Digits of m (magnitude) in base 2, 8, 10 or 16, grouped by sep every 3 (10) or 4 digits. */
static void digits(char *out, size_t cap, unsigned long long m, int base, bool upper, char sep) {
    char tmp[100];
    size_t k = 0, d = 0;
    int every = base == 10 ? 3 : 4;
    do {
        if (sep && d && d % (size_t)every == 0) tmp[k++] = sep;
        tmp[k++] = (upper ? "0123456789ABCDEF" : "0123456789abcdef")[m % (unsigned)base];
        m /= (unsigned)base, d++;
    } while (m && k < sizeof tmp - 2);
    size_t o = 0;
    while (k && o + 1 < cap) out[o++] = tmp[--k];
    out[o] = 0;
}

/* ---- printf-style '%' formatting (Python's str % args) */

static int64_t as_int(tpl_run *r, tpl_val v, char conv) {
    if (v.t == V_INT) return v.u.i;
    if (v.t == V_BOOL) return v.u.b;
    if (v.t == V_FLOAT && (conv == 'd' || conv == 'i' || conv == 'u')) {
        if (!isfinite(v.u.f) || fabs(v.u.f) >= 9.2e18) tpl_fail(r, "%%%c: %g does not fit in an integer", conv, v.u.f);
        return (int64_t)v.u.f;
    }
    tpl_fail(r, "%%%c format: a number is required, not %s", conv, tpl_type_name(v));
}

static double as_float(tpl_run *r, tpl_val v, char conv) {
    if (v.t == V_FLOAT) return v.u.f;
    if (v.t == V_INT) return (double)v.u.i;
    if (v.t == V_BOOL) return v.u.b;
    tpl_fail(r, "%%%c format: a real number is required, not %s", conv, tpl_type_name(v));
}

/* One conversion: flags, width and precision (-1: none) as C's printf has them, Python's rules. */
static void percent_one(tpl_run *r, const char *flags, int64_t width, int64_t prec, char conv, tpl_val v) {
    char f[32], b[512];
    bool left = strchr(flags, '-') != NULL;
    if (conv == 's' || conv == 'r' || conv == 'a' || conv == 'c') {
        size_t mark = r->out_n;
        if (conv == 'c') {
            if (v.t == V_INT) {
                if (v.u.i < 0 || v.u.i > 0x10FFFF) tpl_fail(r, "%%c arg not in range(0x110000)");
                utf8proc_uint8_t u[4];
                tpl_emit(r, (const char *)u, (size_t)utf8proc_encode_char((utf8proc_int32_t)v.u.i, u));
            } else if (v.t == V_STR && tpl_utf8_count(v.u.s, v.n) == 1)
                tpl_emit(r, v.u.s, v.n);
            else
                tpl_fail(r, "%%c requires an integer or a single character");
        } else if (conv == 's')
            tpl_print(r, v);
        else
            tpl_repr(r, v);
        tpl_val t = tpl_take(r, mark);
        pad(r, t.u.s, first_chars(t, prec), width, tpl_str(" ", 1), left ? '<' : '>');
        return;
    }
    if (width > 400 || prec > 300) tpl_fail(r, "%%%c: width or precision too large", conv);
    int w = (int)width, p = (int)prec;
    if (strchr("diouxX", conv)) { /* sign, Python's 0x / 0o with '#', zeros to the precision */
        int64_t i = as_int(r, v, conv);
        unsigned long long m = i < 0 ? -(unsigned long long)i : (unsigned long long)i;
        int base = conv == 'o' ? 8 : conv == 'x' || conv == 'X' ? 16 : 10;
        char d[80], head[8];
        digits(d, sizeof d, m, base, conv == 'X', 0);
        snprintf(head, sizeof head, "%s%s", i < 0 ? "-" : strchr(flags, '+') ? "+" : strchr(flags, ' ') ? " " : "",
                 !strchr(flags, '#') || base == 10 ? "" : conv == 'o' ? "0o" : conv == 'x' ? "0x" : "0X");
        int64_t zeros = p > (int)strlen(d) ? p - (int64_t)strlen(d) : 0;
        int64_t len = (int64_t)(strlen(head) + strlen(d)) + zeros;
        if (!left && strchr(flags, '0') && p < 0 && w > len) zeros += w - len, len = w;
        if (!left) for (int64_t k = len; k < w; k++) tpl_emit(r, " ", 1);
        emits(r, head);
        for (int64_t k = 0; k < zeros; k++) tpl_emit(r, "0", 1);
        emits(r, d);
        if (left) for (int64_t k = len; k < w; k++) tpl_emit(r, " ", 1);
        return;
    } else if (strchr("eEfFgG", conv)) {
        double x = as_float(r, v, conv);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
        if (p >= 0) snprintf(f, sizeof f, "%%%s*.*%c", flags, conv);
        else snprintf(f, sizeof f, "%%%s*%c", flags, conv);
        if (p >= 0) snprintf(b, sizeof b, f, w, p, x);
        else snprintf(b, sizeof b, f, w, x);
#pragma GCC diagnostic pop
    } else
        tpl_fail(r, "unsupported format character '%c' (0x%x)", conv >= 32 && conv < 127 ? conv : '?',
                 (unsigned char)conv);
    emits(r, b);
}

tpl_val tpl_percent(tpl_run *r, tpl_val fmt, tpl_val args) {
    bool tuple = args.t == V_LIST && args.fn == TPL_TUPLE, map = args.t == V_DICT;
    const tpl_val *av = tuple ? args.u.items : &args;
    size_t an = tuple ? args.n : 1, used = 0;
    bool keyed = false;
    size_t mark = r->out_n;
    const char *s = fmt.u.s;
    size_t n = fmt.n, i = 0;
    while (i < n) {
        const char *pct = memchr(s + i, '%', n - i);
        if (!pct) {
            tpl_emit(r, s + i, n - i);
            break;
        }
        tpl_emit(r, s + i, (size_t)(pct - s) - i);
        i = (size_t)(pct - s) + 1;
        if (i < n && s[i] == '%') {
            tpl_emit(r, "%", 1);
            i++;
            continue;
        }
        tpl_val v = {.t = V_UNDEF};
        bool have = false;
        if (i < n && s[i] == '(') { /* %(key)s from a dict */
            const char *close = memchr(s + i, ')', n - i);
            if (!close) tpl_fail(r, "incomplete format key");
            if (!map) tpl_fail(r, "format requires a mapping");
            tpl_val *e = tpl_dict_get(args.u.d, s + i + 1, (size_t)(close - s) - i - 1);
            if (!e) tpl_fail(r, "format key '%.*s' is missing", (int)((size_t)(close - s) - i - 1 > 40 ? 40 : (size_t)(close - s) - i - 1), s + i + 1);
            v = *e, have = keyed = true;
            i = (size_t)(close - s) + 1;
        }
        char flags[8] = {0};
        size_t nf = 0;
        while (i < n && strchr("-+ #0", s[i]) && s[i]) {
            if (nf < 6 && !strchr(flags, s[i])) flags[nf++] = s[i];
            i++;
        }
        int64_t width = 0, prec = -1;
        if (i < n && s[i] == '*') tpl_fail(r, "'*' widths in %% formats are not supported");
        while (i < n && s[i] >= '0' && s[i] <= '9' && width < 100000) width = width * 10 + (s[i++] - '0');
        if (i < n && s[i] == '.') {
            prec = 0;
            i++;
            while (i < n && s[i] >= '0' && s[i] <= '9' && prec < 100000) prec = prec * 10 + (s[i++] - '0');
        }
        while (i < n && (s[i] == 'h' || s[i] == 'l' || s[i] == 'L')) i++;
        if (i >= n) tpl_fail(r, "incomplete format");
        char conv = s[i++];
        if (!have) {
            if (map && !tuple) v = args, used = 1;
            else if (used >= an) tpl_fail(r, "not enough arguments for format string");
            else v = av[used++];
        }
        percent_one(r, flags, width, prec, conv, v);
    }
    if (!map && !keyed && used < an) tpl_fail(r, "not all arguments converted during string formatting");
    return tpl_take(r, mark);
}

/* ---- str.format */

/* The field's value: {0}, {name}, {} (next), then .attr and [key] steps. */
static tpl_val field_value(tpl_run *r, const char *f, size_t n, const tpl_args *g, size_t *next) {
    size_t i = 0;
    while (i < n && f[i] != '.' && f[i] != '[') i++;
    tpl_val v;
    if (!i) {
        if (*next == (size_t)-1) tpl_fail(r, "format: cannot switch from manual field specification to automatic field numbering");
        if (*next >= g->na) tpl_fail(r, "format: replacement index %zu out of range", *next);
        v = g->a[(*next)++];
    } else if (f[0] >= '0' && f[0] <= '9') {
        if (*next != 0 && *next != (size_t)-1)
            tpl_fail(r, "format: cannot switch from automatic field numbering to manual field specification");
        *next = (size_t)-1;
        size_t k = (size_t)strtoull(f, NULL, 10);
        if (k >= g->na) tpl_fail(r, "format: replacement index %zu out of range", k);
        v = g->a[k];
    } else {
        const tpl_val *kw = NULL;
        for (size_t k = 0; k < g->nkw && !kw; k++)
            if (g->kwn[k]->sn == i && !memcmp(g->kwn[k]->s, f, i)) kw = &g->kw[k];
        if (!kw) tpl_fail(r, "format: no argument '%.*s'", (int)(i > 40 ? 40 : i), f);
        v = *kw;
    }
    while (i < n) {
        size_t a = i + 1, b = a;
        if (f[i] == '.') {
            while (b < n && f[b] != '.' && f[b] != '[') b++;
        } else {
            while (b < n && f[b] != ']') b++;
            if (b >= n) tpl_fail(r, "format: missing ']' in a field");
        }
        bool num = b > a && f[a] >= '0' && f[a] <= '9' && f[i] == '[';
        tpl_val key = num ? integer(strtoll(f + a, NULL, 10)) : tpl_str(f + a, b - a);
        v = tpl_attr_of(v, key);
        if (v.t == V_UNDEF) tpl_fail(r, "format: the field '%.*s' has no '%.*s'", (int)(n > 40 ? 40 : n), f,
                                     (int)(b - a > 40 ? 40 : b - a), f + a);
        i = f[i] == '[' ? b + 1 : b;
    }
    return v;
}

/* One value by a format spec [[fill]align][sign][#][0][width][,_][.precision][type]. */
static void format_spec(tpl_run *r, tpl_val v, const char *sp, size_t n) {
    size_t i = 0;
    tpl_val fill = tpl_str(" ", 1);
    char align = 0, sign = '-', type = 0, group = 0;
    bool alt = false;
    int64_t width = 0, prec = -1;
    int32_t c0;
    size_t m0 = n ? cp_at(sp, n, &c0) : 0;
    if (m0 && m0 < n && strchr("<>^=", sp[m0])) fill = tpl_str(sp, m0), align = sp[m0], i = m0 + 1;
    else if (n && strchr("<>^=", sp[0])) align = sp[0], i = 1;
    if (i < n && strchr("+- ", sp[i])) sign = sp[i++];
    if (i < n && sp[i] == '#') alt = true, i++;
    if (i < n && sp[i] == '0') {
        if (!align) fill = tpl_str("0", 1), align = '=';
        i++;
    }
    while (i < n && sp[i] >= '0' && sp[i] <= '9' && width < 100000) width = width * 10 + (sp[i++] - '0');
    if (i < n && (sp[i] == ',' || sp[i] == '_')) group = sp[i++];
    if (i < n && sp[i] == '.') {
        prec = 0, i++;
        while (i < n && sp[i] >= '0' && sp[i] <= '9' && prec < 1000) prec = prec * 10 + (sp[i++] - '0');
    }
    if (i < n) type = sp[i++];
    if (i < n || (type && !strchr("sdbcoxXneEfFgG%", type)))
        tpl_fail(r, "format: invalid format specifier '%.*s'", (int)(n > 40 ? 40 : n), sp);
    if (width > 100000 || prec > 300) tpl_fail(r, "format: width or precision too large");
    size_t mark = r->out_n;
    if (v.t == V_BOOL && !n) v = tpl_to_str(r, v); /* format(True, "") is str; any spec: an int */
    if (v.t == V_STR || v.t == V_NONE || v.t == V_LIST || v.t == V_DICT || v.t == V_UNDEF) {
        if (type && type != 's') tpl_fail(r, "format: unknown code '%c' for a %s", type, tpl_type_name(v));
        tpl_val s = tpl_to_str(r, v);
        pad(r, s.u.s, first_chars(s, prec), width, fill, align && align != '=' ? align : '<');
        return;
    }
    char body[520], pre[4] = {0};
    bool neg;
    if ((v.t == V_INT || v.t == V_BOOL) && (!type || strchr("dbcoxXn", type))) {
        int64_t x = v.t == V_BOOL ? v.u.b : v.u.i;
        if (prec >= 0) tpl_fail(r, "format: precision not allowed in integer format specifier");
        if (type == 'c') {
            utf8proc_uint8_t u[4];
            if (x < 0 || x > 0x10FFFF) tpl_fail(r, "format: %%c arg not in range(0x110000)");
            size_t k = (size_t)utf8proc_encode_char((utf8proc_int32_t)x, u);
            pad(r, (const char *)u, k, width, fill, align && align != '=' ? align : '<');
            return;
        }
        neg = x < 0;
        unsigned long long m = neg ? -(unsigned long long)x : (unsigned long long)x;
        int base = type == 'b' ? 2 : type == 'o' ? 8 : (type == 'x' || type == 'X') ? 16 : 10;
        if (alt && base != 10) pre[0] = '0', pre[1] = type == 'b' ? 'b' : type == 'o' ? 'o' : type;
        digits(body, sizeof body, m, base, type == 'X', group);
    } else if (v.t == V_INT || v.t == V_FLOAT || v.t == V_BOOL) {
        double x = v.t == V_FLOAT ? v.u.f : v.t == V_INT ? (double)v.u.i : v.u.b;
        neg = signbit(x) && !isnan(x);
        double a = fabs(x);
        char t = type ? type : 'g';
        int p = prec < 0 ? 6 : (int)prec;
        if (t == '%') a *= 100, t = 'f';
        if (t == 'n') t = 'g';
        if (!type && prec < 0) { /* str(x) */
            tpl_val s = tpl_to_str(r, (tpl_val){.t = V_FLOAT, .u.f = a});
            snprintf(body, sizeof body, "%.*s", (int)s.n, s.u.s);
            r->out_n = mark;
        } else {
            char f[16];
            snprintf(f, sizeof f, "%%%s.*%c", alt ? "#" : "", t);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
            snprintf(body, sizeof body, f, p, a);
#pragma GCC diagnostic pop
            if (!type && !strchr(body, '.') && !strchr(body, 'e') && isfinite(a)) strcat(body, ".0");
        }
        if (type == '%') strcat(body, "%");
        if (group) { /* the integer part grouped */
            size_t il = 0, bl = strlen(body);
            while (il < bl && body[il] >= '0' && body[il] <= '9') il++;
            char g2[540];
            size_t o = 0;
            for (size_t k = 0; k < il && o + 2 < sizeof g2; k++) {
                if (k && (il - k) % 3 == 0) g2[o++] = group;
                g2[o++] = body[k];
            }
            for (size_t k = il; k < bl && o + 1 < sizeof g2; k++) g2[o++] = body[k];
            g2[o] = 0;
            memcpy(body, g2, o + 1 < sizeof body ? o + 1 : sizeof body);
            body[sizeof body - 1] = 0;
        }
    } else
        tpl_fail(r, "format: cannot format a %s", tpl_type_name(v));
    char head[8];
    snprintf(head, sizeof head, "%s%s", neg ? "-" : sign == '+' ? "+" : sign == ' ' ? " " : "", pre);
    if (!align) align = '>';
    if (align == '=') { /* padding after the sign */
        int64_t len = (int64_t)(strlen(head) + strlen(body));
        emits(r, head);
        for (int64_t k = len; k < width; k++) tpl_emit(r, fill.u.s, fill.n);
        emits(r, body);
        return;
    }
    char all[540];
    snprintf(all, sizeof all, "%s%s", head, body);
    pad(r, all, strlen(all), width, fill, align);
}

static tpl_val str_format(tpl_run *r, tpl_val fmt, const tpl_args *g) {
    size_t mark = r->out_n, next = 0, i = 0, n = fmt.n;
    const char *s = fmt.u.s;
    while (i < n) {
        char c = s[i];
        if ((c == '{' || c == '}') && i + 1 < n && s[i + 1] == c) {
            tpl_emit(r, &c, 1);
            i += 2;
            continue;
        }
        if (c == '}') tpl_fail(r, "format: single '}' encountered in format string");
        if (c != '{') {
            size_t j = i;
            while (j < n && s[j] != '{' && s[j] != '}') j++;
            tpl_emit(r, s + i, j - i);
            i = j;
            continue;
        }
        size_t j = i + 1;
        while (j < n && s[j] != '}' && s[j] != '{') j++;
        if (j >= n || s[j] == '{') tpl_fail(r, "format: a '{' without its '}' (nested fields are not supported)");
        const char *f = s + i + 1;
        size_t fn = j - i - 1, name = 0;
        while (name < fn && f[name] != '!' && f[name] != ':') name++;
        tpl_val v = field_value(r, f, name, g, &next);
        size_t k = name;
        if (k < fn && f[k] == '!') {
            if (k + 1 >= fn || !strchr("rsa", f[k + 1])) tpl_fail(r, "format: unknown conversion specifier");
            if (f[k + 1] != 's') {
                size_t m = r->out_n;
                tpl_repr(r, v);
                v = tpl_take(r, m);
            } else
                v = tpl_to_str(r, v);
            k += 2;
        }
        if (k < fn && f[k] != ':') tpl_fail(r, "format: expected ':' after conversion specifier");
        size_t sp = k < fn ? k + 1 : fn;
        format_spec(r, v, f + sp, fn - sp);
        i = j + 1;
    }
    return tpl_take(r, mark);
}

/* ---- the methods */

bool tpl_more_method(tpl_run *r, tpl_val obj, const char *name, size_t nn, const tpl_args *g, tpl_val *out) {
    const tpl_val *a = g->a;
    size_t na = g->na;
    if (obj.t == V_LIST) {
        if (is(name, nn, "index") || is(name, nn, "count")) {
            if (!na) tpl_fail(r, "%.*s() takes an argument", (int)nn, name);
            int64_t cnt = 0;
            for (uint32_t i = 0; i < obj.n; i++)
                if (tpl_loose_eq(obj.u.items[i], a[0])) {
                    if (name[0] == 'i') return *out = integer(i), true;
                    cnt++;
                }
            if (name[0] == 'i') tpl_fail(r, "index(): the value is not in the list");
            return *out = integer(cnt), true;
        }
        return false;
    }
    if (obj.t != V_STR) return false;
    tpl_val s = obj;
    if (is(name, nn, "format")) return *out = str_format(r, s, g), true;
    if (is(name, nn, "join")) {
        if (!na) tpl_fail(r, "join() takes an argument");
        tpl_val l = tpl_need_list(r, a[0], "join");
        size_t mark = r->out_n;
        for (uint32_t i = 0; i < l.n; i++) {
            if (l.u.items[i].t != V_STR) tpl_fail(r, "join(): item %u is a %s, not a string", i, tpl_type_name(l.u.items[i]));
            if (i) tpl_emit(r, s.u.s, s.n);
            tpl_emit(r, l.u.items[i].u.s, l.u.items[i].n);
        }
        return *out = tpl_take(r, mark), true;
    }
    if (is(name, nn, "find") || is(name, nn, "rfind") || is(name, nn, "index") || is(name, nn, "rindex") ||
        is(name, nn, "count")) {
        tpl_val sub = need_str(r, a, na, 0, "find");
        if (name[0] == 'c') {
            int64_t cnt = 0;
            if (!sub.n) return *out = integer(cp_index(s, s.n) + 1), true;
            for (size_t i = 0; i + sub.n <= s.n;)
                if (!memcmp(s.u.s + i, sub.u.s, sub.n)) cnt++, i += sub.n;
                else i++;
            return *out = integer(cnt), true;
        }
        const char *p = find_in(s.u.s, s.n, sub.u.s, sub.n, name[0] == 'r');
        if (!p && (name[0] == 'i' || name[1] == 'i')) tpl_fail(r, "%.*s(): substring not found", (int)nn, name);
        return *out = integer(p ? cp_index(s, (size_t)(p - s.u.s)) : -1), true;
    }
    static const char *const cls[] = {"isdigit", "isalpha", "isalnum", "isspace", "isupper", "islower",
                                      "isdecimal", "isnumeric"};
    for (size_t k = 0; k < sizeof cls / sizeof cls[0]; k++)
        if (is(name, nn, cls[k])) return *out = str_is(s, cls[k]), true;
    if (is(name, nn, "splitlines")) {
        tpl_val l = tpl_list_of(r, s.n + 1);
        uint32_t k = 0;
        for (size_t i = 0; i < s.n;) {
            size_t j = i, m = 0;
            for (;;) {
                if (j >= s.n) break;
                int32_t c;
                m = cp_at(s.u.s + j, s.n - j, &c);
                if (c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E) ||
                    c == 0x85 || c == 0x2028 || c == 0x2029)
                    break;
                j += m;
            }
            l.u.items[k++] = tpl_str(s.u.s + i, j - i);
            if (j < s.n && s.u.s[j] == '\r' && j + 1 < s.n && s.u.s[j + 1] == '\n') m = 2;
            i = j < s.n ? j + m : j;
        }
        l.n = k;
        return *out = l, true;
    }
    if (is(name, nn, "rsplit")) {
        const tpl_val *sep = na ? &a[0] : NULL;
        int64_t maxs = na > 1 && a[1].t == V_INT ? a[1].u.i : -1;
        if (maxs > (int64_t)s.n) maxs = (int64_t)s.n; /* no more splits than bytes */
        if (maxs < 0) return *out = tpl_call_method(r, s, "split", 5, a, na ? 1 : 0), true;
        if (!sep || sep->t == V_NONE) { /* runs of white space from the right; the rest keeps its front */
            tpl_val *parts = tpl_alloc(r, (size_t)(maxs + 1) * sizeof *parts);
            size_t k = 0, e = s.n;
            for (;;) {
                while (e > 0 && py_space((unsigned char)s.u.s[e - 1])) e--;
                if (!e) break;
                if ((int64_t)k == maxs) {
                    parts[k++] = tpl_str(s.u.s, e);
                    break;
                }
                size_t b0 = e;
                while (b0 > 0 && !py_space((unsigned char)s.u.s[b0 - 1])) b0--;
                parts[k++] = tpl_str(s.u.s + b0, e - b0);
                e = b0;
            }
            tpl_val l = tpl_list_of(r, k);
            for (size_t q = 0; q < k; q++) l.u.items[q] = parts[k - 1 - q];
            return *out = l, true;
        }
        if (sep->t != V_STR) tpl_fail(r, "rsplit: the separator must be a string");
        if (!sep->n) tpl_fail(r, "rsplit: empty separator");
        tpl_val *parts = tpl_alloc(r, (size_t)(maxs + 1) * sizeof *parts);
        size_t k = 0, e = s.n;
        const char *p;
        while ((int64_t)k < maxs && (p = find_in(s.u.s, e, sep->u.s, sep->n, true))) {
            parts[k++] = tpl_str(p + sep->n, e - (size_t)(p - s.u.s) - sep->n);
            e = (size_t)(p - s.u.s);
        }
        tpl_val l = tpl_list_of(r, k + 1);
        l.u.items[0] = tpl_str(s.u.s, e);
        for (size_t q = 0; q < k; q++) l.u.items[q + 1] = parts[k - 1 - q];
        return *out = l, true;
    }
    if (is(name, nn, "partition") || is(name, nn, "rpartition")) {
        tpl_val sep = need_str(r, a, na, 0, "partition");
        if (!sep.n) tpl_fail(r, "partition: empty separator");
        const char *p = find_in(s.u.s, s.n, sep.u.s, sep.n, name[0] == 'r');
        tpl_val e = tpl_str("", 0);
        if (!p) return *out = name[0] == 'r' ? three(r, e, e, s) : three(r, s, e, e), true;
        size_t at = (size_t)(p - s.u.s);
        return *out = three(r, tpl_str(s.u.s, at), sep, tpl_str(p + sep.n, s.n - at - sep.n)), true;
    }
    if (is(name, nn, "zfill")) {
        if (!na || a[0].t != V_INT) tpl_fail(r, "zfill() takes an integer width");
        size_t mark = r->out_n, b = s.n && (s.u.s[0] == '-' || s.u.s[0] == '+');
        int64_t len = (int64_t)tpl_utf8_count(s.u.s, s.n);
        tpl_emit(r, s.u.s, b);
        for (int64_t k = len; k < a[0].u.i; k++) tpl_emit(r, "0", 1);
        tpl_emit(r, s.u.s + b, s.n - b);
        return *out = tpl_take(r, mark), true;
    }
    if (is(name, nn, "ljust")) return *out = justify(r, s, a, na, '<', "ljust"), true;
    if (is(name, nn, "rjust")) return *out = justify(r, s, a, na, '>', "rjust"), true;
    if (is(name, nn, "center")) return *out = justify(r, s, a, na, '^', "center"), true;
    if (is(name, nn, "removeprefix") || is(name, nn, "removesuffix")) {
        tpl_val x = need_str(r, a, na, 0, "removeprefix");
        bool suf = name[6] == 's';
        if (x.n <= s.n && !memcmp(s.u.s + (suf ? s.n - x.n : 0), x.u.s, x.n))
            return *out = tpl_str(s.u.s + (suf ? 0 : x.n), s.n - x.n), true;
        return *out = s, true;
    }
    if (is(name, nn, "swapcase") || is(name, nn, "casefold")) {
        size_t mark = r->out_n;
        for (size_t i = 0; i < s.n;) {
            int32_t c;
            size_t m = cp_at(s.u.s + i, s.n - i, &c);
            int32_t d = name[0] == 'c' ? utf8proc_tolower(c)
                      : utf8proc_toupper(c) != c ? utf8proc_toupper(c) : utf8proc_tolower(c);
            utf8proc_uint8_t u[4];
            if (d == c) tpl_emit(r, s.u.s + i, m);
            else tpl_emit(r, (const char *)u, (size_t)utf8proc_encode_char(d, u));
            i += m;
        }
        return *out = tpl_take(r, mark), true;
    }
    return false;
}
