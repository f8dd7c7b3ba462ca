/*
** prefix.c -- the prefix cache (sm_prefix.h): a tree of token blocks with
** their keys and values, a hash from (parent, tokens) to child, and a pool
** of nodes with least-recently-used eviction of leaves.
*/
#include "sm_prefix.h"

#include <string.h>

#define B SM_PREFIX_BLOCK
#define NONE UINT32_MAX

typedef struct node {
    int32_t tok[B];
    uint32_t parent;  /* NONE: a child of the root */
    uint32_t hnext;   /* the next node in its hash chain, or in the free list */
    uint32_t n_child; /* nodes under it (a node with children is not evicted) */
    uint64_t used;    /* the clock when it was last matched, loaded or stored */
    uint32_t loads;   /* prompts that reused it (0 until the first, which ends a streak) */
    bool live;
    bool whole;       /* every layer's keys and values (false: a window's ring had lost them) */
} node;

struct sm_prefix {
    node *nodes;
    unsigned char *data; /* (n_nodes, block_bytes) */
    uint32_t *bucket;    /* (mask + 1) hash chains */
    uint32_t *path;      /* (n_ctx / B) the last match's nodes */
    bool *whole;         /* (n_ctx / B) and whether each holds every layer's rows */
    size_t n_nodes, mask, block_bytes, n_ctx, max_batch, window, n_path;
    uint32_t free;
    uint32_t streak; /* prompts in a row that stored blocks, no stored block reused first since */
    uint64_t clock;
    sm_prefix_stats st;
};

static size_t hash_of(uint32_t parent, const int32_t *tok) {
    uint64_t h = sm_hash_bytes(tok, B * sizeof *tok);
    return (size_t)(h ^ ((uint64_t)parent * 0x9e3779b97f4a7c15ull));
}

static uint32_t find(const sm_prefix *pc, uint32_t parent, const int32_t *tok) {
    for (uint32_t i = pc->bucket[hash_of(parent, tok) & pc->mask]; i != NONE; i = pc->nodes[i].hnext)
        if (pc->nodes[i].parent == parent && memcmp(pc->nodes[i].tok, tok, sizeof pc->nodes[i].tok) == 0)
            return i;
    return NONE;
}

sm_status sm_prefix_init(sm_prefix **out, const sm_model *m, const sm_state_params *sp,
                         size_t bytes, sm_arena *a, sm_error *err) {
    (void)err;
    *out = NULL;
    size_t bb = B * sm_model_kv_bytes(m, sp->kv_type);
    size_t per = bb + sizeof(node) + 2 * sizeof(uint32_t); /* a node, its data, two buckets */
    size_t n = bb ? bytes / per : 0;
    bool aligned = sp->max_batch % B == 0 || sp->max_batch >= sp->n_ctx;
    if (n == 0 || !aligned || sp->n_ctx < B) return SM_OK;
    if (n > NONE / 2) n = NONE / 2;
    size_t nb = 1;
    while (nb < 2 * n) nb <<= 1;
    sm_prefix *pc = sm_arena_alloc(a, 1, sizeof *pc);
    node *nodes = sm_arena_alloc(a, n, sizeof *nodes);
    uint32_t *bucket = sm_arena_alloc(a, nb, sizeof *bucket);
    uint32_t *path = sm_arena_alloc(a, sp->n_ctx / B + 1, sizeof *path);
    bool *whole = sm_arena_alloc(a, sp->n_ctx / B + 1, sizeof *whole);
    unsigned char *data = sm_arena_alloc(a, n, bb);
    if (!a->base) return SM_OK; /* measuring */
    if (!pc || !nodes || !bucket || !path || !whole || !data)
        return sm_error_set(err, SM_ERR_NOMEM, "arena too small for the prefix cache");
    *pc = (sm_prefix){.nodes = nodes, .data = data, .bucket = bucket, .path = path, .whole = whole,
                      .n_nodes = n,
                      .mask = nb - 1, .block_bytes = bb, .n_ctx = sp->n_ctx,
                      .max_batch = sp->max_batch, .window = sm_model_kv_window(m, sp)};
    pc->st.bytes_max = n * per;
    pc->st.blocks_max = n;
    for (size_t i = 0; i < nb; i++) bucket[i] = NONE;
    for (size_t i = 0; i < n; i++) nodes[i] = (node){.hnext = i + 1 < n ? (uint32_t)(i + 1) : NONE};
    pc->free = 0;
    *out = pc;
    return SM_OK;
}

size_t sm_prefix_usable(size_t d, size_t n, size_t max_batch, size_t window, const bool *whole) {
    for (; d > 0; d--) {
        size_t P = d * B, lo = window && P > window ? (P - window) / B : 0;
        bool ok = P < n && (n - P >= 4 || P % max_batch == 0); /* the call from P as alone */
        for (size_t k = lo; k < d && ok && window; k++) ok = whole[k]; /* what windows read */
        if (ok) break;
    }
    return d;
}

sm_prefix_hit sm_prefix_match(sm_prefix *pc, const int32_t *tokens, size_t n) {
    size_t d = 0;
    uint32_t parent = NONE;
    for (; (d + 1) * B <= n; d++) {
        uint32_t c = find(pc, parent, tokens + d * B);
        if (c == NONE) break;
        pc->path[d] = parent = c;
        pc->whole[d] = pc->nodes[c].whole;
    }
    pc->n_path = d;
    d = sm_prefix_usable(d, n, pc->max_batch, pc->window, pc->whole);
    return (sm_prefix_hit){.n_prompt = n, .n_reused = d * B};
}

