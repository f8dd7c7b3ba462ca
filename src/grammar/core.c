/*
** core.c -- interned stacks and states of a grammar, and their steps over
** code points and bytes (core.h).
*/
#include "core.h"

#include <stdlib.h>
#include <string.h>

static uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

static size_t pow2(size_t n) {
    size_t p = 16;
    while (p < n) p *= 2;
    return p;
}

sm_status gc_init(gc_core *c, const sm_grammar *g, size_t nodes, bool fixed) {
    memset(c, 0, sizeof *c);
    c->g = g, c->fixed = fixed;
    c->node_cap = nodes < 64 ? 64 : nodes;
    c->node_hcap = pow2(c->node_cap * 2);
    c->state_cap = c->node_cap / 2 + 16;
    c->state_hcap = pow2(c->state_cap * 2);
    c->pool_cap = c->node_cap * 4;
    c->trans_cap = pow2(c->node_cap / 2);
    c->work_cap = c->node_cap * 2;
    c->nodes = malloc(c->node_cap * sizeof *c->nodes);
    c->node_hash = calloc(c->node_hcap, sizeof *c->node_hash);
    c->expanded = calloc(c->node_cap, sizeof *c->expanded);
    c->seen = calloc(c->node_cap, sizeof *c->seen);
    c->states = malloc(c->state_cap * sizeof *c->states);
    c->state_hash = calloc(c->state_hcap, sizeof *c->state_hash);
    c->pool = malloc(c->pool_cap * sizeof *c->pool);
    c->trans = calloc(c->trans_cap, sizeof *c->trans);
    c->work = malloc(c->work_cap * 2 * sizeof *c->work);
    c->out = malloc(c->work_cap * sizeof *c->out);
    c->rows = malloc((size_t)GC_ROWS * 129 * sizeof *c->rows);
    if (!c->rows || !c->nodes || !c->node_hash || !c->expanded || !c->seen || !c->states || !c->state_hash || !c->pool ||
        !c->trans || !c->work || !c->out) {
        gc_free(c);
        return SM_ERR_NOMEM;
    }
    gc_clear(c);
    return SM_OK;
}

void gc_free(gc_core *c) {
    free(c->nodes), free(c->node_hash), free(c->expanded), free(c->seen), free(c->states);
    free(c->state_hash), free(c->pool), free(c->trans), free(c->work), free(c->out), free(c->rows);
    memset(c, 0, sizeof *c);
}

void gc_clear(gc_core *c) {
    c->n_nodes = 2; /* the markers */
    c->nodes[GC_ACCEPT] = (gc_node){UINT32_MAX, GC_BOTTOM};
    c->nodes[GC_POP] = (gc_node){UINT32_MAX, GC_SENT};
    memset(c->node_hash, 0, c->node_hcap * sizeof *c->node_hash);
    memset(c->expanded, 0, c->node_cap * sizeof *c->expanded);
    memset(c->seen, 0, c->node_cap * sizeof *c->seen);
    memset(c->state_hash, 0, c->state_hcap * sizeof *c->state_hash);
    memset(c->trans, 0, c->trans_cap * sizeof *c->trans);
    for (size_t r = 0; r < GC_ROWS; r++) c->rows[r * 129] = 0;
    c->states[GC_DEAD] = (gc_state){0, 0, 0};
    c->n_states = 1, c->n_pool = 0, c->stamp = 0, c->full = false;
}

/* Doubles a growing core's node tables. */
static bool grow_nodes(gc_core *c) {
    size_t cap = c->node_cap * 2, hcap = c->node_hcap * 2;
    gc_node *n = realloc(c->nodes, cap * sizeof *n);
    if (n) c->nodes = n;
    uint32_t *e = realloc(c->expanded, cap * sizeof *e);
    if (e) c->expanded = e;
    uint32_t *s = realloc(c->seen, cap * sizeof *s);
    if (s) c->seen = s;
    uint32_t *h = calloc(hcap, sizeof *h);
    uint32_t *w = realloc(c->work, cap * 2 * 2 * sizeof *w);
    if (w) c->work = w;
    uint32_t *o = realloc(c->out, cap * 2 * sizeof *o);
    if (o) c->out = o;
    if (!n || !e || !s || !h || !w || !o) {
        free(h);
        return false;
    }
    memset(e + c->node_cap, 0, (cap - c->node_cap) * sizeof *e);
    memset(s + c->node_cap, 0, (cap - c->node_cap) * sizeof *s);
    for (size_t i = 2; i < c->n_nodes; i++) {
        size_t j = mix((uint64_t)c->nodes[i].pos << 32 | c->nodes[i].parent) & (hcap - 1);
        while (h[j]) j = (j + 1) & (hcap - 1);
        h[j] = (uint32_t)i + 1;
    }
    free(c->node_hash);
    c->node_hash = h, c->node_cap = cap, c->node_hcap = hcap, c->work_cap = cap * 2;
    return true;
}

