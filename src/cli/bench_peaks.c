/*
** bench_peaks.c -- `smallmind bench --peaks`: the core's arithmetic peaks
** (register-only loops of one instruction: f32 FMA, int8 dot products,
** bf16 pair products) on 1 thread and on -t threads, then prefill's
** products on the TinyLlama-1.1B shape (one block's seven linear layers at
** 128 and 512 token rows) through the --kernels table, each weight type
** beside the peak of the instructions its product runs on.
*/
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>

#include "sm_bench.h"

/* samples (the median is printed), each the fastest of LAYER_RUNS runs of the layer: on a shared
   machine one run of a few milliseconds may meet another tenant's burst */
enum { SAMPLES = 5, LAYER_RUNS = 3 };

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int cli_bench_peaks(const cli_opts *o) {
    const sm_kernels *k;
    sm_error err = {{0}};
    if (sm_kernels_choose(o->kernels, &k, &err)) return cli_usage_error(o, "--%s", err.msg);
    int nth = (int)o->threads;
    sm_pool *pools[2] = {NULL, NULL};
    if (sm_pool_create(&pools[0], 1) || sm_pool_create(&pools[1], nth)) {
        sm_pool_free(pools[0]);
        fprintf(stderr, "smallmind: cannot start %d threads\n", nth);
        return EXIT_DATA;
    }
    cli_exit_now = 1; /* nothing to flush: a signal exits at once */
    char cpu[64];
    sm_kernels_cpu_name(cpu, sizeof cpu);
    printf("CPU %s; arithmetic peaks, GOPS (a multiply-add is 2 operations), best of 5\n", cpu);
    printf("  %-38s %12s %12s\n", "loop", "1 thread", nth == 1 ? "" : "threads");
    for (int p = 0; p < SM_PEAK_COUNT; p++) {
        if (!sm_kernels_peak_runs((sm_peak)p)) {
            printf("  %-38s %12s\n", sm_kernels_peak_name((sm_peak)p), "not on this CPU or build");
            continue;
        }
        printf("  %-38s %12.1f", sm_kernels_peak_name((sm_peak)p), sm_bench_peak(pools[0], (sm_peak)p) / 1e9);
        if (nth > 1) printf(" %9.1f (%d)", sm_bench_peak(pools[1], (sm_peak)p) / 1e9, nth);
        printf("\n");
        fflush(stdout);
    }
    printf("prefill's products, TinyLlama-1.1B shape (one block's q, k, v, o, gate, up, down), "
           "kernels %s, %d thread%s, median of %d\n"
           "(each sample the fastest of %d runs, its share of the peaks measured just before it)\n  %-8s %6s %10s %8s  %s\n",
           k->name, nth, nth == 1 ? "" : "s", SAMPLES, LAYER_RUNS, "type", "rows", "ms", "GOPS", "share of the peak of its instructions");
    /* q4_0_r32, q8_0_r32: the same weights repacked, where the table takes them */
    static const sm_dtype types[] = {SM_DTYPE_F32,  SM_DTYPE_F16,      SM_DTYPE_BF16,
                                     SM_DTYPE_Q4_0, SM_DTYPE_Q4_0_R32, SM_DTYPE_Q8_0,
                                     SM_DTYPE_Q8_0_R32, SM_DTYPE_Q4_K, SM_DTYPE_Q6_K};
    static const size_t rows[] = {128, 512};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
        for (size_t ri = 0; ri < 2; ri++) {
            if (types[ti] != sm_dtype_base(types[ti]) && !(sm_kernels_repack_types(k) >> sm_dtype_base(types[ti]) & 1u))
                continue;
            sm_bench_layer *l;
            if (sm_bench_layer_new(&l, types[ti], rows[ri], nth, &err)) {
                fprintf(stderr, "smallmind: %s\n", err.msg);
                sm_pool_free(pools[0]), sm_pool_free(pools[1]);
                return EXIT_DATA;
            }
            /* each sample: the peak of the product's instructions, then the product, so the
               share is taken of the peak of the same moment on a shared machine */
            sm_peak p = sm_kernels_peak_of(k, types[ti]);
            bool has_peak = sm_kernels_peak_runs(p);
            /* int8 VNNI-512 products also beside the loop with q8_0 blocks' f32 step (peak.c) */
            sm_peak pb = has_peak && p == SM_PEAK_VNNI512 ? SM_PEAK_VNNI512_BLOCK : SM_PEAK_COUNT;
            double s[SAMPLES], share[SAMPLES], bshare[SAMPLES];
            sm_bench_layer_run(l, pools[1], k); /* warm-up */
            for (int r = 0; r < SAMPLES; r++) {
                double pk = has_peak ? sm_bench_peak(pools[1], p) : 0;
                double bk = pb != SM_PEAK_COUNT ? sm_bench_peak(pools[1], pb) : 0;
                s[r] = sm_bench_layer_run(l, pools[1], k);
                for (int rep = 1; rep < LAYER_RUNS; rep++) {
                    double t = sm_bench_layer_run(l, pools[1], k);
                    if (t < s[r]) s[r] = t;
                }
                share[r] = pk > 0 ? sm_bench_layer_ops(l) / s[r] / pk : 0;
                bshare[r] = bk > 0 ? sm_bench_layer_ops(l) / s[r] / bk : 0;
            }
            qsort(s, SAMPLES, sizeof(double), cmp_double);
            qsort(share, SAMPLES, sizeof(double), cmp_double);
            qsort(bshare, SAMPLES, sizeof(double), cmp_double);
            double gops = sm_bench_layer_ops(l) / s[SAMPLES / 2];
            sm_bench_layer_free(l);
            printf("  %-8s %6zu %10.2f %8.1f", sm_dtype_name(types[ti]), rows[ri], s[SAMPLES / 2] * 1e3, gops / 1e9);
            if (pb != SM_PEAK_COUNT)
                printf("  %3.0f%% of %s; %3.0f%% with the block step\n", 100 * share[SAMPLES / 2],
                       sm_kernels_peak_name(p), 100 * bshare[SAMPLES / 2]);
            else if (has_peak)
                printf("  %3.0f%% of %s\n", 100 * share[SAMPLES / 2], sm_kernels_peak_name(p));
            else
                printf("  (no SIMD peak for the %s table)\n", k->from[SM_KOP_GEMM]->name);
            fflush(stdout);
        }
    sm_pool_free(pools[0]), sm_pool_free(pools[1]);
    cli_out os = {0};
    return cli_finish_stdout(&os, 0);
}
