/*
** stmt.c -- the template's statements (if, for, set, macro, call, with,
** filter, break, continue, generation) and body: tokens to the tree's
** statement nodes, over parse.c's expressions. Every error names the line.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parse_internal.h"

/* Loop and set targets: a name, name.attr, or names with commas. */
static tpl_node *target(parser *p, bool attr_ok) {
    bool paren = accept_op(p, '(');
    nlist l = {0};
    do {
        ltok *t = peek(p);
        if (t->k != K_NAME) FAIL(p, "expected a variable name");
        p->i++;
        tpl_node *n = tpl_new_node(p, N_NAME, t->line);
        if (!n) break;
        n->s = t->s, n->sn = t->n;
        if (attr_ok && accept_op(p, '.')) {
            ltok *a = peek(p);
            if (a->k != K_NAME) FAIL(p, "expected an attribute name after '.'");
            p->i++;
            tpl_node *m = tpl_new_node(p, N_ATTR, a->line);
            if (!m) break;
            m->a = n, m->s = a->s, m->sn = a->n;
            n = m;
        }
        tpl_nl_add(p, &l, n);
    } while (accept_op(p, ','));
    if (paren && !tpl_expect_op(p, ')', "')'")) return NULL;
    if (l.n == 1) return l.v[0];
    tpl_node *tu = tpl_new_node(p, N_TUPLE, l.n ? l.v[0]->line : 0);
    if (tu) tu->list = nl_done(&l, &tu->n);
    return tu;
}

static tpl_node **body(parser *p, const char *const *ends, size_t n_ends, size_t *n,
                       int *which, const char *opener, uint32_t open_line);

#define END_STMT(p) tpl_expect_kind(p, K_SCLOSE, "'%}'")
/* An if's or a for's else branch (its keyword read): its body into n's second list, up to end. */
static bool else_body(parser *p, tpl_node *n, const char *const *end, const char *kw, uint32_t line) {
    int which;
    if (!END_STMT(p)) return false;
    n->list2 = body(p, end, 1, &n->n2, &which, kw, line);
    return which >= 0;
}

/* A macro's parameters after its '(' up to ')': names (list) and their defaults (list2, N_NOP
   where there is none), n2 of each, in m. */
