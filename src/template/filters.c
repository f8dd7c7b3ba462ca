/*
** filters.c -- the filters, tests and string and dict methods templates
** use. Each checks its operand's type and its arguments and fails with a
** message naming itself; none changes its operand.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "template_internal.h"

const char *const tpl_filter_names[F_COUNT_] = {
    "trim", "length", "tojson", "upper", "lower", "default", "items", "join", "replace", "first",
    "last", "selectattr", "rejectattr", "list", "string", "int", "float", "abs", "capitalize",
    "title", "reverse", "map", "safe", "unique", "indent"};

const char *const tpl_test_names[T_COUNT_] = {
    "defined", "undefined", "none", "string", "number", "integer", "float", "boolean", "true",
    "false", "iterable", "mapping", "sequence", "callable", "odd", "even", "equalto", "lower",
    "upper"};

static tpl_val list_of(tpl_run *r, size_t n) {
    if (n > UINT32_MAX) tpl_fail(r, "a list of %zu items", n);
    return (tpl_val){.t = V_LIST, .n = (uint32_t)n, .u.items = tpl_alloc(r, n * sizeof(tpl_val))};
}

static tpl_val boolean(bool b) { return (tpl_val){.t = V_BOOL, .u.b = b}; }
static tpl_val integer(int64_t i) { return (tpl_val){.t = V_INT, .u.i = i}; }

/* Case mapping code point by code point (utf8proc); invalid bytes stay. */
static tpl_val map_case(tpl_run *r, tpl_val s, int how /* 0 lower, 1 upper, 2 title, 3 capitalize */) {
    char *o = tpl_alloc(r, (size_t)s.n * 4 + 4);
    size_t k = 0, i = 0;
    bool word_start = true, first = true;
    while (i < s.n) {
        utf8proc_int32_t c;
        utf8proc_ssize_t m = utf8proc_iterate((const utf8proc_uint8_t *)s.u.s + i, s.n - i, &c);
        if (m <= 0) {
            o[k++] = s.u.s[i++];
            continue;
        }
        utf8proc_int32_t d = c;
        if (how == 0) d = utf8proc_tolower(c);
        else if (how == 1) d = utf8proc_toupper(c);
        else if (how == 2) d = word_start ? utf8proc_totitle(c) : utf8proc_tolower(c);
        else d = first ? utf8proc_toupper(c) : utf8proc_tolower(c);
        const utf8proc_property_t *pr = utf8proc_get_property(c);
        word_start = !(pr->category <= UTF8PROC_CATEGORY_LO || pr->category == UTF8PROC_CATEGORY_ND ||
                       c == '\'' || (pr->category >= UTF8PROC_CATEGORY_MN && pr->category <= UTF8PROC_CATEGORY_ME));
        first = false;
        k += (size_t)utf8proc_encode_char(d, (utf8proc_uint8_t *)o + k);
        i += (size_t)m;
    }
    return tpl_str(o, k);
}

static bool has_chars(tpl_val set, const char *s, size_t n) {
    for (size_t i = 0; i + n <= set.n; i++)
        if (!memcmp(set.u.s + i, s, n)) return true;
    return false;
}

/* strip/lstrip/rstrip: white space (JavaScript's), or the characters of chars. */
static tpl_val strip(tpl_val s, const tpl_val *chars, bool front, bool back) {
    size_t a = 0, b = s.n;
    if (!chars || chars->t != V_STR) {
        if (front) a = tpl_space_front(s.u.s, b);
        if (back && b > a) b -= tpl_space_back(s.u.s + a, b - a);
        return tpl_str(s.u.s + a, b - a);
    }
    while (front && a < b) {
        size_t m = 1;
        while (a + m < b && ((unsigned char)s.u.s[a + m] & 0xC0) == 0x80) m++;
        if (!has_chars(*chars, s.u.s + a, m)) break;
        a += m;
    }
    while (back && b > a) {
        size_t m = 1;
        while (b - m > a && ((unsigned char)s.u.s[b - m] & 0xC0) == 0x80) m++;
        if (!has_chars(*chars, s.u.s + b - m, m)) break;
        b -= m;
    }
    return tpl_str(s.u.s + a, b - a);
}

