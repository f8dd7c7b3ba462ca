/*
** pool.c -- persistent workers, spin-then-sleep waits, and a width that
** follows what the machine gives.
**
** A run: the caller publishes (fn, arg, width), then bumps the run count of
** each worker 1..width-1, which runs fn(arg, ith, width); the others are
** not disturbed.
**
** Waits. Every wait (a worker's for the next run, the barrier's, the
** caller's for the workers) spins, then sleeps on a futex. A waker enters
** the kernel only when someone sleeps: each word has a count of sleepers,
** and both sides use seq_cst atomics, so either the waker sees the sleeper
** or the sleeper's futex call sees the new value. How long to spin is the
** question (wait_phase): on free CPUs a sleep only costs (the thread it
** wakes for then waits for it: tens to hundreds of microseconds in a VM
** whose idle vCPU the host has parked), while on busy ones a spin burns the
** time slice that the awaited thread, or another process, needs.
**
** Width. A barrier waits for its slowest thread: when a thread loses its
** CPU to another process, the others wait a time slice (milliseconds) for
** work of microseconds, and two threads on a busy machine are slower than
** one. So the pool measures the rate of each window of runs (the work the
** caller states, per second of wall time) and keeps the width that does
** best: now and then it runs one window at a neighbouring width (half or
** double), judges it against the windows before and after, cuts it short
** when it is far slower, and moves when it wins by a margin. Probes up come
** after a quiet interval that doubles while the width holds, or at once
** when the threads' wait to run (the kernel's count of it in
** /proc/thread-self/schedstat) has eased: load left; probes down come when
** the threads wait to run, window after window: load came. Results do not
** depend on the width: callers split work so that which thread computes an
** element never changes how (sm_pool.h).
*/
#define _GNU_SOURCE
#include "sm_pool.h"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

#define SPIN_MIN 20e-6      /* the shortest spin in a run */
#define SPIN_MAX 2e-3       /* the longest */
#define SPIN_OVER 10e-6     /* every spin, with more threads than CPUs */
#define SPIN_IDLE 500e-6    /* an idle worker's, beyond four times the caller's usual gap */
#define LONG_SHARE 0.02     /* long waits rarer than this: spin up to SPIN_MAX (wait_phase) */
#define LONG_WAITS 32       /* the waits that share is averaged over */

#define WINDOW_SECONDS 5e-3 /* a measurement: runs until at least this much wall time */
#define WINDOW_FIRST 2e-3   /* the first four: a busy start is seen soon */
#define CONTENDED 0.1       /* a thread waiting to run this share of a window */
#define EASED 0.2           /* the wait to run this far below the reference: probe up */
#define PROBE_GAP_MIN 0.1   /* seconds from a probe or move to the next probe */
#define PROBE_GAP_MAX 4.0   /* ... doubling to this while the width holds */
#define PROBE_EVERY 20      /* and scheduled ones at least this many windows apart */
#define MOVE_MARGIN 1.08    /* a probe must beat the windows around it by 8% */
#define ABORT_RATIO 1.5     /* a probe slower than the window before by this much ... */
#define ABORT_SLACK 2e-3    /* ... plus this (its first run wakes workers) ends at once */
#define START_WAITED 0.25   /* a start narrowed for load: the share of its life the thread waited to run */
#define EARLY_SECONDS 0.5   /* ... and the time it probes up whenever a window is uncontended */
#define EARLY_EVERY 4       /* ... at least this many windows apart */

/* One thread's hand-out counter, run count and run-queue sample, alone on a cache line. */
typedef struct {
    _Alignas(64) atomic_size_t taken; /* items taken from its slice this phase */
    atomic_uint go;       /* a worker's runs: the caller bumps it to start one */
    atomic_uint sleeping; /* the worker sleeps on `go` */
    double queued; /* share of the time since its previous sample spent waiting to run (-1: unknown) */
} thread_slot;

/* A window of runs being measured. */
typedef struct {
    double work, wall;             /* the runs' stated work, their wall time */
    double t0;                     /* when it began (0: at the next run) */
    double probe_work, probe_wall; /* a probe's runs, its first included */
    int width;                     /* the width it runs at */
} window;

