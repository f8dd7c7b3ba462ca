/*
** mask.c -- grammars bound to a vocabulary, and the masks of the tokens a
** sequence may sample next (sm_grammar.h).
**
** The vocabulary is a trie of the tokens' bytes laid out in preorder (a
** node's subtree is the nodes up to end[node]), so a walk that a dead
** state stops skips a subtree in one step. Binding walks the trie once per
** character-set position p of the grammar, from the stack "p, then
** whatever rule is around it": the tokens taken without leaving p's rule
** are p's own (a list, or a bitmap when many); the trie nodes where the walk
** leaves the rule are p's exits, to be walked at run time from the real
** stack below. A state's mask is then the union over its stacks of their
** positions' tokens and of their exits walked from the stack below, cached
** per state.
*/
#include "core.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MATCH_NODES 32768 /* a matcher's node table: rebuilt around the state when full */
#define MASK_CACHE 32 /* masks kept per matcher, by state (the least recently used goes) */
#define TBINS 400     /* mask times: bin k holds [1e-7 * 1.05^k, 1e-7 * 1.05^(k+1)) seconds */

typedef struct {
    uint32_t end;      /* one past the node's subtree */
    uint32_t tok_at;   /* the node's tokens: ids[tok_at .. tok_at + tok_n) */
    uint32_t tok_n;
    uint16_t depth;
    uint8_t byte;      /* the byte that leads to the node (root: none) */
} tnode;

struct sm_vtrie {
    const sm_tokenizer *tok;
    tnode *nd;         /* (n) in preorder, packed: a walk reads them in order */
    int32_t *ids;      /* tokens in byte order */
    size_t n, n_ids, max_depth;
};
typedef struct sm_vtrie vtrie;

typedef struct {
    int32_t *ids;      /* the tokens p takes within its rule (sorted), or */
    uint64_t *bits;    /* them as a bitmap (when many) */
    size_t n_ids;
    uint32_t *exits;   /* trie nodes where the walk leaves p's rule */
    size_t n_exits;
} ptable;

struct sm_gbind {
    const sm_grammar *g;
    const sm_tokenizer *tok;
    const vtrie *trie_p; /* the trie: the caller's, or own */
    vtrie own;
    ptable *pt;        /* (g->n_elems) per position (character sets only) */
    size_t words;      /* 64-bit words of a mask */
    int32_t ends[SM_MAX_STOP + 4];
    size_t n_ends;
};

struct sm_gmatch {
    sm_gbind *b;
    gc_core c;
    gc_at at;          /* the state, and a character the text ends inside */
    uint32_t epoch;    /* c's rebuilds: cached masks of older ids are stale */
    uint64_t *mask;    /* (words) the last mask */
    uint64_t *cache[MASK_CACHE];
    uint32_t cache_state[MASK_CACHE], cache_epoch[MASK_CACHE];
    uint64_t cache_used[MASK_CACHE], clock;
    gc_at *walk;       /* (max_depth + 1) a walk's place at each depth */
    uint32_t tbin[TBINS]; /* how long masks took (a histogram: no allocation per token) */
    size_t n_masks, n_hits;
    double t_total, t_max;
    bool failed;       /* the state outgrew the tables: nothing is allowed */
};

/* ---- the vocabulary trie */

static const sm_tokenizer *sort_tok;
static int cmp_piece(const void *a, const void *b) {
    size_t la, lb;
    const char *pa = sm_tokenizer_piece(sort_tok, *(const int32_t *)a, &la);
    const char *pb = sm_tokenizer_piece(sort_tok, *(const int32_t *)b, &lb);
    int c = memcmp(pa, pb, la < lb ? la : lb);
    if (c) return c;
    if (la != lb) return la < lb ? -1 : 1;
    return *(const int32_t *)a - *(const int32_t *)b;
}

static void trie_free(vtrie *t) {
    free(t->nd), free(t->ids);
    memset(t, 0, sizeof *t);
}

