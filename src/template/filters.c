/*
** filters.c -- the filters, tests and string and dict methods templates
** use. Each checks its operand's type and its arguments and fails with a
** message naming itself; none changes its operand.
*/
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "template_internal.h"

const char *const tpl_filter_names[F_COUNT_] = {
    "trim", "length", "tojson", "upper", "lower", "default", "items", "join", "replace", "first",
    "last", "selectattr", "rejectattr", "list", "string", "int", "float", "abs", "capitalize",
    "title", "reverse", "map", "safe", "unique", "indent", "select", "reject", "sort", "sum",
    "min", "max", "groupby", "batch", "slice", "dictsort", "wordcount", "truncate", "round",
    "center", "attr", "escape", "bool", "format"};

const char *const tpl_test_names[T_COUNT_] = {
    "defined", "undefined", "none", "string", "number", "integer", "float", "boolean", "true",
    "false", "iterable", "mapping", "sequence", "callable", "odd", "even", "equalto", "lower",
    "upper", "in", "divisibleby", "ne", "lt", "le", "gt", "ge", "sameas", "escaped", "filter",
    "test"};

static bool name_is(const char *s, size_t n, const char *w) { return n == strlen(w) && !memcmp(s, w, n); }

static int id_in(const char *const *names, int count, const char *s, size_t n) {
    for (int i = 0; i < count; i++)
        if (name_is(s, n, names[i])) return i;
    return -1;
}

int tpl_filter_id(const char *s, size_t n) {
    static const struct { const char *alias; int id; } al[] = {
        {"d", F_DEFAULT}, {"count", F_LENGTH}, {"e", F_ESCAPE}, {"forceescape", F_ESCAPE}};
    int id = id_in(tpl_filter_names, F_COUNT_, s, n);
    for (size_t k = 0; id < 0 && k < sizeof al / sizeof al[0]; k++)
        if (name_is(s, n, al[k].alias)) id = al[k].id;
    return id;
}

int tpl_test_id(const char *s, size_t n) {
    static const struct { const char *alias; int id; } al[] = {
        {"eq", T_EQUALTO}, {"==", T_EQUALTO}, {"!=", T_NE}, {"<", T_LT}, {"lessthan", T_LT},
        {"<=", T_LE}, {">", T_GT}, {"greaterthan", T_GT}, {">=", T_GE}};
    int id = id_in(tpl_test_names, T_COUNT_, s, n);
    for (size_t k = 0; id < 0 && k < sizeof al / sizeof al[0]; k++)
        if (name_is(s, n, al[k].alias)) id = al[k].id;
    return id;
}

tpl_val tpl_list_of(tpl_run *r, size_t n) {
    if (n > UINT32_MAX) tpl_fail(r, "a list of %zu items", n);
    return (tpl_val){.t = V_LIST, .n = (uint32_t)n, .u.items = tpl_alloc(r, n * sizeof(tpl_val))};
}

static tpl_val boolean(bool b) { return (tpl_val){.t = V_BOOL, .u.b = b}; }
static tpl_val integer(int64_t i) { return (tpl_val){.t = V_INT, .u.i = i}; }