static const char *find(const char *h, size_t hn, const char *nd, size_t nn) {
    if (!nn) return h;
    for (size_t i = 0; i + nn <= hn; i++)
        if (h[i] == nd[0] && !memcmp(h + i, nd, nn)) return h + i;
    return NULL;
}

static tpl_val replace(tpl_run *r, tpl_val s, tpl_val from, tpl_val to, int64_t count) {
    if (from.t != V_STR || to.t != V_STR) tpl_fail(r, "replace: the arguments must be strings");
    size_t mark = r->out_n;
    size_t i = 0;
    int64_t done = 0;
    if (!from.n) { /* Python: the new text between characters, and at both ends */
        for (;;) {
            if (count < 0 || done < count) tpl_emit(r, to.u.s, to.n), done++;
            if (i >= s.n) break;
            size_t m = 1;
            while (i + m < s.n && ((unsigned char)s.u.s[i + m] & 0xC0) == 0x80) m++;
            tpl_emit(r, s.u.s + i, m);
            i += m;
        }
    } else {
        const char *p;
        while ((count < 0 || done < count) && (p = find(s.u.s + i, s.n - i, from.u.s, from.n))) {
            tpl_emit(r, s.u.s + i, (size_t)(p - s.u.s) - i);
            tpl_emit(r, to.u.s, to.n);
            i = (size_t)(p - s.u.s) + from.n;
            done++;
        }
        tpl_emit(r, s.u.s + i, s.n - i);
    }
    return tpl_take(r, mark);
}

static tpl_val split(tpl_run *r, tpl_val s, const tpl_val *sep, int64_t maxsplit) {
    size_t cap = s.n + 1, n = 0;
    tpl_val *parts = tpl_alloc(r, cap * sizeof *parts);
    size_t i = 0;
    if (!sep || sep->t == V_NONE || sep->t == V_UNDEF) { /* runs of white space */
        i = tpl_space_front(s.u.s, s.n);
        while (i < s.n) {
            if (maxsplit >= 0 && (int64_t)n >= maxsplit) {
                parts[n++] = tpl_str(s.u.s + i, s.n - i);
                break;
            }
            size_t j = i;
            while (j < s.n && !tpl_space_front(s.u.s + j, s.n - j)) j++;
            parts[n++] = tpl_str(s.u.s + i, j - i);
            i = j + tpl_space_front(s.u.s + j, s.n - j);
        }
    } else {
        if (sep->t != V_STR) tpl_fail(r, "split: the separator must be a string");
        if (!sep->n) tpl_fail(r, "split: empty separator");
        const char *p;
        while ((maxsplit < 0 || (int64_t)n < maxsplit) &&
               (p = find(s.u.s + i, s.n - i, sep->u.s, sep->n))) {
            parts[n++] = tpl_str(s.u.s + i, (size_t)(p - s.u.s) - i);
            i = (size_t)(p - s.u.s) + sep->n;
        }
        parts[n++] = tpl_str(s.u.s + i, s.n - i);
    }
    return (tpl_val){.t = V_LIST, .n = (uint32_t)n, .u.items = parts};
}

static bool starts(tpl_run *r, tpl_val s, tpl_val p, bool end, const char *what) {
    if (p.t == V_LIST) {
        for (uint32_t i = 0; i < p.n; i++)
            if (starts(r, s, p.u.items[i], end, what)) return true;
        return false;
    }
    if (p.t != V_STR) tpl_fail(r, "%s: the argument must be a string or a tuple of strings", what);
    if (p.n > s.n) return false;
    return !memcmp(s.u.s + (end ? s.n - p.n : 0), p.u.s, p.n);
}

static tpl_val dict_items(tpl_run *r, tpl_dict *d, int which /* 0 items, 1 keys, 2 values */) {
    tpl_val l = list_of(r, d->n);
    for (uint32_t i = 0; i < d->n; i++) {
        tpl_val k = tpl_str(d->e[i].k, d->e[i].kn);
        if (which == 1) l.u.items[i] = k;
        else if (which == 2) l.u.items[i] = d->e[i].v;
        else {
            tpl_val pair = list_of(r, 2);
            pair.u.items[0] = k;
            pair.u.items[1] = d->e[i].v;
            l.u.items[i] = pair;
        }
    }
    return l;
}

