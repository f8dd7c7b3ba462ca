/*
** render.c -- runs a template's syntax tree over values made from JSON.
**
** Scopes chain to the globals (the caller's variables, the functions); a
** for loop and a macro call open a scope, if does not. Errors longjmp back
** to sm_template_render, which frees every value at once: evaluation
** never checks a status on its way up. Every node evaluated is a step, so a
** template that loops without end stops at max_steps.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "template_internal.h"

#define MAX_CALL_DEPTH 64

enum { G_RAISE, G_NAMESPACE, G_RANGE, G_STRFTIME, G_DICT, G_COUNT_ };
static const char *const global_names[G_COUNT_] = {"raise_exception", "namespace", "range",
                                                   "strftime_now", "dict"};

typedef struct scope scope;
struct scope {
    scope *parent;
    tpl_dict *vars;
};

typedef struct macro {
    const tpl_node *def;
    scope *env;
} macro;

enum { FLOW_NEXT, FLOW_BREAK, FLOW_CONTINUE };

static tpl_val eval(tpl_run *r, scope *sc, const tpl_node *n);
static int exec(tpl_run *r, scope *sc, tpl_node *const *body, size_t n);

static const tpl_val UNDEF = {.t = V_UNDEF};

static void step(tpl_run *r, const tpl_node *n) {
    r->line = n->line;
    if (++r->steps > r->max_steps)
        tpl_fail(r, "the template ran more than %zu steps (an endless loop?)", r->max_steps);
}

static tpl_val lookup(scope *sc, const char *s, size_t n) {
    for (; sc; sc = sc->parent) {
        tpl_val *v = tpl_dict_get(sc->vars, s, n);
        if (v) return *v;
    }
    return UNDEF;
}

static scope *scope_new(tpl_run *r, scope *parent) {
    scope *s = tpl_alloc(r, sizeof *s);
    s->parent = parent;
    s->vars = tpl_dict_new(r, 4);
    return s;
}

static tpl_val list_new(tpl_run *r, size_t n) {
    if (n > UINT32_MAX) tpl_fail(r, "a list of %zu items", n);
    return (tpl_val){.t = V_LIST, .n = (uint32_t)n, .u.items = tpl_alloc(r, n * sizeof(tpl_val))};
}

/* Code point i of s (0-based; count = its code points), as a string. */
static tpl_val char_at(tpl_val s, size_t i) {
    size_t k = 0;
    for (size_t b = 0; b < s.n;) {
        size_t m = 1;
        while (b + m < s.n && ((unsigned char)s.u.s[b + m] & 0xC0) == 0x80) m++;
        if (k++ == i) return tpl_str(s.u.s + b, m);
        b += m;
    }
    return UNDEF;
}

static tpl_val get_attr(tpl_val obj, const char *k, size_t kn) {
    if (obj.t == V_DICT || obj.t == V_NS) {
        tpl_val *v = tpl_dict_get(obj.u.d, k, kn);
        return v ? *v : UNDEF;
    }
    if (obj.t == V_LIST && obj.fn == TPL_GROUP && obj.n == 2 && ((kn == 7 && !memcmp(k, "grouper", 7)) ||
                                                        (kn == 4 && !memcmp(k, "list", 4))))
        return obj.u.items[kn == 4]; /* groupby's (grouper, list) pairs */
    if ((obj.t == V_LIST || obj.t == V_STR) && kn == 6 && !memcmp(k, "length", 6))
        return (tpl_val){.t = V_INT,
                         .u.i = obj.t == V_LIST ? obj.n : (int64_t)tpl_utf8_count(obj.u.s, obj.n)};
    return UNDEF;
}

static tpl_val get_index(tpl_run *r, tpl_val obj, tpl_val idx) {
    if (idx.t == V_STR) return get_attr(obj, idx.u.s, idx.n);
    if (idx.t != V_INT || (obj.t != V_LIST && obj.t != V_STR))
        tpl_fail(r, "cannot index a %s with a %s", tpl_type_name(obj), tpl_type_name(idx));
    int64_t len = obj.t == V_LIST ? obj.n : (int64_t)tpl_utf8_count(obj.u.s, obj.n);
    int64_t i = idx.u.i < 0 ? idx.u.i + len : idx.u.i;
    if (i < 0 || i >= len) return UNDEF;
    return obj.t == V_LIST ? obj.u.items[i] : char_at(obj, (size_t)i);
}

