/*
** parse_internal.h -- what the two halves of the template parser share:
** parse.c (expressions) and stmt.c (statements, the template's body).
*/
#ifndef SM_TEMPLATE_PARSE_INTERNAL_H
#define SM_TEMPLATE_PARSE_INTERNAL_H

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

#define FAIL(p, ...)                    \
    do {                                \
        tpl_parse_fail(p, __VA_ARGS__); \
        return NULL;                    \
    } while (0)

/* A growing list of nodes in the template's pool (an outgrown array is left there). */
typedef struct nlist {
    tpl_node **v;
    size_t n, cap;
} nlist;

/* Records the first error (the current token's line); later ones are dropped. */
void tpl_parse_fail(parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A token as an error message names it, in buf (n bytes). */
const char *tpl_tok_desc(const ltok *t, char *buf, size_t n);
bool tpl_expect_op(parser *p, int op, const char *what);
bool tpl_expect_kind(parser *p, int k, const char *what);
/* A zeroed node in the template's pool; NULL (the error recorded) when out of memory. */
tpl_node *tpl_new_node(parser *p, int kind, uint32_t line);
bool tpl_nl_add(parser *p, nlist *l, tpl_node *x);
/* The index of the name t is among names, or -1. */
int tpl_lookup(const char *const *names, int count, const ltok *t);

static inline ltok *peek(parser *p) { return &p->tok[p->i]; }
static inline bool is_op(const ltok *t, int op) { return t->k == K_OP && t->op == op; }
static inline bool is_name(const ltok *t, const char *w) {
    return t->k == K_NAME && t->n == strlen(w) && !memcmp(t->s, w, t->n);
}
static inline bool accept_op(parser *p, int op) {
    if (!is_op(peek(p), op)) return false;
    p->i++;
    return true;
}
static inline bool accept_name(parser *p, const char *w) {
    if (!is_name(peek(p), w)) return false;
    p->i++;
    return true;
}

static inline tpl_node **nl_done(nlist *l, size_t *n) {
    *n = l->n;
    return l->v;
}


/* parse.c: expressions */
tpl_node *tpl_expr(parser *p);
tpl_node *tpl_or_expr(parser *p);
/* expr, or expr, expr, ... as a tuple (set's values) */
tpl_node *tpl_tuple_expr(parser *p);
/* After a '|' (or {% filter %}): name or name(args) applied to e. */
tpl_node *tpl_filter_call(parser *p, tpl_node *e);

#endif