static bool name_is(const char *s, size_t n, const char *w) { return n == strlen(w) && !memcmp(s, w, n); }

tpl_val tpl_call_method(tpl_run *r, tpl_val obj, const char *name, size_t nn, const tpl_val *a,
                        size_t na) {
    if (obj.t == V_STR) {
        if (name_is(name, nn, "upper")) return map_case(r, obj, 1);
        if (name_is(name, nn, "lower")) return map_case(r, obj, 0);
        if (name_is(name, nn, "title")) return map_case(r, obj, 2);
        if (name_is(name, nn, "capitalize")) return map_case(r, obj, 3);
        if (name_is(name, nn, "strip")) return strip(obj, na ? a : NULL, true, true);
        if (name_is(name, nn, "lstrip")) return strip(obj, na ? a : NULL, true, false);
        if (name_is(name, nn, "rstrip")) return strip(obj, na ? a : NULL, false, true);
        if (name_is(name, nn, "startswith") || name_is(name, nn, "endswith")) {
            if (!na) tpl_fail(r, "%.*s() takes an argument", (int)nn, name);
            return boolean(starts(r, obj, a[0], name[0] == 'e', name[0] == 'e' ? "endswith" : "startswith"));
        }
        if (name_is(name, nn, "split")) {
            if (na > 1 && a[1].t != V_INT) tpl_fail(r, "split: maxsplit must be an integer");
            return split(r, obj, na ? a : NULL, na > 1 ? a[1].u.i : -1);
        }
        if (name_is(name, nn, "replace")) {
            if (na < 2) tpl_fail(r, "replace() takes two arguments");
            if (na > 2 && a[2].t != V_INT && a[2].t != V_NONE) tpl_fail(r, "replace: count must be an integer");
            return replace(r, obj, a[0], a[1], na > 2 && a[2].t == V_INT ? a[2].u.i : -1);
        }
    } else if (obj.t == V_DICT) {
        if (name_is(name, nn, "items")) return dict_items(r, obj.u.d, 0);
        if (name_is(name, nn, "keys")) return dict_items(r, obj.u.d, 1);
        if (name_is(name, nn, "values")) return dict_items(r, obj.u.d, 2);
        if (name_is(name, nn, "get")) {
            if (!na || a[0].t != V_STR) tpl_fail(r, "get() takes a string key");
            tpl_val *v = tpl_dict_get(obj.u.d, a[0].u.s, a[0].n);
            return v ? *v : na > 1 ? a[1] : (tpl_val){.t = V_NONE};
        }
    }
    tpl_fail(r, "a %s has no method '%.*s'", tpl_type_name(obj), (int)(nn > 40 ? 40 : nn), name);
}

/* A keyword argument's value, or NULL. */
static const tpl_val *kwarg(const tpl_val *kw, const tpl_node *const *kwn, size_t nkw, const char *name) {
    for (size_t i = 0; i < nkw; i++)
        if (name_is(kwn[i]->s, kwn[i]->sn, name)) return &kw[i];
    return NULL;
}

static tpl_val attr_of(tpl_val item, tpl_val name) {
    if ((item.t == V_DICT || item.t == V_NS) && name.t == V_STR) {
        /* dotted paths: "function.name" */
        tpl_val cur = item;
        const char *s = name.u.s, *end = s + name.n;
        while (s <= end) {
            const char *dot = memchr(s, '.', (size_t)(end - s));
            size_t n = dot ? (size_t)(dot - s) : (size_t)(end - s);
            if (cur.t != V_DICT && cur.t != V_NS) return (tpl_val){.t = V_UNDEF};
            tpl_val *v = tpl_dict_get(cur.u.d, s, n);
            if (!v) return (tpl_val){.t = V_UNDEF};
            cur = *v;
            if (!dot) break;
            s = dot + 1;
        }
        return cur;
    }
    return (tpl_val){.t = V_UNDEF};
}