/* Python's slice indices for a sequence of len items. */
static tpl_val slice(tpl_run *r, scope *sc, tpl_val obj, const tpl_node *n) {
    if (obj.t != V_LIST && obj.t != V_STR)
        tpl_fail(r, "cannot slice a %s", tpl_type_name(obj));
    int64_t part[3];
    bool given[3];
    for (int k = 0; k < 3; k++) {
        given[k] = false;
        if (!n->list[k]) continue;
        tpl_val v = eval(r, sc, n->list[k]);
        if (v.t == V_UNDEF || v.t == V_NONE) continue;
        if (v.t != V_INT) tpl_fail(r, "slice indices must be integers, not a %s", tpl_type_name(v));
        part[k] = v.u.i;
        given[k] = true;
    }
    tpl_val chars = obj;
    if (obj.t == V_STR) { /* by code points */
        size_t cnt = tpl_utf8_count(obj.u.s, obj.n), k = 0;
        chars = list_new(r, cnt);
        for (size_t b = 0; b < obj.n;) {
            size_t m = 1;
            while (b + m < obj.n && ((unsigned char)obj.u.s[b + m] & 0xC0) == 0x80) m++;
            chars.u.items[k++] = tpl_str(obj.u.s + b, m);
            b += m;
        }
    }
    int64_t len = chars.n, stepv = given[2] ? part[2] : 1;
    if (stepv == 0) tpl_fail(r, "slice step cannot be zero");
    int64_t lo = stepv > 0 ? 0 : -1, hi = stepv > 0 ? len : len - 1;
    int64_t start = stepv > 0 ? lo : hi, stop = stepv > 0 ? hi : lo;
    if (given[0]) {
        start = part[0] < 0 ? part[0] + len : part[0];
        start = start < lo ? lo : start > hi ? hi : start;
    }
    if (given[1]) {
        stop = part[1] < 0 ? part[1] + len : part[1];
        stop = stop < lo ? lo : stop > hi ? hi : stop;
    }
    size_t cnt = 0;
    for (int64_t i = start; stepv > 0 ? i < stop : i > stop; i += stepv) cnt++;
    tpl_val out = list_new(r, cnt);
    size_t k = 0;
    for (int64_t i = start; stepv > 0 ? i < stop : i > stop; i += stepv)
        out.u.items[k++] = chars.u.items[i];
    if (obj.t == V_LIST) return out;
    size_t bytes = 0;
    for (size_t i = 0; i < cnt; i++) bytes += out.u.items[i].n;
    char *s = tpl_alloc(r, bytes);
    bytes = 0;
    for (size_t i = 0; i < cnt; i++) memcpy(s + bytes, out.u.items[i].u.s, out.u.items[i].n), bytes += out.u.items[i].n;
    return tpl_str(s, bytes);
}

static tpl_val concat(tpl_run *r, tpl_val a, tpl_val b) {
    a = tpl_to_str(r, a);
    b = tpl_to_str(r, b);
    if ((size_t)a.n + b.n > r->max_output) tpl_fail(r, "a string longer than %zu bytes", r->max_output);
    char *s = tpl_alloc(r, (size_t)a.n + b.n);
    memcpy(s, a.u.s, a.n);
    memcpy(s + a.n, b.u.s, b.n);
    return tpl_str(s, (size_t)a.n + b.n);
}

static bool is_num(tpl_val v) { return v.t == V_INT || v.t == V_FLOAT; }
static const char *article(tpl_val v) { return strchr("aeiou", tpl_type_name(v)[0]) ? "an" : "a"; }
static double as_f(tpl_val v) { return v.t == V_INT ? (double)v.u.i : v.u.f; }

