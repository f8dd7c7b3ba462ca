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

const char *test_models_dir(void) {
    const char *d = getenv("SM_TEST_MODELS");
    return d && *d ? d : NULL;
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
