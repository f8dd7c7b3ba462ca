/*
** model.c -- model loading, state planning and carving, forward entry point.
**
** The state is laid out by one function, carve(), run twice: on a measuring
** arena to plan the size and on the real arena to form the pointers. The
** KV-cache is part of the state: per layer and head, keys are stored in
** blocks of SM_ATTN_KBLOCK positions, each transposed (hs, KBLOCK), so
** scores are a product with broadcast queries over contiguous memory, and
** values as (positions, hs) rows.
*/
#include "model_internal.h"
#include "sm_half.h"
#include "sm_quant.h"
#include "sm_source.h"

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

sm_status sm_model_open(sm_model **out, sm_source *src, sm_error *err) {
    *out = NULL;
    sm_model *m = calloc(1, sizeof *m);
    if (!m) {
        sm_source_close(src);
        return sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    }
    m->src = src;
    m->cfg = &src->cfg;
    m->w = &src->w;
    sm_status st = SM_OK;
    if (!src->w.data)
        st = sm_error_set(err, SM_ERR_INPUT, "%s: opened without its weights", src->path);
    else if ((st = m->cfg->arch == SM_ARCH_LLAMA ? sm_llama_bind(m, err) : sm_gpt2_bind(m, err))) {
        char msg[sizeof err->msg]; /* say which model: the GGUF file, the directory */
        snprintf(msg, sizeof msg, "%s", err->msg);
        sm_error_set(err, st, "%s: %s", src->path, msg);
    }
    if (st) {
        sm_model_free(m);
        return st;
    }
    for (size_t i = 0; i < m->cfg->n_tensors; i++) m->params += m->cfg->tensors[i].nelem;
    *out = m;
    return SM_OK;
}

sm_status sm_model_load(sm_model **out, const char *path, bool use_mmap, sm_error *err) {
    sm_source *src;
    *out = NULL;
    sm_status st = sm_source_open(&src, path, &(sm_source_opts){.read = !use_mmap}, err);
    return st ? st : sm_model_open(out, src, err);
}

void sm_model_free(sm_model *m) {
    if (!m) return;
    sm_free_big(m->r32);
    free(m->layers);
    sm_source_close(m->src);
    free(m);
}

/* A matrix of the model, its shape, and the bytes its repacked form takes (64-byte rounded). */
typedef struct {
    sm_mat *w;
    size_t N, K, bytes;
} mat_ref;

/* The model's matrices with their shapes, n of them (at most cap). */
static size_t matrices(sm_model *m, mat_ref *mats, size_t cap) {
    const sm_config *c = m->cfg;
    const size_t C = (size_t)c->n_embd, F = (size_t)c->n_ff, Q = m->q_dim, KV = m->kv_dim;
    size_t n = 0;
#define ADD(mat, rows, cols) \
    if ((mat).data && n < cap) mats[n++] = (mat_ref){&(mat), (rows), (cols), 0}
    for (int l = 0; l < c->n_layer; l++) {
        sm_layer *L = &m->layers[l];
        ADD(L->qkv_w, Q + 2 * KV, C);
        /* q, k, v apart: their products start at column Q and Q + KV of the fused output, and a
           repacked product's columns start at multiples of SM_R32 */
        if (Q % SM_R32 == 0 && KV % SM_R32 == 0) {
            ADD(L->q_w, Q, C);
            ADD(L->k_w, KV, C);
            ADD(L->v_w, KV, C);
        }
        ADD(L->proj_w, C, Q);
        ADD(L->gate_w, F, C);
        ADD(L->up_w, F, C);
        ADD(L->down_w, C, F);
    }
    /* a tied output layer too: its layout beside the file's rows the embedding reads (those
       pages leave with the rest, and a token's row comes back from the file when looked up) */
    ADD(m->out_w, (size_t)c->n_vocab, C);
#undef ADD
    return n;
}

