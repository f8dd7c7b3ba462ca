/*
** fuzz_byte_tok.h -- the byte tokenizer (one token per byte, then n_vocab -
** 256 ids with no text), built in, for fuzz targets that need a vocabulary.
*/
#ifndef FUZZ_BYTE_TOK_H
#define FUZZ_BYTE_TOK_H

#include <stdlib.h>
#include <string.h>

#include "sm_config.h"
#include "sm_tokenizer.h"

static inline void fuzz_byte_tokenizer(sm_tokenizer *t, int32_t n_vocab) {
    sm_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.tokenizer = SM_TOKENIZER_BYTE;
    cfg.n_vocab = n_vocab;
    sm_error err = {{0}};
    if (sm_tokenizer_init(t, &cfg, NULL, NULL, &err) != SM_OK) abort();
}

#endif
