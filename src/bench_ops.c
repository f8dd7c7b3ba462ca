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

/* The cases: the shapes of a model of ~1B parameters' layers, one head's attention. */
static const struct {
    sm_kernels_op op;
    const char *what;
    sm_dtype dt;
    size_t T, N, K; /* attention: T queries, N heads of K dimensions */
    size_t pos;     /* attention: the first query's position */
    double set;     /* bytes the weights cycle through (0: one copy, warm in the caches) */
} cases[] = {
    {SM_KOP_GEMM, "f32, 64 rows x 2048 x 2048", SM_DTYPE_F32, 64, 2048, 2048, 0, 0},
    {SM_KOP_GEMM, "f16, 64 rows x 2048 x 2048", SM_DTYPE_F16, 64, 2048, 2048, 0, 0},
    {SM_KOP_QGEMM, "q4_0, 64 rows x 2048 x 2048", SM_DTYPE_Q4_0, 64, 2048, 2048, 0, 0},
    {SM_KOP_QGEMM, "q8_0, 64 rows x 2048 x 2048", SM_DTYPE_Q8_0, 64, 2048, 2048, 0, 0},
    {SM_KOP_QGEMM, "q4_k, 64 rows x 2048 x 2048", SM_DTYPE_Q4_K, 64, 2048, 2048, 0, 0},
    {SM_KOP_ROWS, "f32, 1 row x 2048 x 2048, from memory", SM_DTYPE_F32, 1, 2048, 2048, 0, 96e6},
    {SM_KOP_ROWS, "f16, 1 row x 2048 x 2048, from memory", SM_DTYPE_F16, 1, 2048, 2048, 0, 96e6},
    {SM_KOP_ROWS, "f32, 1 row x 512 x 512, in cache", SM_DTYPE_F32, 1, 512, 512, 0, 0},
    {SM_KOP_ROWS, "f32, 8 rows x 2048 x 2048, from memory", SM_DTYPE_F32, 8, 2048, 2048, 0, 96e6},
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
    int i;               /* into cases[] */
    const sm_kernels *k; /* the table of the run under way */
    char *w;             /* weights: copies back to back; attention: keys then values per head */
    size_t copy_bytes, copies, cur;
    float *x, *out, *scratch;
    size_t scratch_floats; /* per thread */
    size_t ctx;            /* attention: keys per head (padded) */
};

size_t sm_bench_n_cases(void) {
    return N_CASES;
}

