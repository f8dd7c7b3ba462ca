/*
** parse.c -- tokens (lex.c) to expression nodes: a recursive-descent parser
** with Jinja's precedence (filters and tests bind tightest, then ** * / //
** %, then + - ~, comparisons and in, not, and, or, a if b else c), and the
** helpers stmt.c's statements share. Every error names the line.
*/
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parse_internal.h"

/* ---- parser */
void tpl_parse_fail(parser *p, const char *fmt, ...) {
    if (p->err && p->err->msg[0]) return; /* the first error stands */
    va_list ap;
    va_start(ap, fmt);
    tpl_error(p->err, SM_ERR_FORMAT, p->t->name, p->tok[p->i].line, fmt, ap);
    va_end(ap);
}

const char *tpl_tok_desc(const ltok *t, char *buf, size_t n) {
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

bool tpl_expect_op(parser *p, int op, const char *what) {
    if (accept_op(p, op)) return true;
    char b[64];
    tpl_parse_fail(p, "expected %s, found %s", what, tpl_tok_desc(peek(p), b, sizeof b));
    return false;
}
bool tpl_expect_kind(parser *p, int k, const char *what) {
    if (peek(p)->k == k) {
        p->i++;
        return true;
    }
    char b[64];
    tpl_parse_fail(p, "expected %s, found %s", what, tpl_tok_desc(peek(p), b, sizeof b));
    return false;
}

tpl_node *tpl_new_node(parser *p, int kind, uint32_t line) {
    tpl_node *n = tpl_pool_alloc(&p->t->pool, sizeof *n);
    if (!n) {
        tpl_parse_fail(p, "out of memory");
        return NULL;
    }
    memset(n, 0, sizeof *n);
    n->kind = (uint8_t)kind;
    n->line = line;
    return n;
}

bool tpl_nl_add(parser *p, nlist *l, tpl_node *x) {
    if (!x) return false;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 8;
        tpl_node **nv = tpl_pool_alloc(&p->t->pool, cap * sizeof *nv);
        if (!nv) {
            tpl_parse_fail(p, "out of memory");
            return false;
        }
        if (l->n) memcpy(nv, l->v, l->n * sizeof *nv);
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = x;
    return true;
}

static tpl_node *unary(parser *p, bool filters);

/*
** One level deeper in the tree being built: a nested expression, or one more
** link of a chain (a.b.c, x|f|g, 1+1+1, a and b and c), each of which puts
** the chain so far one level further down. Bounding it bounds the depth the
** renderer recurses to. Chains undo their levels when they end (unchain).
*/
static bool deeper(parser *p) {
    if (++p->nest <= MAX_NEST) return true;
    tpl_parse_fail(p, "expression nested too deeply (more than %d levels)", MAX_NEST);
    return false;
}

static tpl_node *unchain(parser *p, tpl_node *e, int links) {
    p->nest -= links;
    return e;
}

int tpl_lookup(const char *const *names, int count, const ltok *t) {
    for (int i = 0; i < count; i++)
        if (is_name(t, names[i])) return i;
    return -1;
}

/* Call arguments after '(' up to ')': positional, then name=value (N_KW). */
static bool call_args(parser *p, nlist *args) {
    while (!accept_op(p, ')')) {
        ltok *t = peek(p);
        if (accept_op(p, '*')) { /* f(*list): its items as positional arguments */
            tpl_node *sp = tpl_new_node(p, N_SPLAT, t->line);
            if (!sp || !(sp->a = tpl_expr(p)) || !tpl_nl_add(p, args, sp)) return false;
        } else if (t->k == K_NAME && is_op(&p->tok[p->i + 1], '=')) {
            tpl_node *kw = tpl_new_node(p, N_KW, t->line);
            if (!kw) return false;
            kw->s = t->s, kw->sn = t->n;
            p->i += 2;
            if (!(kw->a = tpl_expr(p)) || !tpl_nl_add(p, args, kw)) return false;
        } else if (!tpl_nl_add(p, args, tpl_expr(p)))
            return false;
        if (!is_op(peek(p), ')') && !tpl_expect_op(p, ',', "',' or ')' in the arguments")) return false;
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
        int l = tpl_lookup(lits, 6, t);
        if (l >= 0) {
            if (!(n = tpl_new_node(p, l < 4 ? N_BOOL : N_NONE, t->line))) return NULL;
            n->i = l < 2;
            return n;
        }
        if (!(n = tpl_new_node(p, N_NAME, t->line))) return NULL;
        n->s = t->s, n->sn = t->n;
        return n;
    }
    if (t->k == K_STR) {
        p->i++;
        if (!(n = tpl_new_node(p, N_STR, t->line))) return NULL;
        n->s = t->s, n->sn = t->n;
        return n;
    }
    if (t->k == K_NUM) {
        p->i++;
        bool fl = memchr(t->s, '.', t->n) || memchr(t->s, 'e', t->n) || memchr(t->s, 'E', t->n);
        if (!(n = tpl_new_node(p, fl ? N_FLOAT : N_INT, t->line))) return NULL;
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
        if (accept_op(p, ')')) return tpl_new_node(p, N_TUPLE, t->line);
        tpl_node *e = tpl_expr(p);
        if (!e) return NULL;
        if (is_op(peek(p), ',')) {
            nlist l = {0};
            tpl_nl_add(p, &l, e);
            while (accept_op(p, ',') && !is_op(peek(p), ')'))
                if (!tpl_nl_add(p, &l, tpl_expr(p))) return NULL;
            if (!(n = tpl_new_node(p, N_TUPLE, t->line))) return NULL;
            n->list = nl_done(&l, &n->n);
            e = n;
        }
        return tpl_expect_op(p, ')', "')'") ? e : NULL;
    }
    if (accept_op(p, '[')) {
        nlist l = {0};
        while (!accept_op(p, ']')) {
            if (!tpl_nl_add(p, &l, tpl_expr(p)) ||
                (!is_op(peek(p), ']') && !tpl_expect_op(p, ',', "',' or ']' in a list"))) return NULL;
        }
        if (!(n = tpl_new_node(p, N_LIST, t->line))) return NULL;
        n->list = nl_done(&l, &n->n);
        return n;
    }
    if (accept_op(p, '{')) {
        nlist l = {0};
        while (!accept_op(p, '}')) {
            if (!tpl_nl_add(p, &l, tpl_expr(p)) || !tpl_expect_op(p, ':', "':' in a dict") ||
                !tpl_nl_add(p, &l, tpl_expr(p)) ||
                (!is_op(peek(p), '}') && !tpl_expect_op(p, ',', "',' or '}' in a dict"))) return NULL;
        }
        if (!(n = tpl_new_node(p, N_DICT, t->line))) return NULL;
        n->list = nl_done(&l, &n->n);
        return n;
    }
    FAIL(p, "expected a value, found %s", tpl_tok_desc(t, b, sizeof b));
}

static bool starts_value(const ltok *t) {
    static const char *const kw[] = {"and", "or", "not", "in", "is", "if", "else"};
    if (t->k == K_NAME) return tpl_lookup(kw, 7, t) < 0;
    return t->k == K_STR || t->k == K_NUM || is_op(t, '(') || is_op(t, '[') || is_op(t, '{');
}

/* After a '|' (or {% filter %}): name or name(args) applied to e. */
tpl_node *tpl_filter_call(parser *p, tpl_node *e) {
    ltok *f = peek(p);
    if (f->k != K_NAME) FAIL(p, "expected a filter name after '|'");
    p->i++;
    int id = tpl_filter_id(f->s, f->n); /* unknown: an error only if it runs */
    tpl_node *n = tpl_new_node(p, N_FILTER, f->line);
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
                if (!(n = tpl_new_node(p, N_INDEX, a->line)) || !(n->b = primary(p))) return NULL;
            } else if (a->k == K_NAME) {
                p->i++;
                if (!(n = tpl_new_node(p, N_ATTR, a->line))) return NULL;
                n->s = a->s, n->sn = a->n;
            } else
                FAIL(p, "expected an attribute name after '.', found %s", tpl_tok_desc(a, b, sizeof b));
            n->a = e;
            e = n;
        } else if (accept_op(p, '[')) {
            tpl_node *part[3] = {NULL, NULL, NULL};
            int k = 0;
            bool slice = false;
            for (;;) {
                if (!is_op(peek(p), ':') && !is_op(peek(p), ']') && !(part[k] = tpl_expr(p)))
                    return NULL;
                if (k < 2 && accept_op(p, ':')) {
                    slice = true;
                    k++;
                    continue;
                }
                break;
            }
            if (!tpl_expect_op(p, ']', "']'")) return NULL;
            if (!slice && !part[0]) FAIL(p, "an empty subscript []");
            if (!(n = tpl_new_node(p, slice ? N_SLICE : N_INDEX, t->line))) return NULL;
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
            if (!(n = tpl_new_node(p, N_CALL, t->line))) return NULL;
            n->a = e;
            n->list = nl_done(&l, &n->n);
            e = n;
        } else if (accept_op(p, '|')) {
            if (!(e = tpl_filter_call(p, e))) return NULL;
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
            if (f->k != K_NAME && tn == f->s) FAIL(p, "expected a test name after 'is', found %s", tpl_tok_desc(f, b, sizeof b));
            int id = tpl_test_id(tn, tl); /* unknown: an error only if it runs */
            p->i++;
            if (!(n = tpl_new_node(p, N_TEST, f->line))) return NULL;
            n->op = (uint8_t)((id < 0 ? T_UNKNOWN : id) | (neg ? 0x80 : 0));
            n->s = tn, n->sn = tl;
            n->a = e;
            nlist l = {0};
            if (accept_op(p, '(')) {
                if (!call_args(p, &l)) return NULL;
            } else if (starts_value(peek(p)) && !tpl_nl_add(p, &l, postfix_on(p, primary(p), false))) return NULL;
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
        tpl_node *n = tpl_new_node(p, N_BIN, peek(p)->line);
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
            tpl_node *n = tpl_new_node(p, N_NEG, t->line);
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
        tpl_node *n = tpl_new_node(p, N_BIN, peek(p)->line);
        p->i += op == OP_NOTIN ? 2 : 1;
        if (!n || !(n->b = level == 2 ? pow_expr(p) : binary_level(p, level + 1))) return NULL;
        n->op = (uint8_t)op;
        if (level == 0 && last) {
            tpl_node *both = tpl_new_node(p, N_AND, n->line);
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
        tpl_node *n = tpl_new_node(p, N_NOT, t->line);
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
        tpl_node *n = tpl_new_node(p, kind, peek(p)->line);
        p->i++;
        if (!n || !(n->b = operand(p))) return NULL;
        n->a = e;
        e = n;
    }
    return unchain(p, e, links);
}

