/*
** dispatch.c -- picks a kernel table from CPU features, once.
** The x86 tables exist when the Makefile builds avx2.c and avx512.c (it
** defines SM_X86_KERNELS on x86); elsewhere only the scalar table does.
*/
#include "kernels_internal.h"

#include <pthread.h>
#include <string.h>
#include <unistd.h>

size_t sm_kernels_l2_bytes = 512 * 1024;

/* The L2 size per core from the C library (glibc reads CPUID), kept if sane. */
static void read_l2(void) {
    long b = sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (b >= 64 * 1024 && b <= 64L * 1024 * 1024) sm_kernels_l2_bytes = (size_t)b;
}

#ifdef SM_X86_KERNELS
#include <cpuid.h>

/* F16C (vcvtph2ps), which clang's __builtin_cpu_supports does not name. */
static int has_f16c(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

static int has_avx2(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
}
static int has_avx512(void) {
    __builtin_cpu_init();
    return has_avx2() && __builtin_cpu_supports("avx512f");
}
#endif

const sm_kernels *sm_kernels_reference(void) {
    return &sm_kernels_scalar;
}

size_t sm_kernels_available(const sm_kernels **out, size_t cap) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, read_l2);
    size_t n = 0;
    if (n < cap) out[n++] = &sm_kernels_scalar;
#ifdef SM_X86_KERNELS
    if (n < cap && has_avx2()) out[n++] = &sm_kernels_avx2;
    if (n < cap && has_avx512()) out[n++] = &sm_kernels_avx512;
#endif
    return n;
}

const sm_kernels *sm_kernels_select(const char *name) {
    const sm_kernels *avail[8];
    size_t n = sm_kernels_available(avail, 8);
    if (!name || strcmp(name, "auto") == 0) return avail[n - 1];
    for (size_t i = 0; i < n; i++)
        if (strcmp(avail[i]->name, name) == 0) return avail[i];
    return NULL;
}
