/*
** pool.c -- persistent workers, spin-then-sleep wake-up, sense barrier.
**
** Wake-up protocol: the caller publishes (fn, arg), then bumps `generation`.
** A worker that has seen generation g spins until it changes; after about a
** millisecond it registers in `sleepers` under the mutex, re-checks and
** waits. The caller signals only when sleepers > 0. Both sides use seq_cst
** atomics, so either the worker sees the new generation or the caller sees
** the sleeper: no lost wake-up.
**
** Every wait (a worker's, the barrier's, the caller's for the workers) spins
** a while, then yields the CPU on each further check. With more threads
** than online CPUs the spin is short and idle workers sleep at once: a
** spinning thread would otherwise hold the CPU a thread with work needs,
** and a step would take a whole scheduler time slice per thread.
*/
#include "sm_pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

#define SPIN_SECONDS 1e-3   /* an idle worker spins this long before it sleeps */
#define SPINS_BEFORE_YIELD 65536 /* pauses before a wait starts yielding (about 1 ms) */
#define SPINS_OVERSUBSCRIBED 16

/* One thread's hand-out counter, alone on its cache line. */
typedef struct {
    _Alignas(64) atomic_size_t taken;
} work_counter;

struct sm_pool {
    int nth;
    unsigned spin_limit; /* pauses before a wait yields */
    double idle_spin;    /* seconds an idle worker spins before it sleeps */
    pthread_t *threads;
    work_counter *work; /* (nth): items taken from each thread's slice this phase */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    sm_task_fn fn;
    void *arg;
    _Alignas(64) atomic_uint generation;
    _Alignas(64) atomic_int sleepers;
    _Alignas(64) atomic_int done; /* workers finished with the current run */
    _Alignas(64) atomic_int bar_count;
    _Alignas(64) atomic_uint bar_phase;
    _Alignas(64) atomic_bool quit;
};

typedef struct {
    sm_pool *pool;
    int ith;
} worker_arg;


/* One check of a wait: a pause while *spins is under the limit, then a yield. */
static inline void backoff(const sm_pool *p, unsigned *spins) {
    if (*spins < p->spin_limit) {
        ++*spins;
        cpu_relax();
    } else {
        sched_yield();
    }
}

static worker_arg *worker_args(sm_pool *p) {
    return (worker_arg *)(p->threads + p->nth);
}

static void *worker_main(void *varg) {
    worker_arg *wa = varg;
    sm_pool *p = wa->pool;
    unsigned seen = 0;
    for (;;) {
        unsigned g = atomic_load(&p->generation);
        if (g == seen) {
            double t0 = sm_time_now();
            for (unsigned spins = 0; (g = atomic_load(&p->generation)) == seen; spins++) {
                if (atomic_load(&p->quit)) return NULL;
                cpu_relax();
                if ((spins & 1023) == 1023 && sm_time_now() - t0 > p->idle_spin) {
                    pthread_mutex_lock(&p->mu);
                    atomic_fetch_add(&p->sleepers, 1);
                    while ((g = atomic_load(&p->generation)) == seen && !atomic_load(&p->quit))
                        pthread_cond_wait(&p->cv, &p->mu);
                    atomic_fetch_sub(&p->sleepers, 1);
                    pthread_mutex_unlock(&p->mu);
                    t0 = sm_time_now();
                }
            }
        }
        if (atomic_load(&p->quit)) return NULL;
        seen = g;
        p->fn(p->arg, wa->ith, p->nth);
        atomic_fetch_add(&p->done, 1);
    }
}

static void reset_work(sm_pool *p) {
    for (int i = 0; i < p->nth; i++)
        atomic_store_explicit(&p->work[i].taken, 0, memory_order_relaxed);
}

