/*
** Quantized weights: every implementation of the quantized products (the
** vpmaddubsw and vpdpbusd flavours this CPU runs) against the plain-C
** reference, and the reference against double-precision sums of the
** dequantized values; every table's matmul on q8_0 / q4_0 weights.
*/
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "sm_config.h"
#include "sm_half.h"
#include "sm_kernels.h"
#include "sm_quant.h"
#include "kernels/kernels_internal.h"
#include "test.h"

static const sm_dtype QT[] = {SM_DTYPE_Q8_0, SM_DTYPE_Q4_0, SM_DTYPE_Q4_K, SM_DTYPE_Q5_K,
                               SM_DTYPE_Q6_K, SM_DTYPE_Q4_1, SM_DTYPE_Q5_0, SM_DTYPE_Q5_1,
                               SM_DTYPE_Q2_K, SM_DTYPE_Q3_K, SM_DTYPE_IQ4_NL, SM_DTYPE_IQ4_XS};
#define NQT (sizeof QT / sizeof *QT)

/* N rows of K random weights quantized to dt, and their exact dequantization in deq. */
static void *rndq(sm_dtype dt, size_t N, size_t K, unsigned long long *s, float **deq) {
    float *w = test_rnd(N * K, s, 1);
    size_t rb = sm_dtype_row_bytes(dt, K);
    unsigned char *q = test_alloc(N * rb);
    for (size_t n = 0; n < N; n++) sm_quant_quantize(q + n * rb, w + n * K, dt, K);
    for (size_t n = 0; n < N; n++) sm_quant_dequant(w + n * K, q + n * rb, dt, K);
    *deq = w;
    return q;
}

/* Random finite f16 scales (some subnormal, some zero) into block b of dt at q. */
static void rnd_scales(unsigned char *q, sm_dtype dt, size_t b, unsigned long long *s) {
    size_t bb = sm_dtype_row_bytes(dt, sm_dtype_block(dt));
    size_t off = dt == SM_DTYPE_Q6_K ? offsetof(sm_block_q6_k, d)
                 : dt == SM_DTYPE_Q3_K ? offsetof(sm_block_q3_k, d)
                 : dt == SM_DTYPE_Q2_K ? offsetof(sm_block_q2_k, d) : 0;
    int n = dt == SM_DTYPE_Q4_K || dt == SM_DTYPE_Q5_K || dt == SM_DTYPE_Q2_K || dt == SM_DTYPE_Q4_1 ||
            dt == SM_DTYPE_Q5_1 ? 2 : 1; /* d, and dmin or m */
    for (int k = 0; k < n; k++) {
        uint16_t d = sm_f32_to_f16(test_rand(s) * (b % 7 == 0 ? 1e-6f : 0.1f));
        if (b == 5) d = 0;
        memcpy(q + b * bb + off + 2 * (size_t)k, &d, 2);
    }
}

/* Random blocks of every byte pattern (finite scales): each dequant is sm_quant_dequant. */
void test_quant_dequant(void) {
    const sm_qkernel *qk[8];
    size_t nq = sm_kernels_qavailable(qk, 8);
    unsigned long long s = 11;
    for (size_t t = 0; t < NQT; t++) {
        sm_dtype dt = QT[t];
        size_t nb = 16, blk = sm_dtype_block(dt), bb = sm_dtype_row_bytes(dt, blk), n = nb * blk;
        unsigned char *q = test_alloc(nb * bb);
        for (size_t i = 0; i < nb * bb; i++) q[i] = (unsigned char)(test_rand(&s) * 128 + 128);
        for (size_t b = 0; b < nb; b++) rnd_scales(q, dt, b, &s);
        float *want = test_rnd(n, &s, 0), *got = test_rnd(n, &s, 0);
        sm_quant_dequant(want, q, dt, n);
        for (size_t i = 0; i < nq; i++) {
            qk[i]->dequant(got, q, dt, n);
            CHECKF(memcmp(got, want, n * sizeof(float)) == 0, "%s dequant %s differs", qk[i]->name,
                   sm_dtype_name(dt));
        }
        const sm_kernels *ks[8];
        size_t nk = sm_kernels_available(ks, 8);
        for (size_t i = 0; i < nk; i++) {
            ks[i]->to_f32(got, q, dt, n);
            CHECKF(memcmp(got, want, n * sizeof(float)) == 0, "%s to_f32 %s differs", ks[i]->name,
                   sm_dtype_name(dt));
        }
        free(q), free(want), free(got);
    }
}

/* quant_x of every flavour is bit for bit the reference's, ties, zeros and non-finite blocks included. */
void test_quant_activations(void) {
    const sm_qkernel *qk[8];
    size_t nq = sm_kernels_qavailable(qk, 8);
    const size_t K = 256, r = SM_QX_ROWS;
    unsigned long long s = 12;
    float *x = test_rnd(r * K, &s, 3);
    for (size_t j = 32; j < 64; j++) x[j] = 0.0f;                    /* a zero block */
    for (size_t j = 64; j < 96; j++) x[j] = (float)((int)j - 80) * 0.25f; /* x / d: ties */
    x[64] = 63.5f;
    x[100] = NAN, x[140] = INFINITY, x[200] = -INFINITY;
    void *a = test_alloc(SM_QX_BYTES(K)), *b = test_alloc(SM_QX_BYTES(K));
    memset(a, 0, SM_QX_BYTES(K));
    sm_qx want = sm_kernels_qx(a, K);
    qk[0]->quant_x(want, x, r, K);
    CHECK(isnan(want.d[3]) && isnan(want.d[4]) && isnan(want.d[6]) && want.d[1] == 0.0f);
    CHECKF(want.s[0] == -(want.q[0] + want.q[1] + want.q[2] + want.q[3]) && want.s[0] != 0,
           "sums: %d", (int)want.s[0]);
    CHECKF(want.q[64] == 127 && want.d[2] == 63.5f / 127.0f, "tie block: q %d d %g", want.q[64],
           want.d[2]);
    for (size_t j = 0; j < r * K / 16; j++) { /* h: minus each 16 values' sum (a bad block's: 0) */
        int sum = 0;
        for (size_t k = 0; k < 16; k++) sum += want.q[16 * j + k];
        CHECKF(want.h[j] == -sum, "h[%zu] %d, want %d", j, want.h[j], -sum);
    }
    CHECK(want.h[0] != 0 && want.h[6] == 0 && want.h[7] == 0);
    for (size_t i = 1; i < nq; i++) {
        memset(b, 0x55, SM_QX_BYTES(K));
        sm_qx got = sm_kernels_qx(b, K);
        qk[i]->quant_x(got, x, r, K);
        CHECKF(memcmp(got.q, want.q, r * K) == 0, "%s quant_x: values differ", qk[i]->name);
        CHECKF(memcmp(got.s, want.s, r * K / 4 * sizeof *got.s) == 0, "%s quant_x: sums differ",
               qk[i]->name);
        CHECKF(memcmp(got.h, want.h, r * K / 16 * sizeof *got.h) == 0, "%s quant_x: sums of 16 differ",
               qk[i]->name);
        for (size_t j = 0; j < r * K / SM_QK; j++) {
            int same_d = got.d[j] == want.d[j] || (isnan(got.d[j]) && isnan(want.d[j]));
            CHECKF(same_d, "%s quant_x block %zu: d %g, want %g", qk[i]->name, j, got.d[j],
                   want.d[j]);
        }
    }
    free(x), free(a), free(b);
}

