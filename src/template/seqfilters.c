/*
** seqfilters.c -- the filters over sequences: select/reject (by a test),
** selectattr/rejectattr, map (an attribute or a filter), sort, min, max,
** unique, sum, groupby, batch, slice and dictsort, as Jinja defines them:
** comparisons ignore case unless case_sensitive, sorts are stable,
** attribute names may be dotted ("function.name") or indexes. Values that
** Python cannot order (a string and a number) fail, naming the filter.
*/
#include <string.h>

#include "template_internal.h"

/* Python's ordering: numbers (and booleans) by value, strings by code point (UTF-8 bytes
   order as code points do), lists item by item; anything else is not ordered. */
static int compare(tpl_run *r, tpl_val x, tpl_val y, const char *filter) {
    bool xn = x.t == V_INT || x.t == V_FLOAT || x.t == V_BOOL, yn = y.t == V_INT || y.t == V_FLOAT || y.t == V_BOOL;
    if (xn && yn) {
        if (x.t != V_FLOAT && y.t != V_FLOAT) {
            int64_t a = x.t == V_INT ? x.u.i : x.u.b, b = y.t == V_INT ? y.u.i : y.u.b;
            return (a > b) - (a < b);
        }
        double a = x.t == V_INT ? (double)x.u.i : x.t == V_FLOAT ? x.u.f : x.u.b;
        double b = y.t == V_INT ? (double)y.u.i : y.t == V_FLOAT ? y.u.f : y.u.b;
        return (a > b) - (a < b);
    }
    if (x.t == V_STR && y.t == V_STR) {
        int c = memcmp(x.u.s, y.u.s, x.n < y.n ? x.n : y.n);
        return c ? (c > 0) - (c < 0) : (x.n > y.n) - (x.n < y.n);
    }
    if (x.t == V_LIST && y.t == V_LIST) {
        for (uint32_t i = 0; i < x.n && i < y.n; i++) {
            int c = compare(r, x.u.items[i], y.u.items[i], filter);
            if (c) return c;
        }
        return (x.n > y.n) - (x.n < y.n);
    }
    if (x.t == V_NONE && y.t == V_NONE) return 0;
    tpl_fail(r, "%s: a %s and a %s cannot be compared", filter, tpl_type_name(x), tpl_type_name(y));
}

/* The key an item is compared by: its attribute(s) (comma-separated names: a list of them),
   strings lowercased unless case_sensitive. */
static tpl_val key_of(tpl_run *r, tpl_val item, const tpl_val *attr, const tpl_val *dflt, bool cs) {
    tpl_val k = item;
    if (attr && attr->t == V_STR && memchr(attr->u.s, ',', attr->n)) {
        size_t n = 1;
        for (uint32_t i = 0; i < attr->n; i++) n += attr->u.s[i] == ',';
        tpl_val l = tpl_list_of(r, n);
        const char *s = attr->u.s, *end = s + attr->n;
        for (size_t i = 0; i < n; i++) {
            const char *c = memchr(s, ',', (size_t)(end - s));
            size_t len = c ? (size_t)(c - s) : (size_t)(end - s);
            while (len && *s == ' ') s++, len--;
            l.u.items[i] = key_of(r, item, &(tpl_val){.t = V_STR, .n = (uint32_t)len, .u.s = s}, dflt, cs);
            s = c ? c + 1 : end;
        }
        return l;
    }
    if (attr && attr->t != V_NONE && attr->t != V_UNDEF) k = tpl_attr_of(item, *attr);
    if (k.t == V_UNDEF && dflt) k = *dflt;
    return !cs && k.t == V_STR ? tpl_lower(r, k) : k;
}

/* A stable merge sort of idx[0..n) by keys (ascending, or descending when rev). */
static void sort_idx(tpl_run *r, uint32_t *idx, uint32_t *tmp, size_t n, const tpl_val *keys, bool rev,
                     const char *filter) {
    if (n < 2) return;
    size_t h = n / 2;
    sort_idx(r, idx, tmp, h, keys, rev, filter);
    sort_idx(r, idx + h, tmp, n - h, keys, rev, filter);
    size_t i = 0, j = h, o = 0;
    while (i < h && j < n) {
        int c = compare(r, keys[idx[j]], keys[idx[i]], filter);
        tmp[o++] = (rev ? c > 0 : c < 0) ? idx[j++] : idx[i++];
    }
    while (i < h) tmp[o++] = idx[i++];
    while (j < n) tmp[o++] = idx[j++];
    memcpy(idx, tmp, n * sizeof *idx);
}

