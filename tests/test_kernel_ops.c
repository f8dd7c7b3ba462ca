/*
** The kernel tables' elementwise steps against the scalar reference:
** softmax, exp, layer norm, GELU (and its gradient), the Llama steps (RMS
** norm, SwiGLU, RoPE), the add and the sum, on odd sizes and offsets, with
** per-step tolerances. (The products are in test_kernels.c.)
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sm_kernels.h"
#include "test.h"

void test_kernels_softmax(void) {
    const sm_kernels *ks[8], *ref = sm_kernels_reference();
    size_t nk = sm_kernels_available(ks, 8);
    static const size_t ns[] = {1, 3, 17, 255, 256, 50257};
    unsigned long long s = 3;
    for (size_t a = 0; a < 6; a++) {
        size_t n = ns[a];
        float *x = test_rnd(n, &s, 20), *want = test_rnd(n, &s, 0), *got = test_rnd(n, &s, 0);
        memcpy(want, x, n * sizeof *x);
        ref->softmax(want, n);
        double sum = 0;
        for (size_t j = 0; j < n; j++) sum += want[j];
        CHECKF(fabs(sum - 1) < 1e-4, "scalar softmax sums to %g", sum);
        for (size_t i = 1; i < nk; i++) {
            memcpy(got, x, n * sizeof *x);
            ks[i]->softmax(got, n);
            for (size_t j = 0; j < n; j++)
                /* the normalising sum of n floats carries ~sqrt(n) ulp of error */
                CHECKF(fabsf(got[j] - want[j]) <= (2e-6f + 1.5e-7f * sqrtf((float)n)) * want[j] + 1e-9f,
                       "%s softmax n=%zu [%zu]: %g vs %g",
                       ks[i]->name, n, j, got[j], want[j]);
        }
        free(x), free(want), free(got);
    }
}

void test_kernels_exp(void) {
    const sm_kernels *ks[8];
    size_t nk = sm_kernels_available(ks, 8);
    size_t n = 20001;
    float *x = test_rnd(n, &(unsigned long long){4}, 0), *got = test_rnd(n, &(unsigned long long){5}, 0);
    for (size_t j = 0; j < n; j++) x[j] = -87.0f + 175.0f * (float)j / (float)(n - 1);
    for (size_t i = 0; i < nk; i++) {
        ks[i]->exp(got, x, n);
        for (size_t j = 0; j < n; j++) {
            double want = exp((double)x[j]);
            CHECKF(fabs(got[j] - want) <= 2e-6 * want, "%s exp(%g) = %g, want %g", ks[i]->name, x[j],
                   got[j], want);
        }
    }
    free(x), free(got);
}

void test_kernels_layernorm(void) {
    const sm_kernels *ks[8], *ref = sm_kernels_reference();
    size_t nk = sm_kernels_available(ks, 8);
    static const size_t Cs[] = {1, 3, 17, 255, 256, 769};
    unsigned long long s = 6;
    for (size_t a = 0; a < 6; a++) {
        size_t C = Cs[a];
        float *x = test_rnd(C, &s, 3), *g = test_rnd(C, &s, 1), *b = test_rnd(C, &s, 1);
        float *want = test_rnd(C, &s, 0), *got = test_rnd(C, &s, 0);
        for (size_t j = 0; j < C; j++) x[j] += 5.0f; /* a non-zero mean */
        for (int withb = 0; withb < 2; withb++) {
            ref->layernorm(want, x, g, withb ? b : NULL, C, 1e-5f);
            for (size_t i = 1; i < nk; i++) {
                ks[i]->layernorm(got, x, g, withb ? b : NULL, C, 1e-5f);
                for (size_t j = 0; j < C; j++)
                    CHECKF(fabsf(got[j] - want[j]) <= 1e-5f * (1 + fabsf(want[j])),
                           "%s layernorm C=%zu [%zu]: %g vs %g", ks[i]->name, C, j, got[j], want[j]);
            }
        }
        free(x), free(g), free(b), free(want), free(got);
    }
}

