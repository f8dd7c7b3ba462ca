/*
** value.c -- template values: made from JSON, compared, printed as Python's
** Jinja prints them (what transformers and llama.cpp's templates run: True,
** None, lists and dicts as Python's repr, whole floats with ".0") and
** written as JSON by tojson (non-ASCII text kept unless ensure_ascii).
*/
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "json_internal.h"
#include "template_internal.h"

void *tpl_alloc(tpl_run *r, size_t n) {
    void *p = tpl_pool_alloc(&r->pool, n ? n : 1);
    if (!p) tpl_fail(r, "the template needs more than %zu bytes of memory", r->pool.limit);
    return p;
}

void tpl_one_line(char *out, size_t cap, const char *s, size_t n) {
    size_t k = 0, i = 0;
    for (; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char e[6] = {(char)c, 0};
        if (c == '\n' || c == '\t' || c == '\r')
            e[0] = '\\', e[1] = c == '\n' ? 'n' : c == '\t' ? 't' : 'r';
        else if (c < 0x20 || c == 0x7F)
            snprintf(e, sizeof e, "\\x%02X", c);
        size_t l = strlen(e);
        if (k + l >= cap) break;
        memcpy(out + k, e, l);
        k += l;
    }
    if (i < n) /* cut: not inside a character */
        while (k > 0 && ((unsigned char)out[k - 1] & 0x80)) {
            bool lead = ((unsigned char)out[--k] & 0xC0) == 0xC0;
            if (lead) break;
        }
    if (cap) out[k] = 0;
}

sm_status tpl_error(sm_error *err, sm_status code, const char *name, unsigned line, const char *fmt,
                    va_list ap) {
    char msg[400], one[400];
    vsnprintf(msg, sizeof msg, fmt, ap);
    tpl_one_line(one, sizeof one, msg, strlen(msg));
    return sm_error_set(err, code, "%s line %u: %s", name, line, one);
}

void tpl_fail(tpl_run *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    tpl_error(r->err, SM_ERR_INPUT, r->name, r->line, fmt, ap);
    va_end(ap);
    longjmp(r->fail, 1);
}

void tpl_emit(tpl_run *r, const char *s, size_t n) {
    if (!n) return;
    if (n > r->max_output - r->out_n)
        tpl_fail(r, "the output exceeds %zu bytes", r->max_output);
    if (r->out_n + n > r->out_cap) {
        size_t cap = r->out_cap ? r->out_cap : 4096;
        while (cap < r->out_n + n) cap *= 2;
        char *o = realloc(r->out, cap + 1);
        if (!o) tpl_fail(r, "out of memory for %zu bytes of output", cap);
        r->out = o;
        r->out_cap = cap;
    }
    memcpy(r->out + r->out_n, s, n);
    r->out_n += n;
}

tpl_val tpl_take(tpl_run *r, size_t mark) {
    if (!r->out) return tpl_str("", 0); /* nothing emitted yet (no buffer: no pointer arithmetic) */
    tpl_val s = tpl_str_copy(r, r->out + mark, r->out_n - mark);
    r->out_n = mark;
    return s;
}

tpl_val tpl_str_copy(tpl_run *r, const char *s, size_t n) {
    if (n > UINT32_MAX) tpl_fail(r, "a string of %zu bytes", n);
    char *p = tpl_alloc(r, n);
    if (n) memcpy(p, s, n);
    return tpl_str(p, n);
}

tpl_dict *tpl_dict_new(tpl_run *r, size_t cap) {
    tpl_dict *d = tpl_alloc(r, sizeof *d);
    d->n = 0;
    d->cap = (uint32_t)(cap ? cap : 4);
    d->e = tpl_alloc(r, d->cap * sizeof *d->e);
    return d;
}

tpl_val *tpl_dict_get(const tpl_dict *d, const char *k, size_t kn) {
    for (uint32_t i = 0; i < d->n; i++)
        if (d->e[i].kn == kn && !memcmp(d->e[i].k, k, kn)) return &d->e[i].v;
    return NULL;
}

void tpl_dict_set(tpl_run *r, tpl_dict *d, const char *k, size_t kn, tpl_val v) {
    tpl_val *have = tpl_dict_get(d, k, kn);
    if (have) {
        *have = v;
        return;
    }
    if (d->n == d->cap) {
        tpl_entry *e = tpl_alloc(r, 2 * (size_t)d->cap * sizeof *e);
        memcpy(e, d->e, d->n * sizeof *e);
        d->e = e;
        d->cap *= 2;
    }
    d->e[d->n++] = (tpl_entry){k, (uint32_t)kn, v};
}