/*
** The whole pages of a matrix just repacked, if they lie in a file mapped
** read-only, leave this process's memory (MADV_DONTNEED: a clean file page
** is found again in the file, or the page cache, if a state multiplying the
** file's rows reads it later), so the weights are held once, as with
** llama.cpp's repacked tensors. Read or made weights stay as they are.
** The range is first made a mapping of its own (MADV_NOHUGEPAGE splits
** it off): the file is mapped for 2 MiB page-cache folios, and a fault on
** a tensor beside it (a norm between two matrices) mapped its whole folio
** again, the released pages with it: 90 MB of a TinyLlama's file came back
** resident, 4 MB a layer.
*/
static void drop_pages(const sm_model *m, const void *p, size_t n) {
    if (!sm_source_file_backed(m->src, p, n)) return;
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), a = ((uintptr_t)p + pg - 1) & ~(pg - 1);
    uintptr_t b = ((uintptr_t)p + n) & ~(pg - 1);
    if (b > a) /* hints: failure changes nothing */
        madvise((void *)a, b - a, MADV_NOHUGEPAGE), madvise((void *)a, b - a, MADV_DONTNEED);
}

/* What each of a repack's threads is handed: the matrices, and its share of each one's row groups. */
typedef struct {
    const sm_model *m;
    const mat_ref *all;
    size_t n, part, parts;
    void *dst;
} repack_part;

/* A thread's share of every matrix repacked, the file's pages of the share's rows released as
   soon as it is done: the file and its repacked copy are then held at once for a matrix at a
   time, not for the whole model (a q4_k_m TinyLlama's load peaked at 1.0 GB so). */
static void *repack_run(void *arg) {
    const repack_part *r = arg;
    for (size_t i = 0, at = 0; i < r->n; at += r->all[i++].bytes) {
        const mat_ref *a = &r->all[i];
        const size_t G = sm_kernels_row_groups(a->N), g0 = G * r->part / r->parts, g1 = G * (r->part + 1) / r->parts;
        if (g1 <= g0) continue;
        sm_kernels_repack((char *)r->dst + at, a->w->data, a->w->dt, a->N, a->K, g0, g1);
        const size_t rb = sm_dtype_row_bytes(a->w->dt, a->K), n1 = g1 * SM_R32 < a->N ? g1 * SM_R32 : a->N;
        drop_pages(r->m, (const char *)a->w->data + g0 * SM_R32 * rb, (n1 - g0 * SM_R32) * rb);
    }
    return NULL;
}

/*
** Every matrix's row groups split among up to n_threads threads, each writing its own share of
** the block (the first touch of a fresh block: the page zeroing is shared too). A thread that
** cannot be started leaves its share to the calling one.
*/
static void repack_all(const sm_model *m, const mat_ref *all, size_t n, void *dst, int n_threads) {
    enum { MAXT = 64 };
    size_t parts = n_threads < 1 ? 1 : n_threads > MAXT ? MAXT : (size_t)n_threads;
    repack_part part[MAXT];
    pthread_t th[MAXT];
    bool started[MAXT] = {false};
    for (size_t i = 0; i < parts; i++) part[i] = (repack_part){m, all, n, i, parts, dst};
    for (size_t i = 1; i < parts; i++) started[i] = pthread_create(&th[i], NULL, repack_run, &part[i]) == 0;
    repack_run(&part[0]);
    for (size_t i = 1; i < parts; i++)
        if (started[i]) pthread_join(th[i], NULL);
        else repack_run(&part[i]);
}

sm_status sm_model_repack(sm_model *m, unsigned types, int n_threads, sm_error *err) {
    if (m->r32 || !types) return SM_OK;
    size_t cap = (size_t)m->cfg->n_layer * 8 + 1, n = 0, total = 0;
    mat_ref *all = calloc(cap, sizeof *all);
    if (!all) return sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    for (size_t i = 0, k = matrices(m, all, cap); i < k; i++) { /* keep the ones repacked */
        mat_ref r = all[i];
        if (!(types >> r.w->dt & 1u) || !sm_kernels_repackable(r.w->dt, r.N, r.K)) continue;
        r.bytes = (sm_kernels_repacked_bytes(r.w->dt, r.N, r.K) + 63) & ~(size_t)63;
        total += r.bytes;
        all[n++] = r;
    }
    sm_status st = SM_OK;
    if (total && !(m->r32 = sm_alloc_big(total)))
        st = sm_error_set(err, SM_ERR_NOMEM, "cannot allocate %zu bytes for the repacked weights "
                          "(--no-repack multiplies them as they are)", total);
    if (!st) repack_all(m, all, n, m->r32, n_threads);
    for (size_t i = 0, at = 0; i < n && !st; at += all[i++].bytes) {
        sm_mat *w = all[i].w;
        w->r32 = (char *)m->r32 + at;
        /* the pages at the threads' shares' edges, which no share covered whole */
        drop_pages(m, w->data, sm_dtype_row_bytes(w->dt, all[i].K) * all[i].N);
    }
    m->r32_bytes = st ? 0 : total;
    free(all);
    return st;
}