/* The order of n items by their keys: a stable sort of their indexes. */
static uint32_t *sort_order(tpl_run *r, size_t n, const tpl_val *keys, bool rev, const char *filter) {
    uint32_t *idx = tpl_alloc(r, (n + 1) * sizeof *idx), *tmp = tpl_alloc(r, (n + 1) * sizeof *tmp);
    for (uint32_t i = 0; i < n; i++) idx[i] = i;
    sort_idx(r, idx, tmp, n, keys, rev, filter);
    return idx;
}

/* l sorted by the keys (returns the new list). */
static tpl_val sorted(tpl_run *r, tpl_val l, const tpl_val *keys, bool rev, const char *filter) {
    const uint32_t *idx = sort_order(r, l.n, keys, rev, filter);
    tpl_val o = tpl_list_of(r, l.n);
    for (uint32_t i = 0; i < l.n; i++) o.u.items[i] = l.u.items[idx[i]];
    return o;
}

static bool flag(const tpl_val *v) { return v && tpl_truthy(*v); }

/* select/reject (by a test on the item), selectattr/rejectattr (on an attribute). */
static tpl_val pick(tpl_run *r, int f, tpl_val v, const tpl_args *g) {
    const char *fname = tpl_filter_names[f];
    if (v.t == V_UNDEF) return tpl_list_of(r, 0);
    tpl_val l = tpl_need_list(r, v, fname);
    bool by_attr = f == F_SELECTATTR || f == F_REJECTATTR, keep = f == F_SELECT || f == F_SELECTATTR;
    if (by_attr && (!g->na || g->a[0].t != V_STR))
        tpl_fail(r, "%s: the first argument must be an attribute name", fname);
    const tpl_val *ta = g->a + by_attr; /* the test's name, then its own arguments */
    size_t tn = g->na - by_attr;
    int test = -1;
    if (tn) {
        if (ta[0].t != V_STR || (test = tpl_test_id(ta[0].u.s, ta[0].n)) < 0)
            tpl_fail(r, "%s: no test named %.*s", fname, ta[0].t == V_STR ? (int)(ta[0].n > 40 ? 40 : ta[0].n) : 1,
                     ta[0].t == V_STR ? ta[0].u.s : "?");
        ta++, tn--;
    }
    tpl_val o = tpl_list_of(r, l.n);
    o.n = 0;
    for (uint32_t i = 0; i < l.n; i++) {
        tpl_val x = by_attr ? tpl_attr_of(l.u.items[i], g->a[0]) : l.u.items[i];
        bool ok = test < 0 ? tpl_truthy(x) : tpl_apply_test(r, test, x, ta, tn);
        if (ok == keep) o.u.items[o.n++] = l.u.items[i];
    }
    return o;
}

/* map(attribute=NAME, default=V) or map(FILTER, args...). */
static tpl_val map(tpl_run *r, tpl_val v, const tpl_args *g) {
    if (v.t == V_UNDEF) return tpl_list_of(r, 0);
    tpl_val l = tpl_need_list(r, v, "map"), o = tpl_list_of(r, l.n);
    const tpl_val *at = tpl_arg(g, TPL_KW_ONLY, "attribute"), *df = tpl_arg(g, TPL_KW_ONLY, "default");
    if (at) {
        for (uint32_t i = 0; i < l.n; i++) {
            tpl_val x = tpl_attr_of(l.u.items[i], *at);
            o.u.items[i] = x.t == V_UNDEF && df ? *df : x;
        }
        return o;
    }
    int f;
    if (!g->na || g->a[0].t != V_STR || (f = tpl_filter_id(g->a[0].u.s, g->a[0].n)) < 0)
        tpl_fail(r, "map: takes a filter name or attribute=NAME");
    tpl_args own = *g; /* the filter's own arguments: those after its name */
    own.a++, own.na--;
    for (uint32_t i = 0; i < l.n; i++) o.u.items[i] = tpl_apply_filter(r, f, l.u.items[i], &own);
    return o;
}

