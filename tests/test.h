/*
** test.h -- the tiny test harness: one runner (test_main.c), one table.
** A test is `void test_x(void)`; CHECK records a failure and returns.
*/
#ifndef SM_TEST_H
#define SM_TEST_H

#include <stdbool.h>
#include <stddef.h>

#include "sm_model.h"

void test_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void test_skip(const char *why);
bool test_failed(void);

#define CHECK(cond)                                                                      \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            test_fail(__FILE__, __LINE__, "%s", #cond);                                  \
            return;                                                                      \
        }                                                                                \
    } while (0)

#define CHECKF(cond, ...)                                                                \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            test_fail(__FILE__, __LINE__, __VA_ARGS__);                                  \
            return;                                                                      \
        }                                                                                \
    } while (0)

/* Every test function (the table is test_list.h). */
#define T(name) void name(void);
#include "test_list.h"
#undef T

/* Deterministic pseudo-random floats in [-1, 1). */
float test_rand(unsigned long long *state);

/* bytes (at least 1), 64-byte aligned, for free(); aborts when out of memory. */
void *test_alloc(size_t bytes);
/* n of them times scale in a fresh 64-byte-aligned buffer (free() it; n = 0 gives a 1-float one). */
float *test_rnd(size_t n, unsigned long long *state, float scale);

/*
** The kernel specs the exactness tests run through: every table this CPU runs and, with two or
** more, one composed table (the best ISA's, decoding's products from the scalar reference), so
** sequences decoded together equal them alone also when prefill and decoding use other tables.
*/
size_t test_kernel_specs(const char **out, size_t cap);

/* Directory of the random test models (SM_TEST_MODELS), or NULL (then skip). */
const char *test_models_dir(void);

/* Test model `name` loaded with a state of nseq sequences on its own pool. */
typedef struct {
    sm_model *m;
    sm_pool *pool;
    sm_arena arena;
    sm_state *s;
    sm_state_params sp; /* n_ctx is the model's */
    size_t V;
} test_rig;

/* false when the rig cannot be had: skipped (no SM_TEST_MODELS) or failed, said. */
bool test_rig_open(test_rig *r, const char *name, int nth, const char *kern, bool all, size_t batch,
                   size_t nseq);
void test_rig_close(test_rig *r);

#endif