/* Whether token id can be generated as text: it has bytes and neither ends the text nor starts one. */
static bool text_token(const sm_tokenizer *tok, int32_t id) {
    size_t len;
    sm_tokenizer_piece(tok, id, &len);
    sm_tok_kind k = tok->type == SM_TOKENIZER_BYTE ? SM_TOK_NORMAL : sm_tokenizer_kind(tok, id);
    return len > 0 && k != SM_TOK_CONTROL && k != SM_TOK_UNUSED && !sm_tokenizer_is_end(tok, id) && id != tok->bos;
}

static sm_status trie_build(vtrie *t, const sm_tokenizer *tok) {
    memset(t, 0, sizeof *t);
    t->tok = tok;
    size_t nv = (size_t)tok->n_vocab, bytes = 0;
    t->ids = malloc(nv * sizeof *t->ids);
    if (!t->ids) return SM_ERR_NOMEM;
    for (int32_t id = 0; id < (int32_t)nv; id++) {
        if (!text_token(tok, id)) continue;
        size_t len;
        sm_tokenizer_piece(tok, id, &len);
        t->ids[t->n_ids++] = id;
        bytes += len;
        if (len > t->max_depth) t->max_depth = len;
    }
    sort_tok = tok; /* (bindings are made on one thread) */
    qsort(t->ids, t->n_ids, sizeof *t->ids, cmp_piece);
    size_t cap = bytes + 1;
    t->nd = calloc(cap, sizeof *t->nd);
    size_t *path = malloc((t->max_depth + 1) * sizeof *path);
    if (!t->nd || !path || t->max_depth > 65535) {
        free(path);
        trie_free(t);
        return SM_ERR_NOMEM;
    }
    t->n = 1;
    path[0] = 0;
    size_t depth = 0, plen = 0; /* the path's depth; the previous piece's length */
    const char *prev = "";
    for (size_t k = 0; k < t->n_ids; k++) {
        size_t len;
        const char *p = sm_tokenizer_piece(tok, t->ids[k], &len);
        size_t common = 0;
        while (common < len && common < plen && common < depth && p[common] == prev[common]) common++;
        while (depth > common) t->nd[path[depth--]].end = (uint32_t)t->n; /* close the nodes left */
        for (; depth < len; depth++) {
            size_t i = t->n++;
            t->nd[i].byte = (uint8_t)p[depth], t->nd[i].depth = (uint16_t)(depth + 1);
            path[depth + 1] = i;
        }
        size_t at = path[len];
        if (!t->nd[at].tok_n) t->nd[at].tok_at = (uint32_t)k;
        t->nd[at].tok_n++;
        prev = p, plen = len;
    }
    while (depth > 0) t->nd[path[depth--]].end = (uint32_t)t->n;
    t->nd[0].end = (uint32_t)t->n;
    free(path);
    return SM_OK;
}

/* ---- walks */

static void set_bit(uint64_t *m, int32_t id) {
    m[(size_t)id >> 6] |= 1ull << ((size_t)id & 63);
}

/* Tokens at trie node i into mask m, or (when list) appended to the list. */
static void take_tokens(const vtrie *t, size_t i, uint64_t *m, int32_t *list, size_t *n) {
    for (uint32_t k = 0; k < t->nd[i].tok_n; k++) {
        int32_t id = t->ids[t->nd[i].tok_at + k];
        if (m) set_bit(m, id);
        else list[(*n)++] = id;
    }
}

