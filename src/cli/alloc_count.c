/*
** alloc_count.c -- counts the program's own heap allocations, for `bench`.
**
** The binary is linked with -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc
** (see the Makefile), so every call to those in smallmind's objects comes
** here first; calls made inside libc or libcjson are not counted. bench
** reads the count before and after decoding to report allocations per
** generated token, which the design says is zero.
*/
#include "cli.h"

#include <stdatomic.h>
#include <stddef.h>

static atomic_size_t n_allocs;

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);

void *__wrap_malloc(size_t n) {
    atomic_fetch_add_explicit(&n_allocs, 1, memory_order_relaxed);
    return __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size) {
    atomic_fetch_add_explicit(&n_allocs, 1, memory_order_relaxed);
    return __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n) {
    atomic_fetch_add_explicit(&n_allocs, 1, memory_order_relaxed);
    return __real_realloc(p, n);
}

size_t cli_allocs(void) {
    return atomic_load_explicit(&n_allocs, memory_order_relaxed);
}
