/*
** base.c -- status strings, error formatting, little-endian helpers, clock.
*/
#include "sm_base.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

const char *sm_status_str(sm_status st) {
    switch (st) {
    case SM_OK: return "ok";
    case SM_ERR_IO: return "i/o error";
    case SM_ERR_FORMAT: return "malformed input";
    case SM_ERR_UNSUPPORTED: return "unsupported";
    case SM_ERR_NOMEM: return "out of memory";
    case SM_ERR_INPUT: return "invalid input";
    case SM_ERR_RUNTIME: return "runtime error";
    }
    return "unknown status";
}

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
