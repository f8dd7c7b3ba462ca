/*
** test_dispatch.c -- choosing kernels: specs, composed tables (each
** operation through the table it names, bit for bit), the CPU's identity
** and the table keyed by CPU family.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sm_half.h"
#include "sm_kernels.h"
#include "sm_quant.h"
#include "test.h"

/* Bad specs: SM_ERR_INPUT and a message naming the item. */
void test_dispatch_bad_specs(void) {
    static const struct {
        const char *spec, *needle;
    } bad[] = {
        {"neon", "'neon' is not a kernel table"},
        {"rows=neon", "'neon' is not a kernel table"},
        {"bogus=scalar", "'bogus' is not an operation"},
        {"scalar,,rows=scalar", "'' is not a kernel table"},
        {"rows=", "'' is not a kernel table"},
        {"=scalar", "'' is not an operation"},
        {"", "an empty name"},
        {"bf16=fast", "bf16=fast must be bf16 (vdpbf16ps, activations rounded to bf16) or f32"},
        {"f32=bf16", "'f32' is not an operation (gemm, qgemm, rows, qrows, attention), a 16-bit type (bf16, f16) "
                     "or prefetch"},
        {"prefetch=soon", "prefetch=soon must be next (a lone row asks for the next f32 panels' lines) or hw"},
        {"scalar,prefetch=next", "prefetch=next needs a gemm table whose lone rows on f32 panels can ask"},
        {"scalar,f16=bf16", "f16=bf16 needs vdpbf16ps"},
        {"scalar,bf16=bf16", "bf16=bf16 needs vdpbf16ps"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const sm_kernels *k = NULL;
        sm_error err = {{0}};
        CHECKF(sm_kernels_choose(bad[i].spec, &k, &err) == SM_ERR_INPUT && strstr(err.msg, bad[i].needle),
               "spec '%s': '%s'", bad[i].spec, err.msg);
        CHECK(sm_kernels_select(bad[i].spec) == NULL);
    }
    /* a table this CPU lacks, in the words the tests of every table skip on */
    const sm_kernels *avail[8];
    if (sm_kernels_available(avail, 8) < 3) {
        const sm_kernels *k = NULL;
        sm_error err = {{0}};
        CHECKF(sm_kernels_choose("rows=avx512", &k, &err) == SM_ERR_INPUT &&
               strstr(err.msg, "'avx512' is not supported by this CPU (this CPU runs scalar"), "'%s'", err.msg);
    }
    /* a plain name and a composition of one table are that table itself */
    const sm_kernels *ref = sm_kernels_reference();
    CHECK(sm_kernels_select("scalar") == ref);
    CHECK(sm_kernels_select("scalar,rows=scalar,attention=scalar") == ref);
    CHECK(sm_kernels_select("auto") == sm_kernels_select(NULL));
    CHECK(sm_kernels_select("auto,rows=scalar") == sm_kernels_select("rows=scalar"));
    for (int op = 0; op < SM_KOP_COUNT; op++) CHECK(ref->from[op] == ref);
    /* f32 arithmetic for 16-bit weights is every table's; asking for it where it is changes nothing */
    CHECK(sm_kernels_select("scalar,bf16=f32,f16=f32") == ref);
    /* so is the hardware's prefetch for a lone row on f32 panels where the table has no other */
    CHECK(sm_kernels_select("scalar,prefetch=hw") == ref);
    const sm_kernels *a2 = sm_kernels_select("avx2"), *a5 = sm_kernels_select("avx512");
    if (a2) CHECK(a2->row_prefetch == 0 && sm_kernels_select("avx2,prefetch=hw") == a2);
    if (a5) { /* the avx512 table asks for the next panels unless told: its own gemm with row_prefetch 2 */
        static const struct { const char *spec, *name; unsigned char pf; } pv[] = {
            {"avx512,prefetch=hw", "avx512,prefetch=hw", 2},
            {"avx512,prefetch=hw,prefetch=next", "avx512", 1},
            {"avx512,prefetch=hw,avx2", "avx2", 0}, /* a table item starts over */
            {"avx512,rows=avx2,prefetch=hw", "avx512,rows=avx2,prefetch=hw", 2},
            {"avx512,prefetch=hw,gemm=avx2", "avx512,gemm=avx2", 0},
        };
        CHECK(a5->row_prefetch == 1);
        for (size_t i = 0; i < sizeof pv / sizeof *pv; i++) {
            const sm_kernels *k = sm_kernels_select(pv[i].spec);
            CHECKF(k && strcmp(k->name, pv[i].name) == 0 && k->from[SM_KOP_GEMM]->row_prefetch == pv[i].pf,
                   "spec '%s' named '%s'", pv[i].spec, k ? k->name : "(none)");
            if (!k) continue;
            CHECK(sm_kernels_select(k->name) == k);
            char desc[256];
            sm_kernels_describe(k, desc, sizeof desc);
            CHECKF((strstr(desc, "prefetch=hw") != NULL) == (pv[i].pf == 2), "'%s': %s", pv[i].spec, desc);
        }
        if (a2) CHECK(sm_kernels_select("avx512,gemm=avx2,prefetch=next") == NULL);
    }
    const sm_kernels *best = sm_kernels_select("auto");
    if (!best->from[SM_KOP_GEMM]->dot16_types) {
        CHECK(sm_kernels_select("auto,bf16=f32") == best);
        return;
    }
    /* where the CPU has AVX512-BF16: each type on vdpbf16ps or in f32 as the items say, named so */
    static const struct { const char *spec, *name; unsigned types; } v[] = {
        {"avx512,bf16=f32", "avx512,bf16=f32", 0},
        {"avx512,f16=bf16", "avx512,f16=bf16", 1u << SM_DTYPE_BF16 | 1u << SM_DTYPE_F16},
        {"avx512,f16=bf16,bf16=f32", "avx512,bf16=f32,f16=bf16", 1u << SM_DTYPE_F16},
        {"avx512,bf16=f32,bf16=bf16", "avx512", 1u << SM_DTYPE_BF16},
        {"avx512,f16=bf16,avx2", "avx2", 0}, /* a table item starts over */
        {"avx512,rows=avx2,f16=bf16", "avx512,rows=avx2,f16=bf16", 1u << SM_DTYPE_BF16 | 1u << SM_DTYPE_F16},
    };
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        const sm_kernels *k = sm_kernels_select(v[i].spec);
        CHECKF(k && strcmp(k->name, v[i].name) == 0, "spec '%s' named '%s'", v[i].spec, k ? k->name : "(none)");
        if (!k) continue;
        CHECK(sm_kernels_select(k->name) == k);
        CHECKF(k->from[SM_KOP_GEMM]->dot16_types == v[i].types && k->dot16_types == v[i].types,
               "spec '%s': dot16_types %#x", v[i].spec, k->from[SM_KOP_GEMM]->dot16_types);
        CHECK(strcmp(k->from[SM_KOP_GEMM]->name, v[i].types || strstr(v[i].spec, "=f32") ? "avx512" : "avx2") == 0);
        char desc[256];
        sm_kernels_describe(k, desc, sizeof desc);
        const char *want = v[i].types == 0 ? NULL : v[i].types == 1u << SM_DTYPE_F16 ? "(f16: vdpbf16ps)"
                           : v[i].types == 1u << SM_DTYPE_BF16 ? "(bf16: vdpbf16ps)" : "(f16, bf16: vdpbf16ps)";
        CHECKF(want ? strstr(desc, want) != NULL : strstr(desc, "vdpbf16ps") == NULL, "'%s': %s", v[i].spec, desc);
    }
}