/*
** Walks the subtree of trie node top (its tokens too when with_top) from place
** `from` at top's depth, with core c. Tokens taken go to mask m (or the list).
** With exits (a binding), a place where the walk leaves the rule records the
** node in exits and goes on without it. walk: (max_depth + 1) places.
** GC_FULL: a fixed core filled up.
*/
static uint32_t walk(gc_core *c, const vtrie *t, size_t top, gc_at from, gc_at *w, uint64_t *m, int32_t *list,
                     size_t *n_list, uint32_t *exits, size_t *n_exits) {
    const tnode *nd = t->nd;
    w[nd[top].depth] = from;
    for (size_t i = top + 1, end = nd[top].end; i < end;) {
        size_t d = nd[i].depth;
        uint8_t byte = nd[i].byte;
        gc_at prev = w[d - 1], at;
        const uint32_t *row = c->rows + (size_t)(prev.s & (GC_ROWS - 1)) * 129;
        if (prev.part == 0 && byte < 0x80 && row[0] == prev.s + 1 && row[1 + byte]) /* a cached ASCII step */
            at = (gc_at){row[1 + byte] - 1, 0};
        else
            at = gc_step_byte(c, prev, byte);
        if (at.s == GC_FULL) return GC_FULL;
        if (at.s == GC_DEAD) {
            i = nd[i].end;
            continue;
        }
        if (exits && at.part == 0 && gc_has(c, at.s, GC_POP)) {
            exits[(*n_exits)++] = (uint32_t)i;
            at.s = gc_without_pop(c, at.s);
            if (at.s == GC_FULL) return GC_FULL;
            if (at.s == GC_DEAD) {
                i = nd[i].end;
                continue;
            }
        }
        w[d] = at;
        if (nd[i].tok_n) take_tokens(t, i, m, list, n_list);
        i++;
    }
    return 0;
}

/* ---- binding */

void sm_gbind_free(sm_gbind *b) {
    if (!b) return;
    for (size_t i = 0; b->pt && i < b->g->n_elems; i++) free(b->pt[i].ids), free(b->pt[i].bits), free(b->pt[i].exits);
    free(b->pt);
    trie_free(&b->own);
    free(b);
}

sm_status sm_vtrie_new(sm_vtrie **out, const sm_tokenizer *tok, sm_error *err) {
    *out = calloc(1, sizeof **out);
    if (!*out || trie_build(*out, tok)) {
        free(*out);
        *out = NULL;
        return sm_error_set(err, SM_ERR_NOMEM, "out of memory for the vocabulary's trie");
    }
    return SM_OK;
}

void sm_vtrie_free(sm_vtrie *t) {
    if (!t) return;
    trie_free(t);
    free(t);
}