/* Case mapping code point by code point (utf8proc); invalid bytes stay. */
static tpl_val map_case(tpl_run *r, tpl_val s,
                        int how /* 0 lower, 1 upper, 2 str.title, 3 capitalize, 4 the title filter */) {
    char *o = tpl_alloc(r, (size_t)s.n * 4 + 4);
    size_t k = 0, i = 0;
    bool word_start = true, first = true;
    while (i < s.n) {
        utf8proc_int32_t c;
        utf8proc_ssize_t m = utf8proc_iterate((const utf8proc_uint8_t *)s.u.s + i, (utf8proc_ssize_t)(s.n - i), &c);
        if (m <= 0) {
            o[k++] = s.u.s[i++];
            continue;
        }
        utf8proc_int32_t d = c;
        if (how == 0) d = utf8proc_tolower(c);
        else if (how == 1) d = utf8proc_toupper(c);
        else if (how == 2) d = word_start ? utf8proc_totitle(c) : utf8proc_tolower(c);
        else if (how == 4) d = word_start ? utf8proc_toupper(c) : utf8proc_tolower(c);
        else d = first ? utf8proc_toupper(c) : utf8proc_tolower(c);
        const utf8proc_property_t *pr = utf8proc_get_property(c);
        if (how == 2) /* Python's str.title: a word starts after any character without case */
            word_start = !(pr->category >= UTF8PROC_CATEGORY_LU && pr->category <= UTF8PROC_CATEGORY_LT);
        else /* Jinja's title filter: words begin after runs of white space, '-', '(', '{', '[', '<' */
            word_start = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || c == ' ' ||
                         (c >= 9 && c <= 13) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
                         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
                         c == 0x205F || c == 0x3000 || (c >= 0x1C && c <= 0x1F);
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
    tpl_val l = tpl_list_of(r, d->n);
    for (uint32_t i = 0; i < d->n; i++) {
        tpl_val k = tpl_str(d->e[i].k, d->e[i].kn);
        if (which == 1) l.u.items[i] = k;
        else if (which == 2) l.u.items[i] = d->e[i].v;
        else {
            tpl_val pair = tpl_list_of(r, 2);
            pair.u.items[0] = k;
            pair.u.items[1] = d->e[i].v;
            pair.fn = TPL_TUPLE;
            l.u.items[i] = pair;
        }
    }
    return l;
}

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
        if (obj.fn == TPL_LOOP && name_is(name, nn, "cycle")) { /* loop.cycle(a, b, ...) */
            if (!na) tpl_fail(r, "loop.cycle() takes at least one value");
            return a[obj.u.d->e[1].v.u.i % (int64_t)na];
        }
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

const tpl_val *tpl_arg(const tpl_args *g, size_t pos, const char *name) {
    if (pos < g->na) return &g->a[pos];
    for (size_t i = 0; i < g->nkw; i++)
        if (name_is(g->kwn[i]->s, g->kwn[i]->sn, name)) return &g->kw[i];
    return NULL;
}

tpl_val tpl_attr_of(tpl_val item, tpl_val name) {
    if (name.t == V_INT) { /* attribute=0: an index */
        if (item.t != V_LIST) return (tpl_val){.t = V_UNDEF};
        int64_t i = name.u.i < 0 ? name.u.i + item.n : name.u.i;
        return i >= 0 && i < item.n ? item.u.items[i] : (tpl_val){.t = V_UNDEF};
    }
    if ((item.t == V_DICT || item.t == V_NS || item.t == V_LIST) && name.t == V_STR) {
        /* dotted paths: "function.name", "items.0" */
        tpl_val cur = item;
        const char *s = name.u.s, *end = s + name.n;
        while (s <= end) {
            const char *dot = memchr(s, '.', (size_t)(end - s));
            size_t n = dot ? (size_t)(dot - s) : (size_t)(end - s);
            if (cur.t == V_LIST && cur.fn == TPL_GROUP && cur.n == 2 &&
                (name_is(s, n, "grouper") || name_is(s, n, "list"))) { /* groupby's pairs, by name */
                cur = cur.u.items[n == 4];
            } else if (cur.t == V_LIST) {
                char *e, b[24];
                snprintf(b, sizeof b, "%.*s", (int)(n < 20 ? n : 20), s);
                long long k = strtoll(b, &e, 10);
                if (!n || *e || k < 0 || k >= cur.n) return (tpl_val){.t = V_UNDEF};
                cur = cur.u.items[k];
            } else {
                if (cur.t != V_DICT && cur.t != V_NS) return (tpl_val){.t = V_UNDEF};
                tpl_val *v = tpl_dict_get(cur.u.d, s, n);
                if (!v) return (tpl_val){.t = V_UNDEF};
                cur = *v;
            }
            if (!dot) break;
            s = dot + 1;
        }
        return cur;
    }
    return (tpl_val){.t = V_UNDEF};
}

tpl_val tpl_need_list(tpl_run *r, tpl_val v, const char *filter) {
    if (v.t == V_LIST) return v;
    if (v.t == V_STR) { /* a string's characters */
        size_t n = tpl_utf8_count(v.u.s, v.n), k = 0;
        tpl_val l = tpl_list_of(r, n);
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

tpl_val tpl_lower(tpl_run *r, tpl_val s) { return map_case(r, s, 0); }

/* Python's str.isalnum() or '_' for the code point at s: Jinja's \w (wordcount). */
static bool word_char(const char *s, size_t n, size_t *len) {
    utf8proc_int32_t c;
    utf8proc_ssize_t m = utf8proc_iterate((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &c);
    *len = m > 0 ? (size_t)m : 1;
    if (m <= 0) return false;
    int cat = (int)utf8proc_category(c);
    return c == '_' || (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
           (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO) ||
           (cat >= UTF8PROC_CATEGORY_MN && cat <= UTF8PROC_CATEGORY_ME);
}

/* Python's int(s, base) (underscores between digits, white space around), else float(s). */
static bool parse_number(tpl_val v, int base, double *d, int64_t *i, bool *is_int) {
    char b[80];
    if (v.n >= sizeof b) return false;
    size_t k = 0;
    for (uint32_t j = 0; j < v.n; j++) /* "1_000": an underscore between digits goes */
        if (v.u.s[j] != '_' || j == 0 || j + 1 == v.n || v.u.s[j - 1] == '_' || v.u.s[j + 1] == '_')
            b[k++] = v.u.s[j];
    b[k] = 0;
    const char *p = b;
    while (*p == ' ' || (*p >= '\t' && *p <= '\r')) p++;
    char *e;
    errno = 0;
    long long x = strtoll(p, &e, base);
    const char *q = e;
    while (*q == ' ' || (*q >= '\t' && *q <= '\r')) q++;
    if (e != p && !*q && !errno && !(base == 16 && p[0] == '0' && (p[1] | 32) == 'x' && e == p + 1)) {
        *is_int = true, *i = x, *d = (double)x;
        return true;
    }
    double f = strtod(p, &e);
    q = e;
    while (*q == ' ' || (*q >= '\t' && *q <= '\r')) q++;
    if (e == p || *q) return false;
    for (const char *c = p; c < e; c++) /* Python's float() takes no hex and no "infinity" spellings of C's */
        if ((*c | 32) == 'x') return false;
    *is_int = false, *d = f;
    return true;
}

tpl_val tpl_apply_filter(tpl_run *r, int f, tpl_val v, const tpl_args *g) {
    const tpl_val *a = g->a;
    size_t na = g->na;
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
        const tpl_val *ind = tpl_arg(g, TPL_KW_ONLY, "indent");
        if (!ind && na) ind = &a[0];
        const tpl_val *asc = tpl_arg(g, TPL_KW_ONLY, "ensure_ascii"), *sk = tpl_arg(g, TPL_KW_ONLY, "sort_keys");
        if (ind && ind->t != V_INT && ind->t != V_NONE) tpl_fail(r, "tojson: indent must be an integer");
        if (ind && ind->t == V_INT && (ind->u.i < 0 || ind->u.i > 64)) tpl_fail(r, "tojson: indent out of range");
        tpl_json_opts o = {.indent = ind && ind->t == V_INT && ind->u.i > 0 ? (int)ind->u.i : -1,
                           .ascii = asc && tpl_truthy(*asc), .sort_keys = sk && tpl_truthy(*sk)};
        const tpl_val *sep = tpl_arg(g, TPL_KW_ONLY, "separators"); /* (item, key), as Python's json */
        if (sep && sep->t != V_NONE) {
            if (sep->t != V_LIST || sep->n != 2 || sep->u.items[0].t != V_STR || sep->u.items[1].t != V_STR)
                tpl_fail(r, "tojson: separators must be two strings");
            o.sep[0] = sep->u.items[0], o.sep[1] = sep->u.items[1];
        }
        size_t mark = r->out_n;
        tpl_json(r, v, &o, 0);
        return tpl_take(r, mark);
    }
    case F_UPPER:
    case F_LOWER:
    case F_CAPITALIZE:
    case F_TITLE:
        if (v.t != V_STR) tpl_fail(r, "%s: expected a string, got a %s", fname, tpl_type_name(v));
        return map_case(r, v, f == F_LOWER ? 0 : f == F_UPPER ? 1 : f == F_TITLE ? 4 : 3);
    case F_DEFAULT: {
        const tpl_val *bo = tpl_arg(g, 1, "boolean");
        if (v.t == V_UNDEF || (bo && tpl_truthy(*bo) && !tpl_truthy(v)))
            return na ? a[0] : tpl_str("", 0);
        return v;
    }
    case F_ITEMS:
        if (v.t == V_UNDEF) return tpl_list_of(r, 0);
        if (v.t != V_DICT) tpl_fail(r, "items: expected a dict, got a %s", tpl_type_name(v));
        return dict_items(r, v.u.d, 0);
    case F_JOIN: {
        tpl_val l = tpl_need_list(r, v, fname);
        tpl_val sep = na ? a[0] : tpl_str("", 0);
        const tpl_val *at = tpl_arg(g, TPL_KW_ONLY, "attribute");
        if (sep.t != V_STR) tpl_fail(r, "join: the separator must be a string");
        size_t mark = r->out_n;
        for (uint32_t i = 0; i < l.n; i++) {
            if (i) tpl_emit(r, sep.u.s, sep.n);
            tpl_print(r, at ? tpl_attr_of(l.u.items[i], *at) : l.u.items[i]);
        }
        return tpl_take(r, mark);
    }
    case F_REPLACE:
        if (v.t != V_STR) tpl_fail(r, "replace: expected a string, got a %s", tpl_type_name(v));
        if (na < 2) tpl_fail(r, "replace: takes two arguments");
        return replace(r, v, a[0], a[1], na > 2 && a[2].t == V_INT ? a[2].u.i : -1);
    case F_FIRST:
    case F_LAST: {
        tpl_val l = tpl_need_list(r, v, fname);
        if (!l.n) return (tpl_val){.t = V_UNDEF};
        return l.u.items[f == F_FIRST ? 0 : l.n - 1];
    }
    case F_LIST: return tpl_need_list(r, v, fname);
    case F_STRING: return tpl_to_str(r, v);
    case F_INT:
    case F_FLOAT: { /* Jinja: int(value, base), else int(float(value)), else the default */
        const tpl_val *df = tpl_arg(g, 0, "default");
        const tpl_val *bs = tpl_arg(g, 1, "base");
        int base = bs && bs->t == V_INT ? (int)bs->u.i : 10;
        if (base != 0 && (base < 2 || base > 36)) tpl_fail(r, "int: base must be 0 or 2 to 36");
        double d = 0;
        int64_t iv = 0;
        bool is_int = false, ok = true;
        if (v.t == V_INT) is_int = true, iv = v.u.i, d = (double)v.u.i;
        else if (v.t == V_BOOL) is_int = true, iv = v.u.b, d = v.u.b;
        else if (v.t == V_FLOAT) d = v.u.f;
        else if (v.t == V_STR) ok = parse_number(v, f == F_INT ? base : 10, &d, &iv, &is_int);
        else ok = false;
        if (!ok) {
            if (df) return *df;
            return f == F_INT ? integer(0) : (tpl_val){.t = V_FLOAT, .u.f = 0};
        }
        if (f == F_FLOAT) return (tpl_val){.t = V_FLOAT, .u.f = d};
        if (is_int) return integer(iv);
        if (!(fabs(d) < 9.2e18)) tpl_fail(r, "int: %g is out of range", d);
        return integer((int64_t)d);
    }
    case F_BOOL: return boolean(tpl_truthy(v));
    case F_FORMAT: { /* "%s=%d" | format(a, b): Python's %, or %(key)s with keyword arguments */
        if (v.t != V_STR) tpl_fail(r, "format: expected a string, got a %s", tpl_type_name(v));
        if (g->nkw && na) tpl_fail(r, "format: positional and keyword arguments at once");
        if (g->nkw) {
            tpl_dict *d = tpl_dict_new(r, g->nkw);
            for (size_t k = 0; k < g->nkw; k++) tpl_dict_set(r, d, g->kwn[k]->s, g->kwn[k]->sn, g->kw[k]);
            return tpl_percent(r, v, (tpl_val){.t = V_DICT, .u.d = d});
        }
        tpl_val t = tpl_list_of(r, na);
        for (size_t k = 0; k < na; k++) t.u.items[k] = a[k];
        t.fn = TPL_TUPLE;
        return tpl_percent(r, v, t);
    }
    case F_ABS:
        if (v.t == V_INT && v.u.i == INT64_MIN) tpl_fail(r, "abs: %lld has no 64-bit absolute value", (long long)INT64_MIN);
        if (v.t == V_INT) return integer(v.u.i < 0 ? -v.u.i : v.u.i);
        if (v.t == V_FLOAT) return (tpl_val){.t = V_FLOAT, .u.f = fabs(v.u.f)};
        tpl_fail(r, "abs: expected a number, got a %s", tpl_type_name(v));
    case F_REVERSE: {
        if (v.t == V_STR) {
            tpl_val l = tpl_need_list(r, v, fname);
            char *o = tpl_alloc(r, v.n);
            size_t k = 0;
            for (uint32_t i = l.n; i-- > 0;) memcpy(o + k, l.u.items[i].u.s, l.u.items[i].n), k += l.u.items[i].n;
            return tpl_str(o, k);
        }
        tpl_val l = tpl_need_list(r, v, fname), o = tpl_list_of(r, l.n);
        for (uint32_t i = 0; i < l.n; i++) o.u.items[i] = l.u.items[l.n - 1 - i];
        return o;
    }
    case F_SAFE: return v;
    case F_INDENT: { /* indent(width=4, first=False, blank=False); width may be a string */
        if (v.t != V_STR) tpl_fail(r, "indent: expected a string, got a %s", tpl_type_name(v));
        const tpl_val *w = tpl_arg(g, 0, "width");
        const tpl_val *fi = tpl_arg(g, 1, "first");
        const tpl_val *bl = tpl_arg(g, 2, "blank");
        tpl_val pad = tpl_str("    ", 4);
        if (w && w->t == V_STR) pad = *w;
        else if (w && w->t == V_INT) {
            if (w->u.i < 0 || w->u.i > 256) tpl_fail(r, "indent: width out of range");
            char *sp = tpl_alloc(r, (size_t)w->u.i + 1);
            memset(sp, ' ', (size_t)w->u.i);
            pad = tpl_str(sp, (size_t)w->u.i);
        } else if (w)
            tpl_fail(r, "indent: width must be an integer or a string");
        bool blank = bl && tpl_truthy(*bl);
        size_t mark = r->out_n;
        for (size_t i = 0; i < v.n;) { /* line by line: "\n" ends a line (Python's splitlines, in short) */
            const char *nl = memchr(v.u.s + i, '\n', v.n - i);
            size_t e = nl ? (size_t)(nl - v.u.s) + 1 : v.n;
            bool empty = e - i == (nl ? 1u : 0u) || (e - i == 2 && nl && v.u.s[i] == '\r');
            if (i == 0 ? fi && tpl_truthy(*fi) : blank || !empty) tpl_emit(r, pad.u.s, pad.n);
            tpl_emit(r, v.u.s + i, e - i);
            i = e;
        }
        if (!v.n && fi && tpl_truthy(*fi)) tpl_emit(r, pad.u.s, pad.n);
        return tpl_take(r, mark);
    }
    case F_WORDCOUNT: {
        if (v.t != V_STR) v = tpl_to_str(r, v);
        int64_t words = 0;
        bool in = false;
        for (size_t i = 0, m; i < v.n; i += m) {
            bool w = word_char(v.u.s + i, v.n - i, &m);
            words += w && !in;
            in = w;
        }
        return integer(words);
    }
    case F_TRUNCATE: { /* truncate(length=255, killwords=False, end='...', leeway=5), in characters */
        if (v.t != V_STR) v = tpl_to_str(r, v);
        const tpl_val *ln = tpl_arg(g, 0, "length");
        const tpl_val *kill = tpl_arg(g, 1, "killwords");
        const tpl_val *end = tpl_arg(g, 2, "end");
        const tpl_val *lw = tpl_arg(g, 3, "leeway");
        int64_t length = ln && ln->t == V_INT ? ln->u.i : 255, leeway = lw && lw->t == V_INT ? lw->u.i : 5;
        tpl_val e = end && end->t == V_STR ? *end : tpl_str("...", 3);
        int64_t el = (int64_t)tpl_utf8_count(e.u.s, e.n);
        if (length < el) tpl_fail(r, "truncate: length %lld is shorter than the end text", (long long)length);
        if (leeway < 0) tpl_fail(r, "truncate: leeway must be >= 0");
        int64_t chars = (int64_t)tpl_utf8_count(v.u.s, v.n);
        if (chars - leeway <= length) return v; /* (length + leeway could overflow) */
        size_t cut = 0; /* bytes of the first length - el characters */
        for (int64_t k = 0; k < length - el; k++) {
            cut++;
            while (cut < v.n && ((unsigned char)v.u.s[cut] & 0xC0) == 0x80) cut++;
        }
        if (!(kill && tpl_truthy(*kill))) { /* back to the last space: rsplit(" ", 1)[0] */
            size_t sp = cut;
            while (sp > 0 && v.u.s[sp - 1] != ' ') sp--;
            if (sp > 0) cut = sp - 1;
        }
        size_t mark = r->out_n;
        tpl_emit(r, v.u.s, cut);
        tpl_emit(r, e.u.s, e.n);
        return tpl_take(r, mark);
    }
    case F_ROUND: { /* round(precision=0, method='common'): a float */
        const tpl_val *pr = tpl_arg(g, 0, "precision");
        const tpl_val *me = tpl_arg(g, 1, "method");
        if (v.t != V_INT && v.t != V_FLOAT) tpl_fail(r, "round: expected a number, got a %s", tpl_type_name(v));
        int64_t p = pr && pr->t == V_INT ? pr->u.i : 0;
        if (p < -20 || p > 20) tpl_fail(r, "round: precision out of range");
        double x = v.t == V_INT ? (double)v.u.i : v.u.f, sc = pow(10, (double)p), y = x * sc;
        if (me && me->t == V_STR && name_is(me->u.s, me->n, "floor")) y = floor(y);
        else if (me && me->t == V_STR && name_is(me->u.s, me->n, "ceil")) y = ceil(y);
        else if (!me || (me->t == V_STR && name_is(me->u.s, me->n, "common"))) {
            double fl = floor(y); /* Python's round(): halves to even */
            y = y - fl > 0.5 || (y - fl == 0.5 && fmod(fl, 2) != 0) ? fl + 1 : fl;
        } else
            tpl_fail(r, "round: method must be common, ceil or floor");
        return (tpl_val){.t = V_FLOAT, .u.f = y / sc};
    }
    case F_CENTER: {
        if (v.t != V_STR) v = tpl_to_str(r, v);
        const tpl_val *w = tpl_arg(g, 0, "width");
        int64_t width = w && w->t == V_INT ? w->u.i : 80, chars = (int64_t)tpl_utf8_count(v.u.s, v.n);
        if (width > 4096) tpl_fail(r, "center: width out of range");
        if (width <= chars) return v;
        int64_t left = (width - chars) / 2 + ((width - chars) & width & 1); /* Python's str.center */
        size_t mark = r->out_n;
        for (int64_t k = 0; k < left; k++) tpl_emit(r, " ", 1);
        tpl_emit(r, v.u.s, v.n);
        for (int64_t k = 0; k < width - chars - left; k++) tpl_emit(r, " ", 1);
        return tpl_take(r, mark);
    }
    case F_ATTR:
        if (!na) tpl_fail(r, "attr: takes an attribute name");
        /* getattr: a namespace's attributes; a dict's keys are not attributes */
        return a[0].t == V_STR && v.t == V_NS ? tpl_attr_of(v, a[0]) : (tpl_val){.t = V_UNDEF};
    case F_ESCAPE: { /* markupsafe's escape: & < > ' " */
        if (v.t == V_UNDEF || v.t == V_NONE) return v.t == V_NONE ? tpl_str("None", 4) : tpl_str("", 0);
        if (v.t != V_STR) v = tpl_to_str(r, v);
        size_t mark = r->out_n;
        for (uint32_t i = 0; i < v.n; i++) {
            const char *rep = v.u.s[i] == '&' ? "&amp;" : v.u.s[i] == '<' ? "&lt;" : v.u.s[i] == '>' ? "&gt;"
                              : v.u.s[i] == '\'' ? "&#39;" : v.u.s[i] == '"' ? "&#34;" : NULL;
            if (rep) tpl_emit(r, rep, strlen(rep));
            else tpl_emit(r, v.u.s + i, 1);
        }
        return tpl_take(r, mark);
    }
    case F_SELECTATTR:
    case F_REJECTATTR:
    case F_MAP:
    case F_UNIQUE:
    case F_SELECT:
    case F_REJECT:
    case F_SORT:
    case F_SUM:
    case F_MIN:
    case F_MAX:
    case F_GROUPBY:
    case F_BATCH:
    case F_SLICE:
    case F_DICTSORT: return tpl_seq_filter(r, f, v, g);
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
        return tpl_loose_eq(v, a[0]);
    case T_LOWER: return is_lower_upper(v, false);
    case T_UPPER: return is_lower_upper(v, true);
    case T_IN:
        if (!na) tpl_fail(r, "in takes a sequence to look in");
        return tpl_truthy(tpl_binary(r, OP_IN, v, a[0]));
    case T_DIVISIBLEBY:
        if (!na || (a[0].t != V_INT) || v.t != V_INT) tpl_fail(r, "divisibleby takes integers");
        if (!a[0].u.i) tpl_fail(r, "divisibleby 0");
        return a[0].u.i == -1 || v.u.i % a[0].u.i == 0;
    case T_NE:
    case T_LT:
    case T_LE:
    case T_GT:
    case T_GE: {
        static const int ops[] = {OP_NE, OP_LT, OP_LE, OP_GT, OP_GE};
        if (!na) tpl_fail(r, "%s takes a value to compare with", tpl_test_names[t]);
        return tpl_truthy(tpl_binary(r, ops[t - T_NE], v, a[0]));
    }
    case T_SAMEAS:
        if (!na) tpl_fail(r, "sameas takes a value to compare with");
        return v.t == a[0].t && (v.t == V_NONE || v.t == V_UNDEF || v.t == V_BOOL ? tpl_strict_eq(v, a[0])
                                 : v.t == V_LIST ? v.u.items == a[0].u.items
                                 : v.t == V_DICT || v.t == V_NS ? v.u.d == a[0].u.d
                                 : tpl_strict_eq(v, a[0]));
    case T_ESCAPED: return false;
    case T_FILTER: return v.t == V_STR && tpl_filter_id(v.u.s, v.n) >= 0;
    case T_TEST: return v.t == V_STR && tpl_test_id(v.u.s, v.n) >= 0;
    }
    tpl_fail(r, "unknown test");
}