size_t sm_model_repacked_bytes(const sm_model *m) {
    return m->r32_bytes;
}

const void *sm_model_tensor_data(const sm_model *m, size_t i) {
    return i < m->cfg->n_tensors ? m->w->data[i] : NULL;
}

const sm_config *sm_model_config(const sm_model *m) {
    return m->cfg;
}

const sm_source *sm_model_source(const sm_model *m) {
    return m->src;
}

size_t sm_model_weight_bytes(const sm_model *m) {
    return sm_weights_bytes(m->w);
}

sm_status sm_model_check_weights(const sm_model *m, sm_error *err) {
    for (size_t i = 0; i < m->cfg->n_tensors; i++) {
        const sm_tensor_desc *d = &m->cfg->tensors[i];
        const void *x = m->w->data[i];
        size_t n = d->nelem, bad = 0, first = 0;
        if (sm_dtype_quantized(d->dtype)) { /* the scales are its only floats */
            size_t b = sm_quant_first_bad(x, d->dtype, n);
            if (b < n / sm_dtype_block(d->dtype))
                return sm_error_set(err, SM_ERR_FORMAT,
                                    "tensor %s: block %zu has a NaN or infinite scale", d->name, b);
            continue;
        }
        for (size_t k = 0; k < n; k++)
            if (!isfinite(sm_elem_f32(x, d->dtype, k)) && bad++ == 0) first = k;
        if (bad)
            return sm_error_set(err, SM_ERR_FORMAT,
                                "tensor %s: %zu of %zu weights are NaN or infinite (the first is "
                                "element %zu, %s)",
                                d->name, bad, n, first,
                                isnan(sm_elem_f32(x, d->dtype, first)) ? "NaN" : "inf");
    }
    return SM_OK;
}

size_t sm_model_params(const sm_model *m) {
    return m->params;
}

size_t sm_kv_len(const sm_model *m, int l, size_t n_ctx, size_t rows) {
    size_t full = sm_attn_ctx_padded(n_ctx), w = sm_config_window(m->cfg, l);
    size_t ring = w ? sm_attn_ctx_padded(w + rows - 1) : full;
    return ring < full ? ring : full;
}

static size_t kv_elems(const sm_model *m, size_t n_ctx, size_t rows) {
    /* per K or V, one sequence */
    size_t n = 0;
    for (int l = 0; l < m->cfg->n_layer; l++) n += m->kv_dim * sm_kv_len(m, l, n_ctx, rows);
    return n;
}

static size_t n_seq(const sm_state_params *p) {
    return p->n_seq ? p->n_seq : 1;
}

/* The most tokens a call of sm_state_forward_rows takes (row_logits within 1..max_batch). */
static size_t row_logits(const sm_state_params *p) {
    size_t r = p->row_logits < p->max_batch ? p->row_logits : p->max_batch;
    return r ? r : 1;
}

/* Whether any block matrix of m is of a quantized type. */
static bool quantized_blocks(const sm_model *m) {
    for (int l = 0; l < m->cfg->n_layer; l++) {
        const sm_layer *L = &m->layers[l];
        const sm_mat *w[] = {&L->qkv_w, &L->q_w, &L->k_w, &L->v_w, &L->proj_w, &L->gate_w, &L->up_w, &L->down_w};
        for (size_t i = 0; i < sizeof w / sizeof *w; i++)
            if (w[i]->data && sm_dtype_quantized(w[i]->dt)) return true;
    }
    return false;
}

