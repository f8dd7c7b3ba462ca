/*
** bench_ops.c -- one operation of the kernel tables timed on a fixed case
** (sm_bench.h): what `bench --pick-kernels` compares table by table to
** choose, per operation, the table a CPU family should take it from.
*/
#include "sm_bench.h"

#include <stdlib.h>
#include <string.h>

#include "sm_half.h"
#include "sm_quant.h"

/* A case: one operation on fixed shapes. */
typedef struct {
    sm_kernels_op op;
    const char *what;
    sm_dtype dt;
    size_t T, N, K; /* attention: T queries, N heads of K dimensions */
    size_t pos;     /* attention: the first query's position */
    double set;     /* bytes the weights cycle through (0: one copy, warm in the caches) */
} case_desc;

/* --pick-kernels' cases: the shapes of a model of ~1B parameters' layers (and a 15M one's output), one head's attention. */
static const case_desc cases[] = {
    {SM_KOP_GEMM, "f32, 64 rows x 2048 x 2048", SM_DTYPE_F32, 64, 2048, 2048, 0, 0},
    {SM_KOP_GEMM, "f16, 64 rows x 2048 x 2048", SM_DTYPE_F16, 64, 2048, 2048, 0, 0},
    /* timed apart: which arithmetic bf16 weights' GEMM takes (vdpbf16ps or f32) */
    {SM_KOP_GEMM, "bf16, 64 rows x 2048 x 2048", SM_DTYPE_BF16, 64, 2048, 2048, 0, 0},
    {SM_KOP_QGEMM, "q4_0, 64 rows x 2048 x 2048", SM_DTYPE_Q4_0, 64, 2048, 2048, 0, 0},
    {SM_KOP_QGEMM, "q8_0, 64 rows x 2048 x 2048", SM_DTYPE_Q8_0, 64, 2048, 2048, 0, 0},
    {SM_KOP_QGEMM, "q4_k, 64 rows x 2048 x 2048", SM_DTYPE_Q4_K, 64, 2048, 2048, 0, 0},
    {SM_KOP_ROWS, "f32, 1 row x 2048 x 2048, from memory", SM_DTYPE_F32, 1, 2048, 2048, 0, 96e6},
    {SM_KOP_ROWS, "f16, 1 row x 2048 x 2048, from memory", SM_DTYPE_F16, 1, 2048, 2048, 0, 96e6},
    {SM_KOP_ROWS, "f32, 1 row x 512 x 512, in cache", SM_DTYPE_F32, 1, 512, 512, 0, 0},
    {SM_KOP_ROWS, "f32, 8 rows x 2048 x 2048, from memory", SM_DTYPE_F32, 8, 2048, 2048, 0, 96e6},
    /* a small model's short rows: the 15M shape's output layer */
    {SM_KOP_ROWS, "f32, 1 row x 32000 x 288, from memory", SM_DTYPE_F32, 1, 32000, 288, 0, 96e6},
    {SM_KOP_ROWS, "f16, 1 row x 32000 x 288, from memory", SM_DTYPE_F16, 1, 32000, 288, 0, 96e6},
    {SM_KOP_QROWS, "q4_0, 1 row x 2048 x 2048, from memory", SM_DTYPE_Q4_0, 1, 2048, 2048, 0, 96e6},
    {SM_KOP_QROWS, "q8_0, 1 row x 2048 x 2048, from memory", SM_DTYPE_Q8_0, 1, 2048, 2048, 0, 96e6},
    {SM_KOP_QROWS, "q4_k, 1 row x 2048 x 2048, from memory", SM_DTYPE_Q4_K, 1, 2048, 2048, 0, 96e6},
    {SM_KOP_QROWS, "q4_0, 8 rows x 2048 x 2048, from memory", SM_DTYPE_Q4_0, 8, 2048, 2048, 0, 96e6},
    {SM_KOP_ATTENTION, "f32 cache, 1 query over 1024 keys, 16 heads of 64", SM_DTYPE_F32, 1, 16, 64, 1023, 0},
    {SM_KOP_ATTENTION, "f16 cache, 1 query over 1024 keys, 16 heads of 64", SM_DTYPE_F16, 1, 16, 64, 1023, 0},
    {SM_KOP_ATTENTION, "f32 cache, 64 queries at 448, 16 heads of 64", SM_DTYPE_F32, 64, 16, 64, 448, 0},
};
enum { N_CASES = sizeof cases / sizeof cases[0] };