sm_status sm_gbind_new(sm_gbind **out, const sm_grammar *g, const sm_tokenizer *tok, const sm_vtrie *trie,
                       sm_error *err) {
    *out = NULL;
    sm_gbind *b = calloc(1, sizeof *b);
    if (!b) return sm_error_set(err, SM_ERR_NOMEM, "out of memory binding the grammar");
    b->g = g, b->tok = tok;
    b->words = ((size_t)tok->n_vocab + 63) / 64;
    for (int32_t id = 0; id < tok->n_vocab && b->n_ends < sizeof b->ends / sizeof b->ends[0]; id++)
        if (sm_tokenizer_is_end(tok, id)) b->ends[b->n_ends++] = id;
    gc_core c = {0};
    int32_t *list = malloc((size_t)tok->n_vocab * sizeof *list);
    uint32_t *exits = NULL;
    gc_at *w = NULL;
    sm_status st = SM_OK;
    if (trie && trie->tok == tok) b->trie_p = trie;
    else if (!(st = trie_build(&b->own, tok))) b->trie_p = &b->own;
    const vtrie *t = b->trie_p;
    if (!st && !(b->pt = calloc(g->n_elems, sizeof *b->pt))) st = SM_ERR_NOMEM;
    if (!st && !(exits = malloc(t->n * sizeof *exits))) st = SM_ERR_NOMEM;
    if (!st && !(w = malloc((t->max_depth + 1) * sizeof *w))) st = SM_ERR_NOMEM;
    if (!st) st = gc_init(&c, g, 4096, false);
    for (size_t p = 0; !st && list && p < g->n_elems; p++) {
        if (g->elems[p].type != GE_CHARS) continue;
        gc_clear(&c); /* each position's walk is its own */
        uint32_t s0 = gc_expand(&c, (uint32_t)p, GC_SENT);
        size_t n = 0, n_exits = 0;
        if (s0 == GC_FULL ||
            walk(&c, t, 0, (gc_at){s0, 0}, w, NULL, list, &n, exits, &n_exits) == GC_FULL) {
            st = SM_ERR_NOMEM;
            break;
        }
        ptable *pt = &b->pt[p];
        pt->n_ids = n;
        if (n > b->words * 2) { /* many: a bitmap is smaller and faster to apply */
            if (!(pt->bits = calloc(b->words, sizeof *pt->bits))) st = SM_ERR_NOMEM;
            for (size_t k = 0; !st && k < n; k++) set_bit(pt->bits, list[k]);
        } else if (n && !(pt->ids = malloc(n * sizeof *pt->ids))) {
            st = SM_ERR_NOMEM;
        } else if (n) {
            memcpy(pt->ids, list, n * sizeof *list);
        }
        if (!st && n_exits && !(pt->exits = malloc(n_exits * sizeof *pt->exits))) st = SM_ERR_NOMEM;
        if (!st && n_exits) memcpy(pt->exits, exits, n_exits * sizeof *exits);
        pt->n_exits = n_exits;
    }
    if (!st && !list) st = SM_ERR_NOMEM;
    gc_free(&c);
    free(list), free(exits), free(w);
    if (st) {
        sm_gbind_free(b);
        return sm_error_set(err, st, "out of memory binding the grammar to the vocabulary");
    }
    *out = b;
    return SM_OK;
}

/* ---- matchers */

void sm_gmatch_free(sm_gmatch *m) {
    if (!m) return;
    gc_free(&m->c);
    free(m->mask), free(m->walk);
    for (size_t i = 0; i < MASK_CACHE; i++) free(m->cache[i]);
    free(m);
}

void sm_gmatch_reset(sm_gmatch *m) {
    /* the interned states stay (and the masks cached by them): the next sequence reuses them */
    m->at = (gc_at){gc_start(&m->c), 0};
    if (m->at.s == GC_FULL) { /* full: start afresh */
        gc_clear(&m->c);
        m->epoch++;
        m->at = (gc_at){gc_start(&m->c), 0};
    }
    m->failed = m->at.s == GC_FULL || m->at.s == GC_DEAD;
    if (m->at.s == GC_FULL) m->at.s = GC_DEAD;
}

sm_status sm_gmatch_new(sm_gmatch **out, sm_gbind *b, sm_error *err) {
    *out = NULL;
    sm_gmatch *m = calloc(1, sizeof *m);
    if (!m) return sm_error_set(err, SM_ERR_NOMEM, "out of memory for a grammar matcher");
    m->b = b;
    bool ok = gc_init(&m->c, b->g, MATCH_NODES, true) == SM_OK;
    ok = ok && (m->mask = malloc(b->words * sizeof *m->mask)) && (m->walk = malloc((b->trie_p->max_depth + 1) * sizeof *m->walk));
    for (size_t i = 0; ok && i < MASK_CACHE; i++) ok = (m->cache[i] = malloc(b->words * sizeof *m->cache[i])) != NULL;
    if (!ok) {
        sm_gmatch_free(m);
        return sm_error_set(err, SM_ERR_NOMEM, "out of memory for a grammar matcher");
    }
    sm_gmatch_reset(m);
    *out = m;
    return SM_OK;
}

