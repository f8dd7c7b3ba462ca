/*
** base.c -- status strings, error formatting, little-endian helpers, clock.
*/
#include "sm_base.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

sm_status sm_error_set(sm_error *err, sm_status st, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return st;
}

_Noreturn void sm_assert_fail(const char *what, const char *file, int line) {
    fprintf(stderr, "smallmind: internal error: assertion '%s' failed at %s:%d\n",
            what, file, line);
    abort();
}

uint32_t sm_read_u32le(const void *p) {
    const unsigned char *b = p;
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
           (uint32_t)b[3] << 24;
}

uint64_t sm_read_u64le(const void *p) {
    const unsigned char *b = p;
    return (uint64_t)sm_read_u32le(b) | (uint64_t)sm_read_u32le(b + 4) << 32;
}

void sm_write_u32le(void *p, uint32_t v) {
    unsigned char *b = p;
    for (int i = 0; i < 4; i++) b[i] = (unsigned char)(v >> (8 * i));
}

void sm_write_u64le(void *p, uint64_t v) {
    unsigned char *b = p;
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
}

double sm_time_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

sm_status sm_open_regular(const char *path, int *fd, size_t *size, sm_error *err) {
    *size = 0;
    /* O_NONBLOCK: opening a FIFO (or a device) must not wait for a writer;
       it is refused below, and a regular file's reads ignore the flag */
    *fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (*fd < 0) return sm_error_set(err, SM_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(*fd, &sb) != 0 || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size > SIZE_MAX) {
        close(*fd);
        *fd = -1;
        return sm_error_set(err, SM_ERR_IO, "cannot open '%s': not a regular file", path);
    }
    int fl = fcntl(*fd, F_GETFL);
    if (fl >= 0) fcntl(*fd, F_SETFL, fl & ~O_NONBLOCK);
    *size = (size_t)sb.st_size;
    return SM_OK;
}

#define BIG_PAGE ((size_t)2 << 20)

void *sm_alloc_big(size_t bytes) {
    size_t al = bytes >= BIG_PAGE ? BIG_PAGE : 64, size;
    if (!sm_size_align(&size, bytes ? bytes : 1, al)) return NULL;
    void *p = aligned_alloc(al, size);
#ifdef MADV_HUGEPAGE
    if (p && al == BIG_PAGE) madvise(p, size, MADV_HUGEPAGE); /* a hint: failure changes nothing */
#endif
    return p;
}

void sm_free_big(void *p) {
    free(p);
}

void sm_pages_populate(void *p, size_t bytes) {
#ifdef MADV_POPULATE_WRITE
    long ps = sysconf(_SC_PAGESIZE);
    uintptr_t pg = ps > 0 ? (uintptr_t)ps : 4096, a = (uintptr_t)p & ~(pg - 1),
              b = ((uintptr_t)p + bytes + pg - 1) & ~(pg - 1);
    if (bytes && b > a) madvise((void *)a, b - a, MADV_POPULATE_WRITE); /* a hint: failure changes nothing */
#else
    (void)p, (void)bytes;
#endif
}

/* The smallest number in file of the cgroup directory root + dir and its ancestors (0: none;
   v2's "max" and v1's near 2^63 mean none). */
static size_t cgroup_limit(const char *root, char *dir, const char *file) {
    size_t best = 0;
    for (;;) {
        char path[4400];
        snprintf(path, sizeof path, "%s%s/%s", root, dir, file);
        FILE *f = fopen(path, "r"); /* "max" or bytes */
        unsigned long long lim;
        if (f) {
            if (fscanf(f, "%llu", &lim) == 1 && lim > 0 && (!best || lim < best)) best = (size_t)lim;
            fclose(f);
        }
        char *slash = strrchr(dir, '/');
        if (!slash) return best;
        *slash = '\0';
    }
}

size_t sm_mem_limit(void) {
    long pages = sysconf(_SC_PHYS_PAGES), ps = sysconf(_SC_PAGESIZE);
    size_t total = pages > 0 && ps > 0 ? (size_t)pages * (size_t)ps : 0, lim = 0;
    char line[4096];
    FILE *f = fopen("/proc/self/cgroup", "r"); /* v2: "0::/path"; v1: "N:memory:/path" */
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *v1 = strstr(line, ":memory:");
        size_t l = 0;
        if (strncmp(line, "0::", 3) == 0) l = cgroup_limit("/sys/fs/cgroup", line + 3, "memory.max");
        else if (v1) l = cgroup_limit("/sys/fs/cgroup/memory", v1 + 8, "memory.limit_in_bytes");
        if (l && (!lim || l < lim)) lim = l;
    }
    if (f) fclose(f);
    return lim && (!total || lim < total) ? lim : total;
}

