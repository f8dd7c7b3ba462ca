/*
** quant_ref.c -- the quantized products in plain C: the reference the SIMD
** implementations are tested against (scalar table), and the driver that
** feeds any implementation groups of quantized activation rows.
*/
#include "kernels_internal.h"

#include <math.h>
#include <string.h>

static void quant_x(sm_qx qx, const float *restrict x, size_t r, size_t K) {
    const size_t nb = K / SM_QK;
    for (size_t i = 0; i < r; i++)
        for (size_t b = 0; b < nb; b++) {
            const float *xb = x + i * K + b * SM_QK;
            int8_t *q = qx.q + i * K + b * SM_QK;
            float amax = 0.0f;
            int bad = 0;
            int32_t *s = qx.s + i * (K / 4) + b * (SM_QK / 4);
            for (int j = 0; j < SM_QK; j++) {
                bad |= !isfinite(xb[j]);
                amax = fabsf(xb[j]) > amax ? fabsf(xb[j]) : amax;
            }
            float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
            if (bad) {
                memset(q, 0, SM_QK);
                memset(s, 0, SM_QK / 4 * sizeof *s);
                sm_qx_halves(s, qx.h + i * (K / 16) + 2 * b);
                qx.d[i * nb + b] = qx.xs[i * nb + b] = NAN;
                continue;
            }
            int sum = 0;
            for (int j = 0; j < SM_QK; j++) q[j] = (int8_t)nearbyintf(xb[j] * id);
            for (int j = 0; j < SM_QK / 4; j++) {
                s[j] = -(q[4 * j] + q[4 * j + 1] + q[4 * j + 2] + q[4 * j + 3]);
                sum -= s[j];
            }
            sm_qx_halves(s, qx.h + i * (K / 16) + 2 * b);
            qx.d[i * nb + b] = d;
            qx.xs[i * nb + b] = d * (float)sum;
        }
}

static void gemv(float *restrict out, sm_qx qx, size_t r, const void *restrict w, sm_dtype dt,
                 const float *restrict bias, size_t N, size_t K, size_t n0, size_t n1) {
    const size_t nb = K / SM_QK;
    int ws[SM_QK];
    for (size_t n = n0; n < n1; n++) {
        const void *row = sm_kernels_elem(w, dt, n * K);
        float s[SM_QX_ROWS] = {0}, D, M[2];
        for (size_t b = 0; b < nb; b++) { /* each block decoded once for the r rows */
            sm_quant_block_ints(ws, row, dt, b, &D, M);
            for (size_t i = 0; i < r; i++) {
                const int8_t *q = qx.q + i * K + b * SM_QK;
                int dot = 0, h0 = 0, h1 = 0;
                for (int j = 0; j < SM_QK; j++) dot += ws[j] * q[j];
                s[i] += D * qx.d[i * nb + b] * (float)dot;
                if (M[0] == M[1]) {
                    if (M[0] != 0.0f) s[i] -= M[0] * qx.xs[i * nb + b];
                } else { /* q2_k: each half's own zero point, on its activations' sum */
                    for (int j = 0; j < SM_QK / 2; j++) h0 += q[j], h1 += q[j + SM_QK / 2];
                    s[i] -= qx.d[i * nb + b] * (M[0] * (float)h0 + M[1] * (float)h1);
                }
            }
        }
        for (size_t i = 0; i < r; i++) out[i * N + n] = s[i] + (bias ? bias[n] : 0.0f);
    }
}

const sm_qkernel sm_qkernel_scalar = {"scalar", quant_x, gemv, sm_quant_dequant, NULL, 0, SM_PEAK_COUNT, NULL, NULL};

void sm_kernels_qmatmul(const sm_qkernel *qk, float *restrict out, const float *restrict x,
                        const void *restrict w, sm_dtype dt, const float *restrict bias, size_t T,
                        size_t N, size_t K, size_t n0, size_t n1, void *restrict scratch) {
    sm_qx qx = sm_kernels_qx(scratch, K);
    for (size_t t = 0; t < T; t += SM_QX_ROWS) {
        size_t r = T - t < SM_QX_ROWS ? T - t : SM_QX_ROWS;
        qk->quant_x(qx, x + t * K, r, K);
        qk->gemv(out + t * N, qx, r, w, dt, bias, N, K, n0, n1);
    }
}