/* Lays the state out in `a` (measuring or real); records sizes in plan. */
static sm_state *carve(sm_arena *a, const sm_model *m, const sm_state_params *p,
                       sm_state_plan *plan) {
    const sm_config *c = m->cfg;
    size_t S = n_seq(p), B = p->max_batch > S ? p->max_batch : S;
    size_t C = (size_t)c->n_embd, V = (size_t)c->n_vocab, F = (size_t)c->n_ff;
    size_t Q = m->q_dim, W = m->q_dim + 2 * m->kv_dim;
    bool llama = c->arch == SM_ARCH_LLAMA;
    size_t logit_rows = p->all_logits ? B : row_logits(p) > S ? row_logits(p) : S;
    size_t mark = a->used;
    sm_state *s = sm_arena_alloc(a, 1, sizeof *s);
    size_t t0 = a->used;
    float *x = sm_arena_alloc(a, B * C, sizeof(float));
    float *xn = sm_arena_alloc(a, B * C, sizeof(float));
    float *xn_own = sm_arena_alloc(a, (size_t)p->n_threads * SM_FWD_OWN_ROWS * C, sizeof(float));
    float *qkv = sm_arena_alloc(a, B * W, sizeof(float));
    float *att = sm_arena_alloc(a, B * Q, sizeof(float));
    float *tmp = sm_arena_alloc(a, B * C, sizeof(float));
    float *hid = sm_arena_alloc(a, B * F, sizeof(float));
    float *up = llama ? sm_arena_alloc(a, B * F, sizeof(float)) : NULL;
    size_t half = (size_t)c->head_dim / 2;
    float *rcos = llama ? sm_arena_alloc(a, B * half, sizeof(float)) : NULL;
    float *rsin = llama ? sm_arena_alloc(a, B * half, sizeof(float)) : NULL;
    float *rfreq = llama ? sm_arena_alloc(a, half, sizeof(float)) : NULL;
    bool local = llama && c->rope_local_theta > 0;
    float *lcos = local ? sm_arena_alloc(a, B * half, sizeof(float)) : NULL;
    float *lsin = local ? sm_arena_alloc(a, B * half, sizeof(float)) : NULL;
    float *lfreq = local ? sm_arena_alloc(a, half, sizeof(float)) : NULL;
    size_t t1 = a->used;
    float *logits = sm_arena_alloc(a, logit_rows * V, sizeof(float));
    size_t t2 = a->used;
    size_t kv; /* all sequences' keys (or values); on overflow the arena reports it */
    if (!sm_size_mul(&kv, S, kv_elems(m, p->n_ctx, B))) kv = SIZE_MAX;
    size_t kvb = sm_dtype_row_bytes(p->kv_type, 1);
    void *kt = sm_arena_alloc(a, kv, kvb);
    void *v = sm_arena_alloc(a, kv, kvb);
    size_t t3 = a->used;
    size_t kmax = C > F ? C : F; /* the widest input of any product */
    size_t per = sm_kernels_scratch_rows(p->kernels, kmax > Q ? kmax : Q, B); /* a call's rows kept */
    size_t att_scr = SM_ATTN_SCRATCH((size_t)c->head_dim, p->n_ctx);
    if (att_scr > per) per = att_scr;
    per = (per + 15) & ~(size_t)15; /* keep each thread's slice 64-byte aligned */
    float *scratch = sm_arena_alloc(a, (size_t)p->n_threads * per, sizeof(float));
    /* a product's activations quantized once between the threads (repacked quantized weights,
       calls of many rows): one buffer for every thread */
    size_t share = p->n_threads > 1 && p->repack && quantized_blocks(m)
                       ? sm_kernels_share_bytes(p->kernels, kmax > Q ? kmax : Q, B) : 0;
    void *xshared = share ? sm_arena_alloc(a, share, 1) : NULL;
    sm_run *runs = sm_arena_alloc(a, S, sizeof(sm_run));
    sm_attn_row *att_rows = sm_arena_alloc(a, (size_t)p->n_threads * S, sizeof(sm_attn_row));
    const sm_attn_row **att_order = sm_arena_alloc(a, (size_t)p->n_threads * S, sizeof(sm_attn_row *));
    size_t NL = (size_t)c->n_layer;
    size_t *kv_lay = sm_arena_alloc(a, 3 * NL, sizeof(size_t));
    size_t *kv_share = sm_arena_alloc(a, 3 * S, sizeof(size_t));
    size_t t4 = a->used;
    plan->total = t4 - mark;
    plan->activations = t1 - t0;
    plan->logits = t2 - t1;
    plan->kv_cache = t3 - t2;
    plan->scratch = t4 - t3;
    if (!s) return NULL;
    memset(s, 0, sizeof *s);
    s->m = m;
    s->k = p->kernels;
    s->p = *p;
    s->x = x, s->xn = xn, s->xn_own = xn_own, s->qkv = qkv, s->att = att, s->tmp = tmp, s->hid = hid, s->up = up;
    s->rope_cos = rcos, s->rope_sin = rsin, s->rope_freq = rfreq;
    s->rope_cos_l = lcos, s->rope_sin_l = lsin, s->rope_freq_l = lfreq;
    s->logits = logits, s->kt = kt, s->v = v;
    s->scratch = scratch;
    s->scratch_floats = per;
    s->scratch_rows = B;
    s->xshared = xshared;
    s->kv_seq_elems = kv_elems(m, p->n_ctx, B);
    s->kv_off = kv_lay, s->kv_len = kv_lay + NL, s->kv_bstride = kv_lay + 2 * NL;
    for (size_t l = 0; l < NL; l++) s->kv_len[l] = sm_kv_len(m, (int)l, p->n_ctx, B);
    /* block-major per length: the layers of each distinct length (in order of their first),
       a block of each of their heads side by side, then the next block */
    const size_t hblock = m->kv_dim * SM_ATTN_KBLOCK; /* a layer's heads' blocks */
    for (size_t l = 0, off = 0; l < NL; l++) {
        size_t nl = 0, li = 0;
        if (!sm_kv_len_first(s, l)) continue; /* placed with its length's first layer */
        for (size_t j = l; j < NL; j++) nl += s->kv_len[j] == s->kv_len[l];
        for (size_t j = l; j < NL; j++) {
            if (s->kv_len[j] != s->kv_len[l]) continue;
            s->kv_off[j] = off + li++ * hblock;
            s->kv_bstride[j] = nl * hblock;
        }
        off += nl * m->kv_dim * s->kv_len[l];
    }
    s->kv_src = kv_share, s->kv_shared = kv_share + S, s->kv_low = kv_share + 2 * S;
    for (size_t i = 0; i < S; i++) s->kv_src[i] = i, s->kv_shared[i] = 0, s->kv_low[i] = 0;
    s->runs = runs, s->att_rows = att_rows, s->att_order = att_order;
    return s;
}