void sm_prefix_load(sm_prefix *pc, sm_state *s, size_t seq, sm_prefix_hit hit, size_t from) {
    size_t d = hit.n_reused / B;
    pc->clock++;
    for (size_t k = 0; k < d && k < pc->n_path; k++) {
        pc->nodes[pc->path[k]].used = pc->clock;
        if (pc->nodes[pc->path[k]].loads++ == 0) pc->streak = 0; /* stored blocks do get reused */
        if (k * B >= from)
            sm_state_kv_put(s, seq, k * B, B, pc->data + (size_t)pc->path[k] * pc->block_bytes);
    }
    pc->st.in_place += from < hit.n_reused ? from : hit.n_reused;
    pc->st.lookups++;
    pc->st.hits += d > 0;
    pc->st.tokens += hit.n_prompt;
    pc->st.reused += hit.n_reused;
}

/* Unlinks node i from its hash chain and its parent, and frees it. */
static void drop(sm_prefix *pc, uint32_t i) {
    node *x = &pc->nodes[i];
    uint32_t *link = &pc->bucket[hash_of(x->parent, x->tok) & pc->mask];
    while (*link != i) link = &pc->nodes[*link].hnext;
    *link = x->hnext;
    if (x->parent != NONE) pc->nodes[x->parent].n_child--;
    x->live = false;
    x->hnext = pc->free;
    pc->free = i;
    pc->st.evicted++;
}

/* A free node: from the free list, or the least recently used leaf not used at this clock. */
static uint32_t take(sm_prefix *pc) {
    if (pc->free == NONE) {
        uint32_t best = NONE;
        for (uint32_t i = 0; i < pc->n_nodes; i++) {
            const node *x = &pc->nodes[i];
            if (x->live && !x->n_child && x->used < pc->clock &&
                (best == NONE || x->used < pc->nodes[best].used))
                best = i;
        }
        if (best == NONE) return NONE;
        drop(pc, best);
    }
    uint32_t i = pc->free;
    pc->free = pc->nodes[i].hnext;
    return i;
}

/* Stores the whole blocks of tokens[0..n) not yet cached, their keys and values from sequence
   seq of s, or (s NULL) from blocks (block_bytes each) and whole: the first keep whatever the
   streak, past them all of them or (a streak of SM_PREFIX_SPECULATE) the first. */
static void insert(sm_prefix *pc, const sm_state *s, size_t seq, const int32_t *tokens, size_t n,
                   const unsigned char *blocks, const bool *whole, size_t keep) {
    uint32_t parent = NONE;
    size_t past = 0; /* blocks stored past keep */
    pc->clock++;
    for (size_t d = 0; (d + 1) * B <= n; d++) {
        uint32_t c = find(pc, parent, tokens + d * B);
        if (c == NONE) {
            if (d >= keep && past > 0 && pc->streak >= SM_PREFIX_SPECULATE) {
                pc->st.held_back += n / B - d; /* the probe is stored; the rest would be copied for none */
                break;
            }
            if ((c = take(pc)) == NONE) break; /* every node is on this path: no room */
            past += d >= keep;
            node *x = &pc->nodes[c];
            *x = (node){.parent = parent, .live = true};
            memcpy(x->tok, tokens + d * B, sizeof x->tok);
            unsigned char *dst = pc->data + (size_t)c * pc->block_bytes;
            if (s) {
                x->whole = sm_state_kv_get(s, seq, d * B, B, n, dst);
            } else {
                memcpy(dst, blocks + d * pc->block_bytes, pc->block_bytes);
                x->whole = whole[d];
            }
            size_t h = hash_of(parent, x->tok) & pc->mask;
            x->hnext = pc->bucket[h];
            pc->bucket[h] = c;
            if (parent != NONE) pc->nodes[parent].n_child++;
            pc->st.inserted++;
        }
        pc->nodes[c].used = pc->clock;
        parent = c;
    }
    if (past > 0 && pc->streak < UINT32_MAX) pc->streak++;
}

void sm_prefix_insert(sm_prefix *pc, const sm_state *s, size_t seq, const int32_t *tokens,
                      size_t n, size_t keep) {
    insert(pc, s, seq, tokens, n, NULL, NULL, keep);
}

void sm_prefix_put(sm_prefix *pc, const int32_t *tokens, size_t n_blocks, const void *blocks,
                   const bool *whole) {
    insert(pc, NULL, 0, tokens, n_blocks * B, blocks, whole, n_blocks);
}

size_t sm_prefix_block_bytes(const sm_prefix *pc) {
    return pc->block_bytes;
}

size_t sm_prefix_hottest(const sm_prefix *pc, int32_t *tokens, const void **blocks, bool *whole,
                         size_t max_blocks) {
    size_t d = 0;
    for (uint32_t parent = NONE; d < max_blocks; d++) {
        uint32_t best = NONE;
        for (uint32_t i = 0; i < pc->n_nodes; i++) {
            const node *x = &pc->nodes[i];
            if (x->live && x->parent == parent && x->loads > 0 &&
                (best == NONE || x->loads > pc->nodes[best].loads))
                best = i;
        }
        if (best == NONE) break;
        memcpy(tokens + d * B, pc->nodes[best].tok, sizeof pc->nodes[best].tok);
        blocks[d] = pc->data + (size_t)best * pc->block_bytes;
        whole[d] = pc->nodes[best].whole;
        parent = best;
    }
    return d;
}

sm_prefix_stats sm_prefix_stats_of(const sm_prefix *pc) {
    sm_prefix_stats st = pc->st;
    st.blocks = 0;
    for (size_t i = 0; i < pc->n_nodes; i++) st.blocks += pc->nodes[i].live;
    st.bytes = st.blocks * (pc->block_bytes + sizeof(node));
    return st;
}