static int test_by_name(tpl_val name) {
    if (name.t != V_STR) return -1;
    for (int i = 0; i < T_COUNT_; i++)
        if (name_is(name.u.s, name.n, tpl_test_names[i])) return i;
    if (name_is(name.u.s, name.n, "eq") || name_is(name.u.s, name.n, "==") ||
        name_is(name.u.s, name.n, "sameas"))
        return T_EQUALTO;
    return -1;
}

static tpl_val need_list(tpl_run *r, tpl_val v, const char *filter) {
    if (v.t == V_LIST) return v;
    if (v.t == V_STR) { /* a string's characters */
        size_t n = tpl_utf8_count(v.u.s, v.n), k = 0;
        tpl_val l = list_of(r, n);
        for (size_t i = 0; i < v.n;) {
            size_t m = 1;
            while (i + m < v.n && ((unsigned char)v.u.s[i + m] & 0xC0) == 0x80) m++;
            l.u.items[k++] = tpl_str(v.u.s + i, m);
            i += m;
        }
        return l;
    }
    if (v.t == V_DICT) return dict_items(r, v.u.d, 1);
    tpl_fail(r, "%s: expected a list, got a %s", filter, tpl_type_name(v));
}

tpl_val tpl_apply_filter(tpl_run *r, int f, tpl_val v, const tpl_val *a, size_t na,
                         const tpl_val *kw, const tpl_node *const *kwn, size_t nkw) {
    const char *fname = tpl_filter_names[f];
    switch (f) {
    case F_TRIM:
        if (v.t != V_STR) tpl_fail(r, "trim: expected a string, got a %s", tpl_type_name(v));
        return strip(v, na ? a : NULL, true, true);
    case F_LENGTH:
        if (v.t == V_STR) return integer((int64_t)tpl_utf8_count(v.u.s, v.n));
        if (v.t == V_LIST) return integer(v.n);
        if (v.t == V_DICT) return integer(v.u.d->n);
        tpl_fail(r, "length: a %s has no length", tpl_type_name(v));
    case F_TOJSON: {
        const tpl_val *ind = kwarg(kw, kwn, nkw, "indent");
        if (!ind && na) ind = &a[0];
        const tpl_val *asc = kwarg(kw, kwn, nkw, "ensure_ascii"), *sk = kwarg(kw, kwn, nkw, "sort_keys");
        if (ind && ind->t != V_INT && ind->t != V_NONE) tpl_fail(r, "tojson: indent must be an integer");
        if (ind && ind->t == V_INT && (ind->u.i < 0 || ind->u.i > 64)) tpl_fail(r, "tojson: indent out of range");
        size_t mark = r->out_n;
        tpl_json(r, v, ind && ind->t == V_INT && ind->u.i > 0 ? (int)ind->u.i : -1,
                 asc && tpl_truthy(*asc), sk && tpl_truthy(*sk), 0);
        return tpl_take(r, mark);
    }
    case F_UPPER:
    case F_LOWER:
    case F_CAPITALIZE:
    case F_TITLE:
        if (v.t != V_STR) tpl_fail(r, "%s: expected a string, got a %s", fname, tpl_type_name(v));
        return map_case(r, v, f == F_LOWER ? 0 : f == F_UPPER ? 1 : f == F_TITLE ? 2 : 3);
    case F_DEFAULT: {
        const tpl_val *bo = na > 1 ? &a[1] : kwarg(kw, kwn, nkw, "boolean");
        if (v.t == V_UNDEF || (bo && tpl_truthy(*bo) && !tpl_truthy(v)))
            return na ? a[0] : tpl_str("", 0);
        return v;
    }
    case F_ITEMS:
        if (v.t == V_UNDEF) return list_of(r, 0);
        if (v.t != V_DICT) tpl_fail(r, "items: expected a dict, got a %s", tpl_type_name(v));
        return dict_items(r, v.u.d, 0);
    case F_JOIN: {
        tpl_val l = need_list(r, v, fname);
        tpl_val sep = na ? a[0] : tpl_str("", 0);
        const tpl_val *at = kwarg(kw, kwn, nkw, "attribute");
        if (sep.t != V_STR) tpl_fail(r, "join: the separator must be a string");
        size_t mark = r->out_n;
        for (uint32_t i = 0; i < l.n; i++) {
            if (i) tpl_emit(r, sep.u.s, sep.n);
            tpl_print(r, at ? attr_of(l.u.items[i], *at) : l.u.items[i]);
        }
        return tpl_take(r, mark);
    }
    case F_REPLACE:
        if (v.t != V_STR) tpl_fail(r, "replace: expected a string, got a %s", tpl_type_name(v));
        if (na < 2) tpl_fail(r, "replace: takes two arguments");
        return replace(r, v, a[0], a[1], na > 2 && a[2].t == V_INT ? a[2].u.i : -1);
    case F_FIRST:
    case F_LAST: {
        tpl_val l = need_list(r, v, fname);
        if (!l.n) return (tpl_val){.t = V_UNDEF};
        return l.u.items[f == F_FIRST ? 0 : l.n - 1];
    }
    case F_SELECTATTR:
    case F_REJECTATTR: {
        if (v.t == V_UNDEF) return list_of(r, 0);
        tpl_val l = need_list(r, v, fname);
        if (!na || a[0].t != V_STR) tpl_fail(r, "%s: the first argument must be an attribute name", fname);
        int test = -1;
        if (na > 1) {
            test = test_by_name(a[1]);
            if (test < 0) tpl_fail(r, "%s: unknown test", fname);
        }
        tpl_val o = list_of(r, l.n);
        o.n = 0;
        for (uint32_t i = 0; i < l.n; i++) {
            tpl_val x = attr_of(l.u.items[i], a[0]);
            bool ok = test < 0 ? tpl_truthy(x) : tpl_apply_test(r, test, x, a + 2, na - 2);
            if (ok == (f == F_SELECTATTR)) o.u.items[o.n++] = l.u.items[i];
        }
        return o;
    }
    case F_LIST: return need_list(r, v, fname);
    case F_STRING: return tpl_to_str(r, v);
    case F_INT:
    case F_FLOAT: {
        double d = 0;
        if (v.t == V_INT || v.t == V_FLOAT || v.t == V_BOOL) d = v.t == V_INT ? (double)v.u.i : v.t == V_FLOAT ? v.u.f : v.u.b;
        else if (v.t == V_STR) {
            char b[64];
            size_t n = v.n < 63 ? v.n : 63;
            memcpy(b, v.u.s, n);
            b[n] = 0;
            char *e;
            d = strtod(b, &e);
            if (e == b) d = na && (a[0].t == V_INT || a[0].t == V_FLOAT) ? (a[0].t == V_INT ? (double)a[0].u.i : a[0].u.f) : 0;
        }
        if (f == F_FLOAT) return (tpl_val){.t = V_FLOAT, .u.f = d};
        if (!(fabs(d) < 9.2e18)) tpl_fail(r, "int: %g is out of range", d);
        return integer((int64_t)d);
    }
    case F_ABS:
        if (v.t == V_INT && v.u.i == INT64_MIN) tpl_fail(r, "abs: %lld has no 64-bit absolute value", (long long)INT64_MIN);
        if (v.t == V_INT) return integer(v.u.i < 0 ? -v.u.i : v.u.i);
        if (v.t == V_FLOAT) return (tpl_val){.t = V_FLOAT, .u.f = fabs(v.u.f)};
        tpl_fail(r, "abs: expected a number, got a %s", tpl_type_name(v));
    case F_REVERSE: {
        if (v.t == V_STR) {
            tpl_val l = need_list(r, v, fname);
            char *o = tpl_alloc(r, v.n);
            size_t k = 0;
            for (uint32_t i = l.n; i-- > 0;) memcpy(o + k, l.u.items[i].u.s, l.u.items[i].n), k += l.u.items[i].n;
            return tpl_str(o, k);
        }
        tpl_val l = need_list(r, v, fname), o = list_of(r, l.n);
        for (uint32_t i = 0; i < l.n; i++) o.u.items[i] = l.u.items[l.n - 1 - i];
        return o;
    }
    case F_MAP: {
        tpl_val l = need_list(r, v, fname);
        const tpl_val *at = kwarg(kw, kwn, nkw, "attribute");
        if (!at) tpl_fail(r, "map: only map(attribute=NAME) is supported");
        tpl_val o = list_of(r, l.n);
        for (uint32_t i = 0; i < l.n; i++) o.u.items[i] = attr_of(l.u.items[i], *at);
        return o;
    }
    case F_SAFE: return v;
    case F_UNIQUE: {
        tpl_val l = need_list(r, v, fname), o = list_of(r, l.n);
        o.n = 0;
        for (uint32_t i = 0; i < l.n; i++) {
            bool seen = false;
            for (uint32_t j = 0; j < o.n && !seen; j++) seen = tpl_strict_eq(o.u.items[j], l.u.items[i]);
            if (!seen) o.u.items[o.n++] = l.u.items[i];
        }
        return o;
    }
    case F_INDENT: {
        if (v.t != V_STR) tpl_fail(r, "indent: expected a string, got a %s", tpl_type_name(v));
        int64_t width = na && a[0].t == V_INT ? a[0].u.i : 4;
        const tpl_val *fi = na > 1 ? &a[1] : kwarg(kw, kwn, nkw, "first");
        if (width < 0 || width > 256) tpl_fail(r, "indent: width out of range");
        size_t mark = r->out_n;
        for (size_t i = 0; i < v.n; i++) {
            if ((i == 0 && fi && tpl_truthy(*fi)) || (i > 0 && v.u.s[i - 1] == '\n' && v.u.s[i] != '\n'))
                for (int64_t k = 0; k < width; k++) tpl_emit(r, " ", 1);
            tpl_emit(r, v.u.s + i, 1);
        }
        return tpl_take(r, mark);
    }
    }
    tpl_fail(r, "unknown filter");
}

