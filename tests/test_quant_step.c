/*
** q4_0 / q8_0's packed and repacked products against the f32 operations
** avx2_qgemm.c's top states per 32-value block, worked out here in plain C:
** the block's exact integer sum (the weights' levels times the
** activations' q), times d_x and rounded, then one FMA with the weights'
** scale D into the column slice's sum (16 blocks a slice), each slice's sum
** then added to bias or to the slices before it. Every flavour must give
** these bits, whatever its tiles, for the tokens together and each alone
** (what "each record byte for byte as alone" rests on), at the ends of the
** range too: tiny, large and zero activation blocks, a NaN (the row's
** outputs NaN), and weight scales zero, subnormal in f16 and infinite.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sm_half.h"
#include "sm_kernels.h"
#include "sm_quant.h"
#include "kernels/kernels_internal.h"
#include "test.h"

/* Row i's output n as the stated operations give it, from the reference's quantized row qx. */
static float stated(sm_qx qx, const unsigned char *wrow, sm_dtype dt, size_t K, float bias) {
    const size_t nb = K / SM_QK, per = SM_QGEMM_KC / SM_QK;
    float out = bias;
    for (size_t b0 = 0; b0 < nb; b0 += per) {
        float acc = 0.0f;
        for (size_t b = b0; b < nb && b < b0 + per; b++) {
            int ws[SM_QK];
            float D, M[2];
            sm_quant_block_ints(ws, wrow, dt, b, &D, M);
            int32_t sum = 0;
            for (int j = 0; j < SM_QK; j++) sum += ws[j] * qx.q[b * SM_QK + (size_t)j];
            acc = fmaf((float)sum * qx.d[b], D, acc);
        }
        out = acc + out;
    }
    return out;
}

/* Equal bits, or both NaN (a NaN's payload is not the contract). */
static bool same(float a, float b) {
    return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0;
}

void test_quant_exact_step(void) {
    const sm_kernels *ks[8];
    const sm_qkernel *qk[8];
    const size_t nk = sm_kernels_available(ks, 8), nq = sm_kernels_qavailable(qk, 8);
    static const sm_dtype dts[] = {SM_DTYPE_Q4_0, SM_DTYPE_Q8_0};
    const size_t T = 9, N = 64, K = 1056, nb = K / SM_QK; /* three slices, the last one block */
    size_t tested = 0;
    unsigned long long s = 91;
    for (size_t di = 0; di < 2; di++) {
        const sm_dtype dt = dts[di];
        const size_t rb = sm_dtype_row_bytes(dt, K), bb = rb / nb;
        float *x = test_rnd(T * K, &s, 2), *bias = test_rnd(N, &s, 1), *w = test_rnd(N * K, &s, 1);
        unsigned char *q = test_alloc(N * rb);
        for (size_t n = 0; n < N; n++) sm_quant_quantize(q + n * rb, w + n * K, dt, K);
        for (size_t n = 0; n < N; n++) /* weight scales: zero, subnormal in f16, one infinite */
            for (size_t b = n % 5; b < nb; b += 5) {
                uint16_t d = b % 2 ? 0 : sm_f32_to_f16(test_rand(&s) * 3e-6f);
                if (n == 17 && b == 7) d = 0x7c00;
                memcpy(q + n * rb + b * bb, &d, 2);
            }
        /* activations: row 1 a tiny block (d about 1e-32) and one of d = 2^-91; row 2 a large block
           (d about 2^86); row 3 a block of one value 2^101 among ones; row 5 a block near 2^98;
           row 6 a block of zeros; row 4 a NaN */
        for (size_t j = 0; j < SM_QK; j++) {
            x[1 * K + 3 * SM_QK + j] *= 1e-30f;
            x[1 * K + 20 * SM_QK + j] = (j % 2 ? -1.0f : 0.5f) * 127.0f * 0x1p-91f;
            x[2 * K + 9 * SM_QK + j] *= 1e26f;
            x[3 * K + 31 * SM_QK + j] = j == 4 ? 0x1p101f : 1.0f;
            x[5 * K + 17 * SM_QK + j] *= 0x1p98f;
            x[6 * K + 16 * SM_QK + j] = 0.0f;
        }
        x[4 * K + 600] = NAN;
        /* the reference's quantized rows and the outputs the stated operations give */
        void *qb = test_alloc(SM_QX_BYTES(K));
        sm_qx qx = sm_kernels_qx(qb, K);
        float *want = test_alloc(T * N * sizeof(float)), *got = test_alloc(T * N * sizeof(float));
        for (size_t i = 0; i < T; i++) {
            qk[0]->quant_x(qx, x + i * K, 1, K);
            if (i == 1) CHECKF(qx.d[3] > 0.0f && qx.d[3] < 1e-31f && qx.d[20] == 0x1p-91f, "tiny: d %g, %g", qx.d[3], qx.d[20]);
            if (i == 4) CHECK(isnan(qx.d[600 / SM_QK]));
            for (size_t n = 0; n < N; n++) want[i * N + n] = stated(qx, q + n * rb, dt, K, bias[n]);
        }
        CHECK(!isnan(want[1 * N]) && !isnan(want[2 * N]) && !isnan(want[3 * N]) && isnan(want[4 * N]) &&
              !isnan(want[5 * N]) && !isfinite(want[0 * N + 17]));
        void *scr = test_alloc(SM_QGEMM_BYTES);
        for (size_t f = 1; f < nq; f++) { /* the packed products, from the file's rows */
            if (!sm_kernels_qgemm_takes(qk[f], dt, T)) continue;
            for (size_t j = 0; j < T * N; j++) got[j] = 12345.0f;
            qk[f]->gemm(got, x, q, dt, bias, T, N, K, 0, N, scr);
            size_t bad = 0;
            for (size_t j = 0; j < T * N; j++) bad += !same(got[j], want[j]);
            CHECKF(bad == 0, "%s gemm %s: %zu of %zu outputs not the stated operations' bits", qk[f]->name,
                   sm_dtype_name(dt), bad, T * N);
            tested++;
        }
        free(scr);
        unsigned char *r = test_alloc(N * rb);
        sm_kernels_repack(r, q, dt, N, K, 0, N / SM_R32);
        for (size_t ki = 0; ki < nk; ki++) { /* the repacked rows, the tokens together and each alone */
            const sm_kernels *k = ks[ki];
            if (!(sm_kernels_repack_types(k) >> dt & 1u)) continue;
            float *ks_scr = test_alloc(sm_kernels_scratch(k, K) * sizeof(float));
            k->matmul(k, got, x, r, sm_kernels_repacked(dt), bias, T, N, K, 0, N, ks_scr);
            size_t bad = 0;
            for (size_t j = 0; j < T * N; j++) bad += !same(got[j], want[j]);
            for (size_t i = 0; i < T; i++) {
                k->matmul(k, got, x + i * K, r, sm_kernels_repacked(dt), bias, 1, N, K, 0, N, ks_scr);
                for (size_t n = 0; n < N; n++) bad += !same(got[n], want[i * N + n]);
            }
            CHECKF(bad == 0, "%s repacked %s: %zu outputs not the stated operations' bits", k->name,
                   sm_dtype_name(dt), bad);
            tested++;
            free(ks_scr);
        }
        free(x), free(bias), free(w), free(q), free(qb), free(want), free(got), free(r);
    }
    if (nq > 1) CHECKF(tested > 0, "no packed product tested");
}