/* CPUID leaf 1 EAX values of real CPUs (the vendors' revision guides) decoded to family and model. */
void test_dispatch_cpu_identity(void) {
    static const struct {
        unsigned eax, family, model;
        const char *what;
    } cpus[] = {
        {0x00A00F11, 25, 0x01, "AMD Zen 3 (Milan B1)"},
        {0x00A20F12, 25, 0x21, "AMD Zen 3 (Vermeer B2)"},
        {0x00A10F11, 25, 0x11, "AMD Zen 4 (Genoa B1)"},
        {0x00A60F12, 25, 0x61, "AMD Zen 4 (Raphael B2)"},
        {0x00B00F21, 26, 0x02, "AMD Zen 5 (Turin)"},
        {0x00830F10, 23, 0x31, "AMD Zen 2 (Rome)"},
        {0x00050657, 6, 0x55, "Intel Cascade Lake"},
        {0x000906EA, 6, 0x9E, "Intel Coffee Lake"},
        {0x000C06F2, 6, 0xCF, "Intel Emerald Rapids"},
        {0x00000F29, 15, 0x02, "Intel Pentium 4"},
    };
    for (size_t i = 0; i < sizeof cpus / sizeof *cpus; i++) {
        unsigned f, m;
        sm_kernels_cpu_decode(cpus[i].eax, &f, &m);
        CHECKF(f == cpus[i].family && m == cpus[i].model, "%s: family %u model 0x%x, want %u 0x%x",
               cpus[i].what, f, m, cpus[i].family, cpus[i].model);
    }
    /* the table keyed by family: Zen 4 decodes its float weights with avx2, Zen 5 leaves the
       next f32 panels of a lone row to the hardware prefetchers; Zen 3 and another vendor with
       Zen 4's numbers have no entry */
    const char *z4 = sm_kernels_cpu_choice("AuthenticAMD", 25, 0x61);
    CHECK(z4 && strstr(z4, "rows=avx2"));
    CHECK(sm_kernels_cpu_choice("AuthenticAMD", 25, 0x11) && sm_kernels_cpu_choice("AuthenticAMD", 25, 0xa0));
    CHECK(!sm_kernels_cpu_choice("AuthenticAMD", 25, 0x01) && !sm_kernels_cpu_choice("AuthenticAMD", 25, 0x21));
    const char *z5 = sm_kernels_cpu_choice("AuthenticAMD", 26, 0x02);
    CHECK(z5 && strcmp(z5, "prefetch=hw") == 0);
    CHECK(!sm_kernels_cpu_choice("GenuineIntel", 25, 0x61) && !sm_kernels_cpu_choice("AuthenticAMD", 26, 0x60));
    /* Emerald Rapids prefills bf16 weights on f32 arithmetic; other Intel models have no entry */
    const char *emr = sm_kernels_cpu_choice("GenuineIntel", 6, 0xcf);
    CHECK(emr && strcmp(emr, "bf16=f32") == 0);
    CHECK(!sm_kernels_cpu_choice("GenuineIntel", 6, 0x55) && !sm_kernels_cpu_choice("AuthenticAMD", 6, 0xcf));
    char vendor[13];
    unsigned f, m;
    sm_kernels_cpu(vendor, &f, &m);
#ifdef SM_X86_KERNELS
    CHECKF(strlen(vendor) == 12 && f >= 6, "vendor '%s' family %u", vendor, f);
#endif
}