/*
** gemv: the reference equals a double-precision sum of dequantized weights
** times dequantized activations (d q), within the rounding of its f32 sums;
** every flavour equals the reference within the same bound.
*/
void test_quant_gemv(void) {
    const sm_qkernel *qk[8];
    size_t nq = sm_kernels_qavailable(qk, 8);
    static const size_t Ks[] = {32, 64, 96, 288, 1024}, KKs[] = {256, 768, 1024, 256, 512};
    unsigned long long s = 13;
    for (size_t t = 0; t < NQT; t++)
        for (size_t c = 0; c < sizeof Ks / sizeof *Ks; c++)
            for (size_t r = 1; r <= SM_QX_ROWS; r++) {
                sm_dtype dt = QT[t];
                size_t K = sm_dtype_block(dt) == SM_QK ? Ks[c] : KKs[c], N = 19, n0 = 2, n1 = 17, nb = K / SM_QK;
                float *deq, *x = test_rnd(r * K, &s, 2), *bias = test_rnd(N, &s, 1);
                void *w = rndq(dt, N, K, &s, &deq);
                void *buf = test_alloc(SM_QX_BYTES(K));
                sm_qx qx = sm_kernels_qx(buf, K);
                qk[0]->quant_x(qx, x, r, K);
                float *want = test_rnd(r * N, &s, 0), *got = test_rnd(r * N, &s, 0), *first = test_rnd(r * N, &s, 0);
                qk[0]->gemv(want, qx, r, w, dt, bias, N, K, n0, n1);
                for (size_t i = 0; i < r; i++)
                    for (size_t n = n0; n < n1; n++) {
                        double e = bias[n], mag = fabs(bias[n]);
                        for (size_t k = 0; k < K; k++) {
                            double xv = (double)qx.d[i * nb + k / SM_QK] * qx.q[i * K + k];
                            e += xv * deq[n * K + k], mag += fabs(xv * deq[n * K + k]);
                        }
                        double tol = 1e-5 * mag + 1e-6;
                        CHECKF(fabs(want[i * N + n] - e) <= tol,
                               "scalar gemv %s K=%zu row %zu col %zu: %g vs %g", sm_dtype_name(dt),
                               K, i, n, want[i * N + n], e);
                        for (size_t f = 1; f < nq; f++) {
                            got[i * N + n] = 12345.0f;
                            qk[f]->gemv(got, qx, r, w, dt, bias, N, K, n0, n1);
                            CHECKF(fabs(got[i * N + n] - want[i * N + n]) <= tol,
                                   "%s gemv %s K=%zu r=%zu row %zu col %zu: %g vs %g",
                                   qk[f]->name, sm_dtype_name(dt), K, r, i, n, got[i * N + n],
                                   want[i * N + n]);
                            /* the k types: every flavour the same f32 operations on exact integer
                               sums (AVX512-VNNI's two accumulators a row in one register); not
                               iq4_xs, summed as iq4_nl's blocks (vpdpbusd's zero point) */
                            if (f == 1) first[i * N + n] = got[i * N + n];
                            if (sm_dtype_block(dt) != SM_QK && dt != SM_DTYPE_IQ4_XS)
                                CHECKF(got[i * N + n] == first[i * N + n],
                                       "%s gemv %s K=%zu r=%zu row %zu col %zu: %.9g, %s %.9g",
                                       qk[f]->name, sm_dtype_name(dt), K, r, i, n, got[i * N + n],
                                       qk[1]->name, first[i * N + n]);
                        }
                    }
                free(deq), free(x), free(bias), free(w), free(buf), free(want), free(got), free(first);
            }
}

/*
** The packed products (gemm): every output the scalar gemv's on the same
** quantized activations within the rounding of the f32 sums (so within the
** double-precision sum's bound), for token counts across the token block
** (SM_QGEMM_MC), widths across the column slice (SM_QGEMM_KC) with a
** shorter last slice, and row ranges that start and end inside panels;
** columns outside [n0, n1) untouched; the same rows split in two calls
** (two threads) give the same bits.
*/
void test_quant_gemm(void) {
    const sm_qkernel *qk[8];
    size_t nq = sm_kernels_qavailable(qk, 8), tested = 0;
    static const size_t Ts[] = {4, 7, 33, 261}, Ks[] = {32, 544, 1056}, KKs[] = {256, 768, 1280};
    unsigned long long s = 21;
    for (size_t t = 0; t < NQT; t++)
        for (size_t a = 0; a < sizeof Ts / sizeof *Ts; a++)
            for (size_t c = 0; c < 3; c++) {
                sm_dtype dt = QT[t];
                size_t T = Ts[a], K = sm_dtype_block(dt) == SM_QK ? Ks[c] : KKs[c];
                size_t N = 77, n0 = 3, n1 = 74;
                if (T > 33 && K > 600) continue; /* the long cases once each way */
                float *deq, *x = test_rnd(T * K, &s, 2), *bias = test_rnd(N, &s, 1);
                void *w = rndq(dt, N, K, &s, &deq);
                void *qb = test_alloc(SM_QX_BYTES(K));
                void *scr = test_alloc(SM_QGEMM_BYTES);
                float *want = test_rnd(T * N, &s, 0), *got = test_rnd(T * N, &s, 0), *two = test_rnd(T * N, &s, 0);
                sm_qx qx = sm_kernels_qx(qb, K);
                double *mag = calloc(T * N, sizeof *mag);
                for (size_t i = 0; i < T; i++) {
                    qk[0]->quant_x(qx, x + i * K, 1, K);
                    qk[0]->gemv(want + i * N, qx, 1, w, dt, bias, N, K, n0, n1);
                    for (size_t n = n0; n < n1; n++) {
                        mag[i * N + n] = fabs(bias[n]);
                        for (size_t k = 0; k < K; k++)
                            mag[i * N + n] += fabs((double)qx.d[k / SM_QK] * qx.q[k] * deq[n * K + k]);
                    }
                }
                for (size_t f = 1; f < nq; f++) {
                    if (!sm_kernels_qgemm_takes(qk[f], dt, T)) continue;
                    tested++;
                    for (size_t j = 0; j < T * N; j++) got[j] = two[j] = 12345.0f;
                    qk[f]->gemm(got, x, w, dt, bias, T, N, K, n0, n1, scr);
                    qk[f]->gemm(two, x, w, dt, bias, T, N, K, n0, 40, scr);
                    qk[f]->gemm(two, x, w, dt, bias, T, N, K, 40, n1, scr);
                    CHECKF(memcmp(got, two, T * N * sizeof *got) == 0,
                           "%s gemm %s T=%zu K=%zu: rows split in two differ", qk[f]->name,
                           sm_dtype_name(dt), T, K);
                    for (size_t i = 0; i < T; i++)
                        for (size_t n = 0; n < N; n++) {
                            float g = got[i * N + n];
                            if (n < n0 || n >= n1) {
                                CHECKF(g == 12345.0f, "%s gemm %s wrote column %zu", qk[f]->name,
                                       sm_dtype_name(dt), n);
                                continue;
                            }
                            double tol = 2e-5 * mag[i * N + n] + 1e-6;
                            CHECKF(fabs(g - want[i * N + n]) <= tol,
                                   "%s gemm %s T=%zu K=%zu [%zu,%zu]: %g vs gemv %g", qk[f]->name,
                                   sm_dtype_name(dt), T, K, i, n, g, want[i * N + n]);
                        }
                }
                free(deq), free(x), free(bias), free(w), free(qb), free(scr), free(want), free(got);
                free(two), free(mag);
            }
    if (nq > 1) CHECKF(tested > 0, "no packed product tested");
}

