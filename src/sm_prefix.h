/*
** sm_prefix.h -- the prefix cache: the keys and values of prompt prefixes,
** kept so that a prompt starting with tokens already computed is prefilled
** only from where it differs.
**
** Prefixes are stored in blocks of SM_PREFIX_BLOCK tokens in a tree (a
** radix tree over token blocks): a node is one block of tokens under its
** parent, the path from the root a prefix, and the node holds that block's
** keys and values for every layer (sm_state_kv_get's layout). Children are
** found by a hash of (parent, tokens). Memory is one pool of nodes carved
** at init (the --cache-size budget); when it is full, the least recently
** used leaf goes.
**
** What is stored. Copying a prompt's blocks in costs about as much as
** reading them, so a job whose prompts share nothing should not pay it for
** every prompt. A prompt's blocks a waiting request shares (`keep`) are
** always stored. Past those, once SM_PREFIX_SPECULATE prompts in a row
** stored blocks and no block stored before was reused for the first time
** meanwhile, a prompt stores only the first block past its reuse (a probe):
** a later prompt that reuses a probe, or any block never reused before,
** proves that stored blocks get reused, and prompts store whole again.
** Chat turns (a turn's prompt reused by the next) and shared instructions
** keep storing; a job of unrelated prompts stores one block per prompt.
**
** Exactness. A prompt run with a cached prefix gives byte for byte the text
** it gives alone because every row it reuses was computed as the prompt's
** own prefill computes it. A row's arithmetic depends on its call only
** through the call's first position modulo 4 (attention takes queries in
** groups of 4 from a call's start), whether the call has fewer than 4 rows
** (matrix-vector products) and whether the call ends one row past a group
** of 4 (a lone last query). Prefills end their calls at multiples of
** max_batch (sm_state_prefill_seq); blocks are multiples of 4 and never
** straddle such a boundary; and a prompt reuses P tokens only when its own
** first call from P has the same shape as the call the whole prompt would
** make there: P < n and (n - P >= 4 or P is a multiple of max_batch). The
** rows of a block were computed in a call of >= 4 rows whatever prompt
** computed them, so all prompts sharing the block agree on it.
** sm_prefix_match applies these rules; a cache is not made when max_batch
** is neither a multiple of the block nor the whole context.
**
** One thread at a time; never prints; allocates nothing after init.
*/
#ifndef SM_PREFIX_H
#define SM_PREFIX_H

#include "sm_arena.h"
#include "sm_model.h"

#define SM_PREFIX_BLOCK 16
#define SM_PREFIX_SPECULATE 16

typedef struct sm_prefix sm_prefix;

typedef struct sm_prefix_stats {
    size_t bytes_max, bytes;   /* the budget, and the bytes nodes hold now */
    size_t blocks_max, blocks; /* nodes the budget holds, and in use */
    size_t lookups, hits;      /* prompts matched, and those that reused >= 1 block */
    size_t tokens, reused;     /* their prompt tokens, and those served from the cache */
    size_t inserted, evicted;  /* blocks stored, and dropped to make room */
    size_t held_back;          /* blocks not stored: prompts in a row stored blocks none reused */
    size_t in_place;           /* of the reused tokens, those not copied in: read where another
                                  sequence (or the slot's last prompt) holds them */
} sm_prefix_stats;

/* A prompt's match: how many of its tokens it reuses. */
typedef struct sm_prefix_hit {
    size_t n_prompt; /* the prompt's tokens */
    size_t n_reused; /* a multiple of SM_PREFIX_BLOCK, < n_prompt */
} sm_prefix_hit;

/*
** Carves a cache of at most `bytes` (nodes and their keys and values) for
** states like sp of model m from arena a; on a measuring arena only the
** size is added. *out is NULL (and the call OK) when the budget holds no
** block or sp's max_batch breaks block alignment (see above).
*/
sm_status sm_prefix_init(sm_prefix **out, const sm_model *m, const sm_state_params *sp,
                         size_t bytes, sm_arena *a, sm_error *err);

/*
** The longest prefix of tokens (n of them) that a prompt may reuse from the
** cache under the exactness rules, windows included (a sliding-window
** layer needs the blocks in the window before the reused end whole). The
** nodes are remembered for sm_prefix_load until the next call.
*/
sm_prefix_hit sm_prefix_match(sm_prefix *pc, const int32_t *tokens, size_t n);

/* Copies the reused blocks of the last match into sequence seq of state s, those from
** position `from` on (the sequence holds or shares the others already), marking them all
** used, and counts the prompt in the stats. */
void sm_prefix_load(sm_prefix *pc, sm_state *s, size_t seq, sm_prefix_hit hit, size_t from);

/*
** After sequence seq of s was prefilled with tokens[0..n): stores its whole
** blocks not yet cached (evicting least recently used leaves; the blocks
** that find no room are not stored) and marks the others used. The first
** `keep` blocks are stored in any case (a waiting request shares them); the
** ones after them as "What is stored" above says.
*/
void sm_prefix_insert(sm_prefix *pc, const sm_state *s, size_t seq, const int32_t *tokens,
                      size_t n, size_t keep);

/* Stores n_blocks blocks read from a prompt-cache file: their tokens, keys and values
   (sm_prefix_block_bytes each, one after another) and whether each is whole. */
void sm_prefix_put(sm_prefix *pc, const int32_t *tokens, size_t n_blocks, const void *blocks,
                   const bool *whole);
size_t sm_prefix_block_bytes(const sm_prefix *pc);

/*
** The path of blocks prompts reused most (from the root, the child loaded
** most each time), at most max_blocks: its tokens (B per block), each
** block's keys and values (pointers into the cache) and whether it is
** whole. Returns its blocks.
*/
size_t sm_prefix_hottest(const sm_prefix *pc, int32_t *tokens, const void **blocks, bool *whole,
                         size_t max_blocks);

/*
** The exactness rules on their own: of d cached blocks of a prompt of n
** tokens, how many it may reuse with forward calls of max_batch, sliding
** windows of `window` tokens (0: none) and whole[k] telling whether block k
** holds every layer's rows.
*/
size_t sm_prefix_usable(size_t d, size_t n, size_t max_batch, size_t window, const bool *whole);

sm_prefix_stats sm_prefix_stats_of(const sm_prefix *pc);

#endif
