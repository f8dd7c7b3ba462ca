/*
** core.h -- the grammar's run-time state machine (core.c), shared by
** bindings (mask.c: the per-position token tables) and matchers.
**
** A stack is an interned node (pos, parent): pos is the grammar position
** to match next, parent the node to continue with when pos's rule ends
** (BOTTOM below the root rule; SENT in a binding's walks: "the rule around
** this position, whatever it is"). A state is an interned sorted set of
** nodes whose pos is a character set, plus two markers: ACCEPT (the root
** rule ended: the text is a sentence) and POP (a binding walk left its
** rule). States are cached by id: transitions on a code point, and the
** expansion of a node. Tables have a fixed size when `fixed` (a matcher:
** nothing is allocated per token; the caller rebuilds when they fill),
** else they grow (a binding).
*/
#ifndef SM_GRAMMAR_CORE_H
#define SM_GRAMMAR_CORE_H

#include "grammar_internal.h"

#define GC_ACCEPT 0u          /* node ids 0 and 1 are the markers */
#define GC_POP 1u
#define GC_BOTTOM 0xFFFFFFFFu /* parents that are not nodes */
#define GC_SENT 0xFFFFFFFEu
#define GC_DEAD 0u            /* state 0 is the empty set */
#define GC_FULL 0xFFFFFFFDu   /* returned when a fixed table is full (no node, state or parent has this id) */

typedef struct {
    uint32_t pos, parent;
} gc_node;

typedef struct {
    uint32_t off, len; /* its nodes: pool[off .. off + len) */
    uint64_t hash;
} gc_state;

typedef struct {
    uint64_t key; /* state << 21 | code point, + 1 (0: empty); bit 63: a byte step (with part) */
    uint32_t to, part;
} gc_trans;

#define GC_ROWS 1024 /* states with a row of ASCII transitions, direct-mapped */
#define GC_MAX_NODES ((size_t)1 << 21) /* a growing core's limit: a grammar that needs more is refused */

typedef struct gc_core {
    const sm_grammar *g;
    bool fixed;
    gc_node *nodes;      /* (node_cap) */
    uint32_t *node_hash; /* (node_hcap) node ids + 1, open addressing */
    uint32_t *expanded;  /* (node_cap) the state a node expands to, + 1 (0: not yet) */
    uint32_t *seen;      /* (node_cap) expansion stamps */
    size_t n_nodes, node_cap, node_hcap;
    gc_state *states;    /* (state_cap) */
    uint32_t *state_hash;
    uint32_t *pool;      /* (pool_cap) states' nodes */
    size_t n_states, state_cap, state_hcap, n_pool, pool_cap;
    gc_trans *trans;     /* (trans_cap) a direct-mapped cache */
    size_t trans_cap;
    uint32_t *rows;      /* (GC_ROWS * 129): a state + 1, then its steps on 0..127 (+ 1; 0: not yet) */
    uint32_t stamp;
    uint32_t *work;      /* (work_cap) pairs (pos, parent) to expand */
    uint32_t *out;       /* (work_cap) an expansion's nodes */
    size_t work_cap;
    bool full;           /* a fixed table filled up: results since are GC_FULL */
} gc_core;

/* Sizes a core for g: fixed (a matcher) with room for about `nodes` nodes, or growing. */
sm_status gc_init(gc_core *c, const sm_grammar *g, size_t nodes, bool fixed);
void gc_free(gc_core *c);
/* Forgets every node and state (the tables stay). */
void gc_clear(gc_core *c);

/* The state of the grammar's start (the root rule's alternatives, below them BOTTOM). */
uint32_t gc_start(gc_core *c);
/* The state after node (pos, parent) is expanded: pos == a position, parent a node or marker. */
uint32_t gc_expand(gc_core *c, uint32_t pos, uint32_t parent);
/* The state a node continues with (its expansion), cached per node. */
uint32_t gc_node_state(gc_core *c, uint32_t node);
/* The state after state s takes code point cp (GC_DEAD if it cannot). */
uint32_t gc_step(gc_core *c, uint32_t s, uint32_t cp);
/* A state's nodes. */
static inline const uint32_t *gc_nodes(const gc_core *c, uint32_t s, uint32_t *n) {
    *n = c->states[s].len;
    return c->pool + c->states[s].off;
}
bool gc_has(const gc_core *c, uint32_t s, uint32_t node);
/* s without the POP marker. */
uint32_t gc_without_pop(gc_core *c, uint32_t s);

/*
** Bytes: a walk's place is a state and a partial UTF-8 character (part: 0,
** or the bits so far << 2 | the bytes still to come). step_byte gives
** GC_DEAD where no character could follow.
*/
typedef struct {
    uint32_t s, part;
} gc_at;
gc_at gc_step_byte(gc_core *c, gc_at at, uint8_t b);

/* Rebuilds a full fixed core around state s (its stacks copied over); the new id of s, or GC_DEAD. */
uint32_t gc_rebuild(gc_core *c, uint32_t s);

#endif
