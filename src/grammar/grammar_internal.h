/*
** grammar_internal.h -- the compiled form of a grammar, shared by the GBNF
** compiler (gbnf.c) and the matcher (match.c).
**
** Rules are lists of alternatives, each a run of elements ending with
** GE_END, all in one array: an element is a character set (GE_CHARS, an
** index into sets), a call of a rule (GE_REF) or the end of an alternative.
** A position is an element's index. Groups and repetitions became rules of
** their own when the text was compiled ("x*" is "x' ::= x x' | ").
*/
#ifndef SM_GRAMMAR_INTERNAL_H
#define SM_GRAMMAR_INTERNAL_H

#include "sm_grammar.h"

enum { GE_END = 0, GE_CHARS, GE_REF };

typedef struct {
    uint32_t type; /* GE_END, GE_CHARS or GE_REF */
    uint32_t v;    /* GE_CHARS: set index; GE_REF: rule */
} sm_gelem;

typedef struct {
    uint32_t lo, hi; /* code points, inclusive */
} sm_grange;

typedef struct {
    uint64_t ascii[2];   /* which of U+0000..U+007F it takes */
    uint32_t start, n;   /* its ranges above U+007F: ranges[start .. start + n), sorted, disjoint */
} sm_gset;

struct sm_grammar {
    sm_gelem *elems;     /* (n_elems) */
    uint32_t *alts;      /* (n_alts) the position each alternative starts at */
    uint32_t *rule_alt;  /* (n_rules + 1) rule r's alternatives: alts[rule_alt[r] .. rule_alt[r + 1]) */
    char **names;        /* (n_rules) for messages */
    sm_gset *sets;
    sm_grange *ranges;
    size_t n_elems, n_alts, n_rules, n_sets, n_ranges;
    uint32_t root;
};

/* Whether set s takes code point c. */
static inline bool sm_gset_has(const sm_grammar *g, const sm_gset *s, uint32_t c) {
    if (c < 128) return (s->ascii[c >> 6] >> (c & 63)) & 1;
    size_t lo = 0, hi = s->n; /* (indexed from g->ranges, which is NULL when no set has ranges) */
    while (lo < hi) { /* the first range whose hi >= c */
        size_t mid = (lo + hi) / 2;
        if (g->ranges[s->start + mid].hi < c) lo = mid + 1;
        else hi = mid;
    }
    return lo < s->n && g->ranges[s->start + lo].lo <= c;
}

/* Whether set s takes some code point in [lo, hi]. */
bool sm_gset_meets(const sm_grammar *g, const sm_gset *s, uint32_t lo, uint32_t hi);

#endif