/*
** A composed table hands each operation to the table it names: products of
** 1-3 rows and matmul_rows to ROWS/QROWS's, of 4 or more to GEMM/QGEMM's,
** attention to ATTENTION's; every result equal bit for bit to that
** table's own, for f32, f16 and quantized weights.
*/
void test_dispatch_composed(void) {
    const sm_kernels *ks[8];
    size_t nk = sm_kernels_available(ks, 8);
    if (nk < 2) {
        test_skip("one kernel table on this CPU: nothing to compose");
        return;
    }
    const sm_kernels *lo = ks[0], *hi = ks[nk - 1];
    char spec[96], want[96];
    /* decoding from the reference, prefill from the best; and the other way round */
    for (int way = 0; way < 2; way++) {
        const sm_kernels *gemm = way ? lo : hi, *rows = way ? hi : lo, *base = hi;
        if (way)
            snprintf(spec, sizeof spec, "%s,gemm=%s,qgemm=%s,attention=%s", hi->name, lo->name, lo->name, lo->name);
        else
            snprintf(spec, sizeof spec, "%s,rows=%s,qrows=%s", hi->name, lo->name, lo->name);
        const sm_kernels *c = sm_kernels_select(spec);
        CHECKF(c && strcmp(c->name, spec) == 0, "spec '%s' named '%s'", spec, c ? c->name : "(none)");
        if (!c) return;
        CHECK(sm_kernels_select(c->name) == c); /* its name is a spec of itself, the same table */
        CHECK(c->from[SM_KOP_GEMM] == gemm && c->from[SM_KOP_QGEMM] == gemm);
        CHECK(c->from[SM_KOP_ROWS] == rows && c->from[SM_KOP_QROWS] == rows);
        CHECK(c->attention == (way ? lo : hi)->attention && c->softmax == base->softmax);
        char desc[256];
        sm_kernels_describe(c, desc, sizeof desc);
        snprintf(want, sizeof want, "rows %s, qrows %s", rows->name, rows->name);
        CHECKF(strstr(desc, want) != NULL, "describe: '%s'", desc);
        static const sm_dtype dts[] = {SM_DTYPE_F32, SM_DTYPE_F16, SM_DTYPE_Q8_0, SM_DTYPE_Q4_K};
        unsigned long long s = 11;
        const size_t N = 40, K = 512, n0 = 3, n1 = 37;
        for (size_t d = 0; d < sizeof dts / sizeof *dts; d++) {
            float *wf = test_rnd(N * K, &s, 1);
            void *w = malloc(sm_dtype_row_bytes(dts[d], K) * N);
            if (dts[d] == SM_DTYPE_F32) memcpy(w, wf, N * K * sizeof(float));
            else if (dts[d] == SM_DTYPE_F16)
                for (size_t i = 0; i < N * K; i++) ((uint16_t *)w)[i] = sm_f32_to_f16(wf[i]);
            else CHECK(sm_quant_quantize(w, wf, dts[d], N * K) == N * K / sm_dtype_block(dts[d]));
            size_t scr_n = sm_kernels_scratch(c, K);
            CHECK(scr_n >= sm_kernels_scratch(lo, K) && scr_n >= sm_kernels_scratch(hi, K));
            float *scr = test_rnd(scr_n, &s, 1);
            for (size_t T = 1; T <= 9; T += (T < 5 ? 1 : 4)) {
                float *x = test_rnd(T * K, &s, 1), *a = test_rnd(T * N, &s, 1), *b = test_rnd(T * N, &s, 1);
                bool q = dts[d] >= SM_DTYPE_Q8_0;
                const sm_kernels *mt = T >= 4 ? (q ? c->from[SM_KOP_QGEMM] : gemm) : rows;
                c->matmul(c, a, x, w, dts[d], NULL, T, N, K, n0, n1, scr);
                mt->matmul(mt, b, x, w, dts[d], NULL, T, N, K, n0, n1, scr);
                for (size_t t = 0; t < T; t++)
                    CHECKF(memcmp(a + t * N + n0, b + t * N + n0, (n1 - n0) * sizeof(float)) == 0,
                           "%s matmul %s T=%zu: row %zu differs from %s's", c->name, sm_dtype_name(dts[d]), T, t,
                           mt->name);
                c->matmul_rows(c, a, x, w, dts[d], NULL, T, N, K, n0, n1, scr);
                rows->matmul_rows(rows, b, x, w, dts[d], NULL, T, N, K, n0, n1, scr);
                for (size_t t = 0; t < T; t++)
                    CHECKF(memcmp(a + t * N + n0, b + t * N + n0, (n1 - n0) * sizeof(float)) == 0,
                           "%s matmul_rows %s T=%zu: row %zu differs from %s's", c->name, sm_dtype_name(dts[d]),
                           T, t, rows->name);
                free(x), free(a), free(b);
            }
            free(wf), free(w), free(scr);
        }
    }
}