/* The id of node (pos, parent), made if new; GC_FULL if no room. */
static uint32_t node_id(gc_core *c, uint32_t pos, uint32_t parent) {
    size_t j = mix((uint64_t)pos << 32 | parent) & (c->node_hcap - 1);
    for (uint32_t v; (v = c->node_hash[j]); j = (j + 1) & (c->node_hcap - 1))
        if (c->nodes[v - 1].pos == pos && c->nodes[v - 1].parent == parent) return v - 1;
    if (c->n_nodes + 1 >= c->node_cap) {
        if (c->fixed || c->node_cap >= GC_MAX_NODES || !grow_nodes(c)) {
            c->full = true;
            return GC_FULL;
        }
        return node_id(c, pos, parent);
    }
    uint32_t id = (uint32_t)c->n_nodes++;
    c->nodes[id] = (gc_node){pos, parent};
    c->node_hash[j] = id + 1;
    return id;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* The id of the state of sorted, distinct nodes n[0..len); GC_FULL if no room. */
static uint32_t state_id(gc_core *c, const uint32_t *n, size_t len) {
    if (len == 0) return GC_DEAD;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) h = mix(h ^ n[i]);
    size_t j = h & (c->state_hcap - 1);
    for (uint32_t v; (v = c->state_hash[j]); j = (j + 1) & (c->state_hcap - 1)) {
        const gc_state *s = &c->states[v - 1];
        if (s->hash == h && s->len == len && memcmp(c->pool + s->off, n, len * sizeof *n) == 0) return v - 1;
    }
    if (c->n_states + 1 >= c->state_cap || c->n_pool + len > c->pool_cap || (c->n_states + 1) * 2 > c->state_hcap) {
        if (c->fixed) {
            c->full = true;
            return GC_FULL;
        }
        size_t cap = c->state_cap * 2, hcap = c->state_hcap * 2, pcap = c->pool_cap * 2;
        while (pcap < c->n_pool + len) pcap *= 2;
        gc_state *st = realloc(c->states, cap * sizeof *st);
        if (st) c->states = st;
        uint32_t *pool = realloc(c->pool, pcap * sizeof *pool);
        if (pool) c->pool = pool;
        uint32_t *sh = calloc(hcap, sizeof *sh);
        if (!st || !pool || !sh) {
            free(sh);
            c->full = true;
            return GC_FULL;
        }
        for (size_t i = 1; i < c->n_states; i++) {
            size_t k = c->states[i].hash & (hcap - 1);
            while (sh[k]) k = (k + 1) & (hcap - 1);
            sh[k] = (uint32_t)i + 1;
        }
        free(c->state_hash);
        c->state_hash = sh, c->state_cap = cap, c->state_hcap = hcap, c->pool_cap = pcap;
        return state_id(c, n, len);
    }
    uint32_t id = (uint32_t)c->n_states++;
    memcpy(c->pool + c->n_pool, n, len * sizeof *n);
    c->states[id] = (gc_state){(uint32_t)c->n_pool, (uint32_t)len, h};
    c->n_pool += len;
    c->state_hash[j] = id + 1;
    return id;
}

/*
** Expands the n pairs (pos, parent) in c->work into a state: a character
** set's node is kept; a rule call becomes its alternatives, continuing with
** the element after the call (or, when that ends the alternative, with
** the caller's continuation: no stack grows by repetition); an
** alternative's end continues with the parent (ACCEPT below the root rule,
** POP at SENT).
*/
static uint32_t closure(gc_core *c, size_t n) {
    const sm_grammar *g = c->g;
    if (++c->stamp == 0) {
        memset(c->seen, 0, c->node_cap * sizeof *c->seen);
        c->stamp = 1;
    }
    size_t n_out = 0;
    bool accept = false, pop = false;
    while (n > 0) {
        n--;
        uint32_t pos = c->work[2 * n], parent = c->work[2 * n + 1];
        const sm_gelem *e = &g->elems[pos];
        if (e->type == GE_END) {
            if (parent == GC_BOTTOM) accept = true;
            else if (parent == GC_SENT) pop = true;
            else if (c->seen[parent] != c->stamp) {
                c->work[2 * n] = c->nodes[parent].pos, c->work[2 * n + 1] = c->nodes[parent].parent;
                n++;
            }
            continue;
        }
        uint32_t id = node_id(c, pos, parent);
        if (id == GC_FULL) return GC_FULL;
        if (c->seen[id] == c->stamp) continue;
        c->seen[id] = c->stamp;
        if (e->type == GE_CHARS) {
            c->out[n_out++] = id;
            continue;
        }
        uint32_t cont = g->elems[pos + 1].type == GE_END ? parent : node_id(c, pos + 1, parent);
        if (cont == GC_FULL) return GC_FULL;
        uint32_t a0 = g->rule_alt[e->v], a1 = g->rule_alt[e->v + 1];
        if (n + (a1 - a0) > c->work_cap) {
            if (c->fixed || !grow_nodes(c)) {
                c->full = true;
                return GC_FULL;
            }
        }
        for (uint32_t a = a0; a < a1; a++) {
            c->work[2 * n] = g->alts[a], c->work[2 * n + 1] = cont;
            n++;
        }
    }
    if (accept) c->out[n_out++] = GC_ACCEPT;
    if (pop) c->out[n_out++] = GC_POP;
    qsort(c->out, n_out, sizeof *c->out, cmp_u32);
    return state_id(c, c->out, n_out);
}