sm_status sm_state_plan_bytes(const sm_model *m, const sm_state_params *p, sm_state_plan *plan,
                              sm_error *err) {
    const sm_config *c = m->cfg;
    memset(plan, 0, sizeof *plan);
    if (p->n_ctx < 1 || p->n_ctx > (size_t)c->n_ctx)
        return sm_error_set(err, SM_ERR_INPUT, "context size %zu is outside 1..%d (the model's)",
                            p->n_ctx, c->n_ctx);
    if (p->max_batch < 1 || p->max_batch > p->n_ctx)
        return sm_error_set(err, SM_ERR_INPUT, "batch size %zu is outside 1..%zu", p->max_batch,
                            p->n_ctx);
    if (p->kv_type != SM_DTYPE_F32 && p->kv_type != SM_DTYPE_F16)
        return sm_error_set(err, SM_ERR_INPUT, "KV-cache type %s; it is f32 or f16",
                            sm_dtype_name(p->kv_type));
    if (p->n_seq > SM_MAX_SEQ)
        return sm_error_set(err, SM_ERR_INPUT, "%zu sequences; at most %d decode together",
                            p->n_seq, SM_MAX_SEQ);
    if (p->n_threads < 1 || !p->kernels)
        return sm_error_set(err, SM_ERR_INPUT, "thread count and kernels must be set");
    sm_arena meas;
    sm_arena_measure(&meas);
    carve(&meas, m, p, plan);
    if (meas.overflow)
        return sm_error_set(err, SM_ERR_NOMEM, "the run state's size overflows; reduce -c");
    return SM_OK;
}

