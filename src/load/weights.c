/*
** weights.c -- weight-file validation and mapping.
**
** Order matters: sizes and offsets are checked against the file length from
** fstat before the file is mapped, and pointers into the mapping are formed
** only after every check has passed.
*/
#include "sm_weights.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A guess at what a foreign file is, for a helpful message; NULL if unknown. */
static const char *foreign_format(const unsigned char *h, size_t n, size_t file_size) {
    if (n >= 4 && memcmp(h, "GGUF", 4) == 0) return "a GGUF file";
    if (n >= 9) {
        uint64_t hlen = sm_read_u64le(h);
        if (hlen > 0 && hlen < file_size && h[8] == '{') return "a safetensors file";
    }
    if (n >= 28) {
        /* llama2.c: seven int32 (dim, hidden, layers, heads, kv heads, vocab, seq). */
        int plausible = 1;
        for (int i = 0; i < 7; i++) {
            int32_t v = (int32_t)sm_read_u32le(h + 4 * i);
            if (i == 5 && v < 0) v = -v; /* llama2.c marks an untied classifier so */
            if (v <= 0 || v > (1 << 24)) plausible = 0;
        }
        if (plausible) return "a llama2.c checkpoint";
    }
    if (n >= 1 && h[0] == '{') return "JSON text";
    return NULL;
}