struct sm_bench_case {
    case_desc d;
    const sm_kernels *k; /* the table of the run under way */
    char *w;             /* weights: copies back to back; attention: keys then values per head */
    char *wr;            /* the same copies repacked (sm_kernels_repack), for the tables that take them */
    size_t copy_bytes, copies, cur;
    size_t rcopy_bytes;  /* a repacked copy's bytes (q4_k, q5_k: a few more than the file's) */
    float *x, *out, *scratch;
    size_t scratch_floats; /* per thread */
    size_t ctx;            /* attention: keys per head (padded) */
    void *xshared;         /* the threads' shared quantized activations (sm_kernels_share_open) */
    sm_pool *pool;         /* the run's */
};

size_t sm_bench_n_cases(void) {
    return N_CASES;
}

sm_kernels_op sm_bench_case_op(size_t i) {
    return cases[i].op;
}

sm_dtype sm_bench_case_dtype(size_t i) {
    return cases[i].dt;
}

size_t sm_bench_case_rows(size_t i) {
    return cases[i].T;
}

const char *sm_bench_case_what(size_t i) {
    return cases[i].what;
}

static float rnd(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(*s >> 40) / (double)(1ull << 24)) - 0.5f;
}

/* One copy of the weights: random values of dt (a band of 64 rows quantized, then repeated). */
static bool fill_weights(char *w, sm_dtype dt, size_t N, size_t K, uint64_t *s) {
    if (dt != sm_dtype_base(dt)) { /* a repacked layout: its file type's rows, then repacked */
        char *t = malloc(sm_dtype_row_bytes(sm_dtype_base(dt), K) * N);
        bool ok = t && fill_weights(t, sm_dtype_base(dt), N, K, s);
        if (ok) sm_kernels_repack(w, t, sm_dtype_base(dt), N, K, 0, N / SM_R32);
        free(t);
        return ok;
    }
    size_t band = N < 64 ? N : 64, bb = sm_dtype_row_bytes(dt, K) * band;
    float *f = malloc(band * K * sizeof *f);
    if (!f) return false;
    for (size_t i = 0; i < band * K; i++) f[i] = rnd(s);
    if (dt == SM_DTYPE_F32)
        memcpy(w, f, bb);
    else if (dt == SM_DTYPE_F16 || dt == SM_DTYPE_BF16)
        for (size_t i = 0; i < band * K; i++)
            ((uint16_t *)(void *)w)[i] = dt == SM_DTYPE_F16 ? sm_f32_to_f16(f[i]) : sm_f32_to_bf16(f[i]);
    else
        sm_quant_quantize(w, f, dt, band * K);
    free(f);
    for (size_t r = band; r < N; r += band)
        memcpy(w + r / band * bb, w, N - r < band ? sm_dtype_row_bytes(dt, K) * (N - r) : bb);
    return true;
}

/* Floats of per-thread scratch the products of K columns need through any table this CPU runs. */
static size_t scratch_floats(size_t K) {
    const sm_kernels *avail[8];
    size_t nk = sm_kernels_available(avail, 8), most = 0;
    for (size_t t = 0; t < nk; t++) {
        size_t f = sm_kernels_scratch(avail[t], K);
        if (f > most) most = f;
    }
    return most;
}

/* Bytes of the threads' shared activations for products of T rows of K through any table this
   CPU runs (0: none shares). */
static size_t share_bytes(size_t K, size_t T) {
    const sm_kernels *avail[8];
    size_t nk = sm_kernels_available(avail, 8), most = 0;
    for (size_t t = 0; t < nk; t++) {
        size_t b = sm_kernels_share_bytes(avail[t], K, T);
        if (b > most) most = b;
    }
    return most;
}