tpl_val tpl_binary(tpl_run *r, int op, tpl_val a, tpl_val b) {
    static const char *const names[] = {"+", "-", "*", "/", "//", "%", "**", "~", "==", "!=",
                                        "<", ">", "<=", ">=", "in", "not in"};
    if (op == OP_EQ) return (tpl_val){.t = V_BOOL, .u.b = tpl_loose_eq(a, b)};
    if (op == OP_NE) return (tpl_val){.t = V_BOOL, .u.b = !tpl_loose_eq(a, b)};
    if ((op == OP_IN || op == OP_NOTIN) && b.t == V_UNDEF)
        return (tpl_val){.t = V_BOOL, .u.b = op == OP_NOTIN};
    if (op == OP_CONCAT) return concat(r, a, b); /* str() of each: none is "None", undefined "" */
    if (op == OP_MOD && a.t == V_STR) return tpl_percent(r, a, b); /* Python's printf-style format */
    if (a.t == V_UNDEF || b.t == V_UNDEF || a.t == V_NONE || b.t == V_NONE)
        tpl_fail(r, "'%s' on %s %s and %s %s value", names[op], article(a), tpl_type_name(a), article(b),
                 tpl_type_name(b));
    if ((a.t == V_BOOL || b.t == V_BOOL) && (is_num(a) || a.t == V_BOOL) && (is_num(b) || b.t == V_BOOL)) {
        if (a.t == V_BOOL) a = (tpl_val){.t = V_INT, .u.i = a.u.b}; /* Python's bool is an int */
        if (b.t == V_BOOL) b = (tpl_val){.t = V_INT, .u.i = b.u.b};
    }
    if (is_num(a) && is_num(b)) {
        bool fl = a.t == V_FLOAT || b.t == V_FLOAT;
        double x = as_f(a), y = as_f(b);
        int64_t i, j = b.t == V_INT ? b.u.i : 0;
        switch (op) {
        case OP_ADD:
        case OP_SUB:
        case OP_MUL:
            if (!fl) {
                bool ovf = op == OP_ADD ? __builtin_add_overflow(a.u.i, b.u.i, &i)
                         : op == OP_SUB ? __builtin_sub_overflow(a.u.i, b.u.i, &i)
                                        : __builtin_mul_overflow(a.u.i, b.u.i, &i);
                if (!ovf) return (tpl_val){.t = V_INT, .u.i = i};
            }
            return (tpl_val){.t = V_FLOAT, .u.f = op == OP_ADD ? x + y : op == OP_SUB ? x - y : x * y};
        case OP_DIV:
            if (y == 0) tpl_fail(r, "division by zero");
            return (tpl_val){.t = V_FLOAT, .u.f = x / y};
        case OP_FLOORDIV:
        case OP_MOD:
            if (y == 0) tpl_fail(r, "division by zero");
            if (!fl && a.u.i == INT64_MIN && j == -1) { /* the one quotient int64 cannot hold */
                if (op == OP_MOD) return (tpl_val){.t = V_INT, .u.i = 0};
                tpl_fail(r, "%lld // -1 does not fit in a 64-bit integer", (long long)INT64_MIN);
            }
            if (!fl) {
                int64_t q = a.u.i / j, m = a.u.i % j; /* Python's: the remainder has the sign of b */
                if (m != 0 && ((m < 0) != (j < 0))) q--, m += j;
                return (tpl_val){.t = V_INT, .u.i = op == OP_MOD ? m : q};
            }
            double m = fmod(x, y);
            if (m != 0 && ((m < 0) != (y < 0))) m += y;
            return (tpl_val){.t = V_FLOAT, .u.f = op == OP_MOD ? m : floor(x / y)};
        case OP_POW: {
            if (x == 0 && y < 0) tpl_fail(r, "0 cannot be raised to a negative power");
            double p = __builtin_pow(x, y);
            if (!fl && y >= 0 && __builtin_fabs(p) < 9.2e18) return (tpl_val){.t = V_INT, .u.i = (int64_t)p};
            return (tpl_val){.t = V_FLOAT, .u.f = p};
        }
        case OP_LT: return (tpl_val){.t = V_BOOL, .u.b = x < y};
        case OP_GT: return (tpl_val){.t = V_BOOL, .u.b = x > y};
        case OP_LE: return (tpl_val){.t = V_BOOL, .u.b = x <= y};
        case OP_GE: return (tpl_val){.t = V_BOOL, .u.b = x >= y};
        }
    }
    if (a.t == V_LIST && b.t == V_LIST && op == OP_ADD) {
        tpl_val l = list_new(r, (size_t)a.n + b.n);
        memcpy(l.u.items, a.u.items, a.n * sizeof(tpl_val));
        memcpy(l.u.items + a.n, b.u.items, b.n * sizeof(tpl_val));
        return l;
    }
    if (op == OP_IN || op == OP_NOTIN) {
        bool found = false;
        if (b.t == V_LIST) {
            for (uint32_t k = 0; k < b.n && !found; k++) found = tpl_loose_eq(a, b.u.items[k]);
        } else if (b.t == V_STR && a.t == V_STR) {
            found = !a.n;
            for (size_t k = 0; k + a.n <= b.n && !found; k++) found = !memcmp(b.u.s + k, a.u.s, a.n);
        } else if ((b.t == V_DICT || b.t == V_NS) && a.t == V_STR) {
            found = tpl_dict_get(b.u.d, a.u.s, a.n) != NULL;
        } else
            tpl_fail(r, "'%s' with a %s on the left and a %s on the right", names[op], tpl_type_name(a),
                     tpl_type_name(b));
        return (tpl_val){.t = V_BOOL, .u.b = found == (op == OP_IN)};
    }
    if (op == OP_ADD && a.t == V_STR && b.t == V_STR) return concat(r, a, b); /* Python raises for str + 1 */
    if (op == OP_MUL && ((a.t == V_STR && b.t == V_INT) || (a.t == V_INT && b.t == V_STR))) {
        tpl_val s = a.t == V_STR ? a : b; /* Python's 'ab' * 3 */
        int64_t k = a.t == V_INT ? a.u.i : b.u.i;
        if (k <= 0 || !s.n) return tpl_str("", 0);
        if ((uint64_t)k > r->max_output / s.n) tpl_fail(r, "a string longer than %zu bytes", r->max_output);
        char *o = tpl_alloc(r, (size_t)k * s.n);
        for (int64_t i = 0; i < k; i++) memcpy(o + (size_t)i * s.n, s.u.s, s.n);
        return tpl_str(o, (size_t)k * s.n);
    }
    if (op == OP_MUL && ((a.t == V_LIST && b.t == V_INT) || (a.t == V_INT && b.t == V_LIST))) {
        tpl_val l = a.t == V_LIST ? a : b; /* Python's [1, 2] * 3 */
        int64_t k = a.t == V_INT ? a.u.i : b.u.i;
        if (k <= 0 || !l.n) return list_new(r, 0);
        if ((uint64_t)k > (r->max_output + 1) / l.n) tpl_fail(r, "a list of more than %zu items", r->max_output);
        tpl_val o = list_new(r, (size_t)k * l.n);
        for (int64_t i = 0; i < k; i++) memcpy(o.u.items + (size_t)i * l.n, l.u.items, l.n * sizeof(tpl_val));
        return o;
    }
    if (a.t == V_STR && b.t == V_STR && op >= OP_LT && op <= OP_GE) {
        int c = memcmp(a.u.s, b.u.s, a.n < b.n ? a.n : b.n);
        if (!c) c = (a.n > b.n) - (a.n < b.n);
        bool res = op == OP_LT ? c < 0 : op == OP_GT ? c > 0 : op == OP_LE ? c <= 0 : c >= 0;
        return (tpl_val){.t = V_BOOL, .u.b = res};
    }
    tpl_fail(r, "'%s' on %s %s and %s %s", names[op], article(a), tpl_type_name(a), article(b),
             tpl_type_name(b));
}