/* The mask of place at into m->mask; GC_FULL if the core filled up. */
static uint32_t compute(sm_gmatch *m, gc_at at) {
    const sm_gbind *b = m->b;
    const vtrie *t = b->trie_p;
    gc_core *c = &m->c;
    memset(m->mask, 0, b->words * sizeof *m->mask);
    if (at.part) /* inside a character: the whole trie from here (only continuation bytes pass) */
        return walk(c, t, 0, at, m->walk, m->mask, NULL, NULL, NULL, NULL);
    uint32_t len;
    const uint32_t *nodes = gc_nodes(c, at.s, &len);
    for (uint32_t i = 0; i < len; i++) {
        uint32_t id = nodes[i];
        if (id == GC_ACCEPT) {
            for (size_t k = 0; k < b->n_ends; k++) set_bit(m->mask, b->ends[k]);
            continue;
        }
        if (id == GC_POP) continue;
        gc_node nd = c->nodes[id];
        const ptable *pt = &b->pt[nd.pos];
        if (pt->bits)
            for (size_t k = 0; k < b->words; k++) m->mask[k] |= pt->bits[k];
        else
            for (size_t k = 0; k < pt->n_ids; k++) set_bit(m->mask, pt->ids[k]);
        if (!pt->n_exits) continue;
        /* the tokens that leave the rule: walked on from the stack below */
        uint32_t below = nd.parent == GC_BOTTOM ? GC_DEAD : gc_node_state(c, nd.parent);
        if (below == GC_FULL) return GC_FULL;
        for (size_t k = 0; k < pt->n_exits; k++) {
            take_tokens(t, pt->exits[k], m->mask, NULL, NULL); /* they end where the rule ends */
            if (below != GC_DEAD &&
                walk(c, t, pt->exits[k], (gc_at){below, 0}, m->walk, m->mask, NULL, NULL, NULL, NULL) == GC_FULL)
                return GC_FULL;
            nodes = gc_nodes(c, at.s, &len); /* (the pool may have moved: it grows only in bindings) */
        }
    }
    return 0;
}

/* Rebuilds a full core around the current state; false if even that does not fit. */
static bool rebuild(sm_gmatch *m) {
    uint32_t s = gc_rebuild(&m->c, m->at.s);
    m->epoch++;
    if (s == GC_DEAD) {
        m->failed = true;
        m->at.s = GC_DEAD;
        return false;
    }
    m->at.s = s;
    return true;
}

/* The mask after prev where prev is the BOS a SentencePiece text starts with: each token's bytes as shown. */
static void mask_after_bos(sm_gmatch *m, int32_t prev) {
    const sm_gbind *b = m->b;
    memset(m->mask, 0, b->words * sizeof *m->mask);
    for (int32_t id = 0; id < b->tok->n_vocab && !m->failed; id++) {
        if (!text_token(b->tok, id)) continue;
        size_t len;
        const char *p = sm_tokenizer_piece_after(b->tok, prev, id, &len);
        if (len == 0) continue; /* no text after all (" " after BOS): it would not move the grammar */
        gc_at at = m->at;
        for (size_t k = 0; k < len && at.s != GC_DEAD && at.s != GC_FULL; k++) at = gc_step_byte(&m->c, at, (uint8_t)p[k]);
        if (at.s == GC_FULL) {
            if (!rebuild(m)) return;
            id = -1; /* start over with the rebuilt tables */
            memset(m->mask, 0, b->words * sizeof *m->mask);
            continue;
        }
        if (at.s != GC_DEAD) set_bit(m->mask, id);
    }
    if (!m->at.part && gc_has(&m->c, m->at.s, GC_ACCEPT))
        for (size_t k = 0; k < b->n_ends; k++) set_bit(m->mask, b->ends[k]);
}

static const uint64_t *mask_of(sm_gmatch *m, int32_t prev);

/* Counts a mask that took dt seconds. */
static void timed(sm_gmatch *m, double dt) {
    m->n_masks++, m->t_total += dt;
    if (dt > m->t_max) m->t_max = dt;
    int k = dt > 1e-7 ? (int)(log(dt / 1e-7) / log(1.05)) : 0;
    m->tbin[k < 0 ? 0 : k >= TBINS ? TBINS - 1 : k]++;
}

