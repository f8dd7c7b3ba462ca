/*
** arena.c -- bump allocator over one 64-byte aligned block (sm_alloc_big).
*/
#include "sm_arena.h"

#include <stdlib.h>
#include <string.h>

void sm_arena_measure(sm_arena *a) {
    memset(a, 0, sizeof *a);
}

sm_status sm_arena_init(sm_arena *a, size_t bytes) {
    memset(a, 0, sizeof *a);
    size_t size;
    if (!sm_size_align(&size, bytes ? bytes : SM_ARENA_ALIGN, SM_ARENA_ALIGN))
        return SM_ERR_NOMEM;
    a->base = sm_alloc_big(size); /* huge pages for the KV-cache and activations */
    if (!a->base) return SM_ERR_NOMEM;
    a->size = size;
    return SM_OK;
}

void *sm_arena_alloc(sm_arena *a, size_t n, size_t elem) {
    size_t bytes, start, end;
    if (!sm_size_mul(&bytes, n, elem) ||
        !sm_size_align(&start, a->used, SM_ARENA_ALIGN) ||
        !sm_size_add(&end, start, bytes)) {
        a->overflow = true;
        return NULL;
    }
    if (a->fail_after > 0 && --a->fail_after == 0) {
        a->overflow = true;
        return NULL;
    }
    if (!a->base) { /* measuring */
        a->used = end;
        return NULL;
    }
    if (end > a->size) {
        a->overflow = true;
        return NULL;
    }
    a->used = end;
    return a->base + start;
}

size_t sm_arena_mark(const sm_arena *a) {
    return a->used;
}

void sm_arena_reset(sm_arena *a, size_t mark) {
    SM_ASSERT(mark <= a->used);
    a->used = mark;
}

void sm_arena_free(sm_arena *a) {
    sm_free_big(a->base);
    memset(a, 0, sizeof *a);
}
