/*
** bench.c -- memory bandwidth probes and the bytes a decode step reads (sm_bench.h).
*/
#include "sm_bench.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    float *a, *b, *c;
    size_t n;
} triad_job;

static void triad_init(void *arg, int ith, int nth) {
    triad_job *j = arg;
    size_t i0, i1;
    sm_pool_split(j->n, 1024, ith, nth, &i0, &i1); /* first touch by the thread that streams it */
    for (size_t i = i0; i < i1; i++) j->a[i] = 0, j->b[i] = 1, j->c[i] = 2;
}

static void triad_task(void *arg, int ith, int nth) {
    triad_job *j = arg;
    size_t i0, i1;
    sm_pool_split(j->n, 1024, ith, nth, &i0, &i1);
    for (size_t i = i0; i < i1; i++) j->a[i] = j->b[i] + 3.0f * j->c[i];
}

/* Seconds of the fastest of at least `reps` runs of fn on the pool, run for at least `seconds`
   in all (at most 100,000 runs): a working set the caches hold is read in a fraction of a
   millisecond, and on a shared machine five such reads may all meet another tenant. */
static double best_run(sm_pool *pool, sm_task_fn fn, void *arg, int reps, double seconds) {
    double best = 1e30, start = sm_time_now();
    for (int rep = 0; rep < 100000 && (rep < reps || sm_time_now() - start < seconds); rep++) {
        double t0 = sm_time_now();
        sm_pool_run(pool, fn, arg);
        double t = sm_time_now() - t0;
        if (t < best) best = t;
    }
    return best;
}

double sm_bench_triad(sm_pool *pool) {
    triad_job j = {.n = 16u << 20};
    j.a = malloc(j.n * sizeof(float));
    j.b = malloc(j.n * sizeof(float));
    j.c = malloc(j.n * sizeof(float));
    double bw = 0;
    if (j.a && j.b && j.c) {
        sm_pool_run(pool, triad_init, &j);
        bw = 12.0 * (double)j.n / best_run(pool, triad_task, &j, 5, 0);
    }
    free(j.a), free(j.b), free(j.c);
    return bw;
}

typedef struct {
    const sm_kernels *k;
    const float *buf;
    size_t n;   /* floats */
    float *sum; /* (nth) per-thread results, so the reads are not optimised away */
} read_job;

static void read_task(void *arg, int ith, int nth) {
    read_job *j = arg;
    size_t i0, i1;
    sm_pool_split(j->n, 1024, ith, nth, &i0, &i1); /* multiples of 1024 floats */
    j->sum[ith] = j->k->sum(j->buf + i0, i1 - i0);
}

double sm_bench_read(sm_pool *pool, const sm_kernels *k, double bytes) {
    if (bytes > (double)(1u << 30)) bytes = (double)(1u << 30);
    read_job j = {.k = k, .n = ((size_t)bytes / 4 + 1023) & ~(size_t)1023};
    float *buf = aligned_alloc(64, j.n * sizeof *buf);
    j.sum = calloc((size_t)sm_pool_threads(pool), sizeof *j.sum);
    double bw = 0;
    if (buf && j.sum) {
        for (size_t i = 0; i < j.n; i++) buf[i] = (float)(i & 255);
        j.buf = buf;
        sm_pool_run(pool, read_task, &j); /* warm-up: the working set into the caches */
        bw = 4.0 * (double)j.n / best_run(pool, read_task, &j, 5, 0.25);
    }
    free(buf), free(j.sum);
    return bw;
}

double sm_bench_kv_bytes(const sm_config *c, double ctx, sm_dtype kv_type) {
    double el = (double)sm_dtype_row_bytes(kv_type, 1);
    return 2.0 * (double)c->n_layer * (double)c->n_kv_head * (double)c->head_dim * el * ctx;
}

double sm_bench_weight_bytes(const sm_config *c) {
    double b = 0;
    for (size_t i = 0; i < c->n_tensors; i++) {
        const char *nm = c->tensors[i].name;
        if (strcmp(nm, "pos_embd") == 0 || (strcmp(nm, "tok_embd") == 0 && !c->tied_output))
            continue;
        b += (double)c->tensors[i].nbytes;
    }
    return b;
}

typedef struct {
    sm_peak p;
    size_t iters;
    double ops;  /* one thread's */
    float *sink; /* (nth) */
} peak_job;

static void peak_task(void *arg, int ith, int nth) {
    (void)nth;
    peak_job *j = arg;
    double ops = sm_kernels_peak(j->p, j->iters, &j->sink[ith]);
    if (ith == 0) j->ops = ops;
}

double sm_bench_peak(sm_pool *pool, sm_peak p) {
    if (!sm_kernels_peak_runs(p)) return 0;
    int nth = sm_pool_threads(pool);
    peak_job j = {.p = p, .iters = 1000, .sink = calloc((size_t)nth, sizeof(float))};
    if (!j.sink) return 0;
    for (;;) { /* iterations for about 20 ms a run */
        double t0 = sm_time_now();
        sm_pool_run(pool, peak_task, &j);
        double t = sm_time_now() - t0;
        if (t >= 0.02 || j.iters >= (size_t)1 << 40) break;
        j.iters *= t < 0.002 ? 10 : 2;
    }
    double ops = j.ops * nth / best_run(pool, peak_task, &j, 5, 0);
    free(j.sink);
    return ops;
}