/* A case of d, its random values from seed: weights (in copies), inputs, per-thread scratch. */
static sm_status case_make(sm_bench_case **out, const case_desc *d, uint64_t seed, int n_threads,
                           sm_error *err) {
    *out = NULL;
    sm_bench_case *c = calloc(1, sizeof *c);
    if (!c) return sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    c->d = *d;
    const size_t T = d->T, N = d->N, K = d->K;
    const bool att = d->op == SM_KOP_ATTENTION;
    uint64_t s = seed;
    if (att) {
        c->ctx = sm_attn_ctx_padded(d->pos + T);
        c->copy_bytes = 2 * K * c->ctx * sm_dtype_row_bytes(d->dt, 1); /* keys and values of a head */
        c->copies = N;
        c->scratch_floats = SM_ATTN_SCRATCH(K, c->ctx);
    } else {
        c->copy_bytes = sm_dtype_row_bytes(d->dt, K) * N;
        c->copies = d->set > 0 ? (size_t)(d->set / (double)c->copy_bytes) + 1 : 1;
        c->scratch_floats = scratch_floats(K);
    }
    c->scratch_floats = (c->scratch_floats + 15) & ~(size_t)15;
    size_t xn = T * (att ? N * K : K), on = T * (att ? N * K : N);
    c->w = sm_alloc_big(c->copy_bytes * c->copies);
    c->x = aligned_alloc(64, (xn * sizeof(float) + 63) & ~(size_t)63);
    c->out = aligned_alloc(64, (on * sizeof(float) + 63) & ~(size_t)63);
    c->scratch = aligned_alloc(64, c->scratch_floats * (size_t)n_threads * sizeof(float));
    bool ok = c->w && c->x && c->out && c->scratch;
    if (ok && att) /* every head's keys and values: rows of K */
        ok = fill_weights(c->w, d->dt, c->copy_bytes * c->copies / sm_dtype_row_bytes(d->dt, K), K, &s);
    else if (ok) {
        ok = fill_weights(c->w, d->dt, N, K, &s);
        for (size_t k = 1; ok && k < c->copies; k++) memcpy(c->w + k * c->copy_bytes, c->w, c->copy_bytes);
    }
    /* the types a table may repack (f32 panels, the quantized layouts): the same values
       repacked, which sessions hand the tables that take them (fill_weights from the seed
       again, then copies as above) */
    sm_dtype rt = sm_kernels_repacked(d->dt);
    if (ok && !att && rt != d->dt && sm_kernels_repackable(d->dt, N, K) && N % SM_R32 == 0) {
        uint64_t s0 = seed;
        c->rcopy_bytes = sm_dtype_row_bytes(rt, K) * N;
        ok = (c->wr = sm_alloc_big(c->rcopy_bytes * c->copies)) != NULL && fill_weights(c->wr, rt, N, K, &s0);
        for (size_t k = 1; ok && k < c->copies; k++) memcpy(c->wr + k * c->rcopy_bytes, c->wr, c->rcopy_bytes);
    }
    const size_t xb = ok && !att && d->op == SM_KOP_QGEMM ? share_bytes(K, T) : 0;
    if (xb) /* as a model's products quantize x: once between the threads */
        ok = (c->xshared = aligned_alloc(64, (xb + 63) & ~(size_t)63)) != NULL;
    for (size_t j = 0; ok && j < xn; j++) c->x[j] = rnd(&s);
    if (!ok) {
        sm_bench_case_free(c);
        return sm_error_set(err, SM_ERR_NOMEM, "out of memory for the case '%s'", d->what);
    }
    *out = c;
    return SM_OK;
}

sm_status sm_bench_case_new(sm_bench_case **out, size_t i, int n_threads, sm_error *err) {
    *out = NULL;
    if (i >= N_CASES) return sm_error_set(err, SM_ERR_INPUT, "no case %zu", i);
    return case_make(out, &cases[i], 0x5eed + i, n_threads, err);
}

void sm_bench_case_free(sm_bench_case *c) {
    if (!c) return;
    sm_free_big(c->w);
    sm_free_big(c->wr);
    free(c->x), free(c->out), free(c->scratch), free(c->xshared), free(c);
}

