/*
** sm_weights.h -- weight files: validated, then memory-mapped read-only.
**
** A weight file is a 64-byte header (magic "SMWEIGHT", u32 version, u32
** header size, zero padding) followed by raw little-endian tensors at the
** offsets the manifest gives. Before any pointer is formed every file is
** checked against its manifest entries: the header, every offset + size
** (checked arithmetic), tensors contiguous from byte 64 with only the padding
** needed for 64-byte alignment between them, and nothing after the last one.
*/
#ifndef SM_WEIGHTS_H
#define SM_WEIGHTS_H

#include "sm_config.h"

#define SM_WEIGHTS_MAGIC "SMWEIGHT"
#define SM_WEIGHTS_VERSION 1
#define SM_WEIGHTS_HEADER 64

typedef struct sm_weight_file {
    unsigned char *base; /* mapping or heap copy; NULL if not open */
    size_t size;
    bool mapped;
} sm_weight_file;

typedef struct sm_weights {
    const sm_config *cfg; /* borrowed; must outlive the weights */
    sm_weight_file files[SM_MAX_FILES];
    const void **data; /* (n_tensors) pointer per manifest entry */
} sm_weights;

/*
** Opens and validates every file the config names, in `dir`. With use_mmap
** false the files are read into memory instead. On failure *w is free-safe
** and err names the file and tensor at fault.
*/
sm_status sm_weights_open(sm_weights *w, const sm_config *cfg, const char *dir, bool use_mmap,
                          sm_error *err);

/*
** Weights used where they lie in `base`, the bytes of the one file every
** tensor of cfg is in (a GGUF file, validated by its reader): nothing is
** opened or mapped, and closing frees only the pointer table.
*/
sm_status sm_weights_in_place(sm_weights *w, const sm_config *cfg, const void *base, sm_error *err);

/* Fills h with a version-1 weight-file header (magic, version, header size, zeros). */
void sm_weights_header(unsigned char h[SM_WEIGHTS_HEADER]);

/* The manifest index of tensor `name`, or -1. */
long sm_weights_find(const sm_weights *w, const char *name);

/* Bytes of tensor data over all files. */
size_t sm_weights_bytes(const sm_weights *w);

void sm_weights_close(sm_weights *w);

#endif
