/*
** alloc_count.c -- test tool, an LD_PRELOAD library that counts every heap
** allocation call of a whole process (malloc, calloc, realloc,
** aligned_alloc, posix_memalign, memalign) by forwarding to glibc's own
** entry points, and writes "allocs N" to the file $SM_ALLOC_OUT at exit.
** Used to prove that generating more tokens allocates nothing more.
*/
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static atomic_long count;

void *malloc(size_t n) {
    atomic_fetch_add(&count, 1);
    return __libc_malloc(n);
}

void *calloc(size_t a, size_t b) {
    atomic_fetch_add(&count, 1);
    return __libc_calloc(a, b);
}

void *realloc(void *p, size_t n) {
    atomic_fetch_add(&count, 1);
    return __libc_realloc(p, n);
}

void *aligned_alloc(size_t align, size_t n) {
    atomic_fetch_add(&count, 1);
    return __libc_memalign(align, n);
}

void *memalign(size_t align, size_t n) {
    atomic_fetch_add(&count, 1);
    return __libc_memalign(align, n);
}

int posix_memalign(void **out, size_t align, size_t n) {
    atomic_fetch_add(&count, 1);
    void *p = __libc_memalign(align, n);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}

__attribute__((destructor)) static void report(void) {
    const char *path = getenv("SM_ALLOC_OUT");
    if (!path) return;
    char line[64];
    int len = snprintf(line, sizeof line, "allocs %ld\n", atomic_load(&count));
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return;
    if (write(fd, line, (size_t)len) != len) {
        /* nothing to do: the test will find the file short */
    }
    close(fd);
}