static tpl_args eval_args(tpl_run *r, scope *sc, tpl_node *const *list, size_t n) {
    size_t cap = n;
    tpl_val *spread = NULL; /* f(*x): x's items, counted first */
    for (size_t i = 0; i < n; i++) {
        if (list[i]->kind != N_SPLAT) continue;
        if (!spread) spread = tpl_alloc(r, n * sizeof(tpl_val));
        spread[i] = eval(r, sc, list[i]->a);
        if (spread[i].t != V_LIST && spread[i].t != V_STR)
            tpl_fail(r, "'*' needs a list, not %s", tpl_type_name(spread[i]));
        cap += spread[i].n;
    }
    tpl_args g = {tpl_alloc(r, cap * sizeof(tpl_val)), tpl_alloc(r, n * sizeof(tpl_val)),
                  tpl_alloc(r, n * sizeof(tpl_node *)), 0, 0};
    for (size_t i = 0; i < n; i++) {
        if (list[i]->kind == N_KW) {
            g.kwn[g.nkw] = list[i];
            g.kw[g.nkw++] = eval(r, sc, list[i]->a);
        } else if (list[i]->kind == N_SPLAT) {
            for (uint32_t k = 0; k < spread[i].n; k++)
                g.a[g.na++] = spread[i].t == V_LIST ? spread[i].u.items[k] : tpl_str(spread[i].u.s + k, 1);
        } else
            g.a[g.na++] = eval(r, sc, list[i]);
    }
    return g;
}

static tpl_val capture(tpl_run *r, scope *sc, tpl_node *const *body, size_t n) {
    size_t mark = r->out_n;
    exec(r, sc, body, n);
    return tpl_take(r, mark);
}

/* Calls macro m; caller: a call block's body, the macro's caller() (or NULL). */
static tpl_val call_macro(tpl_run *r, const macro *m, const tpl_args *g, const macro *caller) {
    const tpl_node *d = m->def;
    size_t np = d->n2;
    if (g->na > np) tpl_fail(r, "macro '%.*s' takes %zu arguments, got %zu", (int)d->sn, d->s, np, g->na);
    if (++r->depth > MAX_CALL_DEPTH) tpl_fail(r, "macro calls nested more than %d deep", MAX_CALL_DEPTH);
    scope *sc = scope_new(r, m->env);
    if (caller) tpl_dict_set(r, sc->vars, "caller", 6, (tpl_val){.t = V_MACRO, .u.mac = caller});
    for (size_t i = 0; i < np; i++) {
        const tpl_node *p = d->list[i];
        tpl_val v = UNDEF;
        bool set = false;
        if (i < g->na) v = g->a[i], set = true;
        for (size_t k = 0; k < g->nkw; k++)
            if (g->kwn[k]->sn == p->sn && !memcmp(g->kwn[k]->s, p->s, p->sn)) v = g->kw[k], set = true;
        if (!set && d->list2[i]->kind != N_NOP) v = eval(r, sc, d->list2[i]);
        tpl_dict_set(r, sc->vars, p->s, p->sn, v);
    }
    tpl_val out = capture(r, sc, d->list + np, d->n - np);
    r->depth--;
    return out;
}

