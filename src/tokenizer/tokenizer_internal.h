/*
** tokenizer_internal.h -- what the tokenizer's two files share: the tables'
** types and the hash lookups (tokenizer.c: encoding; load.c: reading the
** vocabulary files and building the tables).
*/
#ifndef SM_TOKENIZER_INTERNAL_H
#define SM_TOKENIZER_INTERNAL_H

#include "sm_tokenizer.h"

enum { KIND_NORMAL = 0, KIND_BYTE, KIND_CONTROL };

#define MAX_PIECE 4096 /* bytes of one piece, and sentencepiece's max_token_length cap */

struct sm_tok_merge {
    int32_t a, b;  /* left and right token, a = -1: empty slot */
    int32_t rank;
    int32_t out;   /* the merged token */
};

typedef struct {
    int32_t id;
    uint32_t start, len; /* bytes buf[start .. start + len) */
    int32_t prev, next;  /* -1 at the ends */
    bool fixed;          /* byte fallback: never merges */
} sym;

typedef struct {
    float pri;
    int32_t left, right;
    uint32_t len; /* bytes of the merged pair, to detect stale candidates */
    int32_t id;
} cand;

struct sm_tok_work {
    unsigned char *buf; /* (SM_TOK_SEGMENT + 1) a segment, with the prefixed space */
    sym *syms;          /* (SM_TOK_SEGMENT + 1) */
    cand *heap;         /* (3 * (SM_TOK_SEGMENT + 1)) */
    size_t n_heap;
};

uint32_t sm_tok_hash_pair(int32_t a, int32_t b);
/* A power of two of at least 2n slots (open addressing). */
uint32_t sm_tok_table_size(size_t n);
/* The normal piece with these bytes, or -1. */
int32_t sm_tok_map_find(const sm_tokenizer *t, const void *p, size_t n);
/* Indexes every normal piece; the first of equal pieces wins. */
sm_status sm_tok_build_map(sm_tokenizer *t, sm_error *err);
/* The merge of tokens (a, b), or NULL. */
const sm_tok_merge *sm_tok_merge_find(const sm_tokenizer *t, int32_t a, int32_t b);
/* The code point starting s[0..n) in *cp (-1 if invalid); returns its bytes (>= 1). */
size_t sm_tok_utf8_next(const unsigned char *s, size_t n, int32_t *cp);

#endif
