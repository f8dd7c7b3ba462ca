/*
** tokenizer_internal.h -- what the tokenizer's two files share: the tables'
** types and the hash lookups (tokenizer.c: encoding; load.c: reading the
** vocabulary files and building the tables).
*/
#ifndef SM_TOKENIZER_INTERNAL_H
#define SM_TOKENIZER_INTERNAL_H

#include "sm_tokenizer.h"

/* KIND_USER: an added token that is not special; matched in text before
   pre-tokenizing, shown as text, never made by merges. KIND_UNREACHABLE: a
   byte-level token spelled outside GPT-2's alphabet; its text is its UTF-8. */
enum { KIND_NORMAL = 0, KIND_BYTE, KIND_CONTROL, KIND_USER, KIND_UNUSED, KIND_UNREACHABLE };

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
    unsigned char *buf; /* (cap) a word, with the prefixed space */
    sym *syms;          /* (cap) */
    cand *heap;         /* (3 * cap) */
    size_t n_heap, cap; /* cap: SM_TOK_SEGMENT + 1, doubled for a longer word */
};

#define SM_TOK_SEGMENT 65536 /* bytes of a word the work memory holds when loaded */

/* Makes w hold a word of n bytes (and a prefixed space), growing it; false: out of memory. */
bool sm_tok_work_fit(sm_tok_work *w, size_t n);

/* ------------------------------------------------ pre-tokenizer (pretok.c) */
/* SM_NORM_PREFIX_SPACE: a prepend of " " unless the text starts with one (ByteLevel add_prefix_space) */
enum { SM_NORM_NFC = 1, SM_NORM_NFKC, SM_NORM_NFD, SM_NORM_NFKD, SM_NORM_REPLACE, SM_NORM_PREPEND,
       SM_NORM_PREFIX_SPACE };
enum { SM_STEP_REGEX = 1, SM_STEP_GPT2, SM_STEP_DIGITS };
enum { SM_SPLIT_ISOLATED = 0, SM_SPLIT_REMOVED, SM_SPLIT_MERGED_PREV, SM_SPLIT_MERGED_NEXT,
       SM_SPLIT_CONTIGUOUS, SM_SPLIT_INVERT = 8 /* or'ed in: the gaps are the delimiters */ };
typedef void (*sm_tok_word_fn)(void *ctx, const unsigned char *w, size_t n);

sm_status sm_tok_pre_new(sm_tok_pre **out, sm_error *err);
/* Normalizer i's SM_NORM_* and strings (0 past the last). */
int sm_tok_pre_op(const sm_tok_pre *p, int i, const char **str, size_t *ns, const char **to, size_t *nt);
/* Input bytes normalized at once, about (0: the default); any size gives the same words. */
void sm_tok_pre_chunk(sm_tok_pre *p, size_t bytes);
void sm_tok_pre_free(sm_tok_pre *p);
/* Appends a normalizer: SM_NORM_REPLACE str -> to, SM_NORM_PREPEND (or _PREFIX_SPACE) str to a
   span's first chunk (only_start: only when the span starts the text), or a Unicode form. */
sm_status sm_tok_pre_norm(sm_tok_pre *p, int op, const char *str, size_t ns, const char *to,
                          size_t nt, bool only_start, const char *where, sm_error *err);
/* Appends a step: a regex (PCRE2 syntax; literal: a plain string) splitting by behavior,
   GPT-2's pattern (isolated), or ASCII digits (individual: one by one). */
sm_status sm_tok_pre_step(sm_tok_pre *p, int kind, int behavior, bool individual,
                          const char *pattern, size_t plen, bool literal, const char *where,
                          sm_error *err);
bool sm_tok_pre_has_steps(const sm_tok_pre *p);
/* Normalizes and splits s[0..n) (any bytes; text_start: the span starts the text) and
   calls word for each word, in order. Never allocates. */
void sm_tok_pre_run(sm_tok_pre *p, const unsigned char *s, size_t n, bool text_start,
                    sm_tok_word_fn word, void *ctx);