uint32_t gc_start(gc_core *c) {
    const sm_grammar *g = c->g;
    size_t n = 0;
    for (uint32_t a = g->rule_alt[g->root]; a < g->rule_alt[g->root + 1]; a++) {
        c->work[2 * n] = g->alts[a], c->work[2 * n + 1] = GC_BOTTOM;
        n++;
    }
    return closure(c, n);
}

uint32_t gc_expand(gc_core *c, uint32_t pos, uint32_t parent) {
    c->work[0] = pos, c->work[1] = parent;
    return closure(c, 1);
}

uint32_t gc_node_state(gc_core *c, uint32_t node) {
    if (c->expanded[node]) return c->expanded[node] - 1;
    uint32_t s = gc_expand(c, c->nodes[node].pos, c->nodes[node].parent);
    if (s != GC_FULL) c->expanded[node] = s + 1;
    return s;
}

uint32_t gc_step(gc_core *c, uint32_t s, uint32_t cp) {
    uint32_t *row = NULL;
    if (cp < 128) { /* a state's ASCII steps in a row: one load per step of a walk */
        row = c->rows + (size_t)(s & (GC_ROWS - 1)) * 129;
        if (row[0] != s + 1) {
            memset(row + 1, 0, 128 * sizeof *row);
            row[0] = s + 1;
        } else if (row[1 + cp]) {
            return row[1 + cp] - 1;
        }
    }
    uint64_t key = ((uint64_t)s << 21 | cp) + 1;
    gc_trans *t = &c->trans[mix(key) & (c->trans_cap - 1)];
    if (t->key == key) return t->to;
    const sm_grammar *g = c->g;
    uint32_t len;
    const uint32_t *n = gc_nodes(c, s, &len);
    size_t k = 0;
    for (uint32_t i = 0; i < len; i++) {
        if (n[i] <= GC_POP) continue;
        const gc_node *nd = &c->nodes[n[i]];
        if (sm_gset_has(g, &g->sets[g->elems[nd->pos].v], cp)) {
            c->work[2 * k] = nd->pos + 1, c->work[2 * k + 1] = nd->parent;
            k++;
        }
    }
    uint32_t to = k ? closure(c, k) : GC_DEAD;
    if (to != GC_FULL) *t = (gc_trans){key, to, 0};
    if (to != GC_FULL && row) row[1 + cp] = to + 1;
    return to;
}

bool gc_has(const gc_core *c, uint32_t s, uint32_t node) {
    uint32_t len;
    const uint32_t *n = gc_nodes(c, s, &len);
    for (uint32_t i = 0; i < len && n[i] <= node; i++)
        if (n[i] == node) return true;
    return false;
}

uint32_t gc_without_pop(gc_core *c, uint32_t s) {
    if (!gc_has(c, s, GC_POP)) return s;
    uint32_t len;
    const uint32_t *n = gc_nodes(c, s, &len);
    size_t k = 0;
    for (uint32_t i = 0; i < len; i++)
        if (n[i] != GC_POP) c->out[k++] = n[i];
    return state_id(c, c->out, k);
}

/* Whether state s takes some character in [lo, hi] (surrogates never). */
static bool takes_range(const gc_core *c, uint32_t s, uint32_t lo, uint32_t hi) {
    const sm_grammar *g = c->g;
    uint32_t len;
    const uint32_t *n = gc_nodes(c, s, &len);
    for (uint32_t i = 0; i < len; i++) {
        if (n[i] <= GC_POP) continue;
        const sm_gset *set = &g->sets[g->elems[c->nodes[n[i]].pos].v];
        if (lo < 0xD800 && sm_gset_meets(g, set, lo, hi < 0xD800 ? hi : 0xD7FF)) return true;
        if (hi > 0xDFFF && sm_gset_meets(g, set, lo > 0xDFFF ? lo : 0xE000, hi)) return true;
    }
    return false;
}

