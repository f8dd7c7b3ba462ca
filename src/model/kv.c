/*
** kv.c -- a sequence's keys and values by positions, copied out of the
** state and back in (sm_model.h: sm_state_kv_get / sm_state_kv_put), for
** the prefix cache and the prompt-cache file.
**
** A range of n positions is laid out layer by layer, in each layer kv head
** by kv head, a head's keys (dimension by dimension, n positions each: the
** state's key blocks are runs of positions per dimension, so a range copies
** in runs) then its n values (hs each), every element in the state's
** kv_type: sm_state_kv_bytes(s) bytes per position. In the state a head's
** keys are blocked (sm_kv_key_at) and its values are rows in blocks
** (sm_kv_value_at); a sliding-window layer holds position p in slot p % ring.
*/
#include "model_internal.h"

#include <stdint.h>
#include <string.h>

size_t sm_model_kv_bytes(const sm_model *m, sm_dtype kv_type) {
    return (size_t)m->cfg->n_layer * 2 * m->kv_dim * sm_dtype_row_bytes(kv_type, 1);
}

size_t sm_model_kv_window(const sm_model *m, const sm_state_params *p) {
    size_t w = 0, S = p->n_seq ? p->n_seq : 1, B = p->max_batch > S ? p->max_batch : S;
    for (int l = 0; l < m->cfg->n_layer; l++)
        if (sm_kv_len(m, l, p->n_ctx, B) < sm_attn_ctx_padded(p->n_ctx) &&
            sm_config_window(m->cfg, l) > w)
            w = sm_config_window(m->cfg, l);
    return w;
}

size_t sm_state_kv_bytes(const sm_state *s) {
    return sm_model_kv_bytes(s->m, s->p.kv_type);
}

/* The sequence whose cache holds slot p of seq. */
static size_t holder(const sm_state *s, size_t seq, size_t p) {
    return p < s->kv_shared[seq] ? s->kv_src[seq] : seq;
}

/* Copies between the state's layer l of seq and a range buffer's; to_state picks the way. */
static void copy_layer(sm_state *s, size_t seq, int l, size_t p0, size_t n, char *buf,
                       bool to_state) {
    const size_t hs = (size_t)s->m->cfg->head_dim, KVH = (size_t)s->m->cfg->n_kv_head;
    const size_t eb = sm_dtype_row_bytes(s->p.kv_type, 1), ctx = s->kv_len[l];
    const size_t ring = ctx < sm_attn_ctx_padded(s->p.n_ctx) ? ctx : 0, bs = s->kv_bstride[l];
    for (size_t kh = 0; kh < KVH; kh++) {
        char *bk = buf + kh * 2 * n * hs * eb, *bv = bk + n * hs * eb;
        for (size_t i = 0; i < n;) {
            size_t p = ring ? (p0 + i) % ring : p0 + i; /* its slot */
            /* a run of slots in one key block (and before the ring wraps): one copy per dimension */
            size_t run = SM_ATTN_KBLOCK - p % SM_ATTN_KBLOCK;
            if (run > n - i) run = n - i;
            if (ring && run > ring - p) run = ring - p;
            size_t off = sm_kv_head_at(s, holder(s, seq, p), l, kh); /* a run is in one key block */
            char *kt = (char *)s->kt + off * eb, *vh = (char *)s->v + off * eb;
            for (size_t d = 0; d < hs; d++) {
                char *k = kt + sm_kv_key_at(bs, p, d) * eb, *b = bk + (d * n + i) * eb;
                memcpy(to_state ? k : b, to_state ? b : k, run * eb);
            }
            char *v = vh + sm_kv_value_at(bs, p, hs) * eb, *b = bv + i * hs * eb;
            memcpy(to_state ? v : b, to_state ? b : v, run * hs * eb);
            i += run;
        }
    }
}

bool sm_state_kv_get(const sm_state *s, size_t seq, size_t p0, size_t n, size_t end, void *dst) {
    const size_t lb = 2 * s->m->kv_dim * n * sm_dtype_row_bytes(s->p.kv_type, 1);
    bool whole = true;
    for (int l = 0; l < s->m->cfg->n_layer; l++) {
        char *b = (char *)dst + (size_t)l * lb;
        size_t ctx = s->kv_len[l];
        if (ctx < sm_attn_ctx_padded(s->p.n_ctx) && p0 + ctx < end) { /* overwritten in the ring */
            memset(b, 0, lb);
            whole = false;
            continue;
        }
        copy_layer((sm_state *)s, seq, l, p0, n, b, false);
    }
    return whole;
}