/* One call of the case's operation, the threads splitting its columns (or heads) as the model does. */
static void case_task(void *arg, int ith, int nth) {
    sm_bench_case *c = arg;
    const size_t T = c->d.T, N = c->d.N, K = c->d.K;
    float *scr = c->scratch + (size_t)ith * c->scratch_floats;
    size_t n0, n1;
    if (c->d.op == SM_KOP_ATTENTION) {
        sm_pool_split(N, 1, ith, nth, &n0, &n1);
        size_t half = K * c->ctx * sm_dtype_row_bytes(c->d.dt, 1);
        for (size_t h = n0; h < n1; h++) {
            const char *kv = c->w + h * c->copy_bytes;
            sm_kv_head head = {.kt = kv, .v = kv + half, .type = c->d.dt};
            c->k->attention(c->out + h * K, c->x + h * K, &head, scr, T, c->d.pos, K, 1, N * K, N * K,
                            0.125f, 0);
        }
        return;
    }
    sm_pool_split(N, 64, ith, nth, &n0, &n1); /* whole panels of the packed products (32 rows) */
    const bool rep = c->wr && sm_kernels_repack_types(c->k) >> c->d.dt & 1;
    const void *w = rep ? c->wr + c->cur * c->rcopy_bytes : c->w + c->cur * c->copy_bytes;
    const sm_dtype dt = rep ? sm_kernels_repacked(c->d.dt) : c->d.dt;
    sm_kernels_op op = c->d.op;
    if (op == SM_KOP_QGEMM && sm_kernels_share_open(c->k, c->xshared, scr, 0, c->x, dt, T, K, ith, nth)) {
        sm_pool_barrier(c->pool); /* the model's way (forward.c, reuse_open): every thread, columns or none */
        if (n0 < n1) c->k->matmul(c->k, c->out, c->x, w, dt, NULL, T, N, K, n0, n1, scr);
        sm_kernels_reuse_end(scr);
    } else if (n0 >= n1) {
        return;
    } else if (op == SM_KOP_GEMM || op == SM_KOP_QGEMM)
        c->k->matmul(c->k, c->out, c->x, w, dt, NULL, T, N, K, n0, n1, scr);
    else
        c->k->matmul_rows(c->k, c->out, c->x, w, dt, NULL, T, N, K, n0, n1, scr);
}

double sm_bench_case_run(sm_bench_case *c, sm_pool *pool, const sm_kernels *k, size_t calls) {
    c->k = k, c->pool = pool;
    double t0 = sm_time_now();
    for (size_t n = 0; n < calls; n++) {
        c->cur = (c->cur + 1) % c->copies;
        sm_pool_run(pool, case_task, c);
    }
    return (sm_time_now() - t0) / (double)(calls ? calls : 1);
}

/* The linear layers of one block of the TinyLlama-1.1B shape (N x K), each a case of T rows. */
static const struct {
    const char *what;
    size_t N, K;
} layer[] = {{"TinyLlama block: q", 2048, 2048},    {"TinyLlama block: k", 256, 2048},
             {"TinyLlama block: v", 256, 2048},     {"TinyLlama block: o", 2048, 2048},
             {"TinyLlama block: gate", 5632, 2048}, {"TinyLlama block: up", 5632, 2048},
             {"TinyLlama block: down", 2048, 5632}};
enum { N_LAYER = sizeof layer / sizeof layer[0] };

struct sm_bench_layer {
    sm_bench_case *c[N_LAYER];
};

sm_status sm_bench_layer_new(sm_bench_layer **out, sm_dtype dt, size_t T, int n_threads, sm_error *err) {
    *out = NULL;
    sm_bench_layer *l = calloc(1, sizeof *l);
    if (!l) return sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    const sm_kernels_op op = sm_dtype_quantized(dt) ? SM_KOP_QGEMM : SM_KOP_GEMM;
    for (int i = 0; i < N_LAYER; i++) {
        const case_desc d = {op, layer[i].what, dt, T, layer[i].N, layer[i].K, 0, 0};
        sm_status st = case_make(&l->c[i], &d, 0x1a7e + 8 * (uint64_t)dt + (uint64_t)i, n_threads, err);
        if (st) {
            sm_bench_layer_free(l);
            return st;
        }
    }
    *out = l;
    return SM_OK;
}

double sm_bench_layer_ops(const sm_bench_layer *l) {
    double ops = 0;
    for (int i = 0; i < N_LAYER; i++) ops += 2.0 * (double)l->c[i]->d.T * (double)layer[i].N * (double)layer[i].K;
    return ops;
}

/* x's floats read, as a model's step before a product leaves its input in the caches (not timed):
   the seven cases' inputs (35 MB at 512 rows) would otherwise each come from memory */
static float warm(const float *x, size_t n) {
    float s = 0;
    for (size_t i = 0; i < n; i += 16) s += x[i];
    return s;
}

double sm_bench_layer_run(sm_bench_layer *l, sm_pool *pool, const sm_kernels *k) {
    double t = 0;
    volatile float sink = 0;
    for (int i = 0; i < N_LAYER; i++) {
        sink += warm(l->c[i]->x, l->c[i]->d.T * l->c[i]->d.K);
        t += sm_bench_case_run(l->c[i], pool, k, 1);
    }
    (void)sink;
    return t;
}

void sm_bench_layer_free(sm_bench_layer *l) {
    if (!l) return;
    for (int i = 0; i < N_LAYER; i++) sm_bench_case_free(l->c[i]);
    free(l);
}
