/*
** test_main.c -- runs every C unit test; prints one line per test and a
** closing "N passed, N failed, N skipped" line. Exit 1 if any failed.
**   test_runner [NAME-SUBSTRING]
*/
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

static const struct {
    const char *name;
    void (*fn)(void);
} tests[] = {
#define T(name) {#name, name},
#include "test_list.h"
#undef T
};

static bool failed, skipped;
static char skip_reason[256];

void test_fail(const char *file, int line, const char *fmt, ...) {
    if (!failed) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stdout, "  %s:%d: ", file, line);
        vfprintf(stdout, fmt, ap);
        fputc('\n', stdout);
        va_end(ap);
    }
    failed = true;
}

void test_skip(const char *why) {
    skipped = true;
    snprintf(skip_reason, sizeof skip_reason, "%s", why);
}

bool test_failed(void) {
    return failed;
}

float test_rand(unsigned long long *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(*s >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
}

void *test_alloc(size_t bytes) {
    void *p = aligned_alloc(64, ((bytes ? bytes : 1) + 63) & ~(size_t)63);
    if (!p) abort();
    return p;
}

float *test_rnd(size_t n, unsigned long long *s, float scale) {
    float *p = test_alloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) p[i] = test_rand(s) * scale;
    return p;
}

const char *test_models_dir(void) {
    const char *d = getenv("SM_TEST_MODELS");
    return d && *d ? d : NULL;
}

size_t test_kernel_specs(const char **out, size_t cap) {
    const sm_kernels *ks[8];
    size_t nk = sm_kernels_available(ks, 8), n = 0;
    for (size_t i = 0; i < nk && n < cap; i++) out[n++] = ks[i]->name;
    if (nk >= 2 && n < cap) {
        char spec[64];
        snprintf(spec, sizeof spec, "%s,rows=%s,qrows=%s", ks[nk - 1]->name, ks[0]->name, ks[0]->name);
        const sm_kernels *c = sm_kernels_select(spec);
        if (c && c->from[SM_KOP_ROWS] == ks[0] && c->from[SM_KOP_GEMM] == ks[nk - 1]) out[n++] = c->name;
        else test_fail(__FILE__, __LINE__, "the composed table '%s' is missing or not as named", spec);
    }
    return n;
}

bool test_rig_open(test_rig *r, const char *name, int nth, const char *kern, bool all, size_t batch,
                   size_t nseq) {
    memset(r, 0, sizeof *r);
    const char *dir = test_models_dir();
    if (!dir) {
        test_skip("SM_TEST_MODELS is not set (run through make test)");
        return false;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    sm_error err = {{0}};
    if (sm_model_load(&r->m, path, true, &err)) {
        test_fail(__FILE__, __LINE__, "load %s: %s", path, err.msg);
        return false;
    }
    const sm_config *c = sm_model_config(r->m);
    r->V = (size_t)c->n_vocab;
    /* q4_0 / q8_0 matrices repacked where the table takes them, as sessions do by default */
    const sm_kernels *k = sm_kernels_select(kern);
    unsigned rt = k ? sm_kernels_repack_types(k) : 0;
    if (rt && sm_model_repack(r->m, rt, nth, &err)) {
        test_fail(__FILE__, __LINE__, "repack %s: %s", path, err.msg);
        return false;
    }
    r->sp = (sm_state_params){.n_ctx = (size_t)c->n_ctx, .max_batch = batch, .all_logits = all, .n_threads = nth,
                              .kernels = k, .n_seq = nseq, .kv_type = SM_DTYPE_F32,
                              .repack = rt && sm_model_repacked_bytes(r->m) > 0, .row_logits = 5};
    sm_state_plan plan;
    if (sm_state_plan_bytes(r->m, &r->sp, &plan, &err) || sm_pool_create(&r->pool, nth) ||
        sm_arena_init(&r->arena, plan.total) || sm_state_init(&r->s, r->m, &r->sp, r->pool, &r->arena, &err)) {
        test_fail(__FILE__, __LINE__, "setup: %s", err.msg);
        return false;
    }
    return true;
}

void test_rig_close(test_rig *r) {
    sm_arena_free(&r->arena);
    sm_pool_free(r->pool);
    sm_model_free(r->m);
}

int main(int argc, char **argv) {
    int pass = 0, fail = 0, skip = 0;
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        if (argc > 1 && !strstr(tests[i].name, argv[1])) continue;
        failed = skipped = false;
        tests[i].fn();
        if (failed) {
            printf("FAIL %s\n", tests[i].name);
            fail++;
        } else if (skipped) {
            printf("skip %s: %s\n", tests[i].name, skip_reason);
            skip++;
        } else {
            printf("ok   %s\n", tests[i].name);
            pass++;
        }
        fflush(stdout);
    }
    printf("unit: %d passed, %d failed, %d skipped\n", pass, fail, skip);
    return fail ? 1 : 0;
}