sm_status sm_map_fd(int fd, size_t size, const char *path, bool use_mmap, void **base, bool *mapped,
                    sm_error *err) {
    *base = NULL;
    *mapped = false;
    if (size == 0) return SM_OK;
    if (use_mmap) {
        void *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) return sm_error_set(err, SM_ERR_IO, "cannot map '%s': %s", path, strerror(errno));
#ifdef MADV_HUGEPAGE
        madvise(m, size, MADV_HUGEPAGE); /* readahead fills the page cache in 2 MiB folios */
#endif
        *base = m;
        *mapped = true;
        return SM_OK;
    }
    unsigned char *b = sm_alloc_big(size);
    if (!b)
        return sm_error_set(err, SM_ERR_NOMEM, "cannot allocate %zu bytes to read '%s'", size, path);
    size_t off = 0;
    while (off < size) {
        ssize_t r = pread(fd, b + off, size - off, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        off += (size_t)r;
    }
    if (off != size) {
        sm_status st = sm_error_set(err, SM_ERR_IO, "cannot read '%s': %s", path,
                                    off < size ? "file shrank while reading" : strerror(errno));
        sm_free_big(b);
        return st;
    }
    *base = b;
    return SM_OK;
}

sm_status sm_map_file(const char *path, bool use_mmap, void **base, size_t *size, bool *mapped,
                      sm_error *err) {
    int fd;
    *base = NULL;
    *mapped = false;
    sm_status st = sm_open_regular(path, &fd, size, err);
    if (st) return st;
    st = sm_map_fd(fd, *size, path, use_mmap, base, mapped, err);
    close(fd);
    return st;
}

void sm_unmap(void *base, size_t size, bool mapped) {
    if (!base) return;
    if (mapped) munmap(base, size);
    else sm_free_big(base);
}

void sm_remove_dir(const char *path) {
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) unlinkat(dirfd(d), e->d_name, 0);
        closedir(d);
    }
    rmdir(path);
}

void sm_remove_stale_tmp(const char *path) {
    char parent[4096];
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t plen = slash ? (size_t)(slash - path) : 1;
    if (!*base || plen >= sizeof parent) return;
    memcpy(parent, slash ? path : ".", plen);
    parent[plen] = '\0';
    if (slash && plen == 0) strcpy(parent, "/");
    DIR *d = opendir(parent);
    if (!d) return;
    size_t blen = strlen(base);
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *n = e->d_name;
        if (strncmp(n, base, blen) != 0 ||
            (strncmp(n + blen, ".tmp-", 5) != 0 && strncmp(n + blen, ".dir-", 5) != 0))
            continue;
        char *end;
        long pid = strtol(n + blen + 5, &end, 10); /* then nothing, or what that run made of it */
        if ((*end && *end != '.') || pid <= 0 || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* its writer may be alive */
        char full[8300];
        if ((size_t)snprintf(full, sizeof full, "%s/%s", parent, n) < sizeof full) sm_remove_dir(full);
    }
    closedir(d);
}

bool sm_grow(void **p, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 16, bytes;
    while (c < need)
        if (__builtin_mul_overflow(c, 2, &c)) return false;
    if (!sm_size_mul(&bytes, c, size)) return false;
    void *q = realloc(*p, bytes);
    if (!q) return false;
    *p = q, *cap = c;
    return true;
}

uint64_t sm_hash_bytes(const void *p, size_t n) {
    const unsigned char *s = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ull;
    return h;
}

sm_status sm_write_file(const char *path, const sm_piece *pc, size_t n_pieces, sm_error *err) {
    struct stat sb; /* a FIFO or device there would block the write or be changed in place */
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
        return sm_error_set(err, SM_ERR_IO, "cannot write '%s': not a regular file", path);
    char tmp[4200];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp-%ld", path, (long)getpid()) >= sizeof tmp)
        return sm_error_set(err, SM_ERR_IO, "cannot write '%s': the path is too long", path);
    unlink(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        int e = errno;
        if (fd >= 0) close(fd);
        return sm_error_set(err, SM_ERR_IO, "cannot create '%s': %s", path, strerror(e));
    }
    bool ok = true;
    for (size_t i = 0; ok && i < n_pieces; i++) ok = fwrite(pc[i].p, 1, pc[i].n, f) == pc[i].n;
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int e = errno;
    if (fclose(f) != 0 && ok) {
        ok = false;
        e = errno;
    }
    if (ok && rename(tmp, path) != 0) { /* all of it, or the old file as it was */
        ok = false;
        e = errno;
    }
    if (!ok) unlink(tmp);
    return ok ? SM_OK : sm_error_set(err, SM_ERR_IO, "cannot write '%s': %s", path, strerror(e));
}

sm_status sm_read_file(const char *path, size_t max, char **buf, size_t *len, sm_error *err) {
    *buf = NULL;
    *len = 0;
    int fd;
    size_t n, got = 0;
    sm_status st = sm_open_regular(path, &fd, &n, err);
    if (st) return st;
    if (n > max) {
        close(fd);
        return sm_error_set(err, SM_ERR_FORMAT,
                            "%s: %zu bytes, more than the %zu such a file may have", path, n, max);
    }
    char *b = malloc(n + 1);
    if (!b) {
        close(fd);
        return sm_error_set(err, SM_ERR_NOMEM, "out of memory reading '%s'", path);
    }
    while (got < n) {
        ssize_t r = read(fd, b + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (got != n) {
        free(b);
        return sm_error_set(err, SM_ERR_IO, "cannot read '%s'", path);
    }
    b[n] = '\0';
    *buf = b;
    *len = n;
    return SM_OK;
}