static tpl_node *and_expr(parser *p) { return logic(p, N_AND, "and", not_expr); }
tpl_node *tpl_or_expr(parser *p) { return logic(p, N_OR, "or", and_expr); }

/* a if cond [else b] */
tpl_node *tpl_expr(parser *p) {
    if (!deeper(p)) return NULL;
    tpl_node *e = tpl_or_expr(p);
    int links = 0;
    while (e && is_name(peek(p), "if")) {
        if (!deeper(p)) return NULL;
        links++;
        tpl_node *n = tpl_new_node(p, N_COND, peek(p)->line);
        p->i++;
        if (!n || !(n->b = tpl_or_expr(p))) return NULL;
        n->a = e;
        if (accept_name(p, "else") && !(n->c = tpl_expr(p))) return NULL;
        e = n;
    }
    p->nest--;
    return unchain(p, e, links);
}

/* expr, or expr, expr, ... as a tuple (set's values) */
tpl_node *tpl_tuple_expr(parser *p) {
    tpl_node *e = tpl_expr(p);
    if (!e || !is_op(peek(p), ',')) return e;
    nlist l = {0};
    tpl_nl_add(p, &l, e);
    while (accept_op(p, ',')) {
        if (!tpl_nl_add(p, &l, tpl_expr(p))) return NULL;
    }
    tpl_node *n = tpl_new_node(p, N_TUPLE, e->line);
    if (n) n->list = nl_done(&l, &n->n);
    return n;
}

