/*
** bench_pick.c -- `smallmind bench --pick-kernels`: every operation of every
** kernel table this CPU runs, timed on sm_bench's fixed cases (the tables
** interleaved, medians of 7), the table each operation should come from,
** the arithmetic bf16 weights' GEMM should take (vdpbf16ps or f32) and
** whether a lone row on f32 panels asks for the next ones (prefetch=next|hw),
** printed as the --kernels spec and the line of dispatch.c's CPU-family
** table that makes it this CPU's choice.
*/
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sm_bench.h"

enum { SAMPLES = 7, MAX_TABLES = 8 };

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Case i timed through each of the nt tables of run (interleaved; medians of SAMPLES into med,
   seconds per call; calls per sample set by ref's time). Out of memory: the message, and false. */
static bool time_case(size_t i, sm_pool *pool, int threads, const sm_kernels *const *run, size_t nt,
                      const sm_kernels *ref, double *med) {
    sm_bench_case *c;
    sm_error err = {{0}};
    if (sm_bench_case_new(&c, i, threads, &err)) {
        fprintf(stderr, "smallmind: %s\n", err.msg);
        return false;
    }
    /* calls per sample: about 20 ms of the reference table's, after a warm-up call of each */
    for (size_t t = 0; t < nt; t++) sm_bench_case_run(c, pool, run[t], 1);
    double one = sm_bench_case_run(c, pool, ref, 1);
    size_t calls = one > 0.02 ? 1 : one < 2e-5 ? 1000 : (size_t)(0.02 / one);
    double s[MAX_TABLES][SAMPLES];
    for (int r = 0; r < SAMPLES; r++)
        for (size_t t = 0; t < nt; t++) s[t][r] = sm_bench_case_run(c, pool, run[t], calls);
    sm_bench_case_free(c);
    for (size_t t = 0; t < nt; t++) {
        qsort(s[t], SAMPLES, sizeof(double), cmp_double);
        med[t] = s[t][SAMPLES / 2];
    }
    return true;
}

int cli_bench_pick(const cli_opts *o) {
    const sm_kernels *tabs[MAX_TABLES];
    size_t nt = sm_kernels_available(tabs, MAX_TABLES);
    const sm_kernels *best = tabs[nt - 1];
    sm_pool *pool = NULL;
    if (sm_pool_create(&pool, (int)o->threads)) {
        fprintf(stderr, "smallmind: cannot start %ld threads\n", o->threads);
        return EXIT_DATA;
    }
    cli_exit_now = 1; /* nothing to flush: a signal exits at once */
    char vendor[13], cpu[64];
    unsigned fam, mod;
    sm_kernels_cpu(vendor, &fam, &mod);
    sm_kernels_cpu_name(cpu, sizeof cpu);
    printf("CPU %s, %ld thread%s; microseconds per call, median of %d, the tables "
           "interleaved (each as %s with the operation from it)\n%-9s %-50s", cpu, o->threads,
           o->threads == 1 ? "" : "s", SAMPLES, best->name, "operation", "case");
    for (size_t t = 0; t < nt; t++) printf(" %10s", tabs[t]->name);
    printf("\n");
    double score[SM_KOP_COUNT][MAX_TABLES] = {{0}};
    int n_cases[SM_KOP_COUNT] = {0};
    for (size_t i = 0; i < sm_bench_n_cases(); i++) {
        if (sm_bench_case_dtype(i) == SM_DTYPE_BF16) continue; /* the arithmetic's pass, below */
        /* each table as the best table composed with this operation from it ("avx512,rows=avx2"):
           what a pick would run (a composition may run an operation its own way: the AVX2
           table's batches on 512-bit registers where the CPU has AVX-512) */
        sm_kernels_op op = sm_bench_case_op(i);
        const sm_kernels *run[MAX_TABLES];
        for (size_t t = 0; t < nt; t++) {
            char as[64];
            snprintf(as, sizeof as, "%s,%s=%s", best->name, sm_kernels_op_name(op), tabs[t]->name);
            run[t] = tabs[t] == best ? best : sm_kernels_select(as);
            if (!run[t]) run[t] = tabs[t];
        }
        double med[MAX_TABLES], fastest = 1e30;
        if (!time_case(i, pool, (int)o->threads, run, nt, best, med)) {
            sm_pool_free(pool);
            return EXIT_DATA;
        }
        printf("%-9s %-50s", sm_kernels_op_name(op), sm_bench_case_what(i));
        for (size_t t = 0; t < nt; t++) {
            if (med[t] < fastest) fastest = med[t];
            printf(" %10.1f", med[t] * 1e6);
        }
        printf("\n");
        fflush(stdout);
        for (size_t t = 0; t < nt; t++) score[op][t] += med[t] / fastest;
        n_cases[op]++;
    }
    /* per operation: the table with the least mean ratio to the fastest, case by case; the best
       ISA's table unless another is more than 3% ahead; the spec of those picks, as --kernels
       takes it, gives the table they make (named in its canonical form) */
    char spec[160];
    size_t sl = (size_t)snprintf(spec, sizeof spec, "%s", best->name);
    printf("per operation (mean over its cases of time / the fastest table's):\n");
    size_t picks[SM_KOP_COUNT];
    for (int op = 0; op < SM_KOP_COUNT; op++) {
        size_t pick = nt - 1;
        for (size_t t = 0; t < nt; t++)
            if (score[op][t] * 1.03 < score[op][pick]) pick = t;
        /* a table that repacks quantized weights was timed on them, which a session gives it
           only if its decoding products come from the same table: keep them together */
        bool apart = op == SM_KOP_QROWS && picks[SM_KOP_QGEMM] != pick &&
                     sm_kernels_repack_types(tabs[picks[SM_KOP_QGEMM]]) != 0;
        if (apart) pick = picks[SM_KOP_QGEMM];
        picks[op] = pick;
        printf("  %-9s", sm_kernels_op_name((sm_kernels_op)op));
        for (size_t t = 0; t < nt; t++) printf(" %s %.2f", tabs[t]->name, score[op][t] / n_cases[op]);
        printf(" -> %s%s\n", tabs[pick]->name, apart ? " (with qgemm: its repacked weights)" : "");
        if (tabs[pick] != best && sl < sizeof spec)
            sl += (size_t)snprintf(spec + sl, sizeof spec - sl, ",%s=%s", sm_kernels_op_name((sm_kernels_op)op),
                                   tabs[pick]->name);
    }
    /* bf16 weights' GEMM on the picked gemm table: on vdpbf16ps (activations rounded to bf16)
       or on f32 FMAs (exact) where it has both; vdpbf16ps only if more than 3% ahead, an item
       added to the spec where that differs from the picked table's own */
    const bool table_dot = sm_kernels_select(spec)->dot16_types >> SM_DTYPE_BF16 & 1u;
    for (size_t i = 0; i < sm_bench_n_cases(); i++) {
        if (sm_bench_case_dtype(i) != SM_DTYPE_BF16) continue;
        char as[2][200];
        const sm_kernels *run[2];
        for (int a = 0; a < 2; a++) {
            snprintf(as[a], sizeof as[a], "%s,bf16=%s", spec, a ? "bf16" : "f32");
            run[a] = sm_kernels_select(as[a]);
        }
        printf("gemm      %-50s ", sm_bench_case_what(i));
        if (!run[1]) {
            printf("f32 (no vdpbf16ps on this CPU)\n");
            continue;
        }
        double med[2];
        if (!time_case(i, pool, (int)o->threads, run, 2, run[1], med)) {
            sm_pool_free(pool);
            return EXIT_DATA;
        }
        bool dot = med[1] * 1.03 < med[0];
        printf("f32 %.1f, vdpbf16ps %.1f -> %s\n", med[0] * 1e6, med[1] * 1e6, dot ? "vdpbf16ps" : "f32");
        if (dot != table_dot && sl < sizeof spec)
            sl += (size_t)snprintf(spec + sl, sizeof spec - sl, ",bf16=%s", dot ? "bf16" : "f32");
    }
    /* a lone f32 row on panels: asking for the next panels' lines (the table's default) or
       leaving them to the hardware prefetchers, where the gemm table has the choice; hw only if
       more than 3% ahead over the f32 one-row cases */
    double pf_score[2] = {0, 0};
    const sm_kernels *pf_run[2] = {NULL, NULL};
    if (sm_kernels_select(spec)->from[SM_KOP_GEMM]->row_prefetch)
        for (int a = 0; a < 2; a++) {
            char as[200];
            snprintf(as, sizeof as, "%s,prefetch=%s", spec, a ? "hw" : "next");
            pf_run[a] = sm_kernels_select(as);
        }
    for (size_t i = 0; pf_run[0] && pf_run[1] && i < sm_bench_n_cases(); i++) {
        if (sm_bench_case_op(i) != SM_KOP_ROWS || sm_bench_case_dtype(i) != SM_DTYPE_F32 || sm_bench_case_rows(i) != 1)
            continue;
        double med[2];
        if (!time_case(i, pool, (int)o->threads, pf_run, 2, pf_run[0], med)) {
            sm_pool_free(pool);
            return EXIT_DATA;
        }
        printf("rows      %-50s next %.1f, hw %.1f (a lone row on f32 panels)\n", sm_bench_case_what(i),
               med[0] * 1e6, med[1] * 1e6);
        double f = med[0] < med[1] ? med[0] : med[1];
        pf_score[0] += med[0] / f, pf_score[1] += med[1] / f;
    }
    if (pf_score[0] > 0) {
        bool hw = pf_score[1] * 1.03 < pf_score[0];
        printf("  prefetch -> %s\n", hw ? "hw" : "next");
        if (hw && sl < sizeof spec) sl += (size_t)snprintf(spec + sl, sizeof spec - sl, ",prefetch=hw");
    }
    const sm_kernels *measured = sm_kernels_select(spec), *now = sm_kernels_select(NULL);
    const char *entry = sm_kernels_cpu_choice(vendor, fam, mod);
    if (measured == best)
        printf("this CPU: %s for every operation: no entry in dispatch.c's table\n", best->name);
    else
        printf("this CPU: --kernels %s\n  dispatch.c's entry: {\"%s\", %u, 0x%02x, 0x%02x, \"%s\"},\n",
               measured->name, vendor, fam, mod, mod, spec + strlen(best->name) + 1);
    printf("auto today: %s (%s), %s\n", now->name,
           entry ? "dispatch.c's entry for this CPU" : "no entry for this CPU",
           now == measured ? "the same" : "not what was measured");
    sm_pool_free(pool);
    cli_out os = {0};
    return cli_finish_stdout(&os, 0);
}
