/*
** sm_base.h -- status codes, error messages, checked size arithmetic,
** little-endian readers and a monotonic clock.
**
** Every library function that can fail returns an sm_status and, where the
** caller passed one, fills an sm_error with a one-line message that names the
** file, field or tensor at fault. Library code never prints and never exits;
** only the CLI turns a status into text and an exit code.
*/
#ifndef SM_BASE_H
#define SM_BASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    SM_OK = 0,
    SM_ERR_IO,          /* a file could not be opened, read or written */
    SM_ERR_FORMAT,      /* a file or config is malformed */
    SM_ERR_UNSUPPORTED, /* well-formed but not supported by this build */
    SM_ERR_NOMEM,       /* an allocation failed */
    SM_ERR_INPUT,       /* bad user input: prompt too long, bad token id */
    SM_ERR_RUNTIME,     /* a run-time failure such as NaN logits */
    SM_ERR_CANCELLED    /* the caller's cancel flag was set (Ctrl-C): stopped early */
} sm_status;

/* A one-line, human-readable message; empty when there is none. */
typedef struct sm_error {
    char msg[512];
} sm_error;

/*
** Formats a message into err (if err is not NULL) and returns st, so that
** callers can write `return sm_error_set(err, SM_ERR_FORMAT, "...", ...)`.
*/
sm_status sm_error_set(sm_error *err, sm_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Invariants of the program itself (never user input): abort with location. */
#define SM_ASSERT(cond)                                                      \
    do {                                                                     \
        if (!(cond)) sm_assert_fail(#cond, __FILE__, __LINE__);              \
    } while (0)
_Noreturn void sm_assert_fail(const char *what, const char *file, int line);

/* Checked arithmetic on sizes: return false on overflow, *out untouched then. */
static inline bool sm_size_mul(size_t *out, size_t a, size_t b) {
    size_t r;
    if (__builtin_mul_overflow(a, b, &r)) return false;
    *out = r;
    return true;
}
static inline bool sm_size_add(size_t *out, size_t a, size_t b) {
    size_t r;
    if (__builtin_add_overflow(a, b, &r)) return false;
    *out = r;
    return true;
}
/* Rounds n up to a multiple of align (a power of two); false on overflow. */
static inline bool sm_size_align(size_t *out, size_t n, size_t align) {
    size_t r;
    if (__builtin_add_overflow(n, align - 1, &r)) return false;
    *out = r & ~(align - 1);
    return true;
}

/*
** Grows *p, an array of *cap elements of size bytes, to hold at least need
** (capacities double, from 16). false when memory runs out or the bytes
** overflow; *p and *cap are then unchanged.
*/
bool sm_grow(void **p, size_t *cap, size_t need, size_t size);

uint32_t sm_read_u32le(const void *p);
uint64_t sm_read_u64le(const void *p);
void sm_write_u32le(void *p, uint32_t v);
void sm_write_u64le(void *p, uint64_t v);

/* FNV-1a 64 of n bytes: hash tables, and recognising a training text on resume. */
uint64_t sm_hash_bytes(const void *p, size_t n);

/* Seconds from an arbitrary fixed point, monotonic. */
double sm_time_now(void);

/*
** Opens the regular file `path` read-only: *fd and its *size. Errors
** ("cannot open 'path': ...") name the path; *fd is then -1.
*/
sm_status sm_open_regular(const char *path, int *fd, size_t *size, sm_error *err);

/*
** A block of at least bytes, 64-byte aligned; blocks of 2 MiB and more are
** 2 MiB aligned and asked to be backed by huge pages (Linux: madvise
** MADV_HUGEPAGE; a hint), so streaming through them misses the TLB once per
** 2 MiB instead of once per 4 KiB. NULL when out of memory. sm_free_big
** frees it.
*/
void *sm_alloc_big(size_t bytes);
void sm_free_big(void *p);
/*
** Asks that the pages of [p, p + bytes) be backed by memory now, their
** contents unchanged (Linux 5.14: MADV_POPULATE_WRITE; a hint): one call in
** place of a page fault at each first write.
*/
void sm_pages_populate(void *p, size_t bytes);

/*
** The memory this process may use: the machine's physical memory, or the
** limit of its cgroup (cgroup v2 memory.max: a container's, a Slurm job's)
** when that is smaller. 0 when neither can be read.
*/
size_t sm_mem_limit(void);

/*
** The whole of the open regular file fd (size bytes) in memory: mapped
** read-only (use_mmap; huge pages asked for, as sm_alloc_big does), or read
** into an sm_alloc_big block; *mapped says which. Size 0 gives NULL. Errors
** name path. The caller closes fd and, when done, calls sm_unmap. The one
** way every loader maps or reads a file.
*/
sm_status sm_map_fd(int fd, size_t size, const char *path, bool use_mmap, void **base, bool *mapped,
                    sm_error *err);
/* As sm_map_fd on the regular file path; *size gets its bytes. */
sm_status sm_map_file(const char *path, bool use_mmap, void **base, size_t *size, bool *mapped,
                      sm_error *err);
void sm_unmap(void *base, size_t size, bool mapped);

/* Removes the regular files in directory `path` (one level), then the directory. */
void sm_remove_dir(const char *path);

/*
** Removes the files and directories PATH.tmp-PID and PATH.dir-PID (and
** PATH.dir-PID.anything) beside path whose process PID is gone: what a run
** killed while writing PATH (a checkpoint, a conversion, a GGUF export)
** left behind. A live process's are kept.
*/
void sm_remove_stale_tmp(const char *path);

/*
** Reads the regular file `path` (at most `max` bytes) into a malloc'd
** buffer with a NUL after the last byte. Errors name the path.
*/
sm_status sm_read_file(const char *path, size_t max, char **buf, size_t *len, sm_error *err);

/* One run of bytes of a file sm_write_file writes. */
typedef struct sm_piece {
    const void *p;
    size_t n;
} sm_piece;

/*
** Writes the pieces, in order, to path atomically: into path.tmp-PID,
** fsynced, then renamed over path (a reader sees the old file or all of the
** new one). Refuses a path that is not a regular file (a FIFO, a device).
** Errors ("cannot create/write 'path': ...") name the path.
*/
sm_status sm_write_file(const char *path, const sm_piece *pc, size_t n_pieces, sm_error *err);

#endif