static tpl_val call_global(tpl_run *r, int fn, const tpl_args *g) {
    switch (fn) {
    case G_RAISE: {
        tpl_val m = g->na ? tpl_to_str(r, g->a[0]) : tpl_str("raise_exception", 15);
        char one[400];
        tpl_one_line(one, sizeof one, m.u.s, m.n);
        sm_error_set(r->err, SM_ERR_INPUT, "%s line %u: %s", r->name, r->line, one);
        longjmp(r->fail, 1);
    }
    case G_DICT: /* dict(a=1), dict(d, b=2): a new dict (namespace's arguments) */
    case G_NAMESPACE: {
        const char *what = global_names[fn];
        tpl_dict *d = tpl_dict_new(r, 4 + g->nkw);
        if (g->na > 1) tpl_fail(r, "%s takes at most one positional argument", what);
        if (g->na) {
            if (g->a[0].t != V_DICT) tpl_fail(r, "%s: expected a dict, got a %s", what, tpl_type_name(g->a[0]));
            for (uint32_t i = 0; i < g->a[0].u.d->n; i++) {
                const tpl_entry *e = &g->a[0].u.d->e[i];
                tpl_dict_set(r, d, e->k, e->kn, e->v);
            }
        }
        for (size_t i = 0; i < g->nkw; i++) tpl_dict_set(r, d, g->kwn[i]->s, g->kwn[i]->sn, g->kw[i]);
        return (tpl_val){.t = fn == G_DICT ? V_DICT : V_NS, .u.d = d};
    }
    case G_RANGE: {
        int64_t v[3] = {0, 0, 1};
        if (g->na < 1 || g->na > 3) tpl_fail(r, "range takes 1 to 3 arguments");
        for (size_t i = 0; i < g->na; i++) {
            if (g->a[i].t != V_INT) tpl_fail(r, "range: arguments must be integers");
            v[g->na == 1 ? 1 : i] = g->a[i].u.i;
        }
        if (!v[2]) tpl_fail(r, "range: step cannot be zero");
        /* the count in unsigned 64-bit arithmetic: exact over the whole int64 range */
        bool up = v[2] > 0;
        uint64_t span = up ? (v[1] > v[0] ? (uint64_t)v[1] - (uint64_t)v[0] : 0)
                           : (v[0] > v[1] ? (uint64_t)v[0] - (uint64_t)v[1] : 0);
        uint64_t step = up ? (uint64_t)v[2] : (uint64_t)0 - (uint64_t)v[2];
        uint64_t cnt = span / step + (span % step != 0);
        if (cnt > (uint64_t)(r->max_steps - r->steps))
            tpl_fail(r, "range of %llu items: more than the template's %zu steps", (unsigned long long)cnt,
                     r->max_steps);
        r->steps += (size_t)cnt;
        tpl_val l = list_new(r, (size_t)cnt);
        for (size_t k = 0; k < cnt; k++) /* v[0] + k * step stays between v[0] and v[1] */
            l.u.items[k] = (tpl_val){.t = V_INT, .u.i = (int64_t)((uint64_t)v[0] + k * (uint64_t)v[2])};
        return l;
    }
    case G_STRFTIME: {
        if (g->na != 1 || g->a[0].t != V_STR || g->a[0].n > 100)
            tpl_fail(r, "strftime_now takes one format string");
        char fmt[128], buf[512];
        memcpy(fmt, g->a[0].u.s, g->a[0].n);
        fmt[g->a[0].n] = 0;
        /* now, or SOURCE_DATE_EPOCH (seconds, UTC) where set: reproducible renderings */
        const char *sde = getenv("SOURCE_DATE_EPOCH");
        char *end = NULL;
        long long fixed = sde && *sde ? strtoll(sde, &end, 10) : -1;
        bool pinned = fixed >= 0 && end && !*end;
        time_t now = pinned ? (time_t)fixed : time(NULL);
        struct tm tmv;
        if (pinned) gmtime_r(&now, &tmv);
        else localtime_r(&now, &tmv);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
        size_t n = strftime(buf, sizeof buf, fmt, &tmv); /* the template's format, as Python's */
#pragma GCC diagnostic pop
        return tpl_str_copy(r, buf, n);
    }
    }
    tpl_fail(r, "unknown function");
}