/*
** Rotary frequencies theta^(-2i/hs), computed in float as llama2.c and
** PyTorch's Llama do, so the logits match theirs. The angles of a call's
** rows are computed from them as the call embeds its tokens
** (forward.c's embed), so memory and start-up time do not grow with the context.
*/
static void rope_freqs(sm_state *s) {
    const sm_config *c = s->m->cfg;
    size_t hs = (size_t)c->head_dim, half = hs / 2;
    for (size_t i = 0; i < half; i++) {
        double e = (double)(2 * i) / (double)hs, f = 1.0 / pow((double)c->rope_theta, e);
        if (c->rope_factor > 0) { /* llama3: long wavelengths slowed by factor, short ones kept */
            double wave = 2 * M_PI / f, ctx = (double)c->rope_orig_ctx;
            double lo = ctx / c->rope_low_freq, hi = ctx / c->rope_high_freq;
            if (wave > lo) {
                f /= c->rope_factor;
            } else if (wave >= hi) {
                double sm = (ctx / wave - c->rope_low_freq) / (c->rope_high_freq - c->rope_low_freq);
                f = (1 - sm) * f / c->rope_factor + sm * f;
            }
        }
        if (s->m->rope_div) f /= s->m->rope_div[i]; /* GGUF rope_freqs.weight */
        s->rope_freq[i] = (float)f;
        if (s->rope_freq_l) /* windowed layers: their own base, unscaled */
            s->rope_freq_l[i] = (float)(1.0 / pow((double)c->rope_local_theta, e));
    }
}

sm_status sm_state_init(sm_state **out, const sm_model *m, const sm_state_params *p,
                        sm_pool *pool, sm_arena *arena, sm_error *err) {
    *out = NULL;
    sm_state_plan plan;
    sm_status st = sm_state_plan_bytes(m, p, &plan, err);
    if (st) return st;
    if (!arena->base) { /* measuring: sizes only */
        carve(arena, m, p, &plan);
        return arena->overflow ? sm_error_set(err, SM_ERR_NOMEM, "the run state's size overflows")
                               : SM_OK;
    }
    if (sm_pool_threads(pool) != p->n_threads)
        return sm_error_set(err, SM_ERR_INPUT, "pool has %d threads, params say %d",
                            sm_pool_threads(pool), p->n_threads);
    sm_state *s = carve(arena, m, p, &plan);
    if (!s || arena->overflow)
        return sm_error_set(err, SM_ERR_NOMEM, "arena too small for the run state (%zu bytes)",
                            plan.total);
    s->pool = pool;
    if (s->rope_freq) rope_freqs(s);
    /* The cache is not cleared: every kernel reads only positions already
       written (masked loads), and untouched pages cost nothing until used.
       Laid out block-major, a sequence's used positions are the start of its
       cache, so huge pages hold only them: 16 GPT-2 sequences of 80 tokens
       fault in 2 blocks of 64 positions each, where a head-major cache on
       small pages took 30k page faults and a TLB miss per head (a batch's
       decode 16% slower), and on huge pages zeroed all 1.2 GB of it. */
    *out = s;
    return SM_OK;
}

const char *sm_op_name(sm_op op) {
    static const char *const names[SM_OP_COUNT] = {"matmul", "attention", "norm", "activation",
                                                   "output", "sampling"};
    return (unsigned)op < SM_OP_COUNT ? names[op] : "?";
}

void sm_state_set_cancel(sm_state *s, const volatile int *cancel) {
    s->cancel = cancel;
}

void sm_state_set_profile(sm_state *s, sm_profile *p) {
    s->prof = p;
}