tpl_val tpl_from_json(tpl_run *r, const cJSON *j) {
    if (!j || cJSON_IsNull(j)) return (tpl_val){.t = V_NONE};
    if (cJSON_IsTrue(j)) return (tpl_val){.t = V_BOOL, .u.b = true};
    if (cJSON_IsFalse(j)) return (tpl_val){.t = V_BOOL, .u.b = false};
    if (cJSON_IsNumber(j)) {
        double v = j->valuedouble; /* -40.0 in the text stays a float, as Python's json reads it */
        if (!(j->type & SM_JSON_FLOAT_TEXT) && v == floor(v) && fabs(v) < 9007199254740992.0)
            return (tpl_val){.t = V_INT, .u.i = (int64_t)v};
        return (tpl_val){.t = V_FLOAT, .u.f = v};
    }
    if (cJSON_IsString(j)) return tpl_str(j->valuestring, strlen(j->valuestring));
    size_t n = 0;
    for (const cJSON *c = j->child; c; c = c->next) n++;
    if (cJSON_IsArray(j)) {
        tpl_val *it = tpl_alloc(r, n * sizeof *it);
        size_t i = 0;
        for (const cJSON *c = j->child; c; c = c->next) it[i++] = tpl_from_json(r, c);
        return (tpl_val){.t = V_LIST, .n = (uint32_t)n, .u.items = it};
    }
    if (cJSON_IsObject(j)) {
        tpl_dict *d = tpl_dict_new(r, n);
        for (const cJSON *c = j->child; c; c = c->next)
            tpl_dict_set(r, d, c->string, strlen(c->string), tpl_from_json(r, c));
        return (tpl_val){.t = V_DICT, .u.d = d};
    }
    return (tpl_val){.t = V_UNDEF};
}

bool tpl_truthy(tpl_val v) {
    switch (v.t) {
    case V_BOOL: return v.u.b;
    case V_INT: return v.u.i != 0;
    case V_FLOAT: return v.u.f != 0 && v.u.f == v.u.f;
    case V_STR:
    case V_LIST: return v.n > 0;
    case V_DICT: return v.u.d->n > 0;
    case V_NS:
    case V_FUNC:
    case V_MACRO: return true;
    default: return false;
    }
}

static bool numeric(tpl_val v) { return v.t == V_INT || v.t == V_FLOAT || v.t == V_BOOL; }
static double num(tpl_val v) {
    return v.t == V_INT ? (double)v.u.i : v.t == V_FLOAT ? v.u.f : v.u.b;
}

static bool is_tuple(tpl_val v) { return v.fn == TPL_TUPLE || v.fn == TPL_GROUP; }

static bool py_eq(tpl_val a, tpl_val b, int depth) {
    if (depth > 200) return false;
    if (a.t == V_UNDEF || b.t == V_UNDEF) return a.t == b.t; /* Jinja: undefined equals only undefined */
    if (numeric(a) && numeric(b)) return a.t == V_INT && b.t == V_INT ? a.u.i == b.u.i : num(a) == num(b);
    if (a.t != b.t) return false;
    switch (a.t) {
    case V_NONE: return true;
    case V_STR: return a.n == b.n && !memcmp(a.u.s, b.u.s, a.n);
    case V_LIST:
        if (a.n != b.n || is_tuple(a) != is_tuple(b)) return false;
        for (uint32_t i = 0; i < a.n; i++)
            if (!py_eq(a.u.items[i], b.u.items[i], depth + 1)) return false;
        return true;
    case V_DICT:
        if (a.u.d->n != b.u.d->n) return false;
        for (uint32_t i = 0; i < a.u.d->n; i++) {
            const tpl_val *w = tpl_dict_get(b.u.d, a.u.d->e[i].k, a.u.d->e[i].kn);
            if (!w || !py_eq(a.u.d->e[i].v, *w, depth + 1)) return false;
        }
        return true;
    default: return tpl_strict_eq(a, b);
    }
}

/* ==, `in` and equalto: Python's (bool an int, lists and dicts by their items, a tuple never a list). */
bool tpl_loose_eq(tpl_val a, tpl_val b) { return py_eq(a, b, 0); }

