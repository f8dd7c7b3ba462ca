/*
** quant_ref.c -- the quantized products in plain C: the reference the SIMD
** implementations are tested against (scalar table), and the driver that
** feeds any implementation groups of quantized activation rows.
*/
#include "kernels_internal.h"

#include "sm_half.h"

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
                qx.d[i * nb + b] = qx.xs[i * nb + b] = NAN;
                continue;
            }
            int sum = 0;
            for (int j = 0; j < SM_QK; j++) q[j] = (int8_t)nearbyintf(xb[j] * id);
            for (int j = 0; j < SM_QK / 4; j++) {
                s[j] = -(q[4 * j] + q[4 * j + 1] + q[4 * j + 2] + q[4 * j + 3]);
                sum -= s[j];
            }
            qx.d[i * nb + b] = d;
            qx.xs[i * nb + b] = d * (float)sum;
        }
}

/*
** Block b (of 32 weights) of a quantized row as w[j] = D ws[j] - M with
** integers ws: q8_0 q, q4_0 q - 8 (D = d, M = 0); q4_k / q5_k sc q
** (D = d, M = dmin m of its sub-block); q6_k sc (q - 32) (D = d, M = 0).
*/
static void block_ints(int *ws, const void *row, sm_dtype dt, size_t b, float *D, float *M) {
    *M = 0.0f;
    if (dt == SM_DTYPE_Q8_0) {
        const sm_block_q8_0 *x = (const sm_block_q8_0 *)row + b;
        *D = sm_f16_to_f32(x->d);
        for (int j = 0; j < SM_QK; j++) ws[j] = x->qs[j];
    } else if (dt == SM_DTYPE_Q4_0) {
        const sm_block_q4_0 *x = (const sm_block_q4_0 *)row + b;
        *D = sm_f16_to_f32(x->d);
        for (int j = 0; j < SM_QK / 2; j++) {
            ws[j] = (x->qs[j] & 15) - 8;
            ws[j + SM_QK / 2] = (x->qs[j] >> 4) - 8;
        }
    } else if (dt == SM_DTYPE_Q6_K) {
        const sm_block_q6_k *x = (const sm_block_q6_k *)row + b / 8;
        size_t h = b % 8 / 4, k = b % 4; /* 128-weight half, 32-weight quarter of it */
        *D = sm_f16_to_f32(x->d);
        for (int l = 0; l < SM_QK; l++) {
            int lo = x->ql[64 * h + l + 32 * (k & 1)] >> (k < 2 ? 0 : 4) & 15;
            int q = lo | (x->qh[32 * h + l] >> 2 * k & 3) << 4;
            ws[l] = x->scales[2 * (b % 8) + l / 16] * (q - 32);
        }
    } else {
        const sm_block_q4_k *x4 = (const sm_block_q4_k *)row + b / 8;
        const sm_block_q5_k *x5 = (const sm_block_q5_k *)row + b / 8;
        const sm_block_q4_k *hd = dt == SM_DTYPE_Q4_K ? x4 : (const sm_block_q4_k *)(const void *)x5;
        const uint8_t *qs = dt == SM_DTYPE_Q4_K ? x4->qs : x5->qs;
        size_t j = b % 8;
        uint8_t sc[8], m[8];
        sm_quant_k4_scales(hd->scales, sc, m); /* d, dmin, scales: the same offsets in both */
        *D = sm_f16_to_f32(hd->d);
        *M = sm_f16_to_f32(hd->dmin) * (float)m[j];
        for (int l = 0; l < SM_QK; l++) {
            int q = j & 1 ? qs[32 * (j / 2) + l] >> 4 : qs[32 * (j / 2) + l] & 15;
            if (dt == SM_DTYPE_Q5_K) q += (x5->qh[l] >> j & 1) << 4;
            ws[l] = sc[j] * q;
        }
    }
}

static void gemv(float *restrict out, sm_qx qx, size_t r, const void *restrict w, sm_dtype dt,
                 const float *restrict bias, size_t N, size_t K, size_t n0, size_t n1) {
    const size_t nb = K / SM_QK;
    int ws[SM_QK];
    for (size_t n = n0; n < n1; n++) {
        const void *row = sm_kernels_elem(w, dt, n * K);
        float s[SM_QX_ROWS] = {0}, D, M;
        for (size_t b = 0; b < nb; b++) { /* each block decoded once for the r rows */
            block_ints(ws, row, dt, b, &D, &M);
            for (size_t i = 0; i < r; i++) {
                const int8_t *q = qx.q + i * K + b * SM_QK;
                int dot = 0;
                for (int j = 0; j < SM_QK; j++) dot += ws[j] * q[j];
                s[i] += D * qx.d[i * nb + b] * (float)dot;
                if (M != 0.0f) s[i] -= M * qx.xs[i * nb + b];
            }
        }
        for (size_t i = 0; i < r; i++) out[i * N + n] = s[i] + (bias ? bias[n] : 0.0f);
    }
}

const sm_qkernel sm_qkernel_scalar = {"scalar", quant_x, gemv, sm_quant_dequant};

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