/* Into name, the llama.cpp name (tokenizer.ggml.pre) of the pre-tokenizer that splits text as p
   does (checked on a probe text that tells them apart), false when none does; *nfc: p normalizes
   to NFC, which no llama.cpp pre-tokenizer does (Qwen's tokenizer.json does). */
#define SM_TOK_PRE_NAME 32
bool sm_tok_pre_name(sm_tok_pre *p, bool ignore_merges, bool *nfc, char name[SM_TOK_PRE_NAME]);
/* Whether p is SentencePiece's: no steps (or none that split the probe text), spaces turned into U+2581 (*prepend: one put before). */
bool sm_tok_pre_is_spm(sm_tok_pre *p, bool *prepend);
/* The steps tokenizer.ggml.pre name stands for (llama.cpp's names); SM_ERR_UNSUPPORTED if unknown. */
sm_status sm_tok_pre_named(sm_tok_pre *p, const char *name, size_t n, bool *ignore_merges,
                           const char *where, sm_error *err);

/* ------------------------------------------------ loading (load.c, hf.c) */
sm_status sm_tok_alloc_tables(sm_tokenizer *t, size_t n, size_t text_bytes, sm_error *err);
/* GPT-2's byte alphabet: the code point standing for each byte, and the byte of each code point
   (-1 for those not in it). */
void sm_tok_byte_alphabet(int32_t cp_of[256]);
void sm_tok_byte_inverse(int32_t byte_of_cp[324]);
/* s[0..n) with SentencePiece's space mark U+2581 as a space, into out (n bytes); its length. */
size_t sm_tok_unmark(const char *s, size_t n, char *out);
/* "<0xNN>" -> 0..255; -1 if p is not shaped like a byte piece; -2 if it is but malformed. */
int sm_tok_byte_piece(const char *p, size_t n);
/* Token text in the byte alphabet -> its bytes (out: n bytes at least); -1 if not in it. */
long sm_tok_unalphabet(const int32_t byte_of_cp[324], const char *s, size_t n, char *out);
/* A byte-level vocabulary token's stored text into out (n bytes suffice): the bytes its spelling
   in GPT-2's alphabet stands for, or, spelled with any other character, its own text, *kind then
   KIND_UNREACHABLE (merging never makes it; it decodes to that text); -1 if empty or longer
   than MAX_PIECE. */
long sm_tok_byte_level_text(const int32_t byte_of_cp[324], const char *s, size_t n, char *out, uint8_t *kind);
/* Reads a Hugging Face tokenizer.json (BPE: byte-level or with byte fallback). */
sm_status sm_tok_load_hf(sm_tokenizer *t, const sm_config *cfg, const char *path, sm_error *err);
/* Indexes the added tokens (KIND_CONTROL and KIND_USER pieces) for matching in text. */
sm_status sm_tok_index_added(sm_tokenizer *t, sm_error *err);

/* A power of two of at least 2n slots (open addressing). */
uint32_t sm_tok_table_size(size_t n);
/* The normal piece with these bytes, or -1. */
int32_t sm_tok_map_find(const sm_tokenizer *t, const void *p, size_t n);
/* Indexes every normal piece; the first of equal pieces wins. */
sm_status sm_tok_build_map(sm_tokenizer *t, sm_error *err);
/* An empty merge table for n merges. */
sm_status sm_tok_merges_new(sm_tokenizer *t, size_t n, sm_error *err);
/* Adds merge (a, b) -> out at rank unless (a, b) is there already (it keeps its first rank);
   true if added. */
bool sm_tok_merge_add(sm_tokenizer *t, int32_t a, int32_t b, int32_t rank, int32_t out);
/* The merge of tokens (a, b), or NULL. */
const sm_tok_merge *sm_tok_merge_find(const sm_tokenizer *t, int32_t a, int32_t b);
/* The code point starting s[0..n) in *cp (-1 if invalid); returns its bytes (>= 1). */
size_t sm_tok_utf8_next(const unsigned char *s, size_t n, int32_t *cp);

#endif
