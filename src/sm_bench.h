/*
** sm_bench.h -- what `bench` measures beside the model: the machine's
** memory bandwidth (STREAM's triad, and streaming reads with the kernel
** table's widest loads) and the bytes one decoded token reads, which
** together give the bound on decode speed. The per-step forward profile is
** sm_state_set_profile (sm_model.h).
*/
#ifndef SM_BENCH_H
#define SM_BENCH_H

#include "sm_config.h"
#include "sm_kernels.h"
#include "sm_pool.h"

/*
** Memory bandwidth in bytes/s on the pool's threads: STREAM's triad
** a = b + s c over three 64 MiB arrays, best of 5, counting 12 bytes per
** element as STREAM does (no write-allocate traffic). 0 if out of memory.
*/
double sm_bench_triad(sm_pool *pool);

/*
** Read bandwidth in bytes/s on the pool's threads over a working set of
** `bytes` (at most 1 GiB), each thread streaming its own share with the
** kernel table's widest loads, as a decode step streams its share of the
** weights: where the model fits in cache, this and not the triad is what
** bounds decoding. The best pass after a warm-up, of at least 5 and at least
** 0.25 s of passes. 0 if out of memory.
*/
double sm_bench_read(sm_pool *pool, const sm_kernels *k, double bytes);

/*
** Bytes one decoded token reads from the weights: every tensor except those
** only looked up by row (the position table, and the token embedding when
** a separate output layer exists).
*/
double sm_bench_weight_bytes(const sm_config *c);

/* Bytes of keys and values (of type kv_type, f32 or f16) one decoded token reads at context length ctx. */
double sm_bench_kv_bytes(const sm_config *c, double ctx, sm_dtype kv_type);

/*
** The fixed cases `bench --pick-kernels` times each table on: per operation
** (sm_kernels_op) the shapes of a ~1B-parameter model's layers, prefill's
** many rows, decoding's one (and eight) from memory and from cache, one
** head's attention; and a case of bf16 weights (sm_bench_case_dtype), there
** to choose their GEMM's arithmetic (vdpbf16ps or f32), not a table. A case
** owns its weights and buffers (out of memory: SM_ERR_NOMEM); run times
** `calls` calls of its operation through table k on the pool's threads and
** returns seconds per call.
*/
typedef struct sm_bench_case sm_bench_case;
size_t sm_bench_n_cases(void);
sm_kernels_op sm_bench_case_op(size_t i);
const char *sm_bench_case_what(size_t i);
sm_dtype sm_bench_case_dtype(size_t i);
size_t sm_bench_case_rows(size_t i); /* its token rows (T; 1 for a decoded row's product) */
sm_status sm_bench_case_new(sm_bench_case **out, size_t i, int n_threads, sm_error *err);
double sm_bench_case_run(sm_bench_case *c, sm_pool *pool, const sm_kernels *k, size_t calls);
void sm_bench_case_free(sm_bench_case *c);

/*
** Arithmetic operations per second of peak loop p (sm_kernels_peak) on all
** the pool's threads at once, best of 5 runs of about 20 ms; 0 where the
** CPU does not run p.
*/
double sm_bench_peak(sm_pool *pool, sm_peak p);

/*
** Prefill's products on the TinyLlama-1.1B shape: one block's seven linear
** layers (q, k, v, o: 2048 x 2048 and 256 x 2048; gate, up: 5632 x 2048;
** down: 2048 x 5632) with random weights of type dt, for T token rows:
** seven of the cases above (GEMM or QGEMM). run times one pass of the
** seven through table k, in seconds (each product's input read into the
** caches first, untimed, as a model's step before it leaves it); ops is the
** pass's arithmetic, 2 T N K per product. Out of memory: SM_ERR_NOMEM.
*/
typedef struct sm_bench_layer sm_bench_layer;
sm_status sm_bench_layer_new(sm_bench_layer **out, sm_dtype dt, size_t T, int n_threads, sm_error *err);
double sm_bench_layer_ops(const sm_bench_layer *l);
double sm_bench_layer_run(sm_bench_layer *l, sm_pool *pool, const sm_kernels *k);
void sm_bench_layer_free(sm_bench_layer *l);

#endif