void test_kernels_gelu(void) {
    const sm_kernels *ks[8], *ref = sm_kernels_reference();
    size_t nk = sm_kernels_available(ks, 8);
    size_t n = 4099;
    float *x = test_rnd(n, &(unsigned long long){7}, 0);
    float *want = test_rnd(n, &(unsigned long long){8}, 0), *got = test_rnd(n, &(unsigned long long){9}, 0);
    for (size_t j = 0; j < n; j++) x[j] = -12.0f + 24.0f * (float)j / (float)(n - 1);
    for (int form = 0; form < 2; form++) {
        memcpy(want, x, n * sizeof *x);
        (form ? ref->gelu_erf : ref->gelu_tanh)(want, n);
        /* the scalar forms against the formulas in double */
        for (size_t j = 0; j < n; j++) {
            double u = x[j];
            double w = form ? 0.5 * u * (1 + erf(u / sqrt(2.0)))
                            : 0.5 * u * (1 + tanh(sqrt(2 / M_PI) * (u + 0.044715 * u * u * u)));
            CHECKF(fabs(want[j] - w) <= 1e-6 * (1 + fabs(u)), "scalar gelu form %d at %g", form, u);
        }
        for (size_t i = 1; i < nk; i++) {
            memcpy(got, x, n * sizeof *x);
            (form ? ks[i]->gelu_erf : ks[i]->gelu_tanh)(got, n);
            for (size_t j = 0; j < n; j++)
                CHECKF(fabsf(got[j] - want[j]) <= 2e-6f * (1 + fabsf(x[j])), "%s gelu form %d at %g: %g vs %g",
                       ks[i]->name, form, x[j], got[j], want[j]);
        }
    }
    /* the tanh form's derivative times d: the scalar one against the formula in double (and a
       central difference of it), every table against the scalar one */
    float *d = test_rnd(n, &(unsigned long long){10}, 1);
    for (size_t j = 0; j < n; j++) want[j] = d[j];
    ref->gelu_tanh_grad(want, x, n);
    double c = sqrt(2 / M_PI), k = 0.044715;
    for (size_t j = 0; j < n; j++) {
        double u = x[j], th = tanh(c * (u + k * u * u * u));
        double g = 0.5 * (1 + th) + 0.5 * u * (1 - th * th) * c * (1 + 3 * k * u * u), h = 1e-4;
        double gp = 0.5 * (u + h) * (1 + tanh(c * ((u + h) + k * (u + h) * (u + h) * (u + h)))),
               gm = 0.5 * (u - h) * (1 + tanh(c * ((u - h) + k * (u - h) * (u - h) * (u - h))));
        CHECKF(fabs(want[j] - d[j] * g) <= 1e-6 * (1 + fabs(d[j] * g)), "scalar gelu_tanh_grad at %g", u);
        CHECKF(fabs(g - (gp - gm) / (2 * h)) <= 1e-6, "gelu_tanh_grad's formula at %g", u);
    }
    for (size_t i = 1; i < nk; i++) {
        for (size_t j = 0; j < n; j++) got[j] = d[j];
        ks[i]->gelu_tanh_grad(got, x, n - i); /* lengths past whole vectors; the rest untouched */
        for (size_t j = 0; j < n; j++)
            CHECKF(j < n - i ? fabsf(got[j] - want[j]) <= 2e-6f * (1 + fabsf(want[j])) : got[j] == d[j],
                   "%s gelu_tanh_grad at %g: %g vs %g", ks[i]->name, x[j], got[j], want[j]);
    }
    free(x), free(want), free(got), free(d);
}

