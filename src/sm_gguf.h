/*
** sm_gguf.h -- GGUF files (versions 2 and 3, little-endian), read and
** validated before any pointer into them is formed.
**
** A GGUF file is a header (magic "GGUF", u32 version, u64 tensor count, u64
** metadata count), the metadata (key string, u32 value type, value), the
** tensor infos (name, u32 n_dims, u64 dims innermost first, u32 ggml type,
** u64 offset into the data section), then the data section at the next
** multiple of general.alignment (default 32). Strings are a u64 length and
** that many bytes, not NUL-terminated.
**
** sm_gguf_parse checks everything llama.cpp's history of GGUF bugs names:
** every count against the bytes left before anything is allocated, value
** types in range, no arrays of arrays, string and array lengths inside the
** file, keys and tensor names unique, n_dims 1 to 4 with positive dims and
** checked products, a power-of-two alignment, and every tensor's data whole
** blocks, aligned, inside the file and overlapping no other. Tensors of a
** ggml type smallmind does not run are refused by name at parse time too.
** Errors name the file and the key or tensor at fault.
*/
#ifndef SM_GGUF_H
#define SM_GGUF_H

#include "sm_config.h"

/* GGUF metadata value types. */
enum {
    SM_GGUF_U8 = 0, SM_GGUF_I8, SM_GGUF_U16, SM_GGUF_I16, SM_GGUF_U32, SM_GGUF_I32,
    SM_GGUF_F32, SM_GGUF_BOOL, SM_GGUF_STRING, SM_GGUF_ARRAY, SM_GGUF_U64, SM_GGUF_I64,
    SM_GGUF_F64, SM_GGUF_NTYPES
};

/* Most metadata entries and tensors one file may have (real files: a few hundred / thousand). */
#define SM_GGUF_MAX_KV 65536
#define SM_GGUF_MIN_ALIGN 32 /* tensors less aligned than this are copied at load */
#define SM_GGUF_MAX_TENSORS 65536

typedef struct sm_gguf_kv {
    const char *key; /* into the file, key_len bytes, not NUL-terminated */
    size_t key_len;
    uint32_t type;      /* SM_GGUF_* */
    uint32_t elem;      /* arrays: the elements' type */
    uint64_t n;         /* arrays: element count; else 1 */
    const uint8_t *val; /* the value (a string: its u64 length first; an array: element 0) */
} sm_gguf_kv;

typedef struct sm_gguf_tensor {
    const char *name; /* into the file, name_len bytes */
    size_t name_len;
    int ndim;
    uint64_t ne[4];   /* innermost (row length) first, as GGUF stores them */
    uint32_t ggml_type;
    sm_dtype dtype;   /* smallmind's name for it */
    size_t nelem, nbytes;
    size_t offset;    /* from the start of the file */
} sm_gguf_tensor;

typedef struct sm_gguf {
    const uint8_t *base; /* the file's bytes (mapped or read by sm_gguf_open, else borrowed) */
    size_t size;
    bool mapped, owned;
    uint32_t version;
    size_t n_kv, n_tensors;
    sm_gguf_kv *kv;          /* (n_kv) */
    sm_gguf_tensor *tensors; /* (n_tensors) */
    size_t alignment, data_off;
} sm_gguf;

/*
** Validates size bytes at buf as a GGUF file (`path` names it in messages)
** and indexes them into g, which borrows buf. On failure *g is free-safe.
*/
sm_status sm_gguf_parse(sm_gguf *g, const uint8_t *buf, size_t size, const char *path,
                        sm_error *err);

/* Maps (or, use_mmap false, reads) the file at path, then sm_gguf_parse; g owns the bytes. */
sm_status sm_gguf_open(sm_gguf *g, const char *path, bool use_mmap, sm_error *err);

void sm_gguf_close(sm_gguf *g);

/* Whether the n bytes at p start like a GGUF file (the magic). */
bool sm_gguf_magic(const void *p, size_t n);

/* The entry named key, or NULL. */
const sm_gguf_kv *sm_gguf_find(const sm_gguf *g, const char *key);

/* The tensor named name, or NULL. */
const sm_gguf_tensor *sm_gguf_tensor_find(const sm_gguf *g, const char *name);

/*
** Typed reads of key: *found says whether it is there; a value of the wrong
** type (or an integer out of range) is SM_ERR_FORMAT naming the key.
** Integers of any integer type are accepted; floats f32 or f64.
*/
sm_status sm_gguf_int(const sm_gguf *g, const char *key, int64_t lo, int64_t hi, int64_t *out,
                      bool *found, const char *path, sm_error *err);
sm_status sm_gguf_float(const sm_gguf *g, const char *key, double *out, bool *found,
                        const char *path, sm_error *err);
sm_status sm_gguf_bool(const sm_gguf *g, const char *key, bool *out, bool *found,
                       const char *path, sm_error *err);
sm_status sm_gguf_string(const sm_gguf *g, const char *key, const char **s, size_t *len,
                         bool *found, const char *path, sm_error *err);

/*
** A special token id (tokenizer.ggml.*_token_id): *id -1 when absent or the
** "none" value (0xFFFFFFFF, as llama.cpp writes it), else 0..n_vocab-1 or
** SM_ERR_FORMAT naming the key.
*/
sm_status sm_gguf_token_id(const sm_gguf *g, const char *key, int64_t n_vocab, int32_t *id,
                           const char *path, sm_error *err);

/* An array entry of element type `elem` (strings: SM_GGUF_STRING), else SM_ERR_FORMAT. */
sm_status sm_gguf_array(const sm_gguf *g, const char *key, uint32_t elem, const sm_gguf_kv **kv,
                        const char *path, sm_error *err);

/*
** The next string of a string array (parse checked every length): *p starts
** at kv->val and moves past the string.
*/
static inline const char *sm_gguf_next_string(const uint8_t **p, size_t *len) {
    *len = (size_t)sm_read_u64le(*p);
    const char *s = (const char *)*p + 8;
    *p += 8 + *len;
    return s;
}

/*
** The model a GGUF file holds, as a config (gguf_config.c): architecture
** (llama, gpt2) and hyperparameters from the <arch>.* keys, the tokenizer's
** kind and special ids, and every tensor under smallmind's name with its
** offset in the file (file 0). cfg->gguf borrows g, which must outlive it.
*/
sm_status sm_gguf_config(sm_config *cfg, const sm_gguf *g, const char *path, sm_error *err);

/*
** Only what a tokenizer needs (tokenize, detokenize): the tokenizer's kind,
** special ids and n_vocab (token_embd's rows, else the token count), from
** any GGUF file, a vocabulary-only one or an architecture smallmind does
** not run included. cfg has no tensors.
*/
sm_status sm_gguf_vocab_config(sm_config *cfg, const sm_gguf *g, const char *path,
                               sm_error *err);

/*
** A tensor's name in the other convention, for c's architecture (and Q/K/V
** biases if c has them): GGUF's ("blk.0.attn_output.weight") -> ours
** ("blk.0.attn_out.weight") with to_ours, else ours -> GGUF's. False if
** the architecture has no such tensor.
*/
bool sm_gguf_tensor_name(const sm_config *c, const char *name, bool to_ours,
                         char out[SM_NAME_MAX]);

/* The ggml type of dtype dt (GGUF's numbering). */
uint32_t sm_gguf_type_of(sm_dtype dt);

/* GGUF's name for ggml type t ("Q4_K", ...), or "unknown". */
const char *sm_gguf_type_name(uint32_t t);

#endif