sm_status sm_pool_create(sm_pool **out, int n_threads) {
    *out = NULL;
    if (n_threads < 1) return SM_ERR_INPUT;
    sm_pool *p = aligned_alloc(64, (sizeof *p + 63) & ~(size_t)63);
    if (!p) return SM_ERR_NOMEM;
    memset(p, 0, sizeof *p);
    p->nth = n_threads;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    bool over = cpus > 0 && n_threads > cpus;
    p->spin_limit = over ? SPINS_OVERSUBSCRIBED : SPINS_BEFORE_YIELD;
    p->idle_spin = over ? 0 : SPIN_SECONDS;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    /* one block: thread handles, then their arguments */
    p->threads = calloc((size_t)n_threads, sizeof(pthread_t) + sizeof(worker_arg));
    p->work = aligned_alloc(64, (size_t)n_threads * sizeof *p->work);
    if (!p->threads || !p->work) {
        sm_pool_free(p);
        return SM_ERR_NOMEM;
    }
    int started = 1;
    for (int i = 1; i < n_threads; i++, started++) {
        worker_arg *wa = &worker_args(p)[i];
        wa->pool = p;
        wa->ith = i;
        if (pthread_create(&p->threads[i], NULL, worker_main, wa) != 0) {
            p->nth = started; /* join only those that exist */
            sm_pool_free(p);
            return SM_ERR_RUNTIME;
        }
    }
    *out = p;
    return SM_OK;
}

int sm_pool_threads(const sm_pool *pool) {
    return pool->nth;
}

void sm_pool_run(sm_pool *p, sm_task_fn fn, void *arg) {
    reset_work(p);
    if (p->nth == 1) {
        fn(arg, 0, 1);
        return;
    }
    p->fn = fn;
    p->arg = arg;
    atomic_store(&p->done, 0);
    atomic_fetch_add(&p->generation, 1);
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    fn(arg, 0, p->nth);
    unsigned spins = 0;
    while (atomic_load(&p->done) != p->nth - 1) backoff(p, &spins);
}

/* The last thread to arrive resets the hand-out counters: all others are
** past their counter loops and none leaves before the phase changes. */
void sm_pool_barrier(sm_pool *p) {
    if (p->nth == 1) {
        reset_work(p);
        return;
    }
    unsigned phase = atomic_load(&p->bar_phase);
    if (atomic_fetch_add(&p->bar_count, 1) == p->nth - 1) {
        reset_work(p);
        atomic_store(&p->bar_count, 0);
        atomic_fetch_add(&p->bar_phase, 1);
    } else {
        unsigned spins = 0;
        while (atomic_load(&p->bar_phase) == phase) backoff(p, &spins);
    }
}

size_t sm_pool_next(sm_pool *p, int ith, size_t n) {
    for (int k = 0; k < p->nth; k++) {
        int v = (ith + k) % p->nth; /* own slice first, then the next threads' */
        size_t b, e;
        sm_pool_split(n, 1, v, p->nth, &b, &e);
        atomic_size_t *c = &p->work[v].taken;
        if (atomic_load_explicit(c, memory_order_relaxed) >= e - b) continue;
        size_t i = atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
        if (i < e - b) return b + i;
    }
    return n;
}

void sm_pool_split(size_t n, size_t align, int ith, int nth, size_t *begin, size_t *end) {
    size_t units = (n + align - 1) / align;
    size_t per = units / (size_t)nth, extra = units % (size_t)nth;
    size_t u0 = (size_t)ith * per + ((size_t)ith < extra ? (size_t)ith : extra);
    size_t u1 = u0 + per + ((size_t)ith < extra ? 1 : 0);
    *begin = u0 * align < n ? u0 * align : n;
    *end = u1 * align < n ? u1 * align : n;
}

void sm_pool_free(sm_pool *p) {
    if (!p) return;
    if (p->threads) {
        pthread_mutex_lock(&p->mu);
        atomic_store(&p->quit, true);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
        for (int i = 1; i < p->nth; i++) pthread_join(p->threads[i], NULL);
        free(p->threads);
    }
    free(p->work);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}