void test_kernels_llama_ops(void) {
    const sm_kernels *ks[8], *ref = sm_kernels_reference();
    size_t nk = sm_kernels_available(ks, 8);
    static const size_t Cs[] = {2, 6, 18, 64, 288, 770};
    unsigned long long s = 11;
    for (size_t a = 0; a < 6; a++) {
        size_t C = Cs[a];
        float *x = test_rnd(C, &s, 3), *g = test_rnd(C, &s, 1), *u = test_rnd(C, &s, 2);
        float *cs = test_rnd(C, &s, 1), *sn = test_rnd(C, &s, 1);
        float *want = test_rnd(C, &s, 0), *got = test_rnd(C, &s, 0);
        /* scalar against double formulas */
        ref->rmsnorm(want, x, g, C, 1e-5f);
        double ss = 0;
        for (size_t j = 0; j < C; j++) ss += (double)x[j] * x[j];
        for (size_t j = 0; j < C; j++) {
            double w = x[j] / sqrt(ss / (double)C + 1e-5) * g[j];
            CHECKF(fabs(want[j] - w) <= 1e-5 * (1 + fabs(w)), "scalar rmsnorm C=%zu", C);
        }
        for (size_t i = 1; i < nk; i++) {
            ks[i]->rmsnorm(got, x, g, C, 1e-5f);
            for (size_t j = 0; j < C; j++)
                CHECKF(fabsf(got[j] - want[j]) <= 1e-5f * (1 + fabsf(want[j])),
                       "%s rmsnorm C=%zu [%zu]: %g vs %g", ks[i]->name, C, j, got[j], want[j]);
        }
        for (size_t i = 0; i < nk; i++) { /* in place (out = x), as the Q/K and post norms run it */
            float *io = malloc(C * sizeof *io);
            ks[i]->rmsnorm(got, x, g, C, 1e-5f);
            memcpy(io, x, C * sizeof *io);
            ks[i]->rmsnorm(io, io, g, C, 1e-5f);
            CHECKF(memcmp(io, got, C * sizeof *io) == 0, "%s rmsnorm C=%zu in place differs", ks[i]->name, C);
            free(io);
        }
        for (size_t j = 0; j < C; j++) x[j] *= 4; /* gate values out to +-12 */
        memcpy(want, x, C * sizeof *x);
        ref->swiglu(want, u, C);
        for (size_t j = 0; j < C; j++) {
            double w = x[j] / (1 + exp(-(double)x[j])) * u[j];
            CHECKF(fabs(want[j] - w) <= 1e-5 * (1 + fabs(w)), "scalar swiglu at %g", x[j]);
        }
        for (size_t i = 1; i < nk; i++) {
            memcpy(got, x, C * sizeof *x);
            ks[i]->swiglu(got, u, C);
            for (size_t j = 0; j < C; j++)
                CHECKF(fabsf(got[j] - want[j]) <= 2e-6f * (1 + fabsf(want[j])),
                       "%s swiglu at %g: %g vs %g", ks[i]->name, x[j], got[j], want[j]);
        }
        /* add: every table's element y + x one f32 rounding (the same bits whatever the
           vector width); the elements past n untouched */
        for (size_t i = 0; i < nk; i++) {
            const size_t n = C - 1 - i % 2;
            for (size_t j = 0; j < C; j++) got[j] = u[j] * 3.0f;
            ks[i]->add(got, x, n);
            for (size_t j = 0; j < C; j++) {
                float y = u[j] * 3.0f, w = j < n ? y + x[j] : y;
                CHECKF(memcmp(&got[j], &w, sizeof w) == 0, "%s add n=%zu [%zu]: %g vs %g", ks[i]->name, n, j,
                       got[j], w);
            }
        }
        /* rope with real angles: pairs rotate, norms are kept */
        for (size_t j = 0; j < C / 2; j++) {
            double th = 0.37 * (double)(j + 1) * (double)(a + 1);
            cs[j] = (float)cos(th), sn[j] = (float)sin(th);
        }
        memcpy(want, x, C * sizeof *x);
        ref->rope(want, cs, sn, C);
        for (size_t j = 0; j < C / 2; j++) {
            double aa = x[2 * j], bb = x[2 * j + 1];
            CHECKF(fabs(want[2 * j] - (aa * cs[j] - bb * sn[j])) <= 1e-5 * (1 + fabs(aa) + fabs(bb)) &&
                       fabs(want[2 * j + 1] - (aa * sn[j] + bb * cs[j])) <= 1e-5 * (1 + fabs(aa) + fabs(bb)),
                   "scalar rope pair %zu", j);
        }
        for (size_t i = 1; i < nk; i++) {
            memcpy(got, x, C * sizeof *x);
            ks[i]->rope(got, cs, sn, C);
            for (size_t j = 0; j < C; j++)
                CHECKF(fabsf(got[j] - want[j]) <= 1e-5f * (1 + fabsf(want[j])),
                       "%s rope C=%zu [%zu]: %g vs %g", ks[i]->name, C, j, got[j], want[j]);
        }
        free(x), free(g), free(u), free(cs), free(sn), free(want), free(got);
    }
}

/* sum: the bandwidth probe's stream of loads adds every element (any order), and only those. */
void test_kernels_sum(void) {
    const sm_kernels *ks[8];
    size_t nk = sm_kernels_available(ks, 8);
    size_t n = 64 * 37;
    float *x = aligned_alloc(64, n * sizeof *x);
    CHECK(x != NULL);
    double want = 0;
    for (size_t i = 0; i < n; i++) x[i] = (float)((i * 7) % 13) - 6.0f, want += x[i];
    for (size_t i = 0; i < nk; i++) {
        CHECKF(ks[i]->sum(x, n) == (float)want, "%s sum %g vs %g", ks[i]->name,
               (double)ks[i]->sum(x, n), want);
        CHECKF(ks[i]->sum(x, 64) == 0.0f, "%s sum of 64", ks[i]->name); /* numpy: 0 */
        double w3 = 0; /* fewer than 4 x 64: no streams, the rest only */
        for (size_t j = 0; j < 192; j++) w3 += x[j];
        CHECKF(ks[i]->sum(x, 192) == (float)w3, "%s sum of 192", ks[i]->name);
        /* any length from any float, not past it (training sums rows of B x T floats): the
           elements after each run are not zeros, so a read past its end shows */
        static const size_t ns[] = {1, 5, 8, 13, 300, 1003};
        for (size_t a = 0; a < sizeof ns / sizeof *ns; a++)
            for (size_t off = 0; off < 4; off++) {
                double w = 0;
                for (size_t j = 0; j < ns[a]; j++) w += x[off + j];
                CHECKF(ks[i]->sum(x + off, ns[a]) == (float)w, "%s sum of %zu from x + %zu: %g vs %g",
                       ks[i]->name, ns[a], off, (double)ks[i]->sum(x + off, ns[a]), w);
            }
    }
    free(x);
}