static bool macro_params(parser *p, tpl_node *m) {
    nlist params = {0}, defs = {0};
    while (!accept_op(p, ')')) {
        ltok *t = peek(p);
        tpl_node *pn = tpl_new_node(p, N_NAME, t->line), *dv = NULL;
        if (!pn || t->k != K_NAME) {
            tpl_parse_fail(p, "expected a parameter name");
            return false;
        }
        p->i++;
        pn->s = t->s, pn->sn = t->n;
        if (accept_op(p, '=') && !(dv = tpl_expr(p))) break;
        tpl_nl_add(p, &params, pn);
        if (!dv && !(dv = tpl_new_node(p, N_NOP, t->line))) break;
        tpl_nl_add(p, &defs, dv);
        if (!is_op(peek(p), ')') && !tpl_expect_op(p, ',', "',' or ')'")) break;
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
            if (!(n = tpl_new_node(p, N_IF, line)) || !(n->a = tpl_expr(p)) || !END_STMT(p)) return NULL;
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
            if (which == 1 && !else_body(p, n, endif, "if", line)) return NULL;
            return END_STMT(p) ? first : NULL;
        }
    }
    if (is_name(kw, "for")) {
        if (!(n = tpl_new_node(p, N_FOR, line)) || !(n->a = target(p, false))) return NULL;
        if (!accept_name(p, "in")) FAIL(p, "expected 'in' in the for statement");
        if (!(n->b = tpl_or_expr(p))) return NULL;
        if (accept_name(p, "if") && !(n->c = tpl_or_expr(p))) return NULL;
        if (is_name(peek(p), "recursive")) FAIL(p, "recursive loops are not supported");
        if (!END_STMT(p)) return NULL;
        n->list = body(p, for_ends, 2, &n->n, &which, "for", line);
        if (which < 0) return NULL;
        if (which == 0 && !else_body(p, n, endfor, "for", line)) return NULL;
        return END_STMT(p) ? n : NULL;
    }
    if (is_name(kw, "set")) {
        if (!(n = tpl_new_node(p, N_SET, line)) || !(n->a = target(p, true))) return NULL;
        if (accept_op(p, '=')) return (n->b = tpl_tuple_expr(p)) && END_STMT(p) ? n : NULL;
        if (n->a->kind != N_NAME) FAIL(p, "a block set takes one variable name");
        if (!END_STMT(p)) return NULL;
        n->list = body(p, endset, 1, &n->n, &which, "set", line);
        return which >= 0 && END_STMT(p) ? n : NULL;
    }
    if (is_name(kw, "macro")) {
        ltok *name = peek(p);
        if (name->k != K_NAME) FAIL(p, "expected the macro's name");
        p->i++;
        if (!(n = tpl_new_node(p, N_MACRO, line))) return NULL;
        n->s = name->s, n->sn = name->n;
        if (!tpl_expect_op(p, '(', "'(' after the macro's name") || !macro_params(p, n)) return NULL;
        return macro_rest(p, n, endmacro, "macro", line);
    }
    if (is_name(kw, "call")) { /* {% call(params) m(args) %}body{% endcall %}: m's caller() is body */
        tpl_node *c;
        if (!(n = tpl_new_node(p, N_CALLBLOCK, line)) || !(c = tpl_new_node(p, N_MACRO, line))) return NULL;
        c->s = "caller", c->sn = 6;
        if (accept_op(p, '(') && !macro_params(p, c)) return NULL;
        if (!(n->a = tpl_expr(p))) return NULL;
        if (n->a->kind != N_CALL) FAIL(p, "a call block needs a macro call");
        return (n->b = macro_rest(p, c, endcall, "call", line)) ? n : NULL;
    }
    if (is_name(kw, "with")) { /* {% with a = x, b = y %}: list2 the sets, list the body */
        static const char *const endwith[] = {"endwith"};
        nlist sets = {0};
        if (!(n = tpl_new_node(p, N_WITH, line))) return NULL;
        while (!(peek(p)->k == K_SCLOSE)) {
            tpl_node *st = tpl_new_node(p, N_SET, line);
            if (!st || !(st->a = target(p, false)) || !tpl_expect_op(p, '=', "'='") || !(st->b = tpl_expr(p)) ||
                !tpl_nl_add(p, &sets, st))
                return NULL;
            if (!(peek(p)->k == K_SCLOSE) && !tpl_expect_op(p, ',', "',' or '%}'")) return NULL;
        }
        n->list2 = nl_done(&sets, &n->n2);
        if (!END_STMT(p)) return NULL;
        n->list = body(p, endwith, 1, &n->n, &which, "with", line);
        return which >= 0 && END_STMT(p) ? n : NULL;
    }
    if (is_name(kw, "filter")) { /* {% filter f(args)|g %}body: a is the chain over the body's text */
        static const char *const endfilter[] = {"endfilter"};
        tpl_node *e = tpl_new_node(p, N_NAME, line);
        if (!(n = tpl_new_node(p, N_FILTERBLOCK, line)) || !e) return NULL;
        e->s = "\x01", e->sn = 1; /* no template can name it: the body's text */
        do
            if (!(e = tpl_filter_call(p, e))) return NULL;
        while (accept_op(p, '|'));
        n->a = e;
        if (!END_STMT(p)) return NULL;
        n->list = body(p, endfilter, 1, &n->n, &which, "filter", line);
        return which >= 0 && END_STMT(p) ? n : NULL;
    }
    if (is_name(kw, "break") || is_name(kw, "continue")) {
        if (!(n = tpl_new_node(p, is_name(kw, "break") ? N_BREAK : N_CONTINUE, line))) return NULL;
        return END_STMT(p) ? n : NULL;
    }
    if (is_name(kw, "generation") || is_name(kw, "endgeneration")) {
        n = tpl_new_node(p, N_NOP, line);
        return n && END_STMT(p) ? n : NULL;
    }
    char b[64];
    if (kw->k == K_NAME && kw->n > 3 && !memcmp(kw->s, "end", 3))
        FAIL(p, "unexpected %s", tpl_tok_desc(kw, b, sizeof b));
    FAIL(p, "unsupported statement %s", tpl_tok_desc(kw, b, sizeof b));
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
        tpl_parse_fail(p, "blocks nested too deeply");
        return NULL;
    }
    for (;;) {
        ltok *t = peek(p);
        if (t->k == K_EOF) {
            if (n_ends) {
                tpl_parse_fail(p, "the '%s' of line %u is not closed with {%% %s %%}", opener,
                           open_line, ends[n_ends - 1]);
                break;
            }
            *which = 0;
            break;
        }
        if (t->k == K_TEXT) {
            p->i++;
            tpl_node *x = tpl_new_node(p, N_TEXT, t->line);
            if (!x) break;
            x->s = t->s, x->sn = t->n;
            if (!tpl_nl_add(p, &l, x)) break;
            continue;
        }
        if (t->k == K_EOPEN) {
            p->i++;
            tpl_node *x = tpl_new_node(p, N_OUT, t->line);
            if (!x || !(x->a = tpl_expr(p)) || !tpl_expect_kind(p, K_ECLOSE, "'}}'")) break;
            if (!tpl_nl_add(p, &l, x)) break;
            continue;
        }
        if (t->k == K_SCLOSE && t->op == 1) { /* a comment's end */
            p->i++;
            continue;
        }
        if (t->k != K_SOPEN) {
            char b[64];
            tpl_parse_fail(p, "unexpected %s", tpl_tok_desc(t, b, sizeof b));
            break;
        }
        p->i++;
        ltok *kw = peek(p);
        int e = tpl_lookup(ends, (int)n_ends, kw);
        if (e >= 0) {
            p->i++;
            *which = e;
            break;
        }
        if (kw->k != K_NAME) {
            tpl_parse_fail(p, "expected a statement name after '{%%'");
            break;
        }
        p->i++;
        if (!tpl_nl_add(p, &l, statement(p, kw))) break;
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