/*
** The peak loops: each one this CPU runs does its iterations (twice the
** iterations, twice the operations; 16 f32 or 64 int8 operations per
** 256-bit instruction, twice that at 512 bits, times its accumulators) and
** leaves a finite value; one it does not run reports nothing and touches
** nothing.
*/
void test_dispatch_peaks(void) {
    /* the block steps' loops: 8 vpdpbusd an iteration and accumulator; the int16 runs' 8 vpmaddubsw */
    static const double per_instr[SM_PEAK_COUNT] = {16, 32, 64, 64, 128, 64, 8 * 128, 8 * 128, 8 * 64};
    int ran = 0;
    for (int p = 0; p < SM_PEAK_COUNT; p++) {
        float sink = 0;
        CHECKF(sm_kernels_peak_name((sm_peak)p)[0] != 0, "peak %d has no name", p);
        double a = sm_kernels_peak((sm_peak)p, 1000, &sink), b = sm_kernels_peak((sm_peak)p, 2000, &sink);
        if (!sm_kernels_peak_runs((sm_peak)p)) {
            CHECKF(a == 0 && b == 0 && sink == 0, "%s: ran on a CPU without it", sm_kernels_peak_name((sm_peak)p));
            printf("     (%s: not on this CPU)\n", sm_kernels_peak_name((sm_peak)p));
            continue;
        }
        ran++;
        CHECKF(a > 0 && b == 2 * a, "%s: %g then %g operations", sm_kernels_peak_name((sm_peak)p), a, b);
        CHECKF(fmod(a, per_instr[p] * 1000) == 0 && a / (per_instr[p] * 1000) >= 8,
               "%s: %g operations for 1000 iterations is not a whole number of at least 8 accumulators",
               sm_kernels_peak_name((sm_peak)p), a);
        CHECKF(isfinite(sink), "%s: its value is not finite", sm_kernels_peak_name((sm_peak)p));
    }
    CHECKF(sm_kernels_peak(SM_PEAK_COUNT, 1000, &(float){0}) == 0, "a peak past the last ran");
    /* the peak each table's products are set beside: none for the reference, the FMA of the
       float GEMM's width, the int8 products where the packed quantized product takes the type */
    const sm_kernels *ks[8];
    size_t nk = sm_kernels_available(ks, 8);
    for (size_t t = 0; t < nk; t++)
        for (int dt = 0; dt < SM_DTYPE_COUNT; dt++) {
            sm_peak p = sm_kernels_peak_of(ks[t], (sm_dtype)dt);
            bool q = sm_dtype_quantized((sm_dtype)dt);
            sm_peak want = t == 0                           ? SM_PEAK_COUNT
                           : q                              ? p /* checked below */
                           : ks[t]->dot16_types >> dt & 1u ? SM_PEAK_BF16_512
                           : strcmp(ks[t]->name, "avx512") == 0 ? SM_PEAK_FMA512 : SM_PEAK_FMA256;
            CHECKF(p == want, "%s %s: peak %d, want %d", ks[t]->name, sm_dtype_name((sm_dtype)dt), p, want);
            CHECKF(p == SM_PEAK_COUNT || sm_kernels_peak_runs(p), "%s %s: a peak this CPU lacks", ks[t]->name,
                   sm_dtype_name((sm_dtype)dt));
            if (q && t > 0 && dt == SM_DTYPE_Q4_0)
                CHECKF(p == SM_PEAK_MADDUBS256_RUN || p == SM_PEAK_VNNI256 || p == SM_PEAK_VNNI512,
                       "%s q4_0 (a packed int8 product on every SIMD table): peak %d", ks[t]->name, p);
        }
    /* the bf16 GEMM exactly where the CPU has AVX512-BF16: the avx512 table's, for bf16 weights */
    for (size_t t = 0; t < nk; t++)
        CHECKF(ks[t]->dot16_types == (strcmp(ks[t]->name, "avx512") == 0 && sm_kernels_peak_runs(SM_PEAK_BF16_512)
                                          ? 1u << SM_DTYPE_BF16 : 0u),
               "%s: dot16_types %#x", ks[t]->name, ks[t]->dot16_types);
#ifdef SM_X86_KERNELS
    if (sm_kernels_select("avx2")) CHECKF(ran >= 2, "AVX2 CPU, but %d peak loops ran", ran);
#else
    CHECKF(ran == 0, "a build without SIMD tables ran %d peak loops", ran);
#endif
}