/*
** Every table's matmul on quantized weights: T < 4 (quantized activations),
** and T >= 4 where the table's packed product takes the type, is within
** rounding of the scalar table's; other T >= 4 (weights dequantized into
** the f32 panels) is bit for bit the same table's matmul on the dequantized
** f32 weights; columns outside [n0, n1) untouched. matmul_rows gives each
** row exactly its T = 1 result.
*/
void test_quant_matmul(void) {
    const sm_kernels *ks[8], *ref = sm_kernels_reference();
    size_t nk = sm_kernels_available(ks, 8);
    static const size_t Ts[] = {1, 2, 3, 4, 5, 9, 17};
    static const size_t Ks[] = {32, 96, 256, 288, 544}, KKs[] = {256, 512, 768};
    unsigned long long s = 14;
    for (size_t t = 0; t < NQT; t++)
        for (size_t a = 0; a < sizeof Ts / sizeof *Ts; a++)
            for (size_t c = 0; c < (sm_dtype_block(QT[t]) == SM_QK ? 5u : 3u); c++) {
                sm_dtype dt = QT[t];
                size_t T = Ts[a], K = sm_dtype_block(dt) == SM_QK ? Ks[c] : KKs[c], N = 70, n0 = 5, n1 = 67;
                float *deq, *x = test_rnd(T * K, &s, 1), *bias = test_rnd(N, &s, 1);
                void *w = rndq(dt, N, K, &s, &deq);
                float *want = test_rnd(T * N, &s, 0), *got = test_rnd(T * N, &s, 0);
                float *one = test_rnd(N, &s, 0);
                float *rs = test_rnd(sm_kernels_scratch(ref, K), &s, 0);
                ref->matmul(ref, want, x, w, dt, bias, T, N, K, n0, n1, rs);
                for (size_t i = 0; i < nk; i++) {
                    float *scr = test_rnd(sm_kernels_scratch(ks[i], K), &s, 0);
                    for (size_t j = 0; j < T * N; j++) got[j] = 12345.0f;
                    ks[i]->matmul(ks[i], got, x, w, dt, bias, T, N, K, n0, n1, scr);
                    bool qgemm = sm_kernels_qgemm_takes(ks[i]->quant, dt, T);
                    if (T >= 4 && !qgemm) {
                        ks[i]->matmul(ks[i], want, x, deq, SM_DTYPE_F32, bias, T, N, K, n0, n1, scr);
                        for (size_t r = 0; r < T; r++)
                            CHECKF(memcmp(got + r * N + n0, want + r * N + n0,
                                          (n1 - n0) * sizeof(float)) == 0,
                                   "%s matmul %s T=%zu K=%zu row %zu: not the f32 product of the "
                                   "dequantized weights", ks[i]->name, sm_dtype_name(dt), T, K, r);
                    }
                    for (size_t r = 0; r < T; r++)
                        for (size_t n = 0; n < N; n++) {
                            float g = got[r * N + n];
                            if (n < n0 || n >= n1) {
                                CHECKF(g == 12345.0f, "%s matmul %s wrote column %zu",
                                       ks[i]->name, sm_dtype_name(dt), n);
                                continue;
                            }
                            double mag = fabs(bias[n]);
                            for (size_t k = 0; k < K; k++) mag += fabs(x[r * K + k] * deq[n * K + k]);
                            /* activations at 8 bits: each off by at most half a step, amax / 254 */
                            double tol = T < 4 || qgemm ? 0.01 * mag + 1e-5 : 1e-5 * mag + 1e-6;
                            CHECKF(fabs(g - want[r * N + n]) <= tol,
                                   "%s matmul %s T=%zu K=%zu [%zu,%zu]: %g vs %g", ks[i]->name,
                                   sm_dtype_name(dt), T, K, r, n, g, want[r * N + n]);
                        }
                    ks[i]->matmul_rows(ks[i], got, x, w, dt, bias, T, N, K, n0, n1, scr);
                    for (size_t r = 0; r < T; r++) {
                        ks[i]->matmul(ks[i], one, x + r * K, w, dt, bias, 1, N, K, n0, n1, scr);
                        CHECKF(memcmp(got + r * N + n0, one + n0, (n1 - n0) * sizeof(float)) == 0,
                               "%s matmul_rows %s T=%zu K=%zu: row %zu differs from the row alone",
                               ks[i]->name, sm_dtype_name(dt), T, K, r);
                    }
                    free(scr);
                }
                free(deq), free(x), free(bias), free(w), free(want), free(got), free(one), free(rs);
            }
}