/* A call expression n; caller: see call_macro. */
static tpl_val call_with(tpl_run *r, scope *sc, const tpl_node *n, const macro *caller) {
    const tpl_node *cal = n->a;
    if (cal->kind == N_ATTR) { /* a method, unless the dict holds a callable there */
        tpl_val obj = eval(r, sc, cal->a);
        tpl_val f = (obj.t == V_DICT || obj.t == V_NS) ? get_attr(obj, cal->s, cal->sn) : UNDEF;
        if (f.t != V_FUNC && f.t != V_MACRO) {
            if (caller) tpl_fail(r, "a call block calls a method, not a macro");
            tpl_args g = eval_args(r, sc, n->list, n->n);
            r->line = n->line;
            tpl_val out;
            if (tpl_more_method(r, obj, cal->s, cal->sn, &g, &out)) return out;
            return tpl_call_method(r, obj, cal->s, cal->sn, g.a, g.na);
        }
    }
    tpl_val f = eval(r, sc, cal);
    tpl_args g = eval_args(r, sc, n->list, n->n);
    r->line = n->line;
    if (caller && f.t != V_MACRO) tpl_fail(r, "a call block calls a %s, not a macro", tpl_type_name(f));
    if (f.t == V_FUNC) return call_global(r, f.fn, &g);
    if (f.t == V_MACRO) return call_macro(r, f.u.mac, &g, caller);
    if (cal->kind == N_NAME)
        tpl_fail(r, "'%.*s' is not a function (it is %s)", (int)(cal->sn > 40 ? 40 : cal->sn), cal->s,
                 f.t == V_UNDEF ? "undefined" : tpl_type_name(f));
    tpl_fail(r, "calling a %s", tpl_type_name(f));
}

static tpl_val call(tpl_run *r, scope *sc, const tpl_node *n) { return call_with(r, sc, n, NULL); }

static tpl_val eval(tpl_run *r, scope *sc, const tpl_node *n) {
    step(r, n);
    switch (n->kind) {
    case N_STR: return tpl_str(n->s, n->sn);
    case N_INT: return (tpl_val){.t = V_INT, .u.i = n->i};
    case N_FLOAT: return (tpl_val){.t = V_FLOAT, .u.f = n->f};
    case N_BOOL: return (tpl_val){.t = V_BOOL, .u.b = n->i != 0};
    case N_NONE: return (tpl_val){.t = V_NONE};
    case N_NAME: return lookup(sc, n->s, n->sn);
    case N_LIST:
    case N_TUPLE: {
        tpl_val l = list_new(r, n->n);
        for (size_t i = 0; i < n->n; i++) l.u.items[i] = eval(r, sc, n->list[i]);
        if (n->kind == N_TUPLE) l.fn = TPL_TUPLE;
        return l;
    }
    case N_DICT: {
        tpl_dict *d = tpl_dict_new(r, n->n / 2);
        for (size_t i = 0; i + 1 < n->n; i += 2) {
            tpl_val k = eval(r, sc, n->list[i]);
            if (k.t != V_STR) tpl_fail(r, "dict keys must be strings, not a %s", tpl_type_name(k));
            tpl_dict_set(r, d, k.u.s, k.n, eval(r, sc, n->list[i + 1]));
        }
        return (tpl_val){.t = V_DICT, .u.d = d};
    }
    case N_ATTR: return get_attr(eval(r, sc, n->a), n->s, n->sn);
    case N_INDEX: {
        tpl_val obj = eval(r, sc, n->a), idx = eval(r, sc, n->b);
        r->line = n->line;
        return get_index(r, obj, idx);
    }
    case N_SLICE: return slice(r, sc, eval(r, sc, n->a), n);
    case N_CALL: return call(r, sc, n);
    case N_FILTER: {
        if (n->op == F_UNKNOWN) tpl_fail(r, "unknown filter '%.*s'", (int)(n->sn > 40 ? 40 : n->sn), n->s);
        tpl_val v = eval(r, sc, n->a);
        tpl_args g = eval_args(r, sc, n->list, n->n);
        r->line = n->line;
        return tpl_apply_filter(r, n->op, v, &g);
    }
    case N_TEST: {
        if ((n->op & 0x7F) == T_UNKNOWN) tpl_fail(r, "unknown test '%.*s'", (int)(n->sn > 40 ? 40 : n->sn), n->s);
        tpl_val v = eval(r, sc, n->a);
        tpl_args g = eval_args(r, sc, n->list, n->n);
        r->line = n->line;
        bool res = tpl_apply_test(r, n->op & 0x7F, v, g.a, g.na);
        return (tpl_val){.t = V_BOOL, .u.b = (n->op & 0x80) ? !res : res};
    }
    case N_NOT: return (tpl_val){.t = V_BOOL, .u.b = !tpl_truthy(eval(r, sc, n->a))};
    case N_NEG: {
        tpl_val v = eval(r, sc, n->a);
        if (v.t == V_INT && v.u.i != INT64_MIN) return (tpl_val){.t = V_INT, .u.i = -v.u.i};
        if (v.t == V_INT || v.t == V_FLOAT) return (tpl_val){.t = V_FLOAT, .u.f = -as_f(v)};
        tpl_fail(r, "'-' on a %s", tpl_type_name(v));
    }
    case N_AND: {
        tpl_val a = eval(r, sc, n->a);
        return tpl_truthy(a) ? eval(r, sc, n->b) : a;
    }
    case N_OR: {
        tpl_val a = eval(r, sc, n->a);
        return tpl_truthy(a) ? a : eval(r, sc, n->b);
    }
    case N_COND:
        if (tpl_truthy(eval(r, sc, n->b))) return eval(r, sc, n->a);
        return n->c ? eval(r, sc, n->c) : UNDEF;
    case N_BIN: {
        tpl_val a = eval(r, sc, n->a), b = eval(r, sc, n->b);
        r->line = n->line;
        return tpl_binary(r, n->op, a, b);
    }
    }
    tpl_fail(r, "a statement where a value was expected");
}