typedef struct {
    int width;          /* threads a run uses */
    int probe;          /* the width of a probe in flight, else 0 */
    int phase;          /* of a probe: 1 the probe, 2 the window after */
    double rate[3];     /* the rates of the window before, the probe and the window after */
    double ref_queued;  /* the wait to run after the last probe (-1: the next window's) */
    double gap;         /* seconds from the last probe to the next scheduled one */
    double last;        /* when the last probe ended */
    int windows;        /* windows since then */
    int seen;           /* windows since the start */
    int contended;      /* windows in a row in which a thread waited to run */
    int start_width;    /* the width for the load seen at creation (initial_width), taken by the
                           first run that states its work (0: taken) */
    bool low_start;     /* that width was below the widest */
    double born;        /* when it was taken */
    window win;
} tuner;

struct sm_pool {
    int nth;
    bool adapt;       /* the width follows measurement (sm_pool_set_width(0)) */
    bool over;        /* more threads than CPUs: short spins */
    bool sample;      /* the current run ends a window: each thread samples its run queue */
    pthread_t *threads;
    thread_slot *slot; /* (nth) */
    sm_task_fn fn;
    void *arg;
    int run_width;    /* of the current run */
    tuner tn;
    sm_pool_stats st;
    double last_end;  /* when the caller's last run ended */
    _Alignas(64) atomic_uint done; /* workers finished with the current run */
    _Alignas(64) atomic_uint done_sleepers;
    _Alignas(64) atomic_uint bar_count;
    _Alignas(64) atomic_uint bar_phase;
    _Alignas(64) atomic_uint bar_sleepers;
    _Alignas(64) atomic_bool quit;
    atomic_ullong gap_ns; /* the caller's usual time between runs (ns, a moving average) */
    atomic_ullong sleeps; /* futex waits of every thread */
};

typedef struct {
    sm_pool *pool;
    int ith;
} worker_arg;

/* This thread's /proc/thread-self/schedstat (-1: not opened, -2: not available) and its
** last reading: nanoseconds spent waiting to run, at sm_time_now() seconds. */
static _Thread_local int tls_stat_fd = -1;
static _Thread_local double tls_wait_ns, tls_wait_at;
/* When this thread's current phase of a run began (the run's start or its last wait). */
static _Thread_local double tls_phase_start;
/* The caller woke sleeping workers for this run and has not waited since. */
static _Thread_local bool tls_woke;
/* The share of this thread's recent waits in runs that were long (a moving average). */
static _Thread_local double tls_long_share = 0.5;

static void futex_wait(atomic_uint *w, unsigned old) {
#ifdef __linux__
    syscall(SYS_futex, (unsigned *)w, FUTEX_WAIT_PRIVATE, old, NULL, NULL, 0);
#else
    (void)w, (void)old;
    sched_yield();
#endif
}