const uint64_t *sm_gmatch_mask(sm_gmatch *m, int32_t prev) {
    double t0 = sm_time_now();
    const uint64_t *r = mask_of(m, prev);
    timed(m, sm_time_now() - t0);
    return r;
}

sm_gmatch_stats sm_gmatch_timing(const sm_gmatch *m) {
    sm_gmatch_stats st = {.n = m->n_masks, .hits = m->n_hits, .total = m->t_total, .max = m->t_max};
    size_t acc = 0, half = (m->n_masks + 1) / 2, p99 = m->n_masks - m->n_masks / 100;
    for (int k = 0; k < TBINS; k++) {
        size_t before = acc;
        acc += m->tbin[k];
        double mid = 1e-7 * pow(1.05, k + 0.5);
        if (before < half && acc >= half) st.median = mid;
        if (before < p99 && acc >= p99) st.p99 = mid;
    }
    return st;
}

static const uint64_t *mask_of(sm_gmatch *m, int32_t prev) {
    const sm_gbind *b = m->b;
    if (m->failed || m->at.s == GC_DEAD) {
        memset(m->mask, 0, b->words * sizeof *m->mask);
        return m->mask;
    }
    if (prev >= 0 && prev == b->tok->bos && b->tok->space_prefix) {
        mask_after_bos(m, prev);
        if (m->failed) memset(m->mask, 0, b->words * sizeof *m->mask);
        return m->mask;
    }
    if (!m->at.part)
        for (size_t i = 0; i < MASK_CACHE; i++)
            if (m->cache_epoch[i] == m->epoch && m->cache_state[i] == m->at.s) {
                m->cache_used[i] = ++m->clock;
                m->n_hits++;
                return m->cache[i];
            }
    for (int tries = 0; compute(m, m->at) == GC_FULL; tries++)
        if (tries == 1 || !rebuild(m)) {
            m->failed = true;
            memset(m->mask, 0, b->words * sizeof *m->mask);
            return m->mask;
        }
    if (!m->at.part) { /* into the least recently used slot */
        size_t i = 0;
        for (size_t k = 1; k < MASK_CACHE; k++)
            if (m->cache_used[k] < m->cache_used[i]) i = k;
        memcpy(m->cache[i], m->mask, b->words * sizeof *m->mask);
        m->cache_state[i] = m->at.s, m->cache_epoch[i] = m->epoch, m->cache_used[i] = ++m->clock;
    }
    return m->mask;
}

sm_status sm_gmatch_accept(sm_gmatch *m, int32_t prev, int32_t id, sm_error *err) {
    const sm_gbind *b = m->b;
    if (m->failed) return sm_error_set(err, SM_ERR_RUNTIME, "the grammar's state outgrew its tables");
    if (sm_tokenizer_is_end(b->tok, id)) {
        if (!sm_gmatch_complete(m)) return sm_error_set(err, SM_ERR_INPUT, "the grammar does not end here");
        return SM_OK;
    }
    size_t len;
    const char *p = sm_tokenizer_piece_after(b->tok, prev, id, &len);
    if (!text_token(b->tok, id)) return sm_error_set(err, SM_ERR_INPUT, "token %d is not text", (int)id);
    for (size_t k = 0; k < len; k++) {
        gc_at at = gc_step_byte(&m->c, m->at, (uint8_t)p[k]);
        if (at.s == GC_FULL) {
            if (!rebuild(m)) return sm_error_set(err, SM_ERR_RUNTIME, "the grammar's state outgrew its tables");
            k--;
            continue;
        }
        if (at.s == GC_DEAD) return sm_error_set(err, SM_ERR_INPUT, "token %d breaks the grammar", (int)id);
        m->at = at;
    }
    return SM_OK;
}

/* Whether text can follow place at (a live state): inside a character, or a stack not yet at its end. */
static bool goes_on(const gc_core *c, gc_at at) {
    if (at.part) return true;
    uint32_t len;
    const uint32_t *n = gc_nodes(c, at.s, &len);
    for (uint32_t i = 0; i < len; i++)
        if (n[i] > GC_POP) return true;
    return false;
}

