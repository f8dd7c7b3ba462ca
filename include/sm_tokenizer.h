/*
** sm_tokenizer.h -- text <-> token ids.
**
** This build has the byte tokenizer: 256 ids, id = byte value, so any input
** (including invalid UTF-8 and NUL bytes) is representable and round-trips
** exactly. It has no BOS or EOS token. Encoding writes into a caller buffer
** and decoding returns a pointer to a piece the tokenizer owns: neither
** allocates.
*/
#ifndef SM_TOKENIZER_H
#define SM_TOKENIZER_H

#include "sm_config.h"

typedef struct sm_tokenizer {
    sm_tokenizer_type type;
    int n_vocab;       /* ids the tokenizer produces: 0..n_vocab-1 */
    int32_t bos, eos;  /* -1 when the tokenizer has none */
    char bytes[256];   /* byte tokenizer: piece of id i is bytes + i, length 1 */
} sm_tokenizer;

/* Builds the tokenizer the config names; checks its vocabulary fits the model's. */
sm_status sm_tokenizer_init(sm_tokenizer *t, const sm_config *cfg, sm_error *err);

/*
** Encodes text into out (capacity cap) and returns the number of tokens the
** whole text needs, which may exceed cap (then only cap were written).
*/
size_t sm_tokenizer_encode(const sm_tokenizer *t, const char *text, size_t len, int32_t *out,
                           size_t cap);

/* The bytes of token id (not NUL-terminated); length 0 for ids it lacks. */
const char *sm_tokenizer_piece(const sm_tokenizer *t, int32_t id, size_t *len);

/*
** Length of the longest prefix of s[0..n) that does not end inside a UTF-8
** character: a trailing lead byte with fewer continuation bytes than it
** announces is held back (at most 3 bytes). Invalid bytes count as complete.
*/
size_t sm_utf8_complete(const unsigned char *s, size_t n);

#endif
