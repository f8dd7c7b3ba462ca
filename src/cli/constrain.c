/*
** constrain.c -- structured output for the commands: the grammar a flag or
** a record names, compiled and bound to the model's tokenizer
** (sm_grammar.h), and for batches a cache of bindings by text, so that a
** million records with one schema compile it once.
*/
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sm_grammar.h"

#define GCACHE_KEEP 16 /* bindings kept when no record uses them */

sm_status cli_grammar_compile(sm_grammar_kind kind, const char *text, size_t len, const sm_tokenizer *tok,
                              const sm_vtrie *trie, sm_grammar **g, sm_gbind **b, sm_error *err) {
    *g = NULL, *b = NULL;
    sm_status st;
    switch (kind) {
    case SM_GK_GBNF: st = sm_grammar_parse(g, text, len, err); break;
    case SM_GK_SCHEMA: st = sm_grammar_from_schema(g, text, len, NULL, err); break;
    case SM_GK_JSON: st = sm_grammar_json(g, false, err); break;
    case SM_GK_JSON_OBJECT: st = sm_grammar_json(g, true, err); break;
    default: return sm_error_set(err, SM_ERR_INPUT, "no grammar");
    }
    if (!st) st = sm_gbind_new(b, *g, tok, trie, err);
    if (st) {
        sm_grammar_free(*g);
        *g = NULL;
    }
    return st;
}

int cli_grammar_flag(const cli_opts *o, const sm_tokenizer *tok, sm_grammar **g, sm_gbind **b) {
    *g = NULL, *b = NULL;
    if (!o->gkind) return 0;
    char *text = NULL;
    size_t len = 0;
    if (o->gkind == SM_GK_GBNF || o->gkind == SM_GK_SCHEMA) {
        if (o->ginline) {
            text = (char *)o->gsrc, len = strlen(o->gsrc);
        } else {
            int rc = cli_read_all(o->gsrc, &text, &len);
            if (rc) return rc;
        }
    }
    sm_error err = {{0}};
    sm_status st = cli_grammar_compile(o->gkind, text, len, tok, NULL, g, b, &err);
    if (text && !o->ginline) free(text);
    if (st) {
        fprintf(stderr, "smallmind: --%s%s%s: %s\n", o->gflag, o->ginline ? "" : " ", o->ginline ? "" : o->gsrc, err.msg);
        return EXIT_DATA;
    }
    return 0;
}

/* ---- bindings shared by the records of a batch */

typedef struct {
    char *key;      /* kind byte + text */
    size_t len;
    sm_grammar *g;
    sm_gbind *b;
    size_t refs;    /* records using it now */
    uint64_t used;  /* when it was last asked for */
} gentry;

struct cli_gcache {
    gentry *e;
    size_t n, cap;
    uint64_t clock;
    const sm_tokenizer *tok;
    sm_vtrie *trie;  /* the vocabulary, made at the first grammar and shared */
    sm_sched *sched; /* its slots keep matchers of bindings: forgotten with them */
};

cli_gcache *cli_gcache_new(const sm_tokenizer *tok, sm_sched *sched) {
    cli_gcache *c = calloc(1, sizeof *c);
    if (c) c->tok = tok, c->sched = sched;
    return c;
}

static void drop(cli_gcache *c, size_t i) {
    sm_sched_forget_grammar(c->sched, c->e[i].b);
    sm_gbind_free(c->e[i].b);
    sm_grammar_free(c->e[i].g);
    free(c->e[i].key);
    c->e[i] = c->e[--c->n];
}

void cli_gcache_free(cli_gcache *c) {
    if (!c) return;
    while (c->n) drop(c, c->n - 1);
    sm_vtrie_free(c->trie);
    free(c->e);
    free(c);
}

sm_status cli_gcache_get(cli_gcache *c, sm_grammar_kind kind, const char *text, sm_gbind **out, sm_error *err) {
    size_t len = text ? strlen(text) : 0;
    for (size_t i = 0; i < c->n; i++)
        if (c->e[i].len == len + 1 && c->e[i].key[0] == (char)kind && memcmp(c->e[i].key + 1, text, len) == 0) {
            c->e[i].refs++, c->e[i].used = ++c->clock;
            *out = c->e[i].b;
            return SM_OK;
        }
    /* room: the least recently used binding no record holds goes */
    while (c->n >= GCACHE_KEEP) {
        size_t old = SIZE_MAX;
        for (size_t i = 0; i < c->n; i++)
            if (!c->e[i].refs && (old == SIZE_MAX || c->e[i].used < c->e[old].used)) old = i;
        if (old == SIZE_MAX) break; /* all in use: grow */
        drop(c, old);
    }
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 8;
        gentry *e = realloc(c->e, cap * sizeof *e);
        if (!e) return sm_error_set(err, SM_ERR_NOMEM, "out of memory for a grammar");
        c->e = e, c->cap = cap;
    }
    gentry g = {.len = len + 1, .refs = 1, .used = ++c->clock};
    if (!(g.key = malloc(len + 1))) return sm_error_set(err, SM_ERR_NOMEM, "out of memory for a grammar");
    g.key[0] = (char)kind;
    if (len) memcpy(g.key + 1, text, len);
    sm_status st = c->trie ? SM_OK : sm_vtrie_new(&c->trie, c->tok, err);
    if (!st) st = cli_grammar_compile(kind, text, len, c->tok, c->trie, &g.g, &g.b, err);
    if (st) {
        free(g.key);
        return st;
    }
    c->e[c->n++] = g;
    *out = g.b;
    return SM_OK;
}

void cli_gcache_put(cli_gcache *c, sm_gbind *b) {
    for (size_t i = 0; c && b && i < c->n; i++)
        if (c->e[i].b == b && c->e[i].refs) c->e[i].refs--;
}