void sm_state_kv_put(sm_state *s, size_t seq, size_t p0, size_t n, const void *src) {
    sm_kv_will_write(s, seq, p0);
    const size_t lb = 2 * s->m->kv_dim * n * sm_dtype_row_bytes(s->p.kv_type, 1);
    for (int l = 0; l < s->m->cfg->n_layer; l++)
        copy_layer(s, seq, l, p0, n, (char *)src + (size_t)l * lb, true);
}

bool sm_state_kv_share(sm_state *s, size_t seq, size_t src, size_t n) {
    if (n == 0) {
        s->kv_shared[seq] = 0, s->kv_src[seq] = seq;
        return true;
    }
    if (src == seq || s->kv_shared[src] || n % SM_ATTN_KBLOCK || n > s->p.n_ctx ||
        sm_model_kv_window(s->m, &s->p))
        return false;
    s->kv_shared[seq] = n, s->kv_src[seq] = src;
    return true;
}

void sm_state_kv_copy(sm_state *s, size_t seq, size_t src, size_t n) {
    const size_t hs = (size_t)s->m->cfg->head_dim, KVH = (size_t)s->m->cfg->n_kv_head;
    const size_t eb = sm_dtype_row_bytes(s->p.kv_type, 1), B = SM_ATTN_KBLOCK * hs * eb;
    for (int l = 0; l < s->m->cfg->n_layer; l++)
        for (size_t kh = 0; kh < KVH; kh++)
            for (size_t p = 0; p < n; p += SM_ATTN_KBLOCK) { /* a key block and its values */
                const size_t blk = sm_kv_key_at(s->kv_bstride[l], p, 0);
                size_t to = sm_kv_head_at(s, seq, l, kh) + blk, from = sm_kv_head_at(s, holder(s, src, p), l, kh) + blk;
                memcpy((char *)s->kt + to * eb, (char *)s->kt + from * eb, B);
                memcpy((char *)s->v + to * eb, (char *)s->v + from * eb, B);
            }
}

void sm_kv_will_write(sm_state *s, size_t seq, size_t p0) {
    if (p0 < s->kv_shared[seq]) { /* never into the cache it shares: its own copy first */
        sm_state_kv_copy(s, seq, s->kv_src[seq], s->kv_shared[seq]);
        s->kv_shared[seq] = 0, s->kv_src[seq] = seq;
    }
    if (p0 < s->kv_low[seq]) s->kv_low[seq] = p0;
}

size_t sm_state_kv_shared(const sm_state *s, size_t seq, size_t *src) {
    *src = s->kv_src[seq];
    return s->kv_shared[seq];
}

size_t sm_state_kv_low(const sm_state *s, size_t seq) {
    return s->kv_low[seq];
}

void sm_state_kv_mark(sm_state *s, size_t seq) {
    s->kv_low[seq] = SIZE_MAX;
}

void sm_state_kv_reserve(sm_state *s, size_t seq, size_t n) {
    const size_t eb = sm_dtype_row_bytes(s->p.kv_type, 1), NL = (size_t)s->m->cfg->n_layer;
    const size_t b0 = s->kv_shared[seq] / SM_ATTN_KBLOCK; /* its own blocks: past a shared prefix */
    size_t budget = SM_KV_RESERVE_MAX / 2; /* of its keys (and as much of its values) */
    for (size_t l = 0; l < NL; l++) { /* each length's blocks are one stretch, from its first layer */
        if (!sm_kv_len_first(s, l)) continue;
        const size_t bb = s->kv_bstride[l] * eb, len = n < s->kv_len[l] ? n : s->kv_len[l];
        size_t b1 = (len + SM_ATTN_KBLOCK - 1) / SM_ATTN_KBLOCK;
        if (b1 > b0 + budget / bb) b1 = b0 + budget / bb;
        if (b1 <= b0) continue;
        const size_t at = sm_kv_head_at(s, seq, (int)l, 0) * eb + b0 * bb;
        sm_pages_populate((char *)s->kt + at, (b1 - b0) * bb);
        sm_pages_populate((char *)s->v + at, (b1 - b0) * bb);
        budget -= (b1 - b0) * bb;
    }
}
