/*
** bench_gemv.c -- matrix-vector products (decode) against the read
** bandwidth of the same threads over the same bytes. For each kernel table,
** weight type and thread count: the product out = w . x of one token row
** over shapes of the models `make bench` uses, the weights cycling through
** copies that make a working set of about 256 MB (so every pass reads
** memory, as decoding a model larger than the caches does), split across
** the threads in the model's chunks. Prints GB/s and the share of the read
** probe: the table's widest loads summing the same bytes (as sm_bench_read
** does), its passes interleaved with the product's, medians of 9.
**   bench_gemv [--kernels TABLE] [--rows T] [--types LIST] [THREADS...]
** default: every table, T = 1 token row (up to 16: batched decoding), types
** f32,f16,bf16 (LIST may name the quantized ones too: q8_0,q4_0,q4_k,...;
** shapes whose rows are not whole blocks of a type are skipped), 1 and 2
** threads. q4_0 / q8_0 / q4_k / q5_k weights are repacked (sm_kernels_repack) for the
** tables that take them, as sessions do, unless --no-repack.
** A benchmark, not a test.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sm_base.h"
#include "sm_config.h"
#include "sm_kernels.h"
#include "sm_pool.h"

#define SET_BYTES (256.0 * 1024 * 1024)

typedef struct {
    const sm_kernels *k;
    sm_dtype dt;
    const char *w; /* copies of the matrix, back to back */
    size_t copy_bytes, copies, cur;
    float *out, *x;
    size_t N, K, chunk, T;
    char *scratch;   /* per thread, scratch_bytes each (the quantized products') */
    size_t scratch_bytes;
} job;

/* The read probe over the same bytes: each thread sums its share of the copy. */
static void rd_task(void *arg, int ith, int nth) {
    job *j = arg;
    size_t n = j->copy_bytes / 4, i0, i1;
    sm_pool_split(n, 1024, ith, nth, &i0, &i1);
    if (i0 < i1) j->out[64 * ith] = j->k->sum((const float *)(j->w + j->cur * j->copy_bytes) + i0, i1 - i0);
}

static void mv_task(void *arg, int ith, int nth) {
    job *j = arg;
    const void *w = j->w + j->cur * j->copy_bytes;
    size_t n0, n1;
    sm_pool_split(j->N, j->chunk, ith, nth, &n0, &n1);
    if (n0 < n1)
        j->k->matmul_rows(j->k, j->out, j->x, w, j->dt, NULL, j->T, j->N, j->K, n0, n1,
                          (float *)(void *)(j->scratch + (size_t)ith * j->scratch_bytes));
}