/* min/max: the item with the least/greatest key, undefined for none. */
static tpl_val extreme(tpl_run *r, tpl_val l, const tpl_val *attr, bool cs, bool max, const char *fname) {
    if (!l.n) return (tpl_val){.t = V_UNDEF};
    uint32_t best = 0;
    tpl_val bk = key_of(r, l.u.items[0], attr, NULL, cs);
    for (uint32_t i = 1; i < l.n; i++) {
        tpl_val k = key_of(r, l.u.items[i], attr, NULL, cs);
        int c = compare(r, k, bk, fname);
        if (max ? c > 0 : c < 0) best = i, bk = k;
    }
    return l.u.items[best];
}

/* Python's == on keys (unique, groupby). */
static bool same_key(tpl_val x, tpl_val y) { return tpl_loose_eq(x, y); }

static tpl_val groupby(tpl_run *r, tpl_val l, const tpl_val *attr, const tpl_val *dflt, bool cs) {
    if (!attr) tpl_fail(r, "groupby: takes an attribute name");
    tpl_val *keys = tpl_alloc(r, (l.n + 1) * sizeof *keys);
    for (uint32_t i = 0; i < l.n; i++) keys[i] = key_of(r, l.u.items[i], attr, dflt, cs);
    const uint32_t *idx = sort_order(r, l.n, keys, false, "groupby");
    tpl_val o = tpl_list_of(r, l.n);
    o.n = 0;
    for (uint32_t i = 0; i < l.n;) {
        uint32_t j = i;
        while (j < l.n && same_key(keys[idx[j]], keys[idx[i]])) j++;
        tpl_val items = tpl_list_of(r, j - i), g = tpl_list_of(r, 2);
        for (uint32_t k = i; k < j; k++) items.u.items[k - i] = l.u.items[idx[k]];
        /* the grouper: the attribute as the first item has it (case kept) */
        tpl_val gk = key_of(r, l.u.items[idx[i]], attr, dflt, true);
        g.u.items[0] = gk, g.u.items[1] = items;
        g.fn = TPL_GROUP;
        o.u.items[o.n++] = g;
        i = j;
    }
    return o;
}

