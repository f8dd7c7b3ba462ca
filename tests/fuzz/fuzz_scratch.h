/*
** fuzz_scratch.h -- a scratch directory for fuzz targets that hand files to
** the library: made on first use under /tmp, emptied and removed at exit.
*/
#ifndef FUZZ_SCRATCH_H
#define FUZZ_SCRATCH_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sm_base.h"

static char scratch_dir[64];

static void scratch_cleanup(void) {
    sm_remove_dir(scratch_dir);
}

/* The directory, made on the first call (tag names it: /tmp/sm-fuzz-TAG-XXXXXX). */
static inline const char *scratch_path(const char *tag) {
    if (!scratch_dir[0]) {
        snprintf(scratch_dir, sizeof scratch_dir, "/tmp/sm-fuzz-%s-XXXXXX", tag);
        if (!mkdtemp(scratch_dir)) abort();
        atexit(scratch_cleanup);
    }
    return scratch_dir;
}

/* Writes file name of the scratch directory; 0 on success. */
static inline int scratch_put(const char *name, const void *p, size_t n) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", scratch_dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = n ? fwrite(p, 1, n, f) : 0;
    return fclose(f) == 0 && w == n ? 0 : -1;
}

#endif