int main(int argc, char **argv) {
    static const struct {
        const char *name;
        size_t N, K;
    } shapes[] = {
        {"15M output 32000x288", 32000, 288}, {"15M ffn 768x288", 768, 288},
        {"gpt2 qkv 2304x768", 2304, 768},     {"gpt2 down 768x3072", 768, 3072},
        {"gpt2 output 50257x768", 50257, 768}, {"1.1B ffn 5632x2048", 5632, 2048},
    };
    sm_dtype dts[SM_DTYPE_COUNT] = {SM_DTYPE_F32, SM_DTYPE_F16, SM_DTYPE_BF16};
    size_t ndt = 3;
    int threads[8] = {1, 2}, nt = 2, a = 1;
    const char *table = NULL;
    size_t T = 1;
    int repack = 1;
    for (;;) {
        if (argc > a && strcmp(argv[a], "--no-repack") == 0) {
            repack = 0, a++;
            continue;
        }
        if (argc > a + 1 && strcmp(argv[a], "--kernels") == 0)
            table = argv[a + 1], a += 2;
        else if (argc > a + 1 && strcmp(argv[a], "--rows") == 0 && atoi(argv[a + 1]) >= 1 &&
                 atoi(argv[a + 1]) <= 16)
            T = (size_t)atoi(argv[a + 1]), a += 2;
        else if (argc > a + 1 && strcmp(argv[a], "--types") == 0) {
            ndt = 0;
            for (char *tok = strtok(argv[a + 1], ","); tok && ndt < SM_DTYPE_COUNT; tok = strtok(NULL, ",")) {
                dts[ndt] = sm_dtype_parse(tok);
                if (dts[ndt++] == SM_DTYPE_COUNT) {
                    fprintf(stderr, "bench_gemv: --types: unknown type '%s'\n", tok);
                    return 2;
                }
            }
            a += 2;
        } else
            break;
    }
    if (argc > a) {
        nt = 0;
        for (int i = a; i < argc && nt < 8; i++) threads[nt++] = atoi(argv[i]);
    }
    const sm_kernels *avail[8];
    size_t na = sm_kernels_available(avail, 8);
    if (table && !sm_kernels_select(table)) {
        fprintf(stderr, "bench_gemv: --kernels: no table '%s' on this CPU\n", table);
        return 2;
    }
    /* the set, or one copy of the largest matrix if that is larger */
    size_t set = (size_t)SET_BYTES;
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++)
        if (shapes[si].N * shapes[si].K * 4 > set) set = shapes[si].N * shapes[si].K * 4;
    char *buf = aligned_alloc(64, set + 4096);
    float *x = aligned_alloc(64, 16 * 4096 * sizeof *x);
    float *out = aligned_alloc(64, 16 * 65536 * sizeof *out);
    /* out also takes the probe's per-thread sums (64 floats apart) */
    if (!buf || !x || !out) return 1;
    for (size_t i = 0; i < set / 2; i++) ((uint16_t *)buf)[i] = (uint16_t)(0x3c00 + (i & 255));
    for (size_t i = 0; i < 16 * 4096; i++) x[i] = (float)(i % 7) * 0.125f;
    printf("GB/s of weights read by %zu-row products (matmul_rows), median of 9 passes over a "
           "256 MB set; q4_0/q8_0/k types %s\n", T, repack ? "repacked where the table takes them" : "as stored");
    printf("%-8s %-4s %-7s %-24s %8s %8s %6s %8s\n", "kernels", "type", "threads", "shape", "GB/s",
           "read", "share", "GFLOPS");
    if (table) avail[1] = sm_kernels_select(table), na = 2; /* a table or a composition ("avx512,rows=avx2") */
    for (size_t ki = 1; ki < na; ki++) { /* the SIMD tables */
        const sm_kernels *k = avail[ki];
        for (int ti = 0; ti < nt; ti++) {
            sm_pool *pool;
            if (threads[ti] < 1 || sm_pool_create(&pool, threads[ti]) != SM_OK) return 1;
            for (size_t di = 0; di < ndt; di++)
                for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
                    if (shapes[si].K % sm_dtype_block(dts[di])) continue;
                    job j = {.k = k, .dt = dts[di], .w = buf, .out = out, .x = x,
                             .N = shapes[si].N, .K = shapes[si].K, .chunk = 16, .T = T};
                    /* 16-bit fill values 0x3cXX: every f16 scale of the q types is finite */
                    j.copy_bytes = (j.N * sm_dtype_row_bytes(dts[di], j.K) + 63) & ~(size_t)63;
                    j.scratch_bytes = (sm_kernels_scratch(k, j.K) * sizeof(float) + 63) & ~(size_t)63;
                    j.scratch = aligned_alloc(64, (size_t)threads[ti] * j.scratch_bytes);
                    if (!j.scratch) return 1;
                    j.copies = (size_t)(SET_BYTES / (double)j.copy_bytes);
                    if (j.copies < 1) j.copies = 1;
                    sm_dtype rt = sm_kernels_repacked(j.dt);
                    bool rep = repack && (sm_kernels_repack_types(k) >> j.dt & 1) && rt != j.dt &&
                               sm_kernels_repackable(j.dt, j.N, j.K) &&
                               sm_dtype_row_bytes(rt, j.K) <= 2 * sm_dtype_row_bytes(j.dt, j.K);
                    if (rep) { /* every copy the same weights, repacked: columns in whole row groups, the
                                  last one padded with zero rows as the model's (gpt2 output's 50,257);
                                  the layout's bytes are what is read (q4_k_r32, q5_k_r32: 2-3% more) */
                        size_t rbytes = (sm_kernels_repacked_bytes(j.dt, j.N, j.K) + 63) & ~(size_t)63;
                        char *r = aligned_alloc(64, rbytes);
                        if (!r) return 1;
                        sm_kernels_repack(r, buf, j.dt, j.N, j.K, 0, sm_kernels_row_groups(j.N));
                        j.copy_bytes = rbytes, j.copies = (size_t)(SET_BYTES / (double)rbytes);
                        if (j.copies < 1) j.copies = 1;
                        for (size_t c = 0; c < j.copies; c++) memcpy(buf + c * j.copy_bytes, r, j.copy_bytes);
                        free(r);
                        j.dt = rt, j.chunk = SM_R32;
                    }
                    double t[2][9];
                    for (int pass = -1; pass < 9; pass++) /* product and probe interleaved */
                        for (int p = 0; p < 2; p++) {
                            double t0 = sm_time_now();
                            for (j.cur = 0; j.cur < j.copies; j.cur++)
                                sm_pool_run(pool, p ? rd_task : mv_task, &j);
                            if (pass >= 0) t[p][pass] = sm_time_now() - t0;
                        }
                    for (int p = 0; p < 2; p++) /* insertion sorts for the medians */
                        for (int i = 1; i < 9; i++)
                            for (int q = i; q > 0 && t[p][q] < t[p][q - 1]; q--) {
                                double s = t[p][q];
                                t[p][q] = t[p][q - 1], t[p][q - 1] = s;
                            }
                    double bytes = (double)j.copies * (double)j.copy_bytes;
                    double gbs = bytes / t[0][4] / 1e9, rd = bytes / t[1][4] / 1e9;
                    double gfl = 2.0 * (double)T * (double)j.copies * (double)(j.N * j.K) / t[0][4] / 1e9;
                    printf("%-8s %-4s %-7d %-24s %8.1f %8.1f %5.0f%% %8.1f\n", k->name,
                           sm_dtype_name(dts[di]), threads[ti], shapes[si].name, gbs, rd,
                           100 * gbs / rd, gfl);
                    free(j.scratch);
                    if (rep) /* the pattern again for the next shape */
                        for (size_t i = 0; i < set / 2; i++) ((uint16_t *)buf)[i] = (uint16_t)(0x3c00 + (i & 255));
                }
            sm_pool_free(pool);
        }
    }
    free(buf), free(x), free(out);
    return 0;
}