/*
** Plain rounding for a k-type super-block (the baseline the search must
** beat): q4_k / q5_k sub-block scale (max - min) / nmax and offset -min
** (min at most 0), q6_k sub-block scale m / -32 (m the signed extreme); the
** super-block scales the largest over 63 (127 for q6_k), all f16; each
** weight's nearest level; iq4_xs every block's scale d (0 - 32), d = m /
** (127 32) in f16 (m the super-block's signed extreme). Returns the squared
** error of the 256 weights.
*/
static double plain_k(const float *x, sm_dtype dt) {
    double err = 0;
    if (dt == SM_DTYPE_IQ4_XS) {
        float m = 0;
        for (int i = 0; i < SM_QK_K; i++) m = fabsf(x[i]) > fabsf(m) ? x[i] : m;
        float dl = sm_f16_to_f32(sm_f32_to_f16(m / (127 * 32))) * -32;
        for (int i = 0; i < SM_QK_K; i++) {
            double be = INFINITY;
            for (int k = 0; k < 16; k++) be = fmin(be, fabs(x[i] - (double)(dl * (float)SM_IQ4NL[k])));
            err += be * be;
        }
        return err;
    }
    if (dt == SM_DTYPE_Q2_K) { /* as q4_k's over 16 weights, levels 0..3, 4-bit multiples */
        float a[16], b[16], amx = 0, bmx = 0;
        for (int j = 0; j < 16; j++) {
            float lo = 0, hi = x[16 * j];
            for (int i = 0; i < 16; i++) lo = fminf(lo, x[16 * j + i]), hi = fmaxf(hi, x[16 * j + i]);
            a[j] = (hi - lo) / 3, b[j] = -lo, amx = fmaxf(amx, a[j]), bmx = fmaxf(bmx, b[j]);
        }
        float d = sm_f16_to_f32(sm_f32_to_f16(amx / 15)), dm = sm_f16_to_f32(sm_f32_to_f16(bmx / 15));
        for (int j = 0; j < 16; j++) {
            float sc = d > 0 ? fminf(nearbyintf(a[j] / d), 15) : 0, m = dm > 0 ? fminf(nearbyintf(b[j] / dm), 15) : 0;
            for (int i = 0; i < 16; i++) {
                float v = x[16 * j + i];
                float l = sc > 0 ? fminf(fmaxf(nearbyintf((v + dm * m) / (d * sc)), 0), 3) : 0;
                err += (v - (d * sc * l - dm * m)) * (v - (d * sc * l - dm * m));
            }
        }
        return err;
    }
    if (dt == SM_DTYPE_Q3_K || dt == SM_DTYPE_Q6_K) {
        /* levels -z..z-1, sub-block scale m / -z, stored as multiples -sh-1..sh of amax / sh */
        const float z = dt == SM_DTYPE_Q3_K ? 4 : 32, sh = dt == SM_DTYPE_Q3_K ? 31 : 127;
        float a[16], am = 0;
        for (int j = 0; j < 16; j++) {
            float m = 0;
            for (int i = 0; i < 16; i++) m = fabsf(x[16 * j + i]) > fabsf(m) ? x[16 * j + i] : m;
            a[j] = m / -z;
            am = fmaxf(am, fabsf(a[j]));
        }
        float d = sm_f16_to_f32(sm_f32_to_f16(am / sh));
        for (int j = 0; j < 16; j++) {
            float sc = d > 0 ? fminf(fmaxf(nearbyintf(a[j] / d), -sh - 1), sh) : 0;
            for (int i = 0; i < 16; i++) {
                float l = sc != 0 ? fminf(fmaxf(nearbyintf(x[16 * j + i] / (d * sc)), -z), z - 1) : 0;
                err += (x[16 * j + i] - d * sc * l) * (x[16 * j + i] - d * sc * l);
            }
        }
        return err;
    }
    float nmax = dt == SM_DTYPE_Q4_K ? 15 : 31, a[8], b[8], amx = 0, bmx = 0;
    for (int j = 0; j < 8; j++) {
        float lo = 0, hi = x[32 * j];
        for (int i = 0; i < 32; i++) lo = fminf(lo, x[32 * j + i]), hi = fmaxf(hi, x[32 * j + i]);
        a[j] = (hi - lo) / nmax, b[j] = -lo;
        amx = fmaxf(amx, a[j]), bmx = fmaxf(bmx, b[j]);
    }
    float d = sm_f16_to_f32(sm_f32_to_f16(amx / 63)), dm = sm_f16_to_f32(sm_f32_to_f16(bmx / 63));
    for (int j = 0; j < 8; j++) {
        float sc = d > 0 ? fminf(nearbyintf(a[j] / d), 63) : 0, m = dm > 0 ? fminf(nearbyintf(b[j] / dm), 63) : 0;
        for (int i = 0; i < 32; i++) {
            float v = x[32 * j + i];
            float l = sc > 0 ? fminf(fmaxf(nearbyintf((v + dm * m) / (d * sc)), 0), nmax) : 0;
            err += (v - (d * sc * l - dm * m)) * (v - (d * sc * l - dm * m));
        }
    }
    return err;
}

