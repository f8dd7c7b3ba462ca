/* Tests of the arena and the thread pool. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sm_arena.h"
#include "sm_pool.h"
#include "test.h"

static void carve(sm_arena *a, void **p) {
    p[0] = sm_arena_alloc(a, 3, 1);
    p[1] = sm_arena_alloc(a, 100, sizeof(float));
    p[2] = sm_arena_alloc(a, 1, 65);
}

void test_arena_plan_matches_carve(void) {
    sm_arena m, a;
    void *p[3];
    sm_arena_measure(&m);
    carve(&m, p);
    CHECK(!m.overflow && m.used == 64 + 448 + 65);
    CHECK(sm_arena_init(&a, m.used) == SM_OK);
    carve(&a, p);
    CHECK(!a.overflow && a.used == m.used);
    for (int i = 0; i < 3; i++) CHECK(p[i] && (uintptr_t)p[i] % 64 == 0);
    memset(p[2], 1, 65); /* the last block really has its bytes */
    CHECK(sm_arena_alloc(&a, 1, 1) == NULL && a.overflow); /* full */
    sm_arena_free(&a);
}

void test_arena_overflow_and_fail_after(void) {
    sm_arena a;
    CHECK(sm_arena_init(&a, 1024) == SM_OK);
    CHECK(sm_arena_alloc(&a, SIZE_MAX / 2, 4) == NULL && a.overflow);
    a.overflow = false;
    size_t mark = sm_arena_mark(&a);
    a.fail_after = 2;
    CHECK(sm_arena_alloc(&a, 1, 8) != NULL);
    CHECK(sm_arena_alloc(&a, 1, 8) == NULL && a.overflow); /* injected failure */
    sm_arena_reset(&a, mark);
    CHECK(a.used == mark);
    sm_arena_free(&a);
    sm_arena_free(&a); /* free is safe twice */
}

/* The THPeligible line of the mapping of /proc/self/smaps that holds p: 1 or 0, -1 if none. */
static int thp_eligible(const void *p) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[512];
    int in = 0, r = -1;
    while (r < 0 && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
            in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
        else if (in && strncmp(line, "THPeligible:", 12) == 0)
            r = atoi(line + 12);
    }
    fclose(f);
    return r;
}

void test_alloc_big_alignment_and_huge_pages(void) {
    char *small = sm_alloc_big(100), *big = sm_alloc_big(3u << 20);
    CHECK(small && (uintptr_t)small % 64 == 0);
    CHECK(big && (uintptr_t)big % (2u << 20) == 0); /* whole huge pages */
    memset(small, 1, 100);
    memset(big, 1, 3u << 20); /* every byte asked for is there */
    CHECK(sm_alloc_big(SIZE_MAX - 4096) == NULL);
    /* the hint reaches the kernel: its mapping may be backed by huge pages (THP "madvise" mode) */
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    char mode[128] = "";
    if (f) {
        if (!fgets(mode, sizeof mode, f)) mode[0] = 0;
        fclose(f);
    }
    if (!strstr(mode, "[madvise]") && !strstr(mode, "[always]"))
        test_skip("huge pages: transparent huge pages are off or absent here");
    else
        CHECK(thp_eligible(big) == 1);
    sm_free_big(small);
    sm_free_big(big);
}

void test_pool_split_covers_range(void) {
    size_t ns[] = {0, 1, 5, 63, 64, 65, 768, 50257};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (int nth = 1; nth <= 5; nth++) {
            size_t next = 0;
            for (int ith = 0; ith < nth; ith++) {
                size_t b, e;
                sm_pool_split(ns[i], 64, ith, nth, &b, &e);
                CHECK(b == next && e >= b && e <= ns[i]);
                if (e < ns[i] && e > b) CHECK(e % 64 == 0);
                next = e;
            }
            CHECK(next == ns[i]);
        }
}

typedef struct {
    sm_pool *pool;
    atomic_int counter;
    int seen[8][100];
} barrier_task;

static void barrier_fn(void *arg, int ith, int nth) {
    barrier_task *t = arg;
    for (int round = 0; round < 100; round++) {
        atomic_fetch_add(&t->counter, 1);
        sm_pool_barrier(t->pool);
        t->seen[ith][round] = atomic_load(&t->counter); /* all increments of this round visible */
        sm_pool_barrier(t->pool);
    }
    (void)nth;
}

void test_pool_barrier_orders_phases(void) {
    for (int nth = 1; nth <= 4; nth++)
        for (int width = 0; width <= nth; width++) { /* 0: the pool's choice (all, here) */
            barrier_task t;
            memset(&t, 0, sizeof t);
            CHECK(sm_pool_create(&t.pool, nth) == SM_OK);
            sm_pool_set_width(t.pool, width);
            int w = width ? width : nth;
            for (int run = 0; run < 3; run++) { /* repeated runs reuse the workers */
                atomic_store(&t.counter, 0);
                sm_pool_run(t.pool, barrier_fn, &t);
                for (int ith = 0; ith < w; ith++)
                    for (int r = 0; r < 100; r++) CHECK(t.seen[ith][r] == w * (r + 1));
            }
            sm_pool_free(t.pool);
        }
}