/* the same type and value, lists and dicts by identity (sameas' base). */
bool tpl_strict_eq(tpl_val a, tpl_val b) {
    if (a.t != b.t) {
        if ((a.t == V_INT || a.t == V_FLOAT) && (b.t == V_INT || b.t == V_FLOAT))
            return num(a) == num(b);
        return false;
    }
    switch (a.t) {
    case V_UNDEF:
    case V_NONE: return true;
    case V_BOOL: return a.u.b == b.u.b;
    case V_INT: return a.u.i == b.u.i;
    case V_FLOAT: return a.u.f == b.u.f;
    case V_STR: return a.n == b.n && !memcmp(a.u.s, b.u.s, a.n);
    case V_LIST: return a.u.items == b.u.items && a.n == b.n;
    case V_DICT:
    case V_NS: return a.u.d == b.u.d;
    case V_FUNC: return a.fn == b.fn;
    default: return a.u.mac == b.u.mac;
    }
}

const char *tpl_type_name(tpl_val v) {
    static const char *const names[] = {"undefined", "none",      "boolean", "integer",
                                        "float",     "string",    "list",    "dict",
                                        "namespace", "function", "macro"};
    return names[v.t];
}

/* The shortest decimal that reads back as d (JavaScript's Number toString, short of exponents). */
static int fmt_double(char *b, size_t n, double d) {
    if (d != d) return snprintf(b, n, "NaN");
    if (isinf(d)) return snprintf(b, n, d > 0 ? "Infinity" : "-Infinity");
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(b, n, "%.*g", prec, d);
        if (strtod(b, NULL) == d) break;
    }
    return (int)strlen(b);
}

static void emit_str(tpl_run *r, const char *s) { tpl_emit(r, s, strlen(s)); }

static void print_num(tpl_run *r, tpl_val v) {
    char b[64];
    if (v.t == V_INT) snprintf(b, sizeof b, "%lld", (long long)v.u.i);
    else if (v.u.f == floor(v.u.f) && fabs(v.u.f) < 1e16) { /* Python's repr (and json): 1e16 on, an exponent */
        if (v.u.f == 0 && signbit(v.u.f)) snprintf(b, sizeof b, "-0.0");
        else snprintf(b, sizeof b, "%.1f", v.u.f);
    } else
        fmt_double(b, sizeof b, v.u.f);
    emit_str(r, b);
}

/* Python's isprintable() of one code point: what repr() keeps as it is. */
static bool py_printable(int32_t c) {
    if (c < 0x80) return c >= 0x20 && c < 0x7F;
    switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO: case UTF8PROC_CATEGORY_CN: case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP: case UTF8PROC_CATEGORY_ZS: return false;
    default: return true;
    }
}

/* A string as Python's repr() writes it: single quotes unless it holds ' and no ". */
static void py_string(tpl_run *r, const char *s, size_t n) {
    char q = memchr(s, '\'', n) && !memchr(s, '"', n) ? '"' : '\'';
    tpl_emit(r, &q, 1);
    size_t a = 0;
    for (size_t i = 0; i < n;) {
        utf8proc_int32_t c;
        utf8proc_ssize_t m = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &c);
        if (m < 1) { /* not UTF-8 (a JSON string always is): the byte as it is */
            i++;
            continue;
        }
        if (py_printable(c) && c != q && c != '\\') {
            i += (size_t)m;
            continue;
        }
        tpl_emit(r, s + a, i - a);
        char b[16];
        if (c == q || c == '\\') snprintf(b, sizeof b, "\\%c", (char)c);
        else if (c == '\n' || c == '\r' || c == '\t') snprintf(b, sizeof b, "\\%c", c == '\n' ? 'n' : c == '\r' ? 'r' : 't');
        else if (c < 0x100) snprintf(b, sizeof b, "\\x%02x", (unsigned)c);
        else if (c < 0x10000) snprintf(b, sizeof b, "\\u%04x", (unsigned)c);
        else snprintf(b, sizeof b, "\\U%08x", (unsigned)c);
        emit_str(r, b);
        i += (size_t)m;
        a = i;
    }
    tpl_emit(r, s + a, n - a);
    tpl_emit(r, &q, 1);
}