sm_kernels_op sm_bench_case_op(size_t i) {
    return cases[i].op;
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

sm_status sm_bench_case_new(sm_bench_case **out, size_t i, int n_threads, sm_error *err) {
    *out = NULL;
    if (i >= N_CASES) return sm_error_set(err, SM_ERR_INPUT, "no case %zu", i);
    sm_bench_case *c = calloc(1, sizeof *c);
    if (!c) return sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    c->i = (int)i;
    const size_t T = cases[i].T, N = cases[i].N, K = cases[i].K;
    const bool att = cases[i].op == SM_KOP_ATTENTION;
    uint64_t s = 0x5eed + i;
    if (att) {
        c->ctx = sm_attn_ctx_padded(cases[i].pos + T);
        c->copy_bytes = 2 * K * c->ctx * sm_dtype_row_bytes(cases[i].dt, 1); /* keys and values of a head */
        c->copies = N;
        c->scratch_floats = SM_ATTN_SCRATCH(K, c->ctx);
    } else {
        c->copy_bytes = sm_dtype_row_bytes(cases[i].dt, K) * N;
        c->copies = cases[i].set > 0 ? (size_t)(cases[i].set / (double)c->copy_bytes) + 1 : 1;
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
        ok = fill_weights(c->w, cases[i].dt, c->copy_bytes * c->copies / sm_dtype_row_bytes(cases[i].dt, K), K, &s);
    else if (ok) {
        ok = fill_weights(c->w, cases[i].dt, N, K, &s);
        for (size_t k = 1; ok && k < c->copies; k++) memcpy(c->w + k * c->copy_bytes, c->w, c->copy_bytes);
    }
    for (size_t j = 0; ok && j < xn; j++) c->x[j] = rnd(&s);
    if (!ok) {
        sm_bench_case_free(c);
        return sm_error_set(err, SM_ERR_NOMEM, "out of memory for the case '%s'", cases[i].what);
    }
    *out = c;
    return SM_OK;
}

void sm_bench_case_free(sm_bench_case *c) {
    if (!c) return;
    sm_free_big(c->w);
    free(c->x), free(c->out), free(c->scratch), free(c);
}

/* One call of the case's operation, the threads splitting its columns (or heads) as the model does. */
static void case_task(void *arg, int ith, int nth) {
    sm_bench_case *c = arg;
    const size_t T = cases[c->i].T, N = cases[c->i].N, K = cases[c->i].K;
    float *scr = c->scratch + (size_t)ith * c->scratch_floats;
    size_t n0, n1;
    if (cases[c->i].op == SM_KOP_ATTENTION) {
        sm_pool_split(N, 1, ith, nth, &n0, &n1);
        size_t half = K * c->ctx * sm_dtype_row_bytes(cases[c->i].dt, 1);
        for (size_t h = n0; h < n1; h++) {
            const char *kv = c->w + h * c->copy_bytes;
            sm_kv_head head = {.kt = kv, .v = kv + half, .type = cases[c->i].dt};
            c->k->attention(c->out + h * K, c->x + h * K, &head, scr, T, cases[c->i].pos, K, N * K, N * K,
                            0.125f, 0);
        }
        return;
    }
    sm_pool_split(N, 16, ith, nth, &n0, &n1);
    if (n0 >= n1) return;
    const void *w = c->w + c->cur * c->copy_bytes;
    sm_kernels_op op = cases[c->i].op;
    if (op == SM_KOP_GEMM || op == SM_KOP_QGEMM)
        c->k->matmul(c->k, c->out, c->x, w, cases[c->i].dt, NULL, T, N, K, n0, n1, scr);
    else
        c->k->matmul_rows(c->k, c->out, c->x, w, cases[c->i].dt, NULL, T, N, K, n0, n1, scr);
}

double sm_bench_case_run(sm_bench_case *c, sm_pool *pool, const sm_kernels *k, size_t calls) {
    c->k = k;
    double t0 = sm_time_now();
    for (size_t n = 0; n < calls; n++) {
        c->cur = (c->cur + 1) % c->copies;
        sm_pool_run(pool, case_task, c);
    }
    return (sm_time_now() - t0) / (double)(calls ? calls : 1);
}

/* The linear layers of one block of the TinyLlama-1.1B shape: q, k, v, o, gate, up, down (N x K). */
static const size_t layer_nk[][2] = {{2048, 2048}, {256, 2048}, {256, 2048}, {2048, 2048},
                                     {5632, 2048}, {5632, 2048}, {2048, 5632}};
enum { N_LAYER = sizeof layer_nk / sizeof layer_nk[0], LAYER_KMAX = 5632, LAYER_NMAX = 5632 };

struct sm_bench_layer {
    sm_dtype dt;
    size_t T;
    char *w[N_LAYER];
    float *x, *out, *scratch;
    size_t scratch_floats; /* per thread */
    const sm_kernels *k;
    int cur; /* the product under way */
};

sm_status sm_bench_layer_new(sm_bench_layer **out, sm_dtype dt, size_t T, int n_threads, sm_error *err) {
    *out = NULL;
    sm_bench_layer *l = calloc(1, sizeof *l);
    if (!l) return sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    l->dt = dt, l->T = T;
    uint64_t s = 0x1a7e + (uint64_t)dt;
    l->scratch_floats = (scratch_floats(LAYER_KMAX) + 15) & ~(size_t)15;
    l->x = aligned_alloc(64, T * LAYER_KMAX * sizeof(float));
    l->out = aligned_alloc(64, T * LAYER_NMAX * sizeof(float));
    l->scratch = aligned_alloc(64, l->scratch_floats * (size_t)n_threads * sizeof(float));
    bool ok = l->x && l->out && l->scratch;
    for (int i = 0; ok && i < N_LAYER; i++) {
        l->w[i] = sm_alloc_big(sm_dtype_row_bytes(dt, layer_nk[i][1]) * layer_nk[i][0]);
        ok = l->w[i] && fill_weights(l->w[i], dt, layer_nk[i][0], layer_nk[i][1], &s);
    }
    for (size_t j = 0; ok && j < T * LAYER_KMAX; j++) l->x[j] = rnd(&s);
    if (!ok) {
        sm_bench_layer_free(l);
        return sm_error_set(err, SM_ERR_NOMEM, "out of memory for a TinyLlama layer of %zu rows", T);
    }
    *out = l;
    return SM_OK;
}

double sm_bench_layer_ops(const sm_bench_layer *l) {
    double ops = 0;
    for (int i = 0; i < N_LAYER; i++) ops += 2.0 * (double)l->T * (double)layer_nk[i][0] * (double)layer_nk[i][1];
    return ops;
}

/* One product of the layer, each thread taking its share of the output columns (multiples of 64). */
static void layer_task(void *arg, int ith, int nth) {
    sm_bench_layer *l = arg;
    const size_t N = layer_nk[l->cur][0], K = layer_nk[l->cur][1];
    size_t n0, n1;
    sm_pool_split(N, 64, ith, nth, &n0, &n1);
    if (n0 < n1)
        l->k->matmul(l->k, l->out, l->x, l->w[l->cur], l->dt, NULL, l->T, N, K, n0, n1,
                     l->scratch + (size_t)ith * l->scratch_floats);
}

double sm_bench_layer_run(sm_bench_layer *l, sm_pool *pool, const sm_kernels *k) {
    l->k = k;
    double t0 = sm_time_now();
    for (l->cur = 0; l->cur < N_LAYER; l->cur++) sm_pool_run(pool, layer_task, l);
    return sm_time_now() - t0;
}

void sm_bench_layer_free(sm_bench_layer *l) {
    if (!l) return;
    for (int i = 0; i < N_LAYER; i++) sm_free_big(l->w[i]);
    free(l->x), free(l->out), free(l->scratch), free(l);
}