/*
** The bytes every continuation of place at starts with (at most cap): one
** byte at a time while exactly one byte can follow and the text could not
** end here. *hard: the text can go no further after them. 0 bytes when a
** fixed core fills up (the next mask rebuilds it).
*/
static size_t forced_bytes(gc_core *c, gc_at at, uint8_t *out, size_t cap, bool *hard) {
    size_t n = 0;
    *hard = false;
    while (n < cap) {
        if (!at.part && gc_has(c, at.s, GC_ACCEPT)) {
            *hard = !goes_on(c, at);
            return n;
        }
        gc_at only = {GC_DEAD, 0};
        int viable = 0;
        for (unsigned b = 0; b < 256 && viable < 2; b++) {
            gc_at nx = gc_step_byte(c, at, (uint8_t)b);
            if (nx.s == GC_FULL) return 0;
            if (nx.s != GC_DEAD) viable++, only = nx, out[n] = (uint8_t)b;
        }
        if (viable != 1) return n;
        at = only;
        n++;
    }
    return n;
}

size_t sm_gmatch_forced(sm_gmatch *m, int32_t prev, int32_t *ids, size_t cap) {
    const sm_gbind *b = m->b;
    const vtrie *t = b->trie_p;
    if (m->failed || m->at.s == GC_DEAD || cap == 0) return 0;
    if (prev >= 0 && prev == b->tok->bos && b->tok->space_prefix) return 0; /* first pieces show otherwise */
    uint8_t f[SM_FORCED_BYTES];
    bool hard;
    size_t nf = forced_bytes(&m->c, m->at, f, sizeof f, &hard), at = 0, n = 0;
    while (n < cap && at < nf) {
        /* the longest token that is a prefix of f[at..): it must end before f does (a
           longer token could run on past it) unless nothing can follow f */
        size_t i = 0, best = 0, best_len = 0;
        for (size_t d = at; d < nf;) {
            size_t j = i + 1, end = t->nd[i].end;
            while (j < end && t->nd[j].byte != f[d]) j = t->nd[j].end;
            if (j >= end) break;
            i = j, d++;
            if (t->nd[i].tok_n && (d < nf || hard)) best = i, best_len = d - at;
        }
        if (!best_len) break;
        /* of the tokens with these bytes, a normal one (SentencePiece's byte tokens spell
           single bytes that a normal piece also has) */
        const tnode *nd = &t->nd[best];
        int32_t id = t->ids[nd->tok_at];
        for (uint32_t k = 0; k < nd->tok_n; k++)
            if (sm_tokenizer_kind(b->tok, t->ids[nd->tok_at + k]) == SM_TOK_NORMAL) {
                id = t->ids[nd->tok_at + k];
                break;
            }
        ids[n++] = id;
        at += best_len;
    }
    return n;
}

bool sm_gmatch_complete(const sm_gmatch *m) {
    return !m->failed && !m->at.part && gc_has(&m->c, m->at.s, GC_ACCEPT);
}

bool sm_gmatch_can_continue(const sm_gmatch *m) {
    return !m->failed && m->at.s != GC_DEAD && goes_on(&m->c, m->at);
}

bool sm_grammar_accepts(const sm_grammar *g, const char *s, size_t n) {
    gc_core c;
    if (gc_init(&c, g, 4096, false)) return false;
    gc_at at = {gc_start(&c), 0};
    for (size_t i = 0; i < n && at.s != GC_DEAD && at.s != GC_FULL; i++) at = gc_step_byte(&c, at, (uint8_t)s[i]);
    bool ok = at.s != GC_DEAD && at.s != GC_FULL && !at.part && gc_has(&c, at.s, GC_ACCEPT);
    gc_free(&c);
    return ok;
}