/* A value inside a list or dict, as Python's repr() writes it. */
static void py_repr(tpl_run *r, tpl_val v, int depth) {
    if (depth > 200) tpl_fail(r, "a value nested more than 200 levels");
    switch (v.t) {
    case V_UNDEF: emit_str(r, "Undefined"); return;
    case V_NONE: emit_str(r, "None"); return;
    case V_BOOL: emit_str(r, v.u.b ? "True" : "False"); return;
    case V_INT:
    case V_FLOAT: print_num(r, v); return;
    case V_STR: py_string(r, v.u.s, v.n); return;
    case V_LIST: {
        bool tuple = v.fn == TPL_TUPLE || v.fn == TPL_GROUP;
        emit_str(r, tuple ? "(" : "[");
        for (uint32_t i = 0; i < v.n; i++) {
            if (i) emit_str(r, ", ");
            py_repr(r, v.u.items[i], depth + 1);
        }
        emit_str(r, tuple ? (v.n == 1 ? ",)" : ")") : "]");
        return;
    }
    case V_DICT:
    case V_NS:
        emit_str(r, v.t == V_NS ? "<Namespace {" : "{");
        for (uint32_t i = 0; i < v.u.d->n; i++) {
            if (i) emit_str(r, ", ");
            py_string(r, v.u.d->e[i].k, v.u.d->e[i].kn);
            emit_str(r, ": ");
            py_repr(r, v.u.d->e[i].v, depth + 1);
        }
        emit_str(r, v.t == V_NS ? "}>" : "}");
        return;
    default: tpl_fail(r, "cannot print a %s", tpl_type_name(v));
    }
}

void tpl_repr(tpl_run *r, tpl_val v) { py_repr(r, v, 0); }

/* {{ v }}: str(v) as Python's Jinja prints it; an undefined value prints nothing. */
void tpl_print(tpl_run *r, tpl_val v) {
    switch (v.t) {
    case V_UNDEF: return;
    case V_STR: tpl_emit(r, v.u.s, v.n); return;
    default: py_repr(r, v, 0);
    }
}

tpl_val tpl_to_str(tpl_run *r, tpl_val v) {
    if (v.t == V_STR) return v;
    if (v.t == V_NONE) return tpl_str("None", 4); /* Jinja's str(none), for |string */
    size_t mark = r->out_n;
    tpl_print(r, v);
    return tpl_take(r, mark);
}

static void json_string(tpl_run *r, const char *s, size_t n, bool ascii) {
    tpl_emit(r, "\"", 1);
    size_t a = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        bool esc = c < 0x20 || c == '"' || c == '\\' || (ascii && c >= 0x7F);
        if (!esc) continue;
        tpl_emit(r, s + a, i - a);
        char b[16];
        const char *m = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\r' ? "\\r"
                      : c == '\t' ? "\\t" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
        if (m) emit_str(r, m);
        else if (c < 0x80) {
            snprintf(b, sizeof b, "\\u%04x", c);
            emit_str(r, b);
        } else { /* ensure_ascii: the character as UTF-16 escapes */
            uint32_t cp = c;
            size_t extra = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : 0;
            cp = extra == 3 ? c & 7 : extra == 2 ? c & 15 : extra == 1 ? c & 31 : 0xFFFD;
            for (size_t k = 0; k < extra && i + 1 < n; k++) cp = cp << 6 | (s[++i] & 63);
            if (cp >= 0x10000) {
                cp -= 0x10000;
                snprintf(b, sizeof b, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 1023));
            } else
                snprintf(b, sizeof b, "\\u%04x", cp);
            emit_str(r, b);
        }
        a = i + 1;
    }
    tpl_emit(r, s + a, n - a);
    tpl_emit(r, "\"", 1);
}

static void json_pad(tpl_run *r, int indent, int depth) {
    tpl_emit(r, "\n", 1);
    for (int i = 0; i < indent * depth; i++) tpl_emit(r, " ", 1);
}

static int key_cmp(const tpl_entry *a, const tpl_entry *b) {
    int c = memcmp(a->k, b->k, a->kn < b->kn ? a->kn : b->kn);
    return c ? c : (a->kn > b->kn) - (a->kn < b->kn);
}

