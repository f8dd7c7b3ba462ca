/*
** bench_gemm -- smallmind's matrix-matrix product against OpenBLAS sgemm,
** for `make bench` (built only there, and only when OpenBLAS is installed;
** OpenBLAS is never linked into smallmind itself).
**
**   bench_gemm [--kernels TABLE] [THREADS...]   default: the best table; 1 2
**
** Products are the model's: out (T, N) = x (T, K) . w (N, K)^T, f32. Shapes:
** the cubes 512^3 and 768^3, and the prefill products of the GPT-2-small
** shape for a 512-token prompt (QKV, MLP up and down, output layer) and of
** the seed shape for 256 tokens. smallmind runs its kernel table on its own
** thread pool, each thread its static slice of columns; OpenBLAS runs
** cblas_sgemm(RowMajor, NoTrans, Trans) on the same number of threads. Each
** figure is the best of REPS timed runs after 0.3 s of warm-up, one library
** at a time with a pause between (the idle threads of each spin for a while
** after a call and would take the second core from the other); the results
** of the two are compared (largest difference relative to the largest
** output).
*/
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sm_kernels.h"
#include "sm_pool.h"

void openblas_set_num_threads(int n);

#define REPS 15

static void pause_ms(int ms) {
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

typedef struct {
    const sm_kernels *k;
    float *out, *x, *w, *scratch;
    size_t T, N, K, scratch_floats;
} job;

static void mm_task(void *arg, int ith, int nth) {
    job *j = arg;
    size_t n0, n1;
    sm_pool_split(j->N, 64, ith, nth, &n0, &n1);
    if (n0 < n1)
        j->k->matmul(j->k, j->out, j->x, j->w, SM_DTYPE_F32, NULL, j->T, j->N, j->K, n0, n1,
                     j->scratch + (size_t)ith * j->scratch_floats);
}

static float *rnd(size_t n, unsigned *s) {
    float *p = malloc(n * sizeof *p);
    if (!p) exit(1);
    for (size_t i = 0; i < n; i++) {
        *s = *s * 1664525u + 1013904223u;
        p[i] = (float)((*s >> 8) & 0xFFFF) / 65536.0f - 0.5f;
    }
    return p;
}

int main(int argc, char **argv) {
    static const struct {
        const char *name;
        size_t T, N, K;
    } shapes[] = {
        {"512^3", 512, 512, 512},
        {"768^3", 768, 768, 768},
        {"gpt2-small qkv (512 tok)", 512, 2304, 768},
        {"gpt2-small mlp up", 512, 3072, 768},
        {"gpt2-small mlp down", 512, 768, 3072},
        {"gpt2-small output (1 row)", 1, 50257, 768},
        {"seed qkv (256 tok)", 256, 768, 256},
        {"seed mlp down", 256, 256, 1024},
    };
    int threads[8] = {1, 2}, nt = 2, a = 1;
    const char *table = NULL;
    if (argc > 2 && strcmp(argv[1], "--kernels") == 0) table = argv[2], a = 3;
    if (argc > a) {
        nt = 0;
        for (int i = a; i < argc && nt < 8; i++) threads[nt++] = atoi(argv[i]);
    }
    const sm_kernels *k = sm_kernels_select(table);
    if (!k) {
        fprintf(stderr, "bench_gemm: --kernels: no table '%s' on this CPU\n", table);
        return 2;
    }
    printf("kernels %s; GFLOPS, best of %d after 0.3 s of warm-up\n", k->name, REPS);
    printf("%-28s %7s %12s %12s %8s %10s\n", "shape (T x N x K)", "threads", "smallmind", "OpenBLAS",
           "ratio", "max diff");
    for (int ti = 0; ti < nt; ti++) {
        sm_pool *pool;
        if (threads[ti] < 1 || sm_pool_create(&pool, threads[ti]) != SM_OK) return 1;
        openblas_set_num_threads(threads[ti]);
        for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
            size_t T = shapes[si].T, N = shapes[si].N, K = shapes[si].K;
            unsigned seed = 1;
            job j = {.k = k, .T = T, .N = N, .K = K, .scratch_floats = k->matmul_scratch};
            j.x = rnd(T * K, &seed);
            j.w = rnd(N * K, &seed);
            j.out = malloc(T * N * sizeof(float));
            float *ref = malloc(T * N * sizeof(float));
            /* panels are read with aligned loads: 64-byte aligned, each thread's a multiple of 16 */
            j.scratch_floats = (j.scratch_floats + 15) & ~(size_t)15;
            j.scratch = aligned_alloc(64, ((size_t)threads[ti] * j.scratch_floats + 16) * sizeof(float));
            if (!j.out || !ref || !j.scratch) return 1;
            /* each library on its own: 0.3 s of warm-up (the second core awake, clocks
               settled), then the best of REPS; a pause between the two lets the other's
               idle threads stop spinning on the cores */
            double best[2];
            for (int lib = 0; lib < 2; lib++) {
                pause_ms(50);
                best[lib] = 1e30;
                double tw = sm_time_now();
                for (int rep = -1; rep < REPS; rep++) {
                    if (rep == 0 && sm_time_now() - tw < 0.3) rep = -1; /* still warming up */
                    double t0 = sm_time_now();
                    if (lib == 0)
                        sm_pool_run(pool, mm_task, &j);
                    else
                        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)N, (int)K,
                                    1.0f, j.x, (int)K, j.w, (int)K, 0.0f, ref, (int)N);
                    double t = sm_time_now() - t0;
                    if (rep >= 0 && t < best[lib]) best[lib] = t;
                }
            }
            double diff = 0, mag = 0;
            for (size_t i = 0; i < T * N; i++) {
                diff = fmax(diff, fabs((double)j.out[i] - ref[i]));
                mag = fmax(mag, fabs((double)ref[i]));
            }
            double fl = 2.0 * (double)T * (double)N * (double)K / 1e9;
            char nm[64];
            snprintf(nm, sizeof nm, "%s", shapes[si].name);
            printf("%-28s %7d %12.1f %12.1f %8.2f %10.1e\n", nm, threads[ti], fl / best[0],
                   fl / best[1], best[1] / best[0], mag > 0 ? diff / mag : 0);
            free(j.x), free(j.w), free(j.out), free(ref), free(j.scratch);
        }
        sm_pool_free(pool);
    }
    return 0;
}
