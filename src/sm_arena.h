/*
** sm_arena.h -- the one pooled scratch arena.
**
** Sizes are planned first, then one block is allocated, then buffers are
** carved from it with a bump pointer (64-byte aligned). Nothing is ever freed
** individually. The same carving code runs twice: once on a *measuring* arena
** (no memory; it only adds up sizes) and once on the real one, so the plan
** and the layout cannot disagree.
*/
#ifndef SM_ARENA_H
#define SM_ARENA_H

#include "sm_base.h"

#define SM_ARENA_ALIGN 64

typedef struct sm_arena {
    unsigned char *base; /* NULL for a measuring arena */
    size_t size;         /* capacity in bytes (0 when measuring) */
    size_t used;         /* bytes carved so far, including alignment */
    bool overflow;       /* a request did not fit or a size overflowed */
    int fail_after;      /* tests: >0 fails that many allocs later; 0 off */
} sm_arena;

/* A measuring arena: allocations return NULL and only advance `used`. */
void sm_arena_measure(sm_arena *a);

/*
** Allocates `bytes` (rounded up to 64) in one block. Returns SM_ERR_NOMEM
** if the system cannot provide it; the arena is then zeroed and free-safe.
*/
sm_status sm_arena_init(sm_arena *a, size_t bytes);

/*
** Carves `n * elem` bytes, 64-byte aligned. Returns NULL when the arena is
** measuring, when the request does not fit or when n * elem overflows; the
** last two set a->overflow, which the owner checks once after carving.
*/
void *sm_arena_alloc(sm_arena *a, size_t n, size_t elem);

size_t sm_arena_mark(const sm_arena *a);
void sm_arena_reset(sm_arena *a, size_t mark);
void sm_arena_free(sm_arena *a);

#endif