/*
** The quantizer: no 32-weight block of q8_0 / q4_0 worse than plain
** rounding with the plain scale (amax / 127 for q8_0, the signed extreme
** over -8 for q4_0), with that scale rounded to f16 too; the k types' total
** error below plain_k's and no super-block worse than 1.1 times it;
** non-finite weights refused, naming the block.
*/
void test_quant_quantizer(void) {
    unsigned long long s = 15;
    const size_t n = 256 * SM_QK;
    float *w = test_rnd(n, &s, 1), *back = test_rnd(n, &s, 0);
    for (size_t i = 0; i < n; i++) w[i] = w[i] * w[i] * w[i] * (float)(1 + i % 5); /* heavy tails */
    for (size_t i = n / 2; i < n / 2 + 256; i++) w[i] = fabsf(w[i]) + 0.01f; /* a positive super-block */
    for (size_t t = 0; t < NQT; t++) {
        sm_dtype dt = QT[t];
        size_t blk = sm_dtype_block(dt), nb = n / blk;
        unsigned char *q = test_alloc(sm_dtype_row_bytes(dt, n));
        CHECK(sm_quant_quantize(q, w, dt, n) == nb);
        sm_quant_dequant(back, q, dt, n);
        double ours = 0, plain = 0;
        for (size_t b = 0; b < nb; b++) {
            const float *x = w + b * blk;
            double eo = 0, ep = 0;
            for (size_t j = 0; j < blk; j++) eo += (x[j] - back[b * blk + j]) * (x[j] - back[b * blk + j]);
            if (blk == SM_QK_K) {
                ep = plain_k(x, dt);
                CHECKF(eo <= ep * 1.1 + 1e-12, "%s super-block %zu: error %g, plain rounding %g",
                       sm_dtype_name(dt), b, eo, ep);
            } else if (dt == SM_DTYPE_Q4_1 || dt == SM_DTYPE_Q5_1) { /* m the least, d the range over nmax */
                float lo = x[0], hi = x[0], nmax = dt == SM_DTYPE_Q4_1 ? 15 : 31;
                for (int j = 0; j < SM_QK; j++) lo = fminf(lo, x[j]), hi = fmaxf(hi, x[j]);
                float m = sm_f16_to_f32(sm_f32_to_f16(lo)), d = sm_f16_to_f32(sm_f32_to_f16((hi - m) / nmax));
                for (int j = 0; j < SM_QK; j++) {
                    double l = d > 0 ? fmin(fmax(nearbyint((x[j] - m) / d), 0), nmax) : 0;
                    ep += (x[j] - (l * d + m)) * (x[j] - (l * d + m));
                }
            } else if (dt == SM_DTYPE_IQ4_NL) { /* d = m / -127, each weight's nearest level */
                static const int kv[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
                float m = 0;
                for (int j = 0; j < SM_QK; j++)
                    if (fabsf(x[j]) > fabsf(m)) m = x[j];
                float d = sm_f16_to_f32(sm_f32_to_f16(m / -127));
                for (int j = 0; j < SM_QK; j++) {
                    double be = INFINITY;
                    for (int k = 0; k < 16; k++) be = fmin(be, fabs(x[j] - (double)(d * (float)kv[k])));
                    ep += be * be;
                }
            } else {
                float m = 0;
                for (int j = 0; j < SM_QK; j++)
                    if (fabsf(x[j]) > fabsf(m)) m = x[j];
                const int lv = dt == SM_DTYPE_Q5_0 ? 16 : 8; /* q4_0: -8..7, q5_0: -16..15 */
                float d = sm_f16_to_f32(sm_f32_to_f16(dt == SM_DTYPE_Q8_0 ? fabsf(m) / 127 : m / (float)-lv));
                for (int j = 0; j < SM_QK; j++) {
                    double l = nearbyint(x[j] / d);
                    l = dt == SM_DTYPE_Q8_0 ? fmin(fmax(l, -128), 127) : fmin(fmax(l, -lv), lv - 1);
                    ep += (x[j] - l * d) * (x[j] - l * d);
                }
                CHECKF(eo <= ep * (1 + 1e-5) + 1e-12, "%s block %zu: error %g, plain rounding %g",
                       sm_dtype_name(dt), b, eo, ep);
            }
            ours += eo, plain += ep;
        }
        CHECKF(ours < plain, "%s: total error %g not below plain rounding's %g", sm_dtype_name(dt),
               ours, plain);
        w[777] = NAN;
        CHECK(sm_quant_quantize(q, w, dt, n) == 777 / blk);
        w[777] = 1e30f; /* too large for an f16 scale */
        CHECK(sm_quant_quantize(q, w, dt, n) == 777 / blk);
        w[777] = 0.5f;
        free(q);
    }
    free(w), free(back);
}

/*
** Repacked q4_0 / q8_0 / q4_k / q5_k / q6_k / iq4_nl / iq4_xs matrices (sm_kernels_repack):
** the layouts byte for byte as sm_kernels.h describes them (worked out here
** from the file's blocks; q6_k's levels from the dequantized weights), and
** every table that multiplies them gives, for any T (1 to
** 300, across the token blocks of the packed product; 260 leaves a last block of
** 4 rows, read in place; q4_0's 100 rows in place and 140 split, the
** others' both split), each output bit for
** bit what the same table's packed product (T >= 4) gives on the file's
** rows, each row the same whatever rows are beside it; columns outside
** [n0, n1) untouched. Skips, saying so, where no table takes them.
*/
void test_quant_repacked(void) {
    const sm_kernels *ks[8];
    size_t nk = sm_kernels_available(ks, 8), tested = 0;
    static const sm_dtype dts[] = {SM_DTYPE_Q4_0, SM_DTYPE_Q8_0,   SM_DTYPE_Q4_K,  SM_DTYPE_Q5_K,
                                   SM_DTYPE_Q6_K, SM_DTYPE_IQ4_NL, SM_DTYPE_IQ4_XS};
    static const size_t Ts[] = {1, 2, 3, 4, 6, 7, 13, 100, 140, 260, 300}, Ks[] = {32, 96, 544, 1056}, KKs[] = {256, 512, 768, 1280};
    unsigned long long s = 33;
    unsigned any = 0;
    for (size_t ki = 0; ki < nk; ki++) any |= sm_kernels_repack_types(ks[ki]);
    for (size_t di = 0; di < sizeof dts / sizeof *dts; di++)
        for (size_t c = 0; c < 4; c++) {
            sm_dtype dt = dts[di];
            if (!(any >> dt & 1u)) continue; /* the layouts are the AVX512-VNNI code's */
            const bool q5 = dt == SM_DTYPE_Q5_K, k45 = dt == SM_DTYPE_Q4_K || q5, xs = dt == SM_DTYPE_IQ4_XS;
            const bool kt = k45 || dt == SM_DTYPE_Q6_K || xs;
            /* N = 83 (cases 1, 3): a last row group of 19 rows, its products' columns past N unwritten */
            size_t K = kt ? KKs[c] : Ks[c], N = c % 2 ? 83 : 96, n0 = 32, n1 = N, G = (N + SM_R32 - 1) / SM_R32;
            size_t rb = sm_dtype_row_bytes(dt, K), lb = sm_dtype_row_bytes(sm_kernels_repacked(dt), K);
            float *deq;
            unsigned char *w = rndq(dt, N, K, &s, &deq), *r = test_alloc(G * SM_R32 * lb);
            CHECK(sm_kernels_repackable(dt, N, K) && sm_kernels_repackable(dt, N - 16, K) &&
                  !sm_kernels_repackable(SM_DTYPE_Q4_K, N, 32) && !sm_kernels_repackable(SM_DTYPE_Q8_0, N, 48) &&
                  !sm_kernels_repackable(SM_DTYPE_F16, 0, 256));
            memset(r, 0xee, G * SM_R32 * lb);
            sm_kernels_repack(r, w, dt, N, K, 0, G);
            /* the layout: row n, block b, level bytes j (four at a time), scale */
            const bool q8 = dt == SM_DTYPE_Q8_0;
            const size_t bs = q8 ? 34 : 18, lv = bs - 2, nb = K / SM_QK, blk = SM_R32 * bs;
            (void)blk, (void)lv;
            size_t bad = 0;
            /* q4_k / q5_k: per super-block 8 blocks (levels, q5_k's bit planes, scales, mins), d, dmin */
            const size_t kb = q5 ? 704 : 576, lvb = q5 ? 640 : 512;
            for (size_t n = 0; n < N && k45; n++)
                for (size_t sb = 0; sb < K / 256; sb++) {
                    const sm_block_q4_k *x = (const sm_block_q4_k *)(const void *)(w + n * rb + sb * (rb / (K / 256)));
                    const sm_block_q5_k *x5 = (const sm_block_q5_k *)(const void *)x;
                    const unsigned char *o = r + (n / 32 * (K / 256) + sb) * 32 * (q5 ? 180 : 148);
                    uint8_t sc[8], m[8];
                    sm_quant_k4_scales(x->scales, sc, m);
                    for (size_t j = 0; j < 8; j++) {
                        const unsigned char *ob = o + j * kb;
                        for (size_t i = 0; i < 32; i++) { /* level i of the block: byte i % 16, nibble i / 16 */
                            const uint8_t *qs = q5 ? x5->qs : x->qs;
                            unsigned want = (qs[32 * (j / 2) + i] >> (j % 2 ? 4 : 0) & 15) + (q5 ? (x5->qh[i] >> j & 1u) << 4 : 0);
                            unsigned at = (unsigned)(i % 16), h = (unsigned)(i / 16);
                            unsigned got = ob[(n % 32) / 16 * 256 + at / 4 * 64 + (n % 16) * 4 + at % 4] >> (h ? 4 : 0) & 15;
                            if (q5) /* the fifth bit: the plane's byte of the row's (i % 4)-th level, bit at / 4 (+ 4) */
                                got += (ob[512 + (n % 32) / 16 * 64 + (n % 16) * 4 + at % 4] >> (at / 4 + 4 * h) & 1u) << 4;
                            bad += got != want;
                        }
                        bad += ob[lvb + n % 32] != sc[j], bad += ob[lvb + 32 + n % 32] != m[j];
                    }
                    bad += memcmp(o + 8 * kb + 2 * (n % 32), &x->d, 2) != 0;
                    bad += memcmp(o + 8 * kb + 64 + 2 * (n % 32), &x->dmin, 2) != 0;
                }
            /* q6_k: per super-block 8 blocks (low nibbles, two planes of top bits, the halves'
               scales), d; each level worked out from the dequantized weight, d and its scale */
            for (size_t n = 0; n < N && dt == SM_DTYPE_Q6_K; n++)
                for (size_t sb = 0; sb < K / 256; sb++) {
                    const sm_block_q6_k *x = (const sm_block_q6_k *)(const void *)(w + n * rb) + sb;
                    const unsigned char *o = r + (n / 32 * (K / 256) + sb) * 32 * 210;
                    const float d = sm_f16_to_f32(x->d);
                    for (size_t j = 0; j < 8; j++) {
                        const unsigned char *ob = o + j * 832;
                        for (size_t i = 0; i < 32; i++) {
                            float ds = d * (float)x->scales[2 * j + i / 16];
                            if (ds == 0.0f) continue;
                            long want = lroundf(deq[n * K + sb * 256 + j * 32 + i] / ds) + 32;
                            unsigned at = (unsigned)(i % 16), h = (unsigned)(i / 16);
                            unsigned got = ob[(n % 32) / 16 * 256 + at / 4 * 64 + (n % 16) * 4 + at % 4] >> (h ? 4 : 0) & 15;
                            got += (ob[512 + (n % 32) / 16 * 128 + h * 64 + (n % 16) * 4 + at % 4] >> (2 * (at / 4)) & 3u) << 4;
                            bad += (long)got != want;
                        }
                        bad += ob[768 + n % 32] != (unsigned char)x->scales[2 * j];
                        bad += ob[800 + n % 32] != (unsigned char)x->scales[2 * j + 1];
                    }
                    bad += memcmp(o + 8 * 832 + 2 * (n % 32), &x->d, 2) != 0;
                }
            /* iq4_xs: per super-block 8 blocks' levels (as q4_0_r32's), the rows' ls - 32 a byte
               block after block, d */
            for (size_t n = 0; n < N && xs; n++)
                for (size_t sb = 0; sb < K / 256; sb++) {
                    const sm_block_iq4_xs *x = (const sm_block_iq4_xs *)(const void *)(w + n * rb) + sb;
                    const unsigned char *o = r + (n / 32 * (K / 256) + sb) * 32 * 138;
                    for (size_t j = 0; j < 8; j++) {
                        for (size_t i = 0; i < 32; i++) {
                            unsigned want = x->qs[16 * j + i % 16] >> (i / 16 ? 4 : 0) & 15;
                            unsigned at = (unsigned)(i % 16), h = (unsigned)(i / 16);
                            unsigned got = o[j * 512 + (n % 32) / 16 * 256 + at / 4 * 64 + (n % 16) * 4 + at % 4] >> (h ? 4 : 0) & 15;
                            bad += got != want;
                        }
                        bad += (signed char)o[4096 + j * 32 + n % 32] != sm_quant_iq4xs_scale(x, (int)j) - 32;
                    }
                    bad += memcmp(o + 4096 + 256 + 2 * (n % 32), &x->d, 2) != 0;
                }
            for (size_t n = 0; n < N && !kt; n++) /* q4_0, q8_0, iq4_nl */
                for (size_t b = 0; b < nb; b++) {
                    const unsigned char *src = w + n * rb + b * bs, *o = r + (n / 32 * nb + b) * blk;
                    for (size_t j = 0; j < lv; j++) {
                        unsigned char want = (unsigned char)(src[2 + j] ^ (q8 ? 0x80 : 0));
                        bad += o[(n % 32) / 16 * (16 * lv) + j / 4 * 64 + (n % 16) * 4 + j % 4] != want;
                    }
                    bad += memcmp(o + 32 * lv + (n % 32) * 2, src, 2) != 0;
                }
            CHECKF(bad == 0, "%s K=%zu: %zu bytes of the repacked layout misplaced", sm_dtype_name(dt), K, bad);
            for (size_t ti = 0; ti < sizeof Ts / sizeof *Ts; ti++) {
                size_t T = Ts[ti];
                if (T > 13 && K > 600) continue;
                float *x = test_rnd(T * K, &s, 2), *bias = test_rnd(N, &s, 1);
                float *want = test_rnd(T * N, &s, 0), *got = test_rnd(T * N, &s, 0), *one = test_rnd(N, &s, 0);
                for (size_t ki = 0; ki < nk; ki++) {
                    const sm_kernels *k = ks[ki];
                    if (!(sm_kernels_repack_types(k) >> dt & 1u)) continue;
                    float *scr = test_alloc(sm_kernels_scratch(k, K) * sizeof(float));
                    for (int bi = 0; bi < 2; bi++) {
                        const float *bb = bi ? bias : NULL;
                        for (size_t j = 0; j < T * N; j++) want[j] = got[j] = 12345.0f;
                        k->quant->gemm(want, x, w, dt, bb, T, N, K, n0, n1, scr);
                        k->matmul(k, got, x, r, sm_kernels_repacked(dt), bb, T, N, K, n0, 64, scr);
                        k->matmul_rows(k, got, x, r, sm_kernels_repacked(dt), bb, T, N, K, 64, n1, scr);
                        CHECKF(memcmp(want, got, T * N * sizeof *got) == 0,
                               "%s %s T=%zu K=%zu bias %d: repacked differs from the packed product",
                               k->name, sm_dtype_name(dt), T, K, bi);
                        for (size_t i = 0; i < T; i += 1 + T / 3) { /* a row alone */
                            for (size_t j = 0; j < N; j++) one[j] = 12345.0f;
                            k->matmul(k, one, x + i * K, r, sm_kernels_repacked(dt), bb, 1, N, K, n0, n1, scr);
                            CHECKF(memcmp(one, got + i * N, N * sizeof *one) == 0,
                                   "%s %s T=%zu K=%zu: row %zu alone differs", k->name, sm_dtype_name(dt), T, K, i);
                        }
                        tested++;
                    }
                    free(scr);
                }
                /* not the same as an unrelated product: the packed one is near the exact sum */
                double err = 0, mag = 0;
                for (size_t n = n0; n < n1; n++) {
                    double e = bias[n];
                    for (size_t kk = 0; kk < K; kk++) e += (double)x[kk] * deq[n * K + kk];
                    mag += fabs(e);
                    if (tested) err += fabs(e - want[n]);
                }
                CHECKF(!tested || err <= 0.02 * mag, "%s K=%zu: far from the exact product (%g of %g)",
                       sm_dtype_name(dt), K, err, mag);
                free(x), free(bias), free(want), free(got), free(one);
            }
            free(w), free(r), free(deq);
        }
    if (!tested) test_skip("no kernel table here multiplies repacked quantized weights");
}

/*
** The repacked product's kept activations (sm_kernels_reuse_begin / end):
** inside a window a call on the same x, T, K and type reuses the rows the
** last call quantized (seen by changing x between two calls, which the
** window's contract forbids: the second gives the old rows' product), any
** other x, T or type quantizes afresh, a call of more rows than the scratch
** keeps (one token block, or the rows it was sized for) never reuses, a
** scratch written over by another kernel and armed again starts empty, and
** outside a window nothing is kept.
*/
void test_quant_reuse(void) {
    const sm_kernels *ks[8];
    size_t nk = sm_kernels_available(ks, 8), tested = 0;
    unsigned long long s = 77;
    const size_t N = 96, K = 768; /* a column slice and a part */
    for (size_t ki = 0; ki < nk; ki++) {
        const sm_kernels *k = ks[ki];
        unsigned rt = sm_kernels_repack_types(k);
        if (!(rt >> SM_DTYPE_Q4_0 & 1u)) continue;
        /* a second type of another zero point: q8_0, or q4_k where the table leaves q8_0 as stored */
        const sm_dtype d8 = rt >> SM_DTYPE_Q8_0 & 1u ? SM_DTYPE_Q8_0 : SM_DTYPE_Q4_K;
        CHECK(rt >> d8 & 1u);
        float *deq4, *deq8;
        unsigned char *w4 = rndq(SM_DTYPE_Q4_0, N, K, &s, &deq4), *w8 = rndq(d8, N, K, &s, &deq8);
        unsigned char *r4 = test_alloc(N * sm_dtype_row_bytes(SM_DTYPE_Q4_0_R32, K));
        unsigned char *r8 = test_alloc(N * sm_dtype_row_bytes(sm_kernels_repacked(d8), K));
        sm_kernels_repack(r4, w4, SM_DTYPE_Q4_0, N, K, 0, N / SM_R32);
        sm_kernels_repack(r8, w8, d8, N, K, 0, N / SM_R32);
        static const size_t Ts[] = {1, 3, 13, 260, 520}, caps[] = {0, 300, 600};
        for (size_t ti = 0; ti < sizeof Ts / sizeof *Ts; ti++)
            for (size_t ci = 0; ci < sizeof caps / sizeof *caps; ci++) {
                const size_t T = Ts[ti], cap = caps[ci];
                const size_t scr_n = sm_kernels_scratch_rows(k, K, cap);
                float *scr = test_alloc(scr_n * sizeof(float));
                float *x = test_rnd(T * K, &s, 2), *y = test_rnd(T * K, &s, 2), *x0 = test_alloc(T * K * sizeof *x);
                float *wx4 = test_alloc(T * N * 4), *wy4 = test_alloc(T * N * 4), *wx8 = test_alloc(T * N * 4);
                float *got = test_alloc(T * N * 4);
                memcpy(x0, x, T * K * sizeof *x);
                sm_kernels_reuse_end(scr);
                k->matmul(k, wx4, x, r4, SM_DTYPE_Q4_0_R32, NULL, T, N, K, 0, N, scr);
                k->matmul(k, wy4, y, r4, SM_DTYPE_Q4_0_R32, NULL, T, N, K, 0, N, scr);
                k->matmul(k, wx8, x, r8, sm_kernels_repacked(d8), NULL, T, N, K, 0, N, scr);
                const bool one_block = SM_QGEMM_XBLOCKS(T) <= SM_QGEMM_XBLOCKS(cap); /* room for every row */
                /* two chunks, x changed between them: the second reuses x's old rows */
                sm_kernels_reuse_begin(scr, cap);
                k->matmul(k, got, x, r4, SM_DTYPE_Q4_0_R32, NULL, T, N, K, 0, 32, scr);
                memcpy(x, y, T * K * sizeof *x);
                k->matmul(k, got, x, r4, SM_DTYPE_Q4_0_R32, NULL, T, N, K, 32, N, scr);
                bool kept = memcmp(got, wx4, T * N * 4) == 0, fresh = true;
                for (size_t t = 0; t < T; t++) fresh &= memcmp(got + t * N + 32, wy4 + t * N + 32, (N - 32) * 4) == 0;
                CHECKF(one_block ? kept : fresh, "%s T=%zu, room for %zu: a window's second chunk %s", k->name, T,
                       cap, one_block ? "quantized x again" : "reused rows it had no room for");
                memcpy(x, x0, T * K * sizeof *x);
                /* another x (y), another type (q8_0), fewer rows: each quantized afresh */
                k->matmul(k, got, y, r4, SM_DTYPE_Q4_0_R32, NULL, T, N, K, 0, N, scr);
                CHECKF(memcmp(got, wy4, T * N * 4) == 0, "%s T=%zu: another x in a window", k->name, T);
                k->matmul(k, got, x, r4, SM_DTYPE_Q4_0_R32, NULL, T, N, K, 0, N, scr);
                CHECKF(memcmp(got, wx4, T * N * 4) == 0, "%s T=%zu: x again in a window", k->name, T);
                k->matmul(k, got, x, r8, sm_kernels_repacked(d8), NULL, T, N, K, 0, N, scr);
                CHECKF(memcmp(got, wx8, T * N * 4) == 0, "%s T=%zu: %s after q4_0 on x", k->name, T, sm_dtype_name(d8));
                if (T > 1) {
                    k->matmul(k, got, x, r8, sm_kernels_repacked(d8), NULL, T - 1, N, K, 0, N, scr);
                    CHECKF(memcmp(got, wx8, (T - 1) * N * 4) == 0, "%s T=%zu: fewer rows of x", k->name, T);
                }
                /* written over by another kernel, armed again: nothing kept */
                memset(scr, 0x55, scr_n * sizeof(float));
                sm_kernels_reuse_begin(scr, cap);
                k->matmul(k, got, x, r4, SM_DTYPE_Q4_0_R32, NULL, T, N, K, 0, N, scr);
                CHECKF(memcmp(got, wx4, T * N * 4) == 0, "%s T=%zu: after another kernel's use", k->name, T);
                /* closed: x changed between calls is seen */
                sm_kernels_reuse_end(scr);
                memcpy(x, y, T * K * sizeof *x);
                k->matmul(k, got, x, r4, SM_DTYPE_Q4_0_R32, NULL, T, N, K, 0, N, scr);
                CHECKF(memcmp(got, wy4, T * N * 4) == 0, "%s T=%zu: rows kept outside a window", k->name, T);
                tested++;
                free(x), free(y), free(x0), free(wx4), free(wy4), free(wx8), free(got), free(scr);
            }
        free(w4), free(w8), free(r4), free(r8), free(deq4), free(deq8);
    }
    if (!tested) test_skip("no kernel table here multiplies repacked quantized weights");
}

/*
** Activations the threads quantize once between them (sm_kernels_share_open):
** each of nth "threads" (run one after another) quantizes its share of x's
** rows into the shared buffer, then each multiplies its columns from there;
** every output equals the product with each thread quantizing all of x
** itself, bit for bit. The buffer is what the calls read (x changed after
** the sharing, which the contract forbids, gives the old x's product);
** another type in the window quantizes for itself, and q4_0 after it still
** reads the shared rows; calls of few rows and unrepacked types take no
** shared rows.
*/
void test_quant_share(void) {
    const sm_kernels *ks[8];
    size_t nk = sm_kernels_available(ks, 8), tested = 0;
    unsigned long long s = 91;
    const size_t N = 96, K = 768; /* two column slices */
    for (size_t ki = 0; ki < nk; ki++) {
        const sm_kernels *k = ks[ki];
        unsigned rt = sm_kernels_repack_types(k);
        if (!(rt >> SM_DTYPE_Q4_0 & 1u)) continue;
        const sm_dtype d8 = rt >> SM_DTYPE_Q8_0 & 1u ? SM_DTYPE_Q8_0 : SM_DTYPE_Q4_K, r8t = sm_kernels_repacked(d8);
        float *deq4, *deq8;
        unsigned char *w4 = rndq(SM_DTYPE_Q4_0, N, K, &s, &deq4), *w8 = rndq(d8, N, K, &s, &deq8);
        unsigned char *r4 = test_alloc(N * sm_dtype_row_bytes(SM_DTYPE_Q4_0_R32, K));
        unsigned char *r8 = test_alloc(N * sm_dtype_row_bytes(r8t, K));
        sm_kernels_repack(r4, w4, SM_DTYPE_Q4_0, N, K, 0, N / SM_R32);
        sm_kernels_repack(r8, w8, d8, N, K, 0, N / SM_R32);
        CHECKF(!sm_kernels_share_takes(k, SM_DTYPE_Q4_0_R32, 13, K) && !sm_kernels_share_takes(k, SM_DTYPE_Q4_0, 260, K) &&
               sm_kernels_share_takes(k, SM_DTYPE_Q4_0_R32, 260, K) && sm_kernels_share_takes(k, r8t, 260, K),
               "%s: which calls take shared rows", k->name);
        static const size_t Ts[] = {130, 260, 520};
        for (size_t ti = 0; ti < sizeof Ts / sizeof *Ts; ti++)
            for (int nth = 1; nth <= 3; nth++) {
                const size_t T = Ts[ti], scr_n = sm_kernels_scratch(k, K);
                float *scr = test_alloc((size_t)nth * scr_n * sizeof(float));
                unsigned char *buf = test_alloc(sm_kernels_share_bytes(k, K, T));
                float *x = test_rnd(T * K, &s, 2), *y = test_rnd(T * K, &s, 2);
                float *want4 = test_alloc(T * N * 4), *want8 = test_alloc(T * N * 4), *got4 = test_alloc(T * N * 4);
                float *got8 = test_alloc(T * N * 4);
                sm_kernels_reuse_end(scr);
                k->matmul(k, want4, x, r4, SM_DTYPE_Q4_0_R32, NULL, T, N, K, 0, N, scr);
                k->matmul(k, want8, x, r8, r8t, NULL, T, N, K, 0, N, scr);
                for (int i = 0; i < nth; i++) { /* each thread its rows */
                    float *si = scr + (size_t)i * scr_n;
                    CHECK(sm_kernels_share_open(k, buf, si, 0, x, SM_DTYPE_Q4_0_R32, T, K, i, nth));
                }
                memcpy(x, y, T * K * sizeof *x); /* the calls read buf, not x */
                for (int i = 0; i < nth; i++) { /* then each its columns: q4_0, the other type, q4_0 again */
                    float *si = scr + (size_t)i * scr_n;
                    size_t n0, n1;
                    sm_pool_split(N, SM_R32, i, nth, &n0, &n1);
                    if (n0 >= n1) continue;
                    k->matmul(k, got4, x, r4, SM_DTYPE_Q4_0_R32, NULL, T, N, K, n0, n1, si);
                    k->matmul(k, got8, y, r8, r8t, NULL, T, N, K, n0, n1, si);
                    k->matmul(k, got4, x, r4, SM_DTYPE_Q4_0_R32, NULL, T, N, K, n0, n1, si);
                    sm_kernels_reuse_end(si);
                }
                CHECKF(memcmp(got4, want4, T * N * 4) == 0, "%s T=%zu, %d threads: shared rows' product", k->name, T,
                       nth);
                k->matmul(k, want8, y, r8, r8t, NULL, T, N, K, 0, N, scr);
                CHECKF(memcmp(got8, want8, T * N * 4) == 0, "%s T=%zu, %d threads: %s in the window", k->name, T,
                       nth, sm_dtype_name(d8));
                tested++;
                free(scr), free(buf), free(x), free(y), free(want4), free(want8), free(got4), free(got8);
            }
        free(w4), free(w8), free(r4), free(r8), free(deq4), free(deq8);
    }
    if (!tested) test_skip("no kernel table here multiplies repacked quantized weights");
}