static sm_status check_tokens(const sm_state *s, const int32_t *tokens, size_t n, sm_error *err) {
    const sm_config *c = s->m->cfg;
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= c->n_vocab)
            return sm_error_set(err, SM_ERR_INPUT, "token id %d is outside the vocabulary (0..%d)",
                                (int)tokens[i], c->n_vocab - 1);
    return SM_OK;
}

/* The arithmetic of the call in flight, roughly: every weight once per row (the output
** layer per logits row) and attention over each row's keys. The pool's width follows it. */
static double call_work(const sm_state *s) {
    const sm_config *c = s->m->cfg;
    double out = (double)c->n_vocab * (double)c->n_embd, att = 0;
    double blocks = (double)sm_model_params(s->m) - 2 * out;
    for (size_t g = 0; g < s->n_runs; g++)
        att += (double)s->runs[g].len * ((double)s->runs[g].pos + 0.5 * (double)s->runs[g].len);
    att *= 2.0 * (double)c->n_layer * (double)c->n_head * (double)c->head_dim;
    return (double)s->n * (blocks > 0 ? blocks : out) + (double)(s->every_row ? s->n : s->n_runs) * out + att;
}

/* Runs the call whose runs are in s->runs[0..n_runs) on the pool. */
static sm_status launch(sm_state *s, const int32_t *tokens, size_t n, size_t n_runs,
                        size_t n_packed, bool every_row, const float **logits, sm_error *err) {
    for (size_t g = 0; g < n_runs; g++) sm_kv_will_write(s, s->runs[g].seq, s->runs[g].pos);
    s->stop = false;
    s->tokens = tokens;
    s->n = n;
    s->n_runs = n_runs;
    s->n_packed = n_packed;
    s->every_row = every_row;
    if (s->prof) s->prof_t = sm_time_now();
    sm_pool_run_work(s->pool, sm_forward_task, s, call_work(s));
    if (s->stop) return sm_error_set(err, SM_ERR_CANCELLED, "interrupted");
    sm_fwd_prof_output(s);
    *logits = s->logits;
    return SM_OK;
}

/* One run of n tokens of sequence seq from pos, checked (at most `most` tokens), with the logits of
   every row or of the last. */
static sm_status one_run(sm_state *s, size_t seq, const int32_t *tokens, size_t n, size_t pos, size_t most,
                         bool every_row, const float **logits, sm_error *err) {
    if (seq >= n_seq(&s->p))
        return sm_error_set(err, SM_ERR_INPUT, "forward: sequence %zu, the state has %zu", seq,
                            n_seq(&s->p));
    if (n < 1 || n > most)
        return sm_error_set(err, SM_ERR_INPUT, "forward: %zu tokens%s, the state takes 1..%zu", n,
                            every_row && !s->p.all_logits ? " with logits each" : "", most);
    if (pos > s->p.n_ctx || n > s->p.n_ctx - pos)
        return sm_error_set(err, SM_ERR_INPUT, "forward: positions %zu..%zu exceed the context of %zu",
                            pos, pos + n - 1, s->p.n_ctx);
    sm_status st = check_tokens(s, tokens, n, err);
    if (st) return st;
    s->runs[0] = (sm_run){.start = 0, .len = n, .seq = seq, .pos = pos};
    return launch(s, tokens, n, 1, n, every_row, logits, err);
}

sm_status sm_state_forward_seq(sm_state *s, size_t seq, const int32_t *tokens, size_t n,
                               size_t pos, const float **logits, sm_error *err) {
    return one_run(s, seq, tokens, n, pos, s->p.max_batch, s->p.all_logits, logits, err);
}

sm_status sm_state_forward_rows(sm_state *s, size_t seq, const int32_t *tokens, size_t n, size_t pos,
                                const float **logits, sm_error *err) {
    return one_run(s, seq, tokens, n, pos, sm_state_row_logits(s), true, logits, err);
}

size_t sm_state_row_logits(const sm_state *s) {
    return row_logits(&s->p);
}

sm_status sm_state_forward(sm_state *s, const int32_t *tokens, size_t n, size_t pos,
                           const float **logits, sm_error *err) {
    return sm_state_forward_seq(s, 0, tokens, n, pos, logits, err);
}