static bool is_lower_upper(tpl_val v, bool upper) {
    if (v.t != V_STR) return false;
    for (uint32_t i = 0; i < v.n; i++) {
        char c = v.u.s[i];
        if (upper ? (c >= 'a' && c <= 'z') : (c >= 'A' && c <= 'Z')) return false;
    }
    return true;
}

bool tpl_apply_test(tpl_run *r, int t, tpl_val v, const tpl_val *a, size_t na) {
    switch (t) {
    case T_DEFINED: return v.t != V_UNDEF;
    case T_UNDEFINED: return v.t == V_UNDEF;
    case T_NONE: return v.t == V_NONE;
    case T_STRING: return v.t == V_STR;
    case T_NUMBER: return v.t == V_INT || v.t == V_FLOAT;
    case T_INTEGER: return v.t == V_INT;
    case T_FLOATT: return v.t == V_FLOAT;
    case T_BOOLEAN: return v.t == V_BOOL;
    case T_TRUE: return v.t == V_BOOL && v.u.b;
    case T_FALSE: return v.t == V_BOOL && !v.u.b;
    case T_ITERABLE: return v.t == V_LIST || v.t == V_STR; /* as transformers.js: not dicts */
    case T_MAPPING: return v.t == V_DICT;
    case T_SEQUENCE: return v.t == V_LIST || v.t == V_DICT || v.t == V_STR;
    case T_CALLABLE: return v.t == V_FUNC || v.t == V_MACRO;
    case T_ODD:
    case T_EVEN:
        if (v.t != V_INT) tpl_fail(r, "%s: expected an integer, got a %s", tpl_test_names[t], tpl_type_name(v));
        return ((v.u.i % 2) != 0) == (t == T_ODD);
    case T_EQUALTO:
        if (!na) tpl_fail(r, "equalto takes a value to compare with");
        return tpl_strict_eq(v, a[0]);
    case T_LOWER: return is_lower_upper(v, false);
    case T_UPPER: return is_lower_upper(v, true);
    }
    tpl_fail(r, "unknown test");
}
