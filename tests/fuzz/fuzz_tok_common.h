/*
** fuzz_tok_common.h -- what the BPE and SentencePiece fuzz targets share: a
** scratch directory for tokenizer files, and the encode/decode round trip.
*/
#ifndef FUZZ_TOK_COMMON_H
#define FUZZ_TOK_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sm_tokenizer.h"

static char tok_dir[64];
static const char *const tok_files[] = {"tokenizer.bin", "vocab.json", "merges.txt", "tokenizer.json"};

static void tok_cleanup(void) {
    char path[128];
    for (size_t i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", tok_dir, tok_files[i]);
        unlink(path);
    }
    rmdir(tok_dir);
}

/* Writes name in the scratch directory (made on first use, removed at exit). */
static inline void tok_put(const char *name, const void *p, size_t n) {
    if (!tok_dir[0]) {
        snprintf(tok_dir, sizeof tok_dir, "/tmp/sm-fuzz-tok-XXXXXX");
        if (!mkdtemp(tok_dir)) abort();
        atexit(tok_cleanup);
    }
    char path[128];
    snprintf(path, sizeof path, "%s/%s", tok_dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f) != 0) abort();
}

/* Loads a tokenizer of `type` from the scratch directory's files (BOS 1 / EOS 2 for sentencepiece). */
static inline sm_status tok_load(sm_tokenizer *t, sm_tokenizer_type type) {
    sm_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.tokenizer = type;
    cfg.n_vocab = 1 << 16;
    bool sp = type == SM_TOKENIZER_SENTENCEPIECE;
    cfg.tok_bos = sp ? 1 : -1;
    cfg.tok_eos = sp ? 2 : -1;
    snprintf(cfg.tok_file[0], sizeof cfg.tok_file[0], "%s",
             type == SM_TOKENIZER_HF ? tok_files[3] : sp ? tok_files[0] : tok_files[1]);
    snprintf(cfg.tok_file[1], sizeof cfg.tok_file[1], "%s", tok_files[2]);
    sm_error err = {{0}};
    return sm_tokenizer_init(t, &cfg, tok_dir, NULL, &err);
}

/* The built-in tokenizer: `write` makes its files once, loaded once per process. */
static inline sm_tokenizer *tok_builtin(sm_tokenizer_type type, void (*write)(void)) {
    static sm_tokenizer fixed;
    static int ready;
    if (!ready) {
        write();
        if (tok_load(&fixed, type) != SM_OK) abort();
        ready = 1;
    }
    return &fixed;
}

/*
** Encodes data; every id is in range; decoding gives the bytes back when
** `exact` (every byte representable), preceded by BOS for sentencepiece.
*/
static inline void tok_roundtrip(sm_tokenizer *t, const uint8_t *data, size_t size, int exact) {
    size_t cap = size + 2;
    int32_t *ids = malloc(cap * sizeof *ids);
    char *back = malloc(size + 1);
    if (!ids || !back) abort();
    size_t n = sm_tokenizer_encode(t, (const char *)data, size, ids, cap);
    if (n > cap) abort(); /* never more tokens than bytes + BOS */
    size_t len = 0;
    int32_t prev = -1;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_vocab) abort();
        size_t pl;
        const char *p = sm_tokenizer_piece_after(t, prev, ids[i], &pl);
        prev = ids[i];
        if (len + pl > size) {
            if (exact) abort();
            break;
        }
        memcpy(back + len, p, pl);
        len += pl;
    }
    if (exact && (len != size || (size && memcmp(back, data, size) != 0))) abort();
    free(ids);
    free(back);
}

#endif