sm_status sm_state_forward_many(sm_state *s, const int32_t *tokens, const size_t *seqs,
                                const size_t *poss, size_t n, const float **logits,
                                sm_error *err) {
    size_t S = n_seq(&s->p), B = s->p.max_batch > S ? s->p.max_batch : S;
    if (n < 1 || n > B)
        return sm_error_set(err, SM_ERR_INPUT, "forward: %zu rows, the state holds 1..%zu", n, B);
    size_t runs = 0, longest = 0;
    for (size_t i = 0; i < n; i++) {
        if (seqs[i] >= S)
            return sm_error_set(err, SM_ERR_INPUT, "forward: sequence %zu, the state has %zu",
                                seqs[i], S);
        if (poss[i] >= s->p.n_ctx)
            return sm_error_set(err, SM_ERR_INPUT, "forward: position %zu exceeds the context of %zu",
                                poss[i], s->p.n_ctx);
        sm_run *last = runs ? &s->runs[runs - 1] : NULL;
        if (last && seqs[i] == last->seq) { /* the run goes on */
            if (poss[i] != last->pos + last->len)
                return sm_error_set(err, SM_ERR_INPUT,
                                    "forward: sequence %zu's positions are not consecutive", seqs[i]);
            last->len++;
        } else {
            for (size_t r = 0; r < runs; r++)
                if (s->runs[r].seq == seqs[i])
                    return sm_error_set(err, SM_ERR_INPUT, "forward: sequence %zu given twice",
                                        seqs[i]);
            s->runs[runs++] = (sm_run){.start = i, .len = 1, .seq = seqs[i], .pos = poss[i]};
        }
        if (s->runs[runs - 1].len > longest) longest = s->runs[runs - 1].len;
    }
    size_t packed = 0; /* the rows of the runs of several tokens, which come first */
    for (size_t r = 0; r < runs && longest > 1; r++) {
        const sm_run *ru = &s->runs[r];
        if (ru->len == 1 && packed > 0) continue; /* a longer run after it: start != packed */
        if (ru->len < 4 || ru->len > s->p.max_batch || packed != ru->start)
            return sm_error_set(err, SM_ERR_INPUT,
                                "forward: a run of %zu tokens; runs are 4..%zu tokens each, "
                                "then 1 token each", ru->len, s->p.max_batch);
        packed += ru->len;
    }
    sm_status st = check_tokens(s, tokens, n, err);
    if (st) return st;
    return launch(s, tokens, n, runs, packed, false, logits, err);
}

sm_status sm_state_decode(sm_state *s, const int32_t *tokens, const size_t *seqs,
                          const size_t *poss, size_t n, const float **logits, sm_error *err) {
    for (size_t i = 1; i < n; i++)
        if (seqs[i] == seqs[i - 1])
            return sm_error_set(err, SM_ERR_INPUT, "decode: sequence %zu given twice", seqs[i]);
    return sm_state_forward_many(s, tokens, seqs, poss, n, logits, err);
}

sm_status sm_state_prefill_seq(sm_state *s, size_t seq, const int32_t *tokens, size_t n,
                               size_t pos, const float **logits, sm_error *err) {
    const size_t mb = s->p.max_batch;
    for (size_t done = 0; done < n;) { /* calls end at multiples of max_batch, wherever pos is */
        size_t k = mb - (pos + done) % mb;
        if (k > n - done) k = n - done;
        sm_status st = sm_state_forward_seq(s, seq, tokens + done, k, pos + done, logits, err);
        if (st) return st;
        done += k;
    }
    return SM_OK;
}

sm_status sm_state_prefill(sm_state *s, const int32_t *tokens, size_t n, size_t pos,
                           const float **logits, sm_error *err) {
    return sm_state_prefill_seq(s, 0, tokens, n, pos, logits, err);
}

const sm_state_params *sm_state_params_of(const sm_state *s) {
    return &s->p;
}

const sm_model *sm_state_model(const sm_state *s) {
    return s->m;
}