/* A thread held at a barrier far longer than any spin: the others sleep in the
** kernel and wake when it arrives (the counts say they slept). */
typedef struct {
    sm_pool *pool;
    atomic_int before, after;
} hold_task;

static void hold_fn(void *arg, int ith, int nth) {
    hold_task *t = arg;
    atomic_fetch_add(&t->before, 1);
    if (ith == 0) {
        double t0 = sm_time_now();
        while (sm_time_now() - t0 < 5e-3) {
        }
    }
    sm_pool_barrier(t->pool);
    CHECK(atomic_load(&t->before) == nth);
    atomic_fetch_add(&t->after, 1);
}

void test_pool_waits_sleep_and_wake(void) {
    hold_task t = {0};
    CHECK(sm_pool_create(&t.pool, 3) == SM_OK);
    for (int run = 1; run <= 10; run++) {
        atomic_store(&t.before, 0);
        sm_pool_run(t.pool, hold_fn, &t);
        CHECK(atomic_load(&t.after) == 3 * run);
    }
    sm_pool_stats st;
    sm_pool_get_stats(t.pool, &st);
    CHECKF(st.sleeps > 0 && st.runs == 10 && st.runs_at_width[2] == 10,
           "sleeps %llu, runs %llu (%llu on 3 threads)", (unsigned long long)st.sleeps,
           (unsigned long long)st.runs, (unsigned long long)st.runs_at_width[2]);
    sm_pool_free(t.pool);
}

/* Phases of n items each; taken[phase][item] counts how often it was handed out. */
#define NEXT_PHASES 50
#define NEXT_ITEMS 37
typedef struct {
    sm_pool *pool;
    atomic_int taken[NEXT_PHASES][NEXT_ITEMS];
    atomic_int by_thread[8];
    int slow; /* this thread waits before each phase's loop, or -1 */
} next_task;

static void next_fn(void *arg, int ith, int nth) {
    next_task *t = arg;
    for (int ph = 0; ph < NEXT_PHASES; ph++) {
        size_t n = (size_t)(ph % NEXT_ITEMS) + 1, i;
        if (ith == t->slow) {
            double t0 = sm_time_now();
            while (sm_time_now() - t0 < 2e-4) {
            }
        }
        while ((i = sm_pool_next(t->pool, ith, n)) < n) {
            atomic_fetch_add(&t->taken[ph][i], 1);
            atomic_fetch_add(&t->by_thread[ith], 1);
        }
        CHECK(i == n);
        sm_pool_barrier(t->pool);
    }
    (void)nth;
}

/* Every item of every phase is handed out exactly once, however the threads
** run; a thread held back leaves its items to the others. */
void test_pool_next_hands_out_each_item_once(void) {
    for (int nth = 1; nth <= 4; nth++)
        for (int slow = -1; slow < (nth > 1 ? 1 : 0); slow++) {
            next_task *t = calloc(1, sizeof *t);
            CHECK(t && sm_pool_create(&t->pool, nth) == SM_OK);
            t->slow = slow;
            for (int run = 0; run < 2; run++) { /* a new run starts at 0 again */
                for (int ph = 0; ph < NEXT_PHASES; ph++)
                    for (int i = 0; i < NEXT_ITEMS; i++) atomic_store(&t->taken[ph][i], 0);
                sm_pool_run(t->pool, next_fn, t);
                for (int ph = 0; ph < NEXT_PHASES; ph++)
                    for (int i = 0; i < NEXT_ITEMS; i++)
                        CHECK(atomic_load(&t->taken[ph][i]) == (i <= ph % NEXT_ITEMS ? 1 : 0));
            }
            /* thread 0 waited 0.2 ms each phase: the others took its items (when they
               run beside it: with more threads than CPUs the pool yields, and who runs when
               is the scheduler's choice; on a busy machine the others may not run at all
               for a whole run, so up to 5 more runs are given before it counts as failed) */
            if (slow == 0 && nth <= sysconf(_SC_NPROCESSORS_ONLN)) {
                for (int again = 0; again < 5 && atomic_load(&t->by_thread[0]) >=
                                                     atomic_load(&t->by_thread[1]); again++) {
                    for (int k = 0; k < 8; k++) atomic_store(&t->by_thread[k], 0);
                    for (int ph = 0; ph < NEXT_PHASES; ph++)
                        for (int i = 0; i < NEXT_ITEMS; i++) atomic_store(&t->taken[ph][i], 0);
                    sm_pool_run(t->pool, next_fn, t);
                }
                CHECK(atomic_load(&t->by_thread[0]) < atomic_load(&t->by_thread[1]));
            }
            sm_pool_free(t->pool);
            free(t);
        }
}