/* Binds a loop or set target (a name, or names unpacking a list). */
static void bind(tpl_run *r, scope *sc, const tpl_node *t, tpl_val v) {
    if (t->kind == N_NAME) {
        tpl_dict_set(r, sc->vars, t->s, t->sn, v);
        return;
    }
    if (t->kind == N_ATTR) {
        tpl_val ns = eval(r, sc, t->a);
        r->line = t->line;
        if (ns.t != V_NS) tpl_fail(r, "cannot set an attribute of a %s (only of a namespace)", tpl_type_name(ns));
        tpl_dict_set(r, ns.u.d, t->s, t->sn, v);
        return;
    }
    if (v.t != V_LIST) tpl_fail(r, "cannot unpack a %s", tpl_type_name(v));
    if (v.n != t->n) tpl_fail(r, "cannot unpack %u items into %zu names", v.n, t->n);
    for (size_t i = 0; i < t->n; i++) bind(r, sc, t->list[i], v.u.items[i]);
}

static int exec_for(tpl_run *r, scope *sc, const tpl_node *n) {
    scope *ls = scope_new(r, sc);
    tpl_val it = eval(r, ls, n->b);
    r->line = n->line;
    if (it.t == V_DICT) it = tpl_call_method(r, it, "keys", 4, NULL, 0);
    else if (it.t == V_STR) it = tpl_apply_filter(r, F_LIST, it, &(tpl_args){0});
    else if (it.t == V_UNDEF || it.t == V_NONE) it = list_new(r, 0);
    else if (it.t != V_LIST) tpl_fail(r, "cannot loop over a %s", tpl_type_name(it));
    tpl_val items = it;
    if (n->c) { /* for x in xs if cond: the loop sees only the items that pass */
        items = list_new(r, it.n);
        items.n = 0;
        scope *ts = scope_new(r, sc);
        for (uint32_t i = 0; i < it.n; i++) {
            bind(r, ts, n->a, it.u.items[i]);
            if (tpl_truthy(eval(r, ts, n->c))) items.u.items[items.n++] = it.u.items[i];
        }
    }
    if (!items.n) return exec(r, sc, n->list2, n->n2);
    static const char *const keys[] = {"index", "index0", "revindex", "revindex0", "first",
                                       "last",  "length", "previtem", "nextitem", "depth", "depth0"};
    tpl_dict *loop = tpl_dict_new(r, 11);
    for (int k = 0; k < 11; k++) tpl_dict_set(r, loop, keys[k], strlen(keys[k]), UNDEF);
    loop->e[9].v = (tpl_val){.t = V_INT, .u.i = 1}; /* no recursive loops: always the first level */
    loop->e[10].v = (tpl_val){.t = V_INT, .u.i = 0};
    tpl_dict_set(r, ls->vars, "loop", 4, (tpl_val){.t = V_DICT, .fn = TPL_LOOP, .u.d = loop});
    for (uint32_t i = 0; i < items.n; i++) {
        int64_t len = items.n;
        int64_t vals[4] = {i + 1, i, len - i, len - i - 1};
        for (int k = 0; k < 4; k++) loop->e[k].v = (tpl_val){.t = V_INT, .u.i = vals[k]};
        loop->e[4].v = (tpl_val){.t = V_BOOL, .u.b = i == 0};
        loop->e[5].v = (tpl_val){.t = V_BOOL, .u.b = i == items.n - 1};
        loop->e[6].v = (tpl_val){.t = V_INT, .u.i = len};
        loop->e[7].v = i > 0 ? items.u.items[i - 1] : UNDEF;
        loop->e[8].v = i + 1 < items.n ? items.u.items[i + 1] : UNDEF;
        bind(r, ls, n->a, items.u.items[i]);
        if (exec(r, ls, n->list, n->n) == FLOW_BREAK) break;
    }
    return FLOW_NEXT;
}