static int cmp_by_offset(const void *a, const void *b) {
    const sm_tensor_desc *x = *(const sm_tensor_desc *const *)a;
    const sm_tensor_desc *y = *(const sm_tensor_desc *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Checks that the tensors of file `fi` tile it exactly (see file comment). */
static sm_status check_layout(const sm_config *cfg, int fi, const char *path, size_t size,
                              const sm_tensor_desc **order, sm_error *err) {
    size_t n = 0;
    for (size_t i = 0; i < cfg->n_tensors; i++)
        if (cfg->tensors[i].file == fi) order[n++] = &cfg->tensors[i];
    qsort(order, n, sizeof *order, cmp_by_offset);
    uint64_t expect = SM_WEIGHTS_HEADER; /* where the next tensor must start */
    uint64_t end = SM_WEIGHTS_HEADER;
    for (size_t i = 0; i < n; i++) {
        const sm_tensor_desc *d = order[i];
        if (d->offset >= size)
            return sm_error_set(err, SM_ERR_FORMAT,
                                "%s: tensor %s starts at offset %llu, past the end of the file (%zu bytes)",
                                path, d->name, (unsigned long long)d->offset, size);
        if (d->offset < end)
            return sm_error_set(err, SM_ERR_FORMAT,
                                "%s: tensor %s at offset %llu overlaps %s (which ends at %llu)",
                                path, d->name, (unsigned long long)d->offset,
                                i ? order[i - 1]->name : "the file header",
                                (unsigned long long)end);
        if (d->offset != expect)
            return sm_error_set(err, SM_ERR_FORMAT,
                                "%s: gap before tensor %s: it starts at %llu, expected %llu",
                                path, d->name, (unsigned long long)d->offset,
                                (unsigned long long)expect);
        size_t tend;
        if (d->offset > SIZE_MAX || !sm_size_add(&tend, (size_t)d->offset, d->nbytes))
            return sm_error_set(err, SM_ERR_FORMAT, "%s: tensor %s: offset + size overflows",
                                path, d->name);
        if (tend > size)
            return sm_error_set(err, SM_ERR_FORMAT,
                                "%s: truncated: tensor %s needs bytes %llu..%zu, the file has %zu",
                                path, d->name, (unsigned long long)d->offset, tend, size);
        end = tend;
        size_t next;
        if (!sm_size_align(&next, tend, 64))
            return sm_error_set(err, SM_ERR_FORMAT, "%s: tensor %s: size overflows", path, d->name);
        expect = next;
    }
    if (end != size)
        return sm_error_set(err, SM_ERR_FORMAT,
                            "%s: %llu extra bytes after the last tensor (file is %zu bytes, "
                            "tensors end at %llu)",
                            path, (unsigned long long)(size - end), size, (unsigned long long)end);
    return SM_OK;
}

static sm_status open_file(sm_weight_file *f, const sm_config *cfg, int fi, const char *dir,
                           bool use_mmap, const sm_tensor_desc **order, sm_error *err) {
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, cfg->files[fi]) >= sizeof path)
        return sm_error_set(err, SM_ERR_IO, "cannot open '%s': path too long", dir);
    int fd;
    size_t size;
    sm_status st = sm_open_regular(path, &fd, &size, err);
    if (st) return st;
    unsigned char head[SM_WEIGHTS_HEADER];
    size_t got = 0;
    while (got < sizeof head && got < size) {
        ssize_t r = pread(fd, head + got, sizeof head - got, (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    if (got != (size < sizeof head ? size : sizeof head)) {
        st = sm_error_set(err, SM_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
        goto done;
    }
    if (got < 8 || memcmp(head, SM_WEIGHTS_MAGIC, 8) != 0) {
        const char *what = foreign_format(head, got, size);
        if (size == 0)
            st = sm_error_set(err, SM_ERR_FORMAT, "%s: file is empty; expected a smallmind weight file", path);
        else if (what)
            st = sm_error_set(err, SM_ERR_FORMAT,
                              "%s: this is %s; expected a smallmind weight file (magic SMWEIGHT)",
                              path, what);
        else if (size < SM_WEIGHTS_HEADER)
            st = sm_error_set(err, SM_ERR_FORMAT,
                              "%s: %zu bytes is shorter than the %d-byte weight-file header", path,
                              size, SM_WEIGHTS_HEADER);
        else
            st = sm_error_set(err, SM_ERR_FORMAT,
                              "%s: not a smallmind weight file (magic SMWEIGHT not found)", path);
        goto done;
    }
    if (size < SM_WEIGHTS_HEADER) {
        st = sm_error_set(err, SM_ERR_FORMAT, "%s: %zu bytes is shorter than the %d-byte header",
                          path, size, SM_WEIGHTS_HEADER);
        goto done;
    }
    uint32_t version = sm_read_u32le(head + 8), hsize = sm_read_u32le(head + 12);
    if (version != SM_WEIGHTS_VERSION || hsize != SM_WEIGHTS_HEADER) {
        st = sm_error_set(err, SM_ERR_UNSUPPORTED,
                          "%s: weight-file version %u with a %u-byte header is not supported "
                          "(expected version %d, %d bytes)",
                          path, version, hsize, SM_WEIGHTS_VERSION, SM_WEIGHTS_HEADER);
        goto done;
    }
    if ((st = check_layout(cfg, fi, path, size, order, err))) goto done;

    void *base;
    if ((st = sm_map_fd(fd, size, path, use_mmap, &base, &f->mapped, err))) goto done;
    f->base = base;
    f->size = size;
done:
    close(fd);
    return st;
}

sm_status sm_weights_open(sm_weights *w, const sm_config *cfg, const char *dir, bool use_mmap,
                          sm_error *err) {
    memset(w, 0, sizeof *w);
    w->cfg = cfg;
    sm_status st = SM_OK;
    const sm_tensor_desc **order = malloc(cfg->n_tensors * sizeof *order);
    w->data = calloc(cfg->n_tensors, sizeof *w->data);
    if (!order || !w->data) {
        st = sm_error_set(err, SM_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (int fi = 0; fi < cfg->n_files; fi++)
        if ((st = open_file(&w->files[fi], cfg, fi, dir, use_mmap, order, err))) goto fail;
    for (size_t i = 0; i < cfg->n_tensors; i++) {
        const sm_tensor_desc *d = &cfg->tensors[i];
        w->data[i] = w->files[d->file].base + d->offset;
    }
    free(order);
    return SM_OK;
fail:
    free(order);
    sm_weights_close(w);
    return st;
}

sm_status sm_weights_in_place(sm_weights *w, const sm_config *cfg, const void *base, sm_error *err) {
    memset(w, 0, sizeof *w);
    w->cfg = cfg;
    w->data = calloc(cfg->n_tensors ? cfg->n_tensors : 1, sizeof *w->data);
    if (!w->data) return sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < cfg->n_tensors; i++) w->data[i] = (const char *)base + cfg->tensors[i].offset;
    return SM_OK;
}

long sm_weights_find(const sm_weights *w, const char *name) {
    for (size_t i = 0; i < w->cfg->n_tensors; i++)
        if (strcmp(w->cfg->tensors[i].name, name) == 0) return (long)i;
    return -1;
}

size_t sm_weights_bytes(const sm_weights *w) {
    size_t total = 0;
    for (size_t i = 0; i < w->cfg->n_tensors; i++) total += w->cfg->tensors[i].nbytes;
    return total;
}

void sm_weights_header(unsigned char h[SM_WEIGHTS_HEADER]) {
    memset(h, 0, SM_WEIGHTS_HEADER);
    memcpy(h, SM_WEIGHTS_MAGIC, 8);
    sm_write_u32le(h + 8, SM_WEIGHTS_VERSION);
    sm_write_u32le(h + 12, SM_WEIGHTS_HEADER);
}

void sm_weights_close(sm_weights *w) {
    for (int i = 0; i < SM_MAX_FILES; i++) {
        sm_weight_file *f = &w->files[i];
        sm_unmap(f->base, f->size, f->mapped);
    }
    free(w->data);
    memset(w, 0, sizeof *w);
}
