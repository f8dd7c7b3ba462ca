/*
** sm_pool.h -- a persistent pthread pool.
**
** sm_pool_run(pool, fn, arg) runs fn(arg, ith, nth) on every thread of the
** pool at once (the caller is thread 0) and returns when all have returned.
** Inside fn, sm_pool_barrier synchronises the nth threads, so a whole forward
** pass is one run with barriers between its steps, not one wake-up per op.
** Every wait spins for a short while (so back-to-back runs and barriers cost
** no system call) and then sleeps on a futex. Work is split either
** statically (sm_pool_split) or handed out chunk by chunk (sm_pool_next).
**
** A run uses `width` of the pool's threads (nth = width inside fn), which
** the pool chooses from what it measures: on a busy machine, where its
** threads lose their CPUs to other processes, it runs on fewer threads (down
** to the caller alone) and goes back up when the CPUs are free. A task must
** therefore compute the same results for any nth, which the model's split
** of work guarantees (src/model/forward.c).
*/
#ifndef SM_POOL_H
#define SM_POOL_H

#include "sm_base.h"

typedef struct sm_pool sm_pool;
typedef void (*sm_task_fn)(void *arg, int ith, int nth);

/* Creates n_threads - 1 workers (n_threads >= 1). */
sm_status sm_pool_create(sm_pool **out, int n_threads);

/* The threads the pool has (its widest run). */
int sm_pool_threads(const sm_pool *pool);

/* Runs use `width` threads from now on (1..threads); 0 = chosen by measurement
** (the default). Tests use it to check results at every width. */
void sm_pool_set_width(sm_pool *pool, int width);

#define SM_POOL_MAX_STAT 8
typedef struct {
    uint64_t runs;                           /* sm_pool_run calls */
    uint64_t runs_at_width[SM_POOL_MAX_STAT]; /* [w - 1]: runs on w threads (the last: w >= 8) */
    uint64_t probes;                         /* windows run at another width to compare */
    uint64_t moves;                          /* probes that changed the width */
    uint64_t aborted;                        /* probes ended early, far slower */
    uint64_t sleeps;                         /* waits that slept in the kernel (futex) */
    int width;                               /* the width now */
} sm_pool_stats;

void sm_pool_get_stats(const sm_pool *pool, sm_pool_stats *st);

/*
** Threads this process can run at once: the physical cores among the CPUs
** it may run on (sched_getaffinity: taskset, cpusets, Slurm), at most its
** cgroup's CPU quota rounded up (cpu.max: docker --cpus, systemd CPUQuota).
*/
int sm_pool_default_threads(void);

/* Not reentrant: call from one thread, never from inside a task. */
void sm_pool_run(sm_pool *pool, sm_task_fn fn, void *arg);

/* sm_pool_run of a task whose size is `work` (any unit proportional to its
** time on one thread, such as its arithmetic): the runs that state their
** work are what the pool measures to choose its width. */
void sm_pool_run_work(sm_pool *pool, sm_task_fn fn, void *arg, double work);

/* All nth threads of the current run must call it the same number of times. */
void sm_pool_barrier(sm_pool *pool);

/*
** Work hand-out by atomic counters: the next of n items (0 <= i < n) for
** thread ith, or n when none is left. Each thread owns the slice
** sm_pool_split(n, 1, ith, nth) and takes its items in order from its own
** counter; when its slice is done it takes the next items of the other
** threads' slices from their counters. When the threads keep pace, each
** does exactly its static slice (the same data every call, so what stays in
** its cache is reused); when one is slowed down (another process, an
** interrupt) the others finish its items. sm_pool_run and every barrier
** start a new phase with the counters at 0, so a phase holds at most one
** hand-out loop; all threads must pass the same n.
*/
size_t sm_pool_next(sm_pool *pool, int ith, size_t n);

/* The [begin, end) slice of n items for thread ith of nth, in multiples of
** `align` items (the last slice takes the remainder). */
void sm_pool_split(size_t n, size_t align, int ith, int nth, size_t *begin, size_t *end);

void sm_pool_free(sm_pool *pool);

#endif
