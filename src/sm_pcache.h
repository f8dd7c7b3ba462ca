/*
** sm_pcache.h -- the prompt-cache file (--prompt-cache FILE): the keys and
** values of a prompt's whole blocks (SM_PREFIX_BLOCK tokens each), kept
** between runs so that a later prompt starting with the same tokens loads
** them instead of prefilling them.
**
** The file (host byte order; docs/architecture.md has the layout):
**   header   magic "SMPCACHE", version, the model's identity (a hash of its
**            architecture, shapes, tensor names, types and sampled bytes of
**            every tensor), the kernels (table and int8 products, whose
**            rounding the keys carry), the KV type, forward-call size,
**            context, bytes per block and the number of blocks
**   tokens   SM_PREFIX_BLOCK per block
**   whole    a byte per block: 0 where a sliding window's ring had lost it
**   data     the blocks' keys and values (sm_state_kv_get's layout)
**   checksum of everything before it
** A file is used only when every part matches this run; it is written
** whole to a temporary file and renamed over the old one.
**
** Library code: returns a status with one line naming the file, never prints.
*/
#ifndef SM_PCACHE_H
#define SM_PCACHE_H

#include "sm_base.h"
#include "sm_model.h"
#include "sm_prefix.h"

typedef struct sm_pcache {
    int32_t *tokens;     /* (n_blocks * SM_PREFIX_BLOCK) */
    size_t n_blocks, block_bytes;
    bool *whole;         /* (n_blocks) */
    unsigned char *data; /* (n_blocks, block_bytes) */
    char *file;          /* the whole file as read (the arrays point into it) */
} sm_pcache;

/*
** Reads a prompt cache for states like sp of model m into pc. SM_ERR_IO
** when path does not exist (a first run), SM_ERR_INPUT when it is not a
** prompt cache at all (another kind of file: never to be overwritten), and
** SM_ERR_FORMAT when it is one that this run cannot use (another model,
** kernels, KV type, forward-call size or version; truncated or corrupted),
** each with one line naming the file and the reason.
*/
sm_status sm_pcache_read(sm_pcache *pc, const char *path, const sm_model *m,
                         const sm_state_params *sp, sm_error *err);
void sm_pcache_free(sm_pcache *pc);

/*
** Of tokens[0..n), how many pc may serve under the prefix cache's
** exactness rules (sm_prefix_usable; a multiple of SM_PREFIX_BLOCK, < n).
*/
size_t sm_pcache_match(const sm_pcache *pc, const int32_t *tokens, size_t n, const sm_model *m,
                       const sm_state_params *sp);

/* Copies pc's first n_tokens (a multiple of the block) into sequence seq of s. */
void sm_pcache_load(const sm_pcache *pc, sm_state *s, size_t seq, size_t n_tokens);

/*
** Writes a prompt cache of n_blocks blocks: their tokens, keys and values
** (blocks[k] each sm_model_kv_bytes * SM_PREFIX_BLOCK bytes) and wholeness,
** atomically.
*/
sm_status sm_pcache_write(const char *path, const sm_model *m, const sm_state_params *sp,
                          const int32_t *tokens, size_t n_blocks, const void *const *blocks,
                          const bool *whole, sm_error *err);

/* Writes the whole blocks of tokens[0..n) from sequence seq of s (positions [0, end) filled). */
sm_status sm_pcache_write_state(const char *path, const sm_state *s, size_t seq,
                                const int32_t *tokens, size_t n, size_t end, sm_error *err);

/* Whether pc holds exactly the whole blocks of tokens[0..n) (nothing new to write). */
bool sm_pcache_same(const sm_pcache *pc, const int32_t *tokens, size_t n);

#endif