tpl_val tpl_seq_filter(tpl_run *r, int f, tpl_val v, const tpl_args *g) {
    const char *fname = tpl_filter_names[f];
    switch (f) {
    case F_SELECT:
    case F_REJECT:
    case F_SELECTATTR:
    case F_REJECTATTR: return pick(r, f, v, g);
    case F_MAP: return map(r, v, g);
    case F_SORT: { /* sort(reverse=False, case_sensitive=False, attribute=None) */
        const tpl_val *rev = tpl_arg(g, 0, "reverse"), *cs = tpl_arg(g, 1, "case_sensitive"),
                      *at = tpl_arg(g, 2, "attribute");
        tpl_val l = tpl_need_list(r, v, fname);
        tpl_val *keys = tpl_alloc(r, (l.n + 1) * sizeof *keys);
        for (uint32_t i = 0; i < l.n; i++) keys[i] = key_of(r, l.u.items[i], at, NULL, flag(cs));
        return sorted(r, l, keys, flag(rev), fname);
    }
    case F_MIN:
    case F_MAX:
        return extreme(r, tpl_need_list(r, v, fname), tpl_arg(g, 1, "attribute"),
                       flag(tpl_arg(g, 0, "case_sensitive")), f == F_MAX, fname);
    case F_UNIQUE: { /* the first of each key, in order */
        const tpl_val *cs = tpl_arg(g, 0, "case_sensitive"), *at = tpl_arg(g, 1, "attribute");
        tpl_val l = tpl_need_list(r, v, fname), o = tpl_list_of(r, l.n);
        tpl_val *keys = tpl_alloc(r, (l.n + 1) * sizeof *keys);
        o.n = 0;
        for (uint32_t i = 0; i < l.n; i++) {
            tpl_val k = key_of(r, l.u.items[i], at, NULL, flag(cs));
            bool seen = false;
            for (uint32_t j = 0; j < o.n && !seen; j++) seen = same_key(keys[j], k);
            if (!seen) keys[o.n] = k, o.u.items[o.n++] = l.u.items[i];
        }
        return o;
    }
    case F_SUM: { /* sum(attribute=None, start=0) */
        const tpl_val *at = tpl_arg(g, 0, "attribute"), *st = tpl_arg(g, 1, "start");
        tpl_val l = tpl_need_list(r, v, fname), s = st ? *st : (tpl_val){.t = V_INT, .u.i = 0};
        for (uint32_t i = 0; i < l.n; i++) s = tpl_binary(r, OP_ADD, s, at ? tpl_attr_of(l.u.items[i], *at) : l.u.items[i]);
        return s;
    }
    case F_GROUPBY: {
        return groupby(r, tpl_need_list(r, v, fname), tpl_arg(g, 0, "attribute"), tpl_arg(g, 1, "default"),
                       flag(tpl_arg(g, 2, "case_sensitive")));
    }
    case F_BATCH:
    case F_SLICE: { /* batch(n, fill_with): lists of n; slice(n, fill_with): n lists */
        const tpl_val *cnt = tpl_arg(g, 0, f == F_BATCH ? "linecount" : "slices"), *fill = tpl_arg(g, 1, "fill_with");
        if (!cnt || cnt->t != V_INT || cnt->u.i < 1 || cnt->u.i > (1 << 24))
            tpl_fail(r, "%s: takes a count of at least 1", fname);
        tpl_val l = tpl_need_list(r, v, fname);
        size_t n = (size_t)cnt->u.i, groups, per, extra = 0;
        if (f == F_BATCH) groups = (l.n + n - 1) / n, per = n;
        else groups = n, per = l.n / n, extra = l.n % n;
        tpl_val o = tpl_list_of(r, groups);
        size_t at_i = 0;
        for (size_t gi = 0; gi < groups; gi++) {
            size_t take = f == F_BATCH ? (l.n - at_i < per ? l.n - at_i : per) : per + (gi < extra);
            bool pad = fill && fill->t != V_NONE && (f == F_BATCH ? take < per : extra && gi >= extra);
            tpl_val part = tpl_list_of(r, take + pad * (f == F_BATCH ? per - take : 1));
            for (size_t k = 0; k < take; k++) part.u.items[k] = l.u.items[at_i + k];
            for (size_t k = take; k < part.n; k++) part.u.items[k] = *fill;
            at_i += take;
            o.u.items[gi] = part;
        }
        return o;
    }
    case F_DICTSORT: { /* dictsort(case_sensitive=False, by='key', reverse=False): (key, value) pairs */
        if (v.t != V_DICT) tpl_fail(r, "dictsort: expected a dict, got a %s", tpl_type_name(v));
        const tpl_val *cs = tpl_arg(g, 0, "case_sensitive"), *by = tpl_arg(g, 1, "by"),
                      *rev = tpl_arg(g, 2, "reverse");
        bool by_value = by && by->t == V_STR && by->n == 5 && !memcmp(by->u.s, "value", 5);
        if (by && !by_value && !(by->t == V_STR && by->n == 3 && !memcmp(by->u.s, "key", 3)))
            tpl_fail(r, "dictsort: by must be 'key' or 'value'");
        tpl_dict *d = v.u.d;
        tpl_val l = tpl_list_of(r, d->n);
        tpl_val *keys = tpl_alloc(r, (d->n + 1) * sizeof *keys);
        for (uint32_t i = 0; i < d->n; i++) {
            tpl_val p = tpl_list_of(r, 2);
            p.u.items[0] = tpl_str(d->e[i].k, d->e[i].kn), p.u.items[1] = d->e[i].v;
            p.fn = TPL_TUPLE;
            l.u.items[i] = p;
            keys[i] = key_of(r, p.u.items[by_value], NULL, NULL, flag(cs));
        }
        return sorted(r, l, keys, flag(rev), fname);
    }
    }
    tpl_fail(r, "%s: not a sequence filter", fname);
}