static void futex_wake(atomic_uint *w) {
#ifdef __linux__
    syscall(SYS_futex, (unsigned *)w, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#else
    (void)w;
#endif
}

/* This thread's time on a CPU and waiting for one, in ns, since it began (its schedstat);
   false when unknown. */
static bool thread_schedstat(unsigned long long *run_ns, unsigned long long *wait_ns) {
    if (tls_stat_fd == -1) {
        tls_stat_fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
        if (tls_stat_fd < 0) tls_stat_fd = -2;
    }
    char buf[96];
    ssize_t n = tls_stat_fd >= 0 ? pread(tls_stat_fd, buf, sizeof buf - 1, 0) : -1;
    if (n <= 0) return false;
    buf[n] = 0;
    return sscanf(buf, "%llu %llu", run_ns, wait_ns) == 2;
}

/* The share of the time since this thread's last sample that it spent runnable but not
** running (another thread had its CPU), or -1 when unknown (first sample, no schedstat). */
static double sample_queued(void) {
    unsigned long long run_ns, wait_ns;
    if (!thread_schedstat(&run_ns, &wait_ns)) return -1;
    double now = sm_time_now(), q = -1;
    if (tls_wait_at > 0 && now > tls_wait_at)
        q = ((double)wait_ns - tls_wait_ns) * 1e-9 / (now - tls_wait_at);
    tls_wait_ns = (double)wait_ns;
    tls_wait_at = now;
    return q < 0 ? -1 : q > 1 ? 1 : q;
}

/*
** Waits while *w == old: spins up to `spin` seconds (SPIN_OVER with more
** threads than CPUs), then sleeps on the futex, counted in *sleepers.
** Returns the new value.
*/
static unsigned wait_while(sm_pool *p, atomic_uint *w, unsigned old, atomic_uint *sleepers,
                           double spin) {
    unsigned v = atomic_load(w);
    if (v != old) return v;
    double t0 = sm_time_now();
    if (p->over) spin = SPIN_OVER;
    for (unsigned i = 1; (v = atomic_load(w)) == old; i++) {
        cpu_relax();
        if ((i & 31) == 0 && sm_time_now() - t0 > spin) break;
    }
    while (v == old && !atomic_load(&p->quit)) {
        atomic_fetch_add_explicit(&p->sleeps, 1, memory_order_relaxed);
        atomic_fetch_add(sleepers, 1);
        if ((v = atomic_load(w)) == old) futex_wait(w, old);
        atomic_fetch_sub(sleepers, 1);
        v = atomic_load(w);
    }
    return v;
}

/*
** A wait inside a run (barrier, join). Were every thread on its CPU, it
** would last less than the phase before it took this thread (the others'
** share of the same work): a longer one means the awaited thread is not
** running. On a free machine such long waits are rare (a VM's host or a
** kernel thread holds a CPU for a moment); on a busy one they are the
** rule. So each thread keeps the share of its recent waits that were long:
** while it is small, a wait spins up to SPIN_MAX, riding out the rare
** hiccup; once long waits are common, it spins twice the phase and then
** gives its CPU away, so the awaited thread or another process runs. A
** thread starts in between (its first waits, on a busy machine, are not
** spent spinning); the first wait after waking sleeping workers waits for
** their wake-up and spins long.
*/
static void wait_phase(sm_pool *p, atomic_uint *w, unsigned old, atomic_uint *sleepers) {
    double now = sm_time_now(), expect = 2 * (now - tls_phase_start);
    expect = expect < SPIN_MIN ? SPIN_MIN : expect > SPIN_MAX ? SPIN_MAX : expect;
    bool calm = tls_long_share < LONG_SHARE || tls_woke;
    wait_while(p, w, old, sleepers, calm ? SPIN_MAX : expect);
    tls_woke = false;
    tls_phase_start = sm_time_now();
    bool was_long = tls_phase_start - now > expect;
    tls_long_share += ((was_long ? 1.0 : 0.0) - tls_long_share) / LONG_WAITS;
}

/* After changing *w: wakes its sleepers, if any. */
static void wake(atomic_uint *w, atomic_uint *sleepers) {
    if (atomic_load(sleepers) > 0) futex_wake(w);
}

static worker_arg *worker_args(sm_pool *p) {
    return (worker_arg *)(p->threads + p->nth);
}

static void *worker_main(void *varg) {
    worker_arg *wa = varg;
    sm_pool *p = wa->pool;
    thread_slot *me = &p->slot[wa->ith];
    unsigned seen = 0;
    sample_queued(); /* the first reading: later ones are against it */
    for (;;) {
        /* the next run should come within a few of the caller's usual times between runs */
        double gap = 1e-9 * (double)atomic_load_explicit(&p->gap_ns, memory_order_relaxed);
        seen = wait_while(p, &me->go, seen, &me->sleeping, SPIN_IDLE + 4 * gap);
        if (atomic_load(&p->quit)) break;
        int width = p->run_width; /* stays until this worker is done */
        tls_phase_start = sm_time_now();
        p->fn(p->arg, wa->ith, width);
        if (p->sample) me->queued = sample_queued();
        if (atomic_fetch_add(&p->done, 1) + 1 == (unsigned)width - 1)
            wake(&p->done, &p->done_sleepers);
    }
    if (tls_stat_fd >= 0) close(tls_stat_fd);
    return NULL;
}

static void reset_work(sm_pool *p) {
    for (int i = 0; i < p->nth; i++)
        atomic_store_explicit(&p->slot[i].taken, 0, memory_order_relaxed);
}

/* ---- the width controller ---- */

/* The width a probe tries from w: down (halving) or up (doubling), within 1..nth. */
static int neighbour(const sm_pool *p, int w, bool down) {
    if (down) return w > 1 ? w / 2 : (p->nth > 1 ? 2 : 1);
    return w < p->nth ? (w * 2 < p->nth ? w * 2 : p->nth) : w / 2;
}

/* A window is over: its rate (work per second) and the most any of its threads waited to
** run (share of the time; -1 unknown). */
static void window_done(sm_pool *p, double rate, double queued, double now) {
    tuner *t = &p->tn;
    t->windows++;
    t->seen++;
    if (t->probe) { /* the probe against the mean of the windows before and after it */
        t->rate[t->phase++] = rate;
        if (t->phase < 3) return;
        if (t->rate[1] > 0.5 * (t->rate[0] + t->rate[2]) * MOVE_MARGIN) {
            t->width = t->probe;
            t->gap = PROBE_GAP_MIN;
            p->st.moves++;
        } else {
            t->gap = t->gap * 2 < PROBE_GAP_MAX ? t->gap * 2 : PROBE_GAP_MAX;
        }
        t->probe = 0;
        t->last = now;
        t->windows = 0;
        t->ref_queued = -1;
        return;
    }
    bool contended = queued > CONTENDED;
    t->contended = contended ? t->contended + 1 : 0;
    if (t->ref_queued < 0) t->ref_queued = queued;
    double since = now - t->last;
    bool eased = queued >= 0 && t->ref_queued >= 0 && queued < t->ref_queued - EASED;
    bool down = t->contended >= 2 && t->width > 1 && (since > PROBE_GAP_MIN || !p->st.probes);
    /* a start narrowed for load that its windows do not see is undone soon */
    if (t->low_start && now - t->born > EARLY_SECONDS) t->low_start = false;
    bool early = t->low_start && queued >= 0 && queued < CONTENDED / 2 && t->windows >= EARLY_EVERY;
    bool up = !contended && t->width < p->nth &&
              (early || (since > PROBE_GAP_MIN &&
                         (eased || (since > t->gap && t->windows >= PROBE_EVERY))));
    if (!down && !up) return;
    t->probe = neighbour(p, t->width, down);
    t->contended = 0;
    t->rate[0] = rate; /* this window is the one before */
    t->phase = 1;
    p->st.probes++;
}

/* The width of the next run; sets p->sample when the run ends its window. */
static int next_width(sm_pool *p, double now) {
    tuner *t = &p->tn;
    int w = t->probe && t->phase == 1 ? t->probe : t->width;
    if (t->win.width != w) t->win = (window){.width = w}; /* a new window */
    double len = t->seen < 4 ? WINDOW_FIRST : WINDOW_SECONDS;
    p->sample = p->adapt && t->win.t0 > 0 && now - t->win.t0 >= len;
    return w;
}

/* Accounts one run of `work` that took t0..t1 into the open window. */
static void account(sm_pool *p, int width, double work, double t0, double t1) {
    tuner *t = &p->tn;
    window *wn = &t->win;
    p->st.runs++;
    p->st.runs_at_width[width <= SM_POOL_MAX_STAT ? width - 1 : SM_POOL_MAX_STAT - 1]++;
    if (!p->adapt || work <= 0) return;
    if (t->probe && t->phase == 1) { /* a probe far slower than the width it tries to beat */
        wn->probe_work += work;
        wn->probe_wall += t1 - t0;
        if (wn->probe_wall > ABORT_RATIO * wn->probe_work / t->rate[0] + ABORT_SLACK) {
            p->st.aborted++;
            window_done(p, wn->probe_work / wn->probe_wall, -1, t1);
            *wn = (window){0};
            return;
        }
    }
    if (wn->t0 == 0) { /* the window's first run (workers may have been waking) only starts it */
        wn->t0 = t1;
        sample_queued(); /* the caller's reading at its start */
        return;
    }
    wn->work += work;
    wn->wall += t1 - t0;
    if (!p->sample) return;
    double queued = -1;
    for (int i = 0; i < width; i++)
        if (p->slot[i].queued > queued) queued = p->slot[i].queued;
    window_done(p, wn->work / wn->wall, queued, t1);
    *wn = (window){0};
}

/* ---- the pool ---- */

/*
** The width to start at. Several processes started at once (xargs -P, a
** job array on one node) should begin narrow instead of spending their
** first windows, a short prompt's whole prefill, in barriers whose partner
** waits for a CPU. Two signs must agree: the kernel's count of runnable
** threads (/proc/loadavg, this one included) says other threads leave fewer
** CPUs than nth, and this thread waited to run for a good share of its life
** so far (/proc/thread-self/schedstat: loading the model, before the pool).
** One other runnable thread is not counted: a pipe's other end (the producer
** of our stdin, the consumer of our output) runs beside us for a moment and
** then waits on us. Only when this process may run on every online CPU: the
** count is machine-wide, and a process pinned to a subset does not compete
** with the rest. A start narrowed wrongly is undone within the first
** windows (window_done: early). Only pools whose runs state their work
** (the model's) take it, at their first such run: a pool that never
** measures (convert, train, bench's probes) keeps every thread.
*/
static int initial_width(int nth, long cpus) {
#ifdef __linux__
    if (nth < 2 || cpus != sysconf(_SC_NPROCESSORS_ONLN)) return nth;
    FILE *f = fopen("/proc/loadavg", "r");
    if (!f) return nth;
    long running = -1;
    if (fscanf(f, "%*f %*f %*f %ld/", &running) != 1) running = -1;
    fclose(f);
    long others = running - 1;
    unsigned long long run_ns, wait_ns;
    if (others <= 1 || !thread_schedstat(&run_ns, &wait_ns) ||
        (double)wait_ns < START_WAITED * (double)(run_ns + wait_ns))
        return nth;
    long free_cpus = cpus - (others - 1);
    return free_cpus >= nth ? nth : free_cpus < 1 ? 1 : (int)free_cpus;
#else
    (void)cpus;
    return nth;
#endif
}

sm_status sm_pool_create(sm_pool **out, int n_threads) {
    *out = NULL;
    if (n_threads < 1) return SM_ERR_INPUT;
    sm_pool *p = aligned_alloc(64, (sizeof *p + 63) & ~(size_t)63);
    if (!p) return SM_ERR_NOMEM;
    memset(p, 0, sizeof *p);
    p->nth = n_threads;
    p->adapt = true;
    cpu_set_t set; /* the CPUs this process may run on */
    long cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set)
                                                            : sysconf(_SC_NPROCESSORS_ONLN);
    p->over = cpus > 0 && n_threads > cpus;
    p->gap_ns = (uint64_t)(SPIN_MAX * 1e9); /* before any run: the longest idle spin */
    p->tn.width = n_threads;
    p->tn.start_width = initial_width(n_threads, cpus);
    p->tn.gap = PROBE_GAP_MIN;
    p->tn.last = sm_time_now();
    p->tn.ref_queued = -1;
    /* one block: thread handles, then their arguments */
    p->threads = calloc((size_t)n_threads, sizeof(pthread_t) + sizeof(worker_arg));
    p->slot = aligned_alloc(64, (size_t)n_threads * sizeof *p->slot);
    if (!p->threads || !p->slot) {
        p->nth = 1; /* no workers to stop */
        sm_pool_free(p);
        return SM_ERR_NOMEM;
    }
    memset(p->slot, 0, (size_t)n_threads * sizeof *p->slot);
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

void sm_pool_set_width(sm_pool *p, int width) {
    p->adapt = width == 0;
    p->tn.probe = 0;
    p->tn.win = (window){0};
    p->tn.width = width < 1 || width > p->nth ? p->nth : width;
    p->tn.low_start = false;
    p->tn.start_width = 0;
}

void sm_pool_get_stats(const sm_pool *p, sm_pool_stats *st) {
    *st = p->st;
    st->width = p->tn.width;
    st->sleeps = atomic_load(&((sm_pool *)p)->sleeps);
}

void sm_pool_run_work(sm_pool *p, sm_task_fn fn, void *arg, double work) {
    double t0 = sm_time_now();
    if (p->last_end > 0) { /* the time since the last run, into the average idle workers use */
        uint64_t g = (uint64_t)((t0 - p->last_end) * 1e9), avg = atomic_load(&p->gap_ns);
        atomic_store(&p->gap_ns, avg - avg / 8 + g / 8);
    }
    tls_phase_start = t0;
    if (p->tn.start_width && work > 0 && p->adapt) { /* the first measured run: the start's width */
        p->tn.width = p->tn.start_width;
        p->tn.low_start = p->tn.start_width < p->nth;
        p->tn.born = t0;
        p->tn.start_width = 0;
    }
    const int width = next_width(p, t0);
    reset_work(p);
    p->run_width = width;
    if (width > 1) {
        p->fn = fn;
        p->arg = arg;
        atomic_store(&p->done, 0);
        tls_woke = false;
        for (int i = 1; i < width; i++) {
            atomic_fetch_add(&p->slot[i].go, 1);
            if (atomic_load(&p->slot[i].sleeping)) {
                tls_woke = true;
                futex_wake(&p->slot[i].go);
            }
        }
    }
    fn(arg, 0, width);
    for (unsigned d; width > 1 && (d = atomic_load(&p->done)) != (unsigned)width - 1;)
        wait_phase(p, &p->done, d, &p->done_sleepers);
    if (p->sample) p->slot[0].queued = sample_queued();
    double t1 = sm_time_now();
    p->last_end = t1;
    account(p, width, work, t0, t1);
}

void sm_pool_run(sm_pool *p, sm_task_fn fn, void *arg) {
    sm_pool_run_work(p, fn, arg, 0);
}

/* The last thread to arrive resets the hand-out counters: all others are
** past their counter loops and none leaves before the phase changes. */
void sm_pool_barrier(sm_pool *p) {
    const int width = p->run_width;
    if (width == 1) {
        reset_work(p);
        return;
    }
    unsigned phase = atomic_load(&p->bar_phase);
    if (atomic_fetch_add(&p->bar_count, 1) == (unsigned)width - 1) {
        reset_work(p);
        atomic_store(&p->bar_count, 0);
        atomic_fetch_add(&p->bar_phase, 1);
        wake(&p->bar_phase, &p->bar_sleepers);
        tls_phase_start = sm_time_now();
        return;
    }
    wait_phase(p, &p->bar_phase, phase, &p->bar_sleepers);
}

size_t sm_pool_next(sm_pool *p, int ith, size_t n) {
    const int width = p->run_width;
    for (int k = 0; k < width; k++) {
        int v = (ith + k) % width; /* own slice first, then the next threads' */
        size_t b, e;
        sm_pool_split(n, 1, v, width, &b, &e);
        atomic_size_t *c = &p->slot[v].taken;
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
        atomic_store(&p->quit, true);
        for (int i = 1; i < p->nth; i++) {
            atomic_fetch_add(&p->slot[i].go, 1);
            futex_wake(&p->slot[i].go);
        }
        for (int i = 1; i < p->nth; i++) pthread_join(p->threads[i], NULL);
        free(p->threads);
    }
    free(p->slot);
    free(p);
}

/* The CPUs of the affinity mask as (package, core) pairs: how many distinct. */
static int cores_in(const cpu_set_t *set, int ncpu) {
    int(*seen)[2] = calloc((size_t)ncpu, sizeof *seen), nseen = 0;
    if (!seen) return ncpu;
    for (int i = 0; i < CPU_SETSIZE && nseen >= 0; i++) {
        if (!CPU_ISSET((size_t)i, set)) continue;
        int ids[2] = {-1, -1};
        const char *files[2] = {"physical_package_id", "core_id"};
        for (int k = 0; k < 2; k++) {
            char path[96];
            snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/%s", i, files[k]);
            FILE *f = fopen(path, "r");
            if (!f || fscanf(f, "%d", &ids[k]) != 1) ids[k] = -1;
            if (f) fclose(f);
        }
        if (ids[0] < 0 || ids[1] < 0) { /* no topology: count CPUs */
            nseen = -1;
            break;
        }
        bool dup = false;
        for (int j = 0; j < nseen && !dup; j++) dup = seen[j][0] == ids[0] && seen[j][1] == ids[1];
        if (!dup && nseen < ncpu) {
            seen[nseen][0] = ids[0];
            seen[nseen][1] = ids[1];
            nseen++;
        }
    }
    free(seen);
    return nseen > 0 ? nseen : ncpu;
}

/* The first number in a file (cgroup v1's cpu.cfs_quota_us, cpu.cfs_period_us), or -1. */
static double file_number(const char *path) {
    FILE *f = fopen(path, "r");
    double v = -1;
    if (f && fscanf(f, "%lf", &v) != 1) v = -1;
    if (f) fclose(f);
    return v;
}

/* quota/period of a cgroup v2 cpu.max ("max 100000" or "150000 100000"), 0 = none. */
static double quota_v2(const char *dir) {
    char path[4200], q[32] = "";
    double period = 0;
    snprintf(path, sizeof path, "/sys/fs/cgroup%s/cpu.max", dir);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int n = fscanf(f, "%31s %lf", q, &period);
    fclose(f);
    double quota = n == 2 && strcmp(q, "max") != 0 ? atof(q) : 0;
    return quota > 0 && period > 0 ? quota / period : 0;
}

/* The smallest CPU quota of this process's cgroup and its ancestors (v2, or v1's cpu
** controller), in CPUs; 0 when there is none. */
static double cgroup_quota(void) {
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f) return 0;
    char line[4096], dir[4096] = "";
    bool v1 = false;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c2 = 0;
        if (strcmp(line, "0") == 0 && c1[1] == 0 && !v1) { /* "0::/path": the v2 hierarchy */
            snprintf(dir, sizeof dir, "%s", c2 + 1);
        } else { /* v1: "N:cpu,cpuacct:/path" */
            char *list = c1 + 1, *save = NULL;
            for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
                if (strcmp(tok, "cpu") == 0) {
                    snprintf(dir, sizeof dir, "%s", c2 + 1);
                    v1 = true;
                }
        }
    }
    fclose(f);
    if (v1) {
        const char *roots[] = {"/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu"};
        for (int r = 0; r < 2; r++) {
            char path[4200];
            snprintf(path, sizeof path, "%s%s/cpu.cfs_quota_us", roots[r], dir);
            double quota = file_number(path);
            snprintf(path, sizeof path, "%s%s/cpu.cfs_period_us", roots[r], dir);
            double period = file_number(path);
            if (quota > 0 && period > 0) return quota / period;
        }
        return 0;
    }
    /* v2: the path, then each ancestor up to the root ("") */
    if (strcmp(dir, "/") == 0) dir[0] = 0;
    double best = 0;
    for (;;) {
        double q = quota_v2(dir);
        if (q > 0 && (best == 0 || q < best)) best = q;
        char *slash = strrchr(dir, '/');
        if (!slash) break;
        *slash = 0;
    }
    return best;
}

int sm_pool_default_threads(void) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int n = online > 0 ? (int)online : 1;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        n = cores_in(&set, CPU_COUNT(&set));
    double quota = cgroup_quota();
    if (quota > 0 && quota < n) n = (int)quota + (quota > (int)quota ? 1 : 0);
    return n > 0 ? n : 1;
}