void tpl_json(tpl_run *r, tpl_val v, const tpl_json_opts *o, int depth) {
    if (depth > 200) tpl_fail(r, "tojson: nested more than 200 levels");
    int indent = o->indent;
    bool ascii = o->ascii, sort_keys = o->sort_keys;
    tpl_val item_sep = o->sep[0].t == V_STR ? o->sep[0] : indent >= 0 ? tpl_str(",", 1) : tpl_str(", ", 2);
    tpl_val key_sep = o->sep[1].t == V_STR ? o->sep[1] : tpl_str(": ", 2);
    switch (v.t) {
    case V_UNDEF:
    case V_NONE: emit_str(r, "null"); return;
    case V_BOOL: emit_str(r, v.u.b ? "true" : "false"); return;
    case V_INT:
    case V_FLOAT:
        if (v.t == V_FLOAT && !isfinite(v.u.f)) emit_str(r, "null");
        else print_num(r, v);
        return;
    case V_STR: json_string(r, v.u.s, v.n, ascii); return;
    case V_LIST:
        if (!v.n) {
            emit_str(r, "[]");
            return;
        }
        emit_str(r, "[");
        for (uint32_t i = 0; i < v.n; i++) {
            if (i) tpl_emit(r, item_sep.u.s, item_sep.n);
            if (indent > 0) json_pad(r, indent, depth + 1);
            tpl_json(r, v.u.items[i], o, depth + 1);
        }
        if (indent > 0) json_pad(r, indent, depth);
        emit_str(r, "]");
        return;
    case V_DICT:
    case V_NS: {
        tpl_dict *d = v.u.d;
        if (!d->n) {
            emit_str(r, "{}");
            return;
        }
        const tpl_entry **order = tpl_alloc(r, d->n * sizeof *order);
        for (uint32_t i = 0; i < d->n; i++) order[i] = &d->e[i];
        if (sort_keys) /* insertion sort: stable, and dicts here are small */
            for (uint32_t i = 1; i < d->n; i++)
                for (uint32_t j = i; j > 0 && key_cmp(order[j - 1], order[j]) > 0; j--) {
                    const tpl_entry *t = order[j];
                    order[j] = order[j - 1];
                    order[j - 1] = t;
                }
        emit_str(r, "{");
        for (uint32_t i = 0; i < d->n; i++) {
            if (i) tpl_emit(r, item_sep.u.s, item_sep.n);
            if (indent > 0) json_pad(r, indent, depth + 1);
            json_string(r, order[i]->k, order[i]->kn, ascii);
            tpl_emit(r, key_sep.u.s, key_sep.n);
            tpl_json(r, order[i]->v, o, depth + 1);
        }
        if (indent > 0) json_pad(r, indent, depth);
        emit_str(r, "}");
        return;
    }
    default: tpl_fail(r, "tojson: cannot write a %s as JSON", tpl_type_name(v));
    }
}

/* JavaScript's \s: ASCII white space, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029,
   U+202F, U+205F, U+3000, U+FEFF. Returns the bytes of the one at s (0: none). */
static size_t space_at(const unsigned char *s, size_t n) {
    if (!n) return 0;
    if (s[0] == ' ' || (s[0] >= 9 && s[0] <= 13)) return 1;
    if (n >= 2 && s[0] == 0xC2 && s[1] == 0xA0) return 2;
    if (n < 3) return 0;
    uint32_t c = (uint32_t)(s[0] & 15) << 12 | (uint32_t)(s[1] & 63) << 6 | (s[2] & 63);
    if ((s[0] & 0xF0) != 0xE0 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80) return 0;
    bool sp = c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
              c == 0x202F || c == 0x205F || c == 0x3000 || c == 0xFEFF;
    return sp ? 3 : 0;
}

size_t tpl_space_front(const char *s, size_t n) {
    size_t i = 0, k;
    while ((k = space_at((const unsigned char *)s + i, n - i))) i += k;
    return i;
}

size_t tpl_space_back(const char *s, size_t n) {
    size_t i = n;
    for (;;) {
        if (i >= 1 && space_at((const unsigned char *)s + i - 1, 1)) {
            i--;
            continue;
        }
        if (i >= 2 && space_at((const unsigned char *)s + i - 2, 2) == 2) {
            i -= 2;
            continue;
        }
        if (i >= 3 && space_at((const unsigned char *)s + i - 3, 3) == 3) {
            i -= 3;
            continue;
        }
        return n - i;
    }
}

size_t tpl_utf8_count(const char *s, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}
