/*
** dispatch.c -- completes the kernel tables for this CPU, once, and picks
** one. The x86 tables exist when the Makefile builds avx2.c and avx512.c (it
** defines SM_X86_KERNELS on x86); elsewhere only the scalar table does.
*/
#include "kernels_internal.h"

#include <pthread.h>
#include <string.h>
#include <unistd.h>

/* The L2 size per core from the C library (glibc reads CPUID) if sane, else the default. */
static size_t read_l2(void) {
    long b = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return b >= 64 * 1024 && b <= 64L * 1024 * 1024 ? (size_t)b : SM_L2_DEFAULT;
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

/* CPUID leaf 7: AVX-VNNI (subleaf 1, EAX bit 4); AVX512-VNNI (ECX bit 11) with VL (EBX bit 31). */
static int has_avxvnni(void) {
    unsigned a, b, c, d;
    return has_avx2() && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 4 & 1);
}
static int has_avx512vnni(void) {
    unsigned a, b, c, d;
    return has_avx512() && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c >> 11 & 1) && (b >> 31 & 1);
}
#endif

/* The tables this CPU runs, scalar first, completed by init. */
static sm_kernels tables[3];
static size_t n_tables;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* Once, before any table is handed out: each table's integer products and the cache size. */
static void init(void) {
    tables[n_tables++] = sm_kernels_scalar;
#ifdef SM_X86_KERNELS
    const sm_qkernel *q2 = has_avxvnni() ? &sm_qkernel_avxvnni : &sm_qkernel_avx2_maddubs;
    if (has_avx2()) {
        tables[n_tables] = sm_kernels_avx2;
        tables[n_tables++].quant = q2;
    }
    if (has_avx512()) {
        tables[n_tables] = sm_kernels_avx512;
        tables[n_tables++].quant = has_avx512vnni() ? &sm_qkernel_avx512vnni : q2;
    }
#endif
    size_t l2 = read_l2();
    for (size_t i = 0; i < n_tables; i++) tables[i].l2_bytes = l2;
}

size_t sm_kernels_scratch(const sm_kernels *k, size_t K) {
    size_t qb = SM_QX_BYTES(K) > SM_QGEMM_BYTES ? SM_QX_BYTES(K) : SM_QGEMM_BYTES;
    size_t q = (qb + sizeof(float) - 1) / sizeof(float);
    return q > k->matmul_scratch ? q : k->matmul_scratch;
}

size_t sm_kernels_qavailable(const sm_qkernel **out, size_t cap) {
    size_t n = 0;
    if (n < cap) out[n++] = &sm_qkernel_scalar;
#ifdef SM_X86_KERNELS
    if (n < cap && has_avx2()) out[n++] = &sm_qkernel_avx2_maddubs;
    if (n < cap && has_avxvnni()) out[n++] = &sm_qkernel_avxvnni;
    if (n < cap && has_avx512vnni()) out[n++] = &sm_qkernel_avx512vnni;
#endif
    return n;
}

const char *sm_kernels_int8_name(const sm_kernels *k) {
    return k->quant->name;
}

const sm_kernels *sm_kernels_reference(void) {
    pthread_once(&once, init);
    return &tables[0];
}

size_t sm_kernels_available(const sm_kernels **out, size_t cap) {
    pthread_once(&once, init);
    size_t n = 0;
    for (; n < n_tables && n < cap; n++) out[n] = &tables[n];
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
