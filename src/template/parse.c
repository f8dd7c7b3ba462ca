/*
** parse.c -- tokens (lex.c) to a syntax tree: a recursive-descent parser
** with Jinja's precedence (filters and tests bind tightest, then ** * / //
** %, then + - ~, comparisons and in, not, and, or, a if b else c). Every
** error names the line.
*/
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template_internal.h"

#define MAX_NEST 200 /* expression and block nesting */

/* ---- parser */
typedef struct parser {
    sm_template *t;
    sm_error *err;
    ltok *tok;
    size_t i;
    int nest;
} parser;

#define FAIL(p, ...)                                  \
    do {                                              \
        parse_fail(p, __VA_ARGS__);                   \
        return NULL;                                  \
    } while (0)

static void parse_fail(parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void parse_fail(parser *p, const char *fmt, ...) {
    if (p->err && p->err->msg[0]) return; /* the first error stands */
    va_list ap;
    va_start(ap, fmt);
    tpl_error(p->err, SM_ERR_FORMAT, p->t->name, p->tok[p->i].line, fmt, ap);
    va_end(ap);
}

static ltok *peek(parser *p) { return &p->tok[p->i]; }
static bool is_op(const ltok *t, int op) { return t->k == K_OP && t->op == op; }
static bool is_name(const ltok *t, const char *w) {
    return t->k == K_NAME && t->n == strlen(w) && !memcmp(t->s, w, t->n);
}
static bool accept_op(parser *p, int op) {
    if (!is_op(peek(p), op)) return false;
    p->i++;
    return true;
}
static bool accept_name(parser *p, const char *w) {
    if (!is_name(peek(p), w)) return false;
    p->i++;
    return true;
}

static const char *tok_desc(const ltok *t, char *buf, size_t n) {
    switch (t->k) {
    case K_TEXT: return "text";
    case K_SOPEN: return "'{%'";
    case K_SCLOSE: return "'%}'";
    case K_EOPEN: return "'{{'";
    case K_ECLOSE: return "'}}'";
    case K_EOF: return "the end of the template";
    case K_STR: return "a string";
    case K_NUM:
    case K_NAME: snprintf(buf, n, "'%.*s'", (int)(t->n > 40 ? 40 : t->n), t->s); return buf;
    default:
        if (t->op < 256) snprintf(buf, n, "'%c'", t->op);
        else snprintf(buf, n, "'%s'", t->op == Q_EQ ? "==" : t->op == Q_NE ? "!=" : t->op == Q_LE ? "<="
                                      : t->op == Q_GE ? ">=" : t->op == Q_POW ? "**" : "//");
        return buf;
    }
}

static bool expect_op(parser *p, int op, const char *what) {
    if (accept_op(p, op)) return true;
    char b[64];
    parse_fail(p, "expected %s, found %s", what, tok_desc(peek(p), b, sizeof b));
    return false;
}
static bool expect_kind(parser *p, int k, const char *what) {
    if (peek(p)->k == k) {
        p->i++;
        return true;
    }
    char b[64];
    parse_fail(p, "expected %s, found %s", what, tok_desc(peek(p), b, sizeof b));
    return false;
}

static tpl_node *node(parser *p, int kind, uint32_t line) {
    tpl_node *n = tpl_pool_alloc(&p->t->pool, sizeof *n);
    if (!n) {
        parse_fail(p, "out of memory");
        return NULL;
    }
    memset(n, 0, sizeof *n);
    n->kind = (uint8_t)kind;
    n->line = line;
    return n;
}

/* A growing list of nodes in the template's pool (an outgrown array is left there). */
typedef struct nlist {
    tpl_node **v;
    size_t n, cap;
} nlist;

static bool nl_add(parser *p, nlist *l, tpl_node *x) {
    if (!x) return false;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 8;
        tpl_node **nv = tpl_pool_alloc(&p->t->pool, cap * sizeof *nv);
        if (!nv) {
            parse_fail(p, "out of memory");
            return false;
        }
        if (l->n) memcpy(nv, l->v, l->n * sizeof *nv);
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = x;
    return true;
}

static tpl_node **nl_done(nlist *l, size_t *n) {
    *n = l->n;
    return l->v;
}

static tpl_node *expr(parser *p);
static tpl_node *or_expr(parser *p);
static tpl_node *unary(parser *p, bool filters);

/*
** One level deeper in the tree being built: a nested expression, or one more
** link of a chain (a.b.c, x|f|g, 1+1+1, a and b and c), each of which puts
** the chain so far one level further down. Bounding it bounds the depth the
** renderer recurses to. Chains undo their levels when they end (unchain).
*/
static bool deeper(parser *p) {
    if (++p->nest <= MAX_NEST) return true;
    parse_fail(p, "expression nested too deeply (more than %d levels)", MAX_NEST);
    return false;
}

static tpl_node *unchain(parser *p, tpl_node *e, int links) {
    p->nest -= links;
    return e;
}

static int lookup(const char *const *names, int count, const ltok *t) {
    for (int i = 0; i < count; i++)
        if (is_name(t, names[i])) return i;
    return -1;
}

/* Call arguments after '(' up to ')': positional, then name=value (N_KW). */
static bool call_args(parser *p, nlist *args) {
    while (!accept_op(p, ')')) {
        ltok *t = peek(p);
        if (accept_op(p, '*')) { /* f(*list): its items as positional arguments */
            tpl_node *sp = node(p, N_SPLAT, t->line);
            if (!sp || !(sp->a = expr(p)) || !nl_add(p, args, sp)) return false;
        } else if (t->k == K_NAME && is_op(&p->tok[p->i + 1], '=')) {
            tpl_node *kw = node(p, N_KW, t->line);
            if (!kw) return false;
            kw->s = t->s, kw->sn = t->n;
            p->i += 2;
            if (!(kw->a = expr(p)) || !nl_add(p, args, kw)) return false;
        } else if (!nl_add(p, args, expr(p)))
            return false;
        if (!is_op(peek(p), ')') && !expect_op(p, ',', "',' or ')' in the arguments")) return false;
    }
    return true;
}

static tpl_node *primary(parser *p) {
    ltok *t = peek(p);
    char b[64];
    tpl_node *n;
    if (t->k == K_NAME) {
        p->i++;
        static const char *const lits[] = {"true", "True", "false", "False", "none", "None"};
        int l = lookup(lits, 6, t);
        if (l >= 0) {
            if (!(n = node(p, l < 4 ? N_BOOL : N_NONE, t->line))) return NULL;
            n->i = l < 2;
            return n;
        }
        if (!(n = node(p, N_NAME, t->line))) return NULL;
        n->s = t->s, n->sn = t->n;
        return n;
    }
    if (t->k == K_STR) {
        p->i++;
        if (!(n = node(p, N_STR, t->line))) return NULL;
        n->s = t->s, n->sn = t->n;
        return n;
    }
    if (t->k == K_NUM) {
        p->i++;
        bool fl = memchr(t->s, '.', t->n) || memchr(t->s, 'e', t->n) || memchr(t->s, 'E', t->n);
        if (!(n = node(p, fl ? N_FLOAT : N_INT, t->line))) return NULL;
        char num[64];
        if (t->n >= sizeof num) FAIL(p, "number too long");
        memcpy(num, t->s, t->n);
        num[t->n] = 0;
        if (fl) n->f = strtod(num, NULL);
        else {
            unsigned long long v = strtoull(num, NULL, 10);
            if (v > (unsigned long long)INT64_MAX) n->kind = N_FLOAT, n->f = (double)v;
            else n->i = (int64_t)v;
        }
        return n;
    }
    if (accept_op(p, '(')) {
        if (accept_op(p, ')')) return node(p, N_TUPLE, t->line);
        tpl_node *e = expr(p);
        if (!e) return NULL;
        if (is_op(peek(p), ',')) {
            nlist l = {0};
            nl_add(p, &l, e);
            while (accept_op(p, ',') && !is_op(peek(p), ')'))
                if (!nl_add(p, &l, expr(p))) return NULL;
            if (!(n = node(p, N_TUPLE, t->line))) return NULL;
            n->list = nl_done(&l, &n->n);
            e = n;
        }
        return expect_op(p, ')', "')'") ? e : NULL;
    }
    if (accept_op(p, '[')) {
        nlist l = {0};
        while (!accept_op(p, ']')) {
            if (!nl_add(p, &l, expr(p)) ||
                (!is_op(peek(p), ']') && !expect_op(p, ',', "',' or ']' in a list"))) return NULL;
        }
        if (!(n = node(p, N_LIST, t->line))) return NULL;
        n->list = nl_done(&l, &n->n);
        return n;
    }
    if (accept_op(p, '{')) {
        nlist l = {0};
        while (!accept_op(p, '}')) {
            if (!nl_add(p, &l, expr(p)) || !expect_op(p, ':', "':' in a dict") ||
                !nl_add(p, &l, expr(p)) ||
                (!is_op(peek(p), '}') && !expect_op(p, ',', "',' or '}' in a dict"))) return NULL;
        }
        if (!(n = node(p, N_DICT, t->line))) return NULL;
        n->list = nl_done(&l, &n->n);
        return n;
    }
    FAIL(p, "expected a value, found %s", tok_desc(t, b, sizeof b));
}

static bool starts_value(const ltok *t) {
    static const char *const kw[] = {"and", "or", "not", "in", "is", "if", "else"};
    if (t->k == K_NAME) return lookup(kw, 7, t) < 0;
    return t->k == K_STR || t->k == K_NUM || is_op(t, '(') || is_op(t, '[') || is_op(t, '{');
}

/* After a '|' (or {% filter %}): name or name(args) applied to e. */
static tpl_node *filter_call(parser *p, tpl_node *e) {
    ltok *f = peek(p);
    if (f->k != K_NAME) FAIL(p, "expected a filter name after '|'");
    p->i++;
    int id = tpl_filter_id(f->s, f->n); /* unknown: an error only if it runs */
    tpl_node *n = node(p, N_FILTER, f->line);
    if (!n) return NULL;
    n->op = (uint8_t)(id < 0 ? F_UNKNOWN : id);
    n->s = f->s, n->sn = f->n;
    n->a = e;
    if (accept_op(p, '(')) {
        nlist l = {0};
        if (!call_args(p, &l)) return NULL;
        n->list = nl_done(&l, &n->n);
    }
    return n;
}

/* e followed by .name, [i], (args) and, with filters, |filter and `is test` (Jinja: the filters of
   a unary expression apply to it whole, -3|abs is 3) */
static tpl_node *postfix_on(parser *p, tpl_node *e, bool filters) {
    char b[64];
    int links = 0;
    while (e) {
        ltok *t = peek(p);
        tpl_node *n;
        if (!filters && (is_op(t, '|') || is_name(t, "is"))) break;
        if ((is_op(t, '.') || is_op(t, '[') || is_op(t, '(') || is_op(t, '|') || is_name(t, "is"))) {
            if (!deeper(p)) return NULL;
            links++;
        }
        if (accept_op(p, '.')) {
            ltok *a = peek(p);
            if (a->k == K_NUM && !memchr(a->s, '.', a->n)) {
                if (!(n = node(p, N_INDEX, a->line)) || !(n->b = primary(p))) return NULL;
            } else if (a->k == K_NAME) {
                p->i++;
                if (!(n = node(p, N_ATTR, a->line))) return NULL;
                n->s = a->s, n->sn = a->n;
            } else
                FAIL(p, "expected an attribute name after '.', found %s", tok_desc(a, b, sizeof b));
            n->a = e;
            e = n;
        } else if (accept_op(p, '[')) {
            tpl_node *part[3] = {NULL, NULL, NULL};
            int k = 0;
            bool slice = false;
            for (;;) {
                if (!is_op(peek(p), ':') && !is_op(peek(p), ']') && !(part[k] = expr(p)))
                    return NULL;
                if (k < 2 && accept_op(p, ':')) {
                    slice = true;
                    k++;
                    continue;
                }
                break;
            }
            if (!expect_op(p, ']', "']'")) return NULL;
            if (!slice && !part[0]) FAIL(p, "an empty subscript []");
            if (!(n = node(p, slice ? N_SLICE : N_INDEX, t->line))) return NULL;
            n->a = e;
            if (slice) {
                n->list = tpl_pool_alloc(&p->t->pool, 3 * sizeof *n->list);
                if (!n->list) FAIL(p, "out of memory");
                memcpy(n->list, part, sizeof part);
                n->n = 3;
            } else
                n->b = part[0];
            e = n;
        } else if (accept_op(p, '(')) {
            nlist l = {0};
            if (!call_args(p, &l)) return NULL;
            if (!(n = node(p, N_CALL, t->line))) return NULL;
            n->a = e;
            n->list = nl_done(&l, &n->n);
            e = n;
        } else if (accept_op(p, '|')) {
            if (!(e = filter_call(p, e))) return NULL;
        } else if (is_name(t, "is")) {
            p->i++;
            bool neg = accept_name(p, "not");
            ltok *f = peek(p);
            static const struct { int op; const char *s; } ops[] = {
                {Q_EQ, "=="}, {Q_NE, "!="}, {'<', "<"}, {Q_LE, "<="}, {'>', ">"}, {Q_GE, ">="}};
            const char *tn = f->s;
            size_t tl = f->n;
            for (size_t k = 0; f->k == K_OP && k < sizeof ops / sizeof ops[0]; k++)
                if (f->op == ops[k].op) tn = ops[k].s, tl = strlen(ops[k].s);
            if (f->k != K_NAME && tn == f->s) FAIL(p, "expected a test name after 'is', found %s", tok_desc(f, b, sizeof b));
            int id = tpl_test_id(tn, tl); /* unknown: an error only if it runs */
            p->i++;
            if (!(n = node(p, N_TEST, f->line))) return NULL;
            n->op = (uint8_t)((id < 0 ? T_UNKNOWN : id) | (neg ? 0x80 : 0));
            n->s = tn, n->sn = tl;
            n->a = e;
            nlist l = {0};
            if (accept_op(p, '(')) {
                if (!call_args(p, &l)) return NULL;
            } else if (starts_value(peek(p)) && !nl_add(p, &l, postfix_on(p, primary(p), false))) return NULL;
            n->list = nl_done(&l, &n->n);
            e = n;
        } else
            break;
    }
    return unchain(p, e, links);
}

/* a ** b over unary operands (Jinja: -2 ** 2 is 4) */
static tpl_node *pow_expr(parser *p) {
    tpl_node *e = unary(p, true);
    int links = 0;
    while (e && is_op(peek(p), Q_POW)) {
        if (!deeper(p)) return NULL;
        links++;
        tpl_node *n = node(p, N_BIN, peek(p)->line);
        p->i++;
        if (!n || !(n->b = unary(p, true))) return NULL;
        n->op = OP_POW, n->a = e;
        e = n;
    }
    return unchain(p, e, links);
}

/* [-+] operand, then the postfix steps (the filters only at the outermost sign) */
static tpl_node *unary(parser *p, bool filters) {
    ltok *t = peek(p);
    if (is_op(t, '-') || is_op(t, '+')) {
        if (!deeper(p)) return NULL;
        p->i++;
        tpl_node *a = unary(p, false);
        p->nest--;
        if (a && t->op == '-') {
            tpl_node *n = node(p, N_NEG, t->line);
            if (n) n->a = a;
            a = n;
        }
        return a ? postfix_on(p, a, filters) : NULL;
    }
    return postfix_on(p, primary(p), filters);
}

static tpl_node *binary_level(parser *p, int level);

/* levels: 0 comparisons and in, 1 + - ~, 2 * / // % */
static int bin_op(parser *p, int level) {
    ltok *t = peek(p);
    if (t->k == K_NAME && level == 0) {
        if (is_name(t, "in")) return OP_IN;
        if (is_name(t, "not") && is_name(&p->tok[p->i + 1], "in")) return OP_NOTIN;
        return -1;
    }
    if (t->k != K_OP) return -1;
    switch (level) {
    case 0:
        return t->op == Q_EQ ? OP_EQ : t->op == Q_NE ? OP_NE : t->op == '<' ? OP_LT
             : t->op == '>' ? OP_GT : t->op == Q_LE ? OP_LE : t->op == Q_GE ? OP_GE : -1;
    case 1: return t->op == '+' ? OP_ADD : t->op == '-' ? OP_SUB : t->op == '~' ? OP_CONCAT : -1;
    default:
        return t->op == '*' ? OP_MUL : t->op == '/' ? OP_DIV : t->op == Q_FLOORDIV ? OP_FLOORDIV
             : t->op == '%' ? OP_MOD : -1;
    }
}

static tpl_node *binary_level(parser *p, int level) {
    tpl_node *e = level == 2 ? pow_expr(p) : binary_level(p, level + 1);
    tpl_node *last = NULL; /* comparisons chain as Python's: a < b < c is a < b and b < c */
    int op, links = 0;
    while (e && (op = bin_op(p, level)) >= 0) {
        if (!deeper(p)) return NULL;
        links++;
        tpl_node *n = node(p, N_BIN, peek(p)->line);
        p->i += op == OP_NOTIN ? 2 : 1;
        if (!n || !(n->b = level == 2 ? pow_expr(p) : binary_level(p, level + 1))) return NULL;
        n->op = (uint8_t)op;
        if (level == 0 && last) {
            tpl_node *both = node(p, N_AND, n->line);
            if (!both) return NULL;
            n->a = last, both->a = e, both->b = n;
            e = both;
        } else {
            n->a = e;
            e = n;
        }
        if (level == 0) last = n->b;
    }
    return unchain(p, e, links);
}

static tpl_node *not_expr(parser *p) {
    ltok *t = peek(p);
    if (is_name(t, "not")) {
        if (!deeper(p)) return NULL;
        p->i++;
        tpl_node *n = node(p, N_NOT, t->line);
        if (n && !(n->a = not_expr(p))) n = NULL;
        p->nest--;
        return n;
    }
    return binary_level(p, 0);
}

/* operand (word operand)*: `and` over not, `or` over and */
static tpl_node *logic(parser *p, int kind, const char *word, tpl_node *(*operand)(parser *)) {
    tpl_node *e = operand(p);
    int links = 0;
    while (e && is_name(peek(p), word)) {
        if (!deeper(p)) return NULL;
        links++;
        tpl_node *n = node(p, kind, peek(p)->line);
        p->i++;
        if (!n || !(n->b = operand(p))) return NULL;
        n->a = e;
        e = n;
    }
    return unchain(p, e, links);
}

static tpl_node *and_expr(parser *p) { return logic(p, N_AND, "and", not_expr); }
static tpl_node *or_expr(parser *p) { return logic(p, N_OR, "or", and_expr); }

/* a if cond [else b] */
static tpl_node *expr(parser *p) {
    if (!deeper(p)) return NULL;
    tpl_node *e = or_expr(p);
    int links = 0;
    while (e && is_name(peek(p), "if")) {
        if (!deeper(p)) return NULL;
        links++;
        tpl_node *n = node(p, N_COND, peek(p)->line);
        p->i++;
        if (!n || !(n->b = or_expr(p))) return NULL;
        n->a = e;
        if (accept_name(p, "else") && !(n->c = expr(p))) return NULL;
        e = n;
    }
    p->nest--;
    return unchain(p, e, links);
}

/* expr, or expr, expr, ... as a tuple (set's values) */
static tpl_node *tuple_expr(parser *p) {
    tpl_node *e = expr(p);
    if (!e || !is_op(peek(p), ',')) return e;
    nlist l = {0};
    nl_add(p, &l, e);
    while (accept_op(p, ',')) {
        if (!nl_add(p, &l, expr(p))) return NULL;
    }
    tpl_node *n = node(p, N_TUPLE, e->line);
    if (n) n->list = nl_done(&l, &n->n);
    return n;
}

/* Loop and set targets: a name, name.attr, or names with commas. */
static tpl_node *target(parser *p, bool attr_ok) {
    bool paren = accept_op(p, '(');
    nlist l = {0};
    do {
        ltok *t = peek(p);
        if (t->k != K_NAME) FAIL(p, "expected a variable name");
        p->i++;
        tpl_node *n = node(p, N_NAME, t->line);
        if (!n) break;
        n->s = t->s, n->sn = t->n;
        if (attr_ok && accept_op(p, '.')) {
            ltok *a = peek(p);
            if (a->k != K_NAME) FAIL(p, "expected an attribute name after '.'");
            p->i++;
            tpl_node *m = node(p, N_ATTR, a->line);
            if (!m) break;
            m->a = n, m->s = a->s, m->sn = a->n;
            n = m;
        }
        nl_add(p, &l, n);
    } while (accept_op(p, ','));
    if (paren && !expect_op(p, ')', "')'")) return NULL;
    if (l.n == 1) return l.v[0];
    tpl_node *tu = node(p, N_TUPLE, l.n ? l.v[0]->line : 0);
    if (tu) tu->list = nl_done(&l, &tu->n);
    return tu;
}

static tpl_node **body(parser *p, const char *const *ends, size_t n_ends, size_t *n,
                       int *which, const char *opener, uint32_t open_line);

#define END_STMT(p) expect_kind(p, K_SCLOSE, "'%}'")

/* A macro's parameters after its '(' up to ')': names (list) and their defaults (list2, N_NOP
   where there is none), n2 of each, in m. */
static bool macro_params(parser *p, tpl_node *m) {
    nlist params = {0}, defs = {0};
    while (!accept_op(p, ')')) {
        ltok *t = peek(p);
        tpl_node *pn = node(p, N_NAME, t->line), *dv = NULL;
        if (!pn || t->k != K_NAME) {
            parse_fail(p, "expected a parameter name");
            return false;
        }
        p->i++;
        pn->s = t->s, pn->sn = t->n;
        if (accept_op(p, '=') && !(dv = expr(p))) break;
        nl_add(p, &params, pn);
        if (!dv && !(dv = node(p, N_NOP, t->line))) break;
        nl_add(p, &defs, dv);
        if (!is_op(peek(p), ')') && !expect_op(p, ',', "',' or ')'")) break;
    }
    m->list2 = nl_done(&defs, &m->n2);
    m->list = nl_done(&params, &m->n2);
    return !(p->err && p->err->msg[0]);
}

/* The rest of a macro m, its parameters read, up to its end tag: list holds the parameters, then
   the body. */
static tpl_node *macro_rest(parser *p, tpl_node *m, const char *const *end, const char *what,
                            uint32_t line) {
    if (!END_STMT(p)) return NULL;
    int which;
    size_t nb;
    tpl_node **pl = m->list, **b = body(p, end, 1, &nb, &which, what, line);
    if (which < 0 || !END_STMT(p)) return NULL;
    m->list = tpl_pool_alloc(&p->t->pool, (m->n2 + nb + 1) * sizeof *m->list);
    if (!m->list) FAIL(p, "out of memory");
    if (m->n2) memcpy(m->list, pl, m->n2 * sizeof *pl);
    if (nb) memcpy(m->list + m->n2, b, nb * sizeof *b);
    m->n = m->n2 + nb;
    return m;
}

static tpl_node *statement(parser *p, ltok *kw) {
    static const char *const if_ends[] = {"elif", "else", "endif"};
    static const char *const for_ends[] = {"else", "endfor"};
    static const char *const endif[] = {"endif"}, *const endfor[] = {"endfor"};
    static const char *const endset[] = {"endset"}, *const endmacro[] = {"endmacro"},
                             *const endcall[] = {"endcall"};
    uint32_t line = kw->line;
    int which;
    tpl_node *n;
    if (is_name(kw, "if")) { /* if, each elif an if in the else branch of the one before */
        tpl_node *first = NULL, *prev = NULL;
        for (;;) {
            if (!(n = node(p, N_IF, line)) || !(n->a = expr(p)) || !END_STMT(p)) return NULL;
            n->list = body(p, if_ends, 3, &n->n, &which, "if", line);
            if (which < 0) return NULL;
            if (prev) {
                if (!(prev->list2 = tpl_pool_alloc(&p->t->pool, sizeof *prev->list2)))
                    FAIL(p, "out of memory");
                prev->list2[0] = n;
                prev->n2 = 1;
            } else
                first = n;
            prev = n;
            if (which == 0) { /* elif (its keyword read): its condition next */
                line = p->tok[p->i - 1].line;
                continue;
            }
            if (which == 1) {
                if (!END_STMT(p)) return NULL;
                n->list2 = body(p, endif, 1, &n->n2, &which, "if", line);
                if (which < 0) return NULL;
            }
            return END_STMT(p) ? first : NULL;
        }
    }
    if (is_name(kw, "for")) {
        if (!(n = node(p, N_FOR, line)) || !(n->a = target(p, false))) return NULL;
        if (!accept_name(p, "in")) FAIL(p, "expected 'in' in the for statement");
        if (!(n->b = or_expr(p))) return NULL;
        if (accept_name(p, "if") && !(n->c = or_expr(p))) return NULL;
        if (is_name(peek(p), "recursive")) FAIL(p, "recursive loops are not supported");
        if (!END_STMT(p)) return NULL;
        n->list = body(p, for_ends, 2, &n->n, &which, "for", line);
        if (which < 0) return NULL;
        if (which == 0) {
            if (!END_STMT(p)) return NULL;
            n->list2 = body(p, endfor, 1, &n->n2, &which, "for", line);
            if (which < 0) return NULL;
        }
        return END_STMT(p) ? n : NULL;
    }
    if (is_name(kw, "set")) {
        if (!(n = node(p, N_SET, line)) || !(n->a = target(p, true))) return NULL;
        if (accept_op(p, '=')) return (n->b = tuple_expr(p)) && END_STMT(p) ? n : NULL;
        if (n->a->kind != N_NAME) FAIL(p, "a block set takes one variable name");
        if (!END_STMT(p)) return NULL;
        n->list = body(p, endset, 1, &n->n, &which, "set", line);
        return which >= 0 && END_STMT(p) ? n : NULL;
    }
    if (is_name(kw, "macro")) {
        ltok *name = peek(p);
        if (name->k != K_NAME) FAIL(p, "expected the macro's name");
        p->i++;
        if (!(n = node(p, N_MACRO, line))) return NULL;
        n->s = name->s, n->sn = name->n;
        if (!expect_op(p, '(', "'(' after the macro's name") || !macro_params(p, n)) return NULL;
        return macro_rest(p, n, endmacro, "macro", line);
    }
    if (is_name(kw, "call")) { /* {% call(params) m(args) %}body{% endcall %}: m's caller() is body */
        tpl_node *c;
        if (!(n = node(p, N_CALLBLOCK, line)) || !(c = node(p, N_MACRO, line))) return NULL;
        c->s = "caller", c->sn = 6;
        if (accept_op(p, '(') && !macro_params(p, c)) return NULL;
        if (!(n->a = expr(p))) return NULL;
        if (n->a->kind != N_CALL) FAIL(p, "a call block needs a macro call");
        return (n->b = macro_rest(p, c, endcall, "call", line)) ? n : NULL;
    }
    if (is_name(kw, "with")) { /* {% with a = x, b = y %}: list2 the sets, list the body */
        static const char *const endwith[] = {"endwith"};
        nlist sets = {0};
        if (!(n = node(p, N_WITH, line))) return NULL;
        while (!(peek(p)->k == K_SCLOSE)) {
            tpl_node *st = node(p, N_SET, line);
            if (!st || !(st->a = target(p, false)) || !expect_op(p, '=', "'='") || !(st->b = expr(p)) ||
                !nl_add(p, &sets, st))
                return NULL;
            if (!(peek(p)->k == K_SCLOSE) && !expect_op(p, ',', "',' or '%}'")) return NULL;
        }
        n->list2 = nl_done(&sets, &n->n2);
        if (!END_STMT(p)) return NULL;
        n->list = body(p, endwith, 1, &n->n, &which, "with", line);
        return which >= 0 && END_STMT(p) ? n : NULL;
    }
    if (is_name(kw, "filter")) { /* {% filter f(args)|g %}body: a is the chain over the body's text */
        static const char *const endfilter[] = {"endfilter"};
        tpl_node *e = node(p, N_NAME, line);
        if (!(n = node(p, N_FILTERBLOCK, line)) || !e) return NULL;
        e->s = "\x01", e->sn = 1; /* no template can name it: the body's text */
        do
            if (!(e = filter_call(p, e))) return NULL;
        while (accept_op(p, '|'));
        n->a = e;
        if (!END_STMT(p)) return NULL;
        n->list = body(p, endfilter, 1, &n->n, &which, "filter", line);
        return which >= 0 && END_STMT(p) ? n : NULL;
    }
    if (is_name(kw, "break") || is_name(kw, "continue")) {
        if (!(n = node(p, is_name(kw, "break") ? N_BREAK : N_CONTINUE, line))) return NULL;
        return END_STMT(p) ? n : NULL;
    }
    if (is_name(kw, "generation") || is_name(kw, "endgeneration")) {
        n = node(p, N_NOP, line);
        return n && END_STMT(p) ? n : NULL;
    }
    char b[64];
    if (kw->k == K_NAME && kw->n > 3 && !memcmp(kw->s, "end", 3))
        FAIL(p, "unexpected %s", tok_desc(kw, b, sizeof b));
    FAIL(p, "unsupported statement %s", tok_desc(kw, b, sizeof b));
}

/*
** Statements up to {% END %} for one of ends (*which = its index, the
** name consumed, '%}' not), or to the end of the template when n_ends is 0.
** *which = -1 on error.
*/
static tpl_node **body(parser *p, const char *const *ends, size_t n_ends, size_t *n,
                       int *which, const char *opener, uint32_t open_line) {
    nlist l = {0};
    *which = -1;
    *n = 0;
    if (++p->nest > MAX_NEST) {
        parse_fail(p, "blocks nested too deeply");
        return NULL;
    }
    for (;;) {
        ltok *t = peek(p);
        if (t->k == K_EOF) {
            if (n_ends) {
                parse_fail(p, "the '%s' of line %u is not closed with {%% %s %%}", opener,
                           open_line, ends[n_ends - 1]);
                break;
            }
            *which = 0;
            break;
        }
        if (t->k == K_TEXT) {
            p->i++;
            tpl_node *x = node(p, N_TEXT, t->line);
            if (!x) break;
            x->s = t->s, x->sn = t->n;
            if (!nl_add(p, &l, x)) break;
            continue;
        }
        if (t->k == K_EOPEN) {
            p->i++;
            tpl_node *x = node(p, N_OUT, t->line);
            if (!x || !(x->a = expr(p)) || !expect_kind(p, K_ECLOSE, "'}}'")) break;
            if (!nl_add(p, &l, x)) break;
            continue;
        }
        if (t->k == K_SCLOSE && t->op == 1) { /* a comment's end */
            p->i++;
            continue;
        }
        if (t->k != K_SOPEN) {
            char b[64];
            parse_fail(p, "unexpected %s", tok_desc(t, b, sizeof b));
            break;
        }
        p->i++;
        ltok *kw = peek(p);
        int e = lookup(ends, (int)n_ends, kw);
        if (e >= 0) {
            p->i++;
            *which = e;
            break;
        }
        if (kw->k != K_NAME) {
            parse_fail(p, "expected a statement name after '{%%'");
            break;
        }
        p->i++;
        if (!nl_add(p, &l, statement(p, kw))) break;
    }
    p->nest--;
    if (*which < 0) return NULL;
    tpl_node **r = nl_done(&l, n);
    if (p->err && p->err->msg[0]) *which = -1;
    return r;
}

sm_status sm_template_parse(sm_template **out, const char *src, size_t len, const char *name,
                            sm_error *err) {
    *out = NULL;
    sm_template *t = calloc(1, sizeof *t);
    if (!t) return sm_error_set(err, SM_ERR_NOMEM, "%s: out of memory", name);
    snprintf(t->name, sizeof t->name, "%s", name);
    sm_error local;
    if (!err) err = &local;
    err->msg[0] = 0;
    ltok *toks;
    size_t n_toks;
    sm_status st = tpl_lex(t, src, len, &toks, &n_toks, err);
    if (!st) {
        parser P = {.t = t, .err = err, .tok = toks};
        int which;
        t->body = body(&P, NULL, 0, &t->n, &which, NULL, 0);
        if (which < 0) st = SM_ERR_FORMAT;
        free(toks);
    }
    if (st) {
        sm_template_free(t);
        return st;
    }
    *out = t;
    return SM_OK;
}

void sm_template_free(sm_template *t) {
    if (!t) return;
    tpl_pool_free(&t->pool);
    free(t);
}