/* part: bits << 4 | length << 2 | bytes to come */
static gc_at step_byte(gc_core *c, gc_at at, uint8_t b);

gc_at gc_step_byte(gc_core *c, gc_at at, uint8_t b) {
    if (at.part == 0 && b < 0x80) return (gc_at){gc_step(c, at.s, b), 0};
    /* a byte of a multi-byte character: its step cached by (state, part, byte) */
    uint64_t key = ((uint64_t)at.s << 32 | (uint64_t)(at.part & 0xFFFFFF) << 8 | b) | 1ull << 63;
    gc_trans *t = &c->trans[mix(key) & (c->trans_cap - 1)];
    if (t->key == key) return (gc_at){t->to, t->part};
    gc_at r = step_byte(c, at, b);
    if (r.s != GC_FULL) *t = (gc_trans){key, r.s, r.part};
    return r;
}

static gc_at step_byte(gc_core *c, gc_at at, uint8_t b) {
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000}, max_cp[5] = {0, 0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
    gc_at dead = {GC_DEAD, 0};
    uint32_t bits, total, rest;
    if (at.part == 0) {
        if (b < 0x80) return (gc_at){gc_step(c, at.s, b), 0};
        if (b >= 0xC2 && b <= 0xDF) total = 2, bits = b & 0x1Fu;
        else if (b >= 0xE0 && b <= 0xEF) total = 3, bits = b & 0x0Fu;
        else if (b >= 0xF0 && b <= 0xF4) total = 4, bits = b & 0x07u;
        else return dead;
        rest = total - 1;
    } else {
        if ((b & 0xC0) != 0x80) return dead;
        bits = (at.part >> 4) << 6 | (b & 0x3Fu);
        total = (at.part >> 2) & 3u;
        total = total ? total : 4; /* 4 is stored as 0 in two bits */
        rest = (at.part & 3u) - 1;
    }
    uint32_t lo = bits << (6 * rest), hi = lo | ((1u << (6 * rest)) - 1);
    if (lo < min_cp[total]) lo = min_cp[total];
    if (hi > max_cp[total]) hi = max_cp[total];
    if (lo > hi) return dead;
    if (rest == 0) {
        if (bits >= 0xD800 && bits <= 0xDFFF) return dead;
        return (gc_at){gc_step(c, at.s, bits), 0};
    }
    if (!takes_range(c, at.s, lo, hi)) return dead;
    return (gc_at){at.s, bits << 4 | (total & 3u) << 2 | rest};
}

uint32_t gc_rebuild(gc_core *c, uint32_t s) {
    /* the stacks of s as position chains, bottom last: [len, terminal, pos_0 .. pos_len-1] per node */
    uint32_t len;
    const uint32_t *n = gc_nodes(c, s, &len);
    size_t cap = c->node_cap * 4, k = 0;
    uint32_t *chains = malloc(cap * sizeof *chains); /* a rare event: not per token */
    if (!chains) return GC_DEAD;
    for (uint32_t i = 0; i < len; i++) {
        if (n[i] <= GC_POP) {
            if (k + 2 > cap) goto fail;
            chains[k++] = 0, chains[k++] = n[i];
            continue;
        }
        size_t at = k;
        if (k + 2 > cap) goto fail;
        k += 2;
        uint32_t v = n[i], depth = 0;
        while (v != GC_BOTTOM && v != GC_SENT) {
            if (k + 1 > cap) goto fail;
            chains[k++] = c->nodes[v].pos;
            depth++;
            v = c->nodes[v].parent;
        }
        chains[at] = depth, chains[at + 1] = v;
    }
    gc_clear(c);
    size_t m = 0;
    for (size_t i = 0; i < k;) {
        uint32_t depth = chains[i], v = chains[i + 1];
        for (uint32_t d = depth; d > 0; d--) {
            v = node_id(c, chains[i + 2 + d - 1], v);
            if (v == GC_FULL) goto fail;
        }
        c->out[m++] = v;
        i += 2 + depth;
    }
    free(chains);
    qsort(c->out, m, sizeof *c->out, cmp_u32);
    uint32_t r = state_id(c, c->out, m);
    return r == GC_FULL ? GC_DEAD : r;
fail:
    free(chains);
    return GC_DEAD;
}