static int exec(tpl_run *r, scope *sc, tpl_node *const *body, size_t nb) {
    for (size_t k = 0; k < nb; k++) {
        const tpl_node *n = body[k];
        step(r, n);
        switch (n->kind) {
        case N_TEXT: tpl_emit(r, n->s, n->sn); break;
        case N_OUT: tpl_print(r, eval(r, sc, n->a)); break;
        case N_IF: { /* an else holding only an if (an elif) is taken in this loop */
            const tpl_node *c = n;
            bool yes;
            while (!(yes = tpl_truthy(eval(r, sc, c->a))) && c->n2 == 1 && c->list2[0]->kind == N_IF)
                c = c->list2[0];
            int f = yes ? exec(r, sc, c->list, c->n) : exec(r, sc, c->list2, c->n2);
            if (f != FLOW_NEXT) return f;
            break;
        }
        case N_FOR: exec_for(r, sc, n); break;
        case N_SET: bind(r, sc, n->a, n->b ? eval(r, sc, n->b) : capture(r, sc, n->list, n->n)); break;
        case N_MACRO: {
            macro *m = tpl_alloc(r, sizeof *m);
            m->def = n;
            m->env = sc;
            tpl_dict_set(r, sc->vars, n->s, n->sn, (tpl_val){.t = V_MACRO, .u.mac = m});
            break;
        }
        case N_CALLBLOCK: {
            macro *c = tpl_alloc(r, sizeof *c);
            c->def = n->b;
            c->env = sc;
            tpl_val v = call_with(r, sc, n->a, c);
            tpl_emit(r, v.u.s, v.n);
            break;
        }
        case N_WITH: { /* its values from the scope outside, its sets and body in one of their own */
            scope *ws = scope_new(r, sc);
            for (size_t i = 0; i < n->n2; i++) bind(r, ws, n->list2[i]->a, eval(r, sc, n->list2[i]->b));
            int f = exec(r, ws, n->list, n->n);
            if (f != FLOW_NEXT) return f;
            break;
        }
        case N_FILTERBLOCK: { /* the body's text through the filters */
            scope *fs = scope_new(r, sc);
            tpl_dict_set(r, fs->vars, "\x01", 1, capture(r, sc, n->list, n->n));
            tpl_print(r, eval(r, fs, n->a));
            break;
        }
        case N_BREAK: return FLOW_BREAK;
        case N_CONTINUE: return FLOW_CONTINUE;
        case N_NOP: break;
        default: tpl_fail(r, "an expression where a statement was expected");
        }
    }
    return FLOW_NEXT;
}

sm_status sm_template_render(const sm_template *t, const cJSON *vars,
                             const sm_template_limits *lim, char **out, size_t *len,
                             sm_error *err) {
    *out = NULL;
    *len = 0;
    sm_error local;
    tpl_run *r = calloc(1, sizeof *r);
    if (!r) return sm_error_set(err, SM_ERR_NOMEM, "%s: out of memory", t->name);
    r->err = err ? err : &local;
    r->name = t->name;
    r->max_steps = lim && lim->max_steps ? lim->max_steps : 10000000;
    r->max_output = lim && lim->max_output ? lim->max_output : (16u << 20);
    r->pool.limit = lim && lim->max_memory ? lim->max_memory : (256u << 20);
    sm_status st = SM_OK;
    if (setjmp(r->fail)) {
        st = SM_ERR_INPUT;
        if (strstr(r->err->msg, "out of memory")) st = SM_ERR_NOMEM;
    } else {
        scope *g = scope_new(r, NULL);
        for (int i = 0; i < G_COUNT_; i++)
            tpl_dict_set(r, g->vars, global_names[i], strlen(global_names[i]),
                         (tpl_val){.t = V_FUNC, .fn = (uint8_t)i});
        if (vars && !cJSON_IsObject(vars)) tpl_fail(r, "the variables are not a JSON object");
        for (const cJSON *c = vars ? vars->child : NULL; c; c = c->next)
            tpl_dict_set(r, g->vars, c->string, strlen(c->string), tpl_from_json(r, c));
        /* the template's own sets go to a scope of their own, above the caller's variables */
        exec(r, scope_new(r, g), t->body, t->n);
        tpl_emit(r, "", 0);
        if (!r->out && !(r->out = malloc(1))) tpl_fail(r, "out of memory");
        r->out[r->out_n] = 0;
        *out = r->out;
        *len = r->out_n;
        r->out = NULL;
    }
    free(r->out);
    tpl_pool_free(&r->pool);
    free(r);
    return st;
}
