/*
** quant.c -- reference conversions of the block-quantized types and the
** quantizer (plain C).
**
** The quantizer picks each block's scale by search: for every candidate d
** (rounded to f16 first, since that is the scale the file will hold) each
** weight gets its nearest level, clamped to the type's range; the candidate
** with the least squared error over the block wins, then one least-squares
** step (d = sum x q / sum q^2 for those levels) is kept if it lowers the
** error further. The candidates include the plain choice (the largest
** magnitude at the end of the range: d = amax / 127 for q8_0, d = max / -8
** for q4_0), so no block is worse than plain rounding with that scale.
*/
#include "sm_quant.h"

#include "sm_config.h"
#include "sm_half.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/* nearbyintf in the default rounding mode (to nearest, ties to even), inline: |v| < 2^22 by adding
** 1.5 x 2^23, which leaves no fraction bits; larger values are whole already. */
static inline float rne(float v) {
    return fabsf(v) < 4194304.0f ? (v + 12582912.0f) - 12582912.0f : v;
}

static float f16_round(float d) {
    return sm_f16_to_f32(sm_f32_to_f16(d));
}

/* Levels q[i] in [lo, hi] nearest x[i] / d (ties to even), zero point z; the block's squared error. */
static float levels(int8_t *q, const float *x, float d, int lo, int hi, int z) {
    float id = d != 0.0f ? 1.0f / d : 0.0f, err = 0.0f;
    for (int i = 0; i < SM_QK; i++) {
        float v = rne(x[i] * id);
        int l = v < (float)(lo - z) ? lo : v > (float)(hi - z) ? hi : (int)v + z;
        q[i] = (int8_t)(l - z);
        float e = x[i] - (float)q[i] * d;
        err += e * e;
    }
    return err;
}

/*
** The scale for block x over candidates m / c (m: the value of largest
** magnitude), levels [lo, hi] around zero point z; the levels (less z) in q.
*/
static uint16_t search(int8_t *q, const float *x, const float *cand, int nc, int lo, int hi,
                       int z) {
    float m = 0.0f;
    for (int i = 0; i < SM_QK; i++) {
        if (!isfinite(x[i])) {
            memset(q, 0, SM_QK);
            return sm_f32_to_f16(NAN);
        }
        if (fabsf(x[i]) > fabsf(m)) m = x[i];
    }
    int8_t t[SM_QK];
    float best = INFINITY, bd = NAN;
    memset(q, 0, SM_QK);
    if (m == 0.0f) return 0;
    for (int c = 0; c < nc; c++) {
        float d = f16_round(m / cand[c]);
        float e = levels(t, x, d, lo, hi, z);
        if (e < best) best = e, bd = d, memcpy(q, t, SM_QK);
    }
    float sxq = 0.0f, sqq = 0.0f;
    for (int i = 0; i < SM_QK; i++) sxq += x[i] * (float)q[i], sqq += (float)q[i] * (float)q[i];
    if (sqq > 0.0f) {
        float d = f16_round(sxq / sqq);
        float e = levels(t, x, d, lo, hi, z);
        if (e < best) bd = d, memcpy(q, t, SM_QK);
    }
    return sm_f32_to_f16(bd);
}

static const float cand_q8[] = {127.0f, -128.0f, 126.5f, -127.5f};
static const float cand_q4[] = {-8.0f, -8.5f, -8.25f, -7.75f, -7.5f, -7.25f, -7.0f,
                                7.0f,  7.25f, 7.5f,   -6.75f, -6.5f};
static const float cand_q5[] = {-16.0f, -16.5f, -16.25f, -15.75f, -15.5f, 15.0f, 15.5f, -15.0f};

/*
** The k types. Sub-block scales are found first, as floats, then stored as
** 6-bit (q4_k, q5_k) or 8-bit (q6_k) multiples of the super-block's f16 d
** (and dmin); the last step tries each sub-block's stored scale (and min)
** one step either way, the levels re-chosen each time, and keeps the best.
*/

/* Squared error of n weights x on levels 0..nmax of w = a q - b (b >= 0), levels into L. */
static float asym_levels(uint8_t *L, const float *x, int n, int nmax, float a, float b) {
    float ia = a > 0.0f ? 1.0f / a : 0.0f, err = 0.0f;
    for (int i = 0; i < n; i++) {
        float v = rne((x[i] + b) * ia);
        int l = v >= 0.0f ? (v <= (float)nmax ? (int)v : nmax) : 0; /* NaN: 0 */
        L[i] = (uint8_t)l;
        float e = a * (float)l - b - x[i];
        err += e * e;
    }
    return err;
}

/*
** The scale a >= 0 and offset b >= 0 (w = a q - b, q in 0..nmax) of 32
** weights: for each candidate step (the range over nmax - 1 .. nmax + 1 in
** fifths) the levels, then the least-squares a, b for those levels (b held
** at 0 where it would turn negative), ranked by that fit's error on those
** levels (from the sums, without another pass); the best fit wins.
*/
static void fit_asym(const float *x, int n, int nmax, float *a_out, float *b_out) {
    float lo = x[0], hi = x[0];
    for (int i = 1; i < n; i++) lo = x[i] < lo ? x[i] : lo, hi = x[i] > hi ? x[i] : hi;
    if (lo > 0.0f) lo = 0.0f;
    *a_out = 0.0f, *b_out = -lo;
    if (hi <= lo) return;
    *a_out = (hi - lo) / (float)nmax; /* plain, kept if no fit's error is finite (huge weights) */
    float best = INFINITY;
    uint8_t L[32];
    for (int t = -5; t <= 5; t++) {
        float a = (hi - lo) / ((float)nmax + 0.2f * (float)t);
        asym_levels(L, x, n, nmax, a, -lo);
        float sq = 0.0f, sqq = 0.0f, sx = 0.0f, sqx = 0.0f, fn = (float)n;
        for (int i = 0; i < n; i++) {
            sq += L[i], sqq += (float)L[i] * L[i], sx += x[i], sqx += (float)L[i] * x[i];
        }
        float det = fn * sqq - sq * sq, fa, fb;
        if (det <= 0.0f) continue;
        fa = (fn * sqx - sq * sx) / det;
        fb = (sq * sqx - sqq * sx) / det; /* w = fa q - fb */
        if (fb < 0.0f) fb = 0.0f, fa = sqq > 0.0f ? sqx / sqq : 0.0f;
        if (fa < 0.0f) continue;
        /* sum (fa q - fb - x)^2 less the constant sum x^2 */
        float e = fa * fa * sqq + fn * fb * fb - 2.0f * fa * sqx + 2.0f * fb * sx - 2.0f * fa * fb * sq;
        if (e < best) best = e, *a_out = fa, *b_out = fb;
    }
}

/* f16 d for values v[n] >= 0 stored as multiples 0..hi; the largest maps to hi. */
static float k_super(const float *v, int n, int hi) {
    float mx = 0.0f;
    for (int j = 0; j < n; j++) mx = v[j] > mx ? v[j] : mx;
    return f16_round(mx / (float)hi);
}

static uint8_t k_mult(float v, float d, int hi) {
    float r = d > 0.0f ? rne(v / d) : 0.0f;
    return (uint8_t)(r >= 0.0f ? (r <= (float)hi ? (int)r : hi) : 0);
}

/* Error of the super-block with d, dmin for sc, m (levels re-chosen, into L). */
static float k45_error(uint8_t *L, const float *x, int nmax, float d, float dmin, const uint8_t *sc,
                       const uint8_t *m) {
    float e = 0.0f;
    for (int j = 0; j < 8; j++)
        e += asym_levels(L + 32 * j, x + 32 * j, 32, nmax, d * (float)sc[j], dmin * (float)m[j]);
    return e;
}

/*
** One q4_k / q5_k super-block (nmax 15 / 31): the f16 scales, 6-bit sc, m,
** and levels L. Then d and dmin refitted by least squares for those sc, m and
** levels (w = d sc q - dmin m is linear in them), kept if the error drops.
*/
static bool quant_k45(const float *x, int nmax, uint16_t *dh, uint16_t *dminh, uint8_t *sc,
                      uint8_t *m, uint8_t *L) {
    float a[8], b[8];
    for (int j = 0; j < 8; j++) fit_asym(x + 32 * j, 32, nmax, &a[j], &b[j]);
    float d = k_super(a, 8, 63), dmin = k_super(b, 8, 63);
    *dh = sm_f32_to_f16(d), *dminh = sm_f32_to_f16(dmin);
    if (!isfinite(d) || !isfinite(dmin)) return false; /* weights too large for f16 scales */
    uint8_t t[SM_QK_K];
    for (int j = 0; j < 8; j++) {
        int s0 = k_mult(a[j], d, 63), m0 = k_mult(b[j], dmin, 63);
        float best = INFINITY;
        for (int k = 0; k < 9; k++) { /* (s0, m0) first, kept unless a neighbour is better */
            int s1 = s0 + (k % 3 == 2 ? 1 : -(k % 3)), m1 = m0 + (k / 3 == 2 ? 1 : -(k / 3));
            if (s1 < 0 || s1 > 63 || m1 < 0 || m1 > 63) continue;
            float e = asym_levels(t, x + 32 * j, 32, nmax, d * (float)s1, dmin * (float)m1);
            if (k == 0 || e < best) best = e, sc[j] = (uint8_t)s1, m[j] = (uint8_t)m1, memcpy(L + 32 * j, t, 32);
        }
    }
    /* x ~ d u - dmin v with u = sc q, v = m: normal equations in (d, -dmin) */
    float uu = 0.0f, uv = 0.0f, vv = 0.0f, ux = 0.0f, vx = 0.0f;
    for (int i = 0; i < SM_QK_K; i++) {
        float u = (float)(sc[i / 32] * L[i]), v = (float)m[i / 32];
        uu += u * u, uv += u * v, vv += v * v, ux += u * x[i], vx += v * x[i];
    }
    float det = uu * vv - uv * uv, best = k45_error(t, x, nmax, d, dmin, sc, m);
    if (det > 0.0f) {
        float d2 = f16_round((ux * vv - vx * uv) / det), dmin2 = f16_round(-(uu * vx - uv * ux) / det);
        if (d2 >= 0.0f && dmin2 >= 0.0f && k45_error(t, x, nmax, d2, dmin2, sc, m) < best) {
            d = d2, dmin = dmin2;
            memcpy(L, t, SM_QK_K);
        }
    }
    *dh = sm_f32_to_f16(d), *dminh = sm_f32_to_f16(dmin);
    return true;
}

/* Squared error of 16 weights on levels -z..z-1 of w = a q (levels + z into L): q6_k's z 32, q3_k's 4. */
static float sym_levels(uint8_t *L, const float *x, float a, int z) {
    float ia = a != 0.0f ? 1.0f / a : 0.0f, err = 0.0f;
    for (int i = 0; i < 16; i++) {
        float v = rne(x[i] * ia);
        int l = v >= (float)-z ? (v <= (float)(z - 1) ? (int)v : z - 1) : -z; /* NaN: -z */
        L[i] = (uint8_t)(l + z);
        float e = a * (float)l - x[i];
        err += e * e;
    }
    return err;
}

/* The scale of 16 weights on levels -32..31: candidates around m / -32 and m / 31, then least squares. */
static float fit_sym(const float *x) {
    float m = 0.0f;
    for (int i = 0; i < 16; i++) m = fabsf(x[i]) > fabsf(m) ? x[i] : m;
    if (m == 0.0f) return 0.0f;
    float best = INFINITY, ba = m / -32.0f; /* plain, kept if no fit's error is finite */
    uint8_t L[16];
    for (int t = -6; t <= 6; t++) {
        float a = m / (-32.0f + 0.25f * (float)t);
        sym_levels(L, x, a, 32);
        float sqq = 0.0f, sqx = 0.0f;
        for (int i = 0; i < 16; i++) {
            float q = (float)L[i] - 32.0f;
            sqq += q * q, sqx += q * x[i];
        }
        if (sqq <= 0.0f) continue;
        float fa = sqx / sqq, e = -fa * sqx; /* the refit's error on these levels, less sum x^2 */
        if (e < best) best = e, ba = fa;
    }
    return ba;
}

/* One q6_k super-block: the f16 d, int8 sc[16] and levels L (0..63); false if d overflows f16. */
static bool quant_q6k(const float *x, uint16_t *dh, int8_t *sc, uint8_t *L) {
    float a[16], am = 0.0f;
    for (int j = 0; j < 16; j++) {
        a[j] = fit_sym(x + 16 * j);
        am = fabsf(a[j]) > fabsf(am) ? a[j] : am;
    }
    float d = f16_round(am / -128.0f);
    *dh = sm_f32_to_f16(d);
    if (!isfinite(d)) return false;
    uint8_t t[16];
    for (int j = 0; j < 16; j++) {
        float r = d != 0.0f ? rne(a[j] / d) : 0.0f;
        int s0 = r >= -128.0f ? (r <= 127.0f ? (int)r : 127) : -128;
        float best = INFINITY;
        for (int k = 0; k < 3; k++) { /* s0 first, kept unless a neighbour is better */
            int s1 = s0 + (k == 2 ? 1 : -k);
            if (s1 < -128 || s1 > 127) continue;
            float e = sym_levels(t, x + 16 * j, d * (float)s1, 32);
            if (k == 0 || e < best) best = e, sc[j] = (int8_t)s1, memcpy(L + 16 * j, t, 16);
        }
    }
    return true;
}

static bool quant_q2k(const float *x, sm_block_q2_k *o);
static bool quant_q3k(const float *x, sm_block_q3_k *o);
static bool quant_iq4xs(const float *x, sm_block_iq4_xs *o);

/* Super-block b of a k type from x (256 weights); false if a weight is NaN or infinite or too large. */
static bool quantize_k(void *dst, const float *x, sm_dtype dt) {
    uint8_t L[SM_QK_K];
    for (int i = 0; i < SM_QK_K; i++)
        if (!isfinite(x[i])) {
            memset(dst, 0, sm_dtype_row_bytes(dt, SM_QK_K));
            return false;
        }
    if (dt == SM_DTYPE_Q2_K) return quant_q2k(x, dst);
    if (dt == SM_DTYPE_Q3_K) return quant_q3k(x, dst);
    if (dt == SM_DTYPE_IQ4_XS) return quant_iq4xs(x, dst);
    if (dt == SM_DTYPE_Q6_K) {
        sm_block_q6_k *o = dst;
        if (!quant_q6k(x, &o->d, o->scales, L)) return false;
        memset(o->ql, 0, sizeof o->ql);
        memset(o->qh, 0, sizeof o->qh);
        for (int i = 0; i < SM_QK_K; i++) {
            int h = i / 128, k = i % 128 / 32, l = i % 32;
            o->ql[64 * h + l + 32 * (k & 1)] |= (uint8_t)((L[i] & 15) << (k < 2 ? 0 : 4));
            o->qh[32 * h + l] |= (uint8_t)((L[i] >> 4) << 2 * k);
        }
        return isfinite(sm_f16_to_f32(o->d));
    }
    sm_block_q4_k *o4 = dst; /* d, dmin, scales at the same offsets in q5_k */
    sm_block_q5_k *o5 = dst;
    uint8_t sc[8], m[8], *qs = dt == SM_DTYPE_Q4_K ? o4->qs : o5->qs;
    if (!quant_k45(x, dt == SM_DTYPE_Q4_K ? 15 : 31, &o4->d, &o4->dmin, sc, m, L)) return false;
    sm_quant_k4_pack(o4->scales, sc, m);
    if (dt == SM_DTYPE_Q5_K) memset(o5->qh, 0, sizeof o5->qh);
    for (int j = 0; j < 8; j++)
        for (int l = 0; l < 32; l++) {
            uint8_t q = L[32 * j + l];
            if (j & 1)
                qs[32 * (j / 2) + l] |= (uint8_t)((q & 15) << 4);
            else
                qs[32 * (j / 2) + l] = q & 15;
            if (dt == SM_DTYPE_Q5_K) o5->qh[l] |= (uint8_t)((q >> 4) << j);
        }
    return isfinite(sm_f16_to_f32(o4->d)) && isfinite(sm_f16_to_f32(o4->dmin));
}

/*
** q2_k: each 16 weights' scale and offset fitted as q4_k's 32 are (levels 0..3), then stored as
** 4-bit multiples of the f16 d and dmin, each tried one step either way with its levels re-chosen.
*/
static bool quant_q2k(const float *x, sm_block_q2_k *o) {
    float a[16], b[16];
    for (int j = 0; j < 16; j++) fit_asym(x + 16 * j, 16, 3, &a[j], &b[j]);
    float d = k_super(a, 16, 15), dmin = k_super(b, 16, 15);
    o->d = sm_f32_to_f16(d), o->dmin = sm_f32_to_f16(dmin);
    if (!isfinite(d) || !isfinite(dmin)) return false;
    uint8_t L[SM_QK_K], t[16];
    for (int j = 0; j < 16; j++) {
        int s0 = k_mult(a[j], d, 15), m0 = k_mult(b[j], dmin, 15);
        float best = INFINITY;
        for (int k = 0; k < 9; k++) {
            int s1 = s0 + (k % 3 == 2 ? 1 : -(k % 3)), m1 = m0 + (k / 3 == 2 ? 1 : -(k / 3));
            if (s1 < 0 || s1 > 15 || m1 < 0 || m1 > 15) continue;
            float e = asym_levels(t, x + 16 * j, 16, 3, d * (float)s1, dmin * (float)m1);
            if (k == 0 || e < best) best = e, o->scales[j] = (uint8_t)(s1 | m1 << 4), memcpy(L + 16 * j, t, 16);
        }
    }
    memset(o->qs, 0, sizeof o->qs);
    for (int i = 0; i < SM_QK_K; i++) o->qs[32 * (i / 128) + i % 32] |= (uint8_t)(L[i] << 2 * (i % 128 / 32));
    return true;
}

/*
** q3_k: each 16 weights' scale from candidates around m / -4 (m: the value of largest
** magnitude) refitted by least squares, then stored as 6-bit multiples (-32..31) of the f16 d,
** each tried one step either way with its levels re-chosen.
*/
static bool quant_q3k(const float *x, sm_block_q3_k *o) {
    float a[16], am = 0.0f;
    for (int j = 0; j < 16; j++) {
        float m = 0.0f, best = INFINITY;
        for (int i = 0; i < 16; i++) m = fabsf(x[16 * j + i]) > fabsf(m) ? x[16 * j + i] : m;
        a[j] = m / -4.0f;
        uint8_t L[16];
        for (int t = -4; t <= 4 && m != 0.0f; t++) {
            sym_levels(L, x + 16 * j, m / (-4.0f + 0.25f * (float)t), 4);
            float sqq = 0.0f, sqx = 0.0f;
            for (int i = 0; i < 16; i++) {
                float q = (float)L[i] - 4.0f;
                sqq += q * q, sqx += q * x[16 * j + i];
            }
            if (sqq <= 0.0f) continue;
            float fa = sqx / sqq, e = -fa * sqx;
            if (e < best) best = e, a[j] = fa;
        }
        am = fabsf(a[j]) > fabsf(am) ? a[j] : am;
    }
    float d = f16_round(am / -32.0f);
    o->d = sm_f32_to_f16(d);
    if (!isfinite(d)) return false;
    uint8_t L[SM_QK_K], t[16], sc[16];
    for (int j = 0; j < 16; j++) {
        float r = d != 0.0f ? rne(a[j] / d) : 0.0f;
        int s0 = r >= -32.0f ? (r <= 31.0f ? (int)r : 31) : -32;
        float best = INFINITY;
        for (int k = 0; k < 3; k++) {
            int s1 = s0 + (k == 2 ? 1 : -k);
            if (s1 < -32 || s1 > 31) continue;
            float e = sym_levels(t, x + 16 * j, d * (float)s1, 4);
            if (k == 0 || e < best) best = e, sc[j] = (uint8_t)(s1 + 32), memcpy(L + 16 * j, t, 16);
        }
    }
    sm_quant_k3_pack(o->scales, sc);
    memset(o->qs, 0, sizeof o->qs);
    memset(o->hmask, 0, sizeof o->hmask);
    for (int i = 0; i < SM_QK_K; i++) {
        int h = i / 128, k = i % 128 / 32, l = i % 32;
        o->qs[32 * h + l] |= (uint8_t)((L[i] & 3) << 2 * k);
        o->hmask[l] |= (uint8_t)((L[i] >> 2) << (4 * h + k));
    }
    return true;
}

/* Squared error of 32 weights on levels 0..nmax of w = d q + m (f16-rounded d, m), levels into L. */
static float offset_levels(uint8_t *L, const float *x, int nmax, float d, float m) {
    float id = d > 0.0f ? 1.0f / d : 0.0f, err = 0.0f;
    for (int i = 0; i < SM_QK; i++) {
        float v = rne((x[i] - m) * id);
        L[i] = (uint8_t)(v >= 0.0f ? (v <= (float)nmax ? (int)v : nmax) : 0);
        float e = d * (float)L[i] + m - x[i];
        err += e * e;
    }
    return err;
}

/*
** q4_1 / q5_1 (levels 0..nmax): first the plain choice, m the block's least value and d its
** range over nmax (both rounded to f16, the scales the file holds); then steps of the range
** over nmax - 1 .. nmax + 1 in quarters, each with its levels' least-squares d and m, the
** least error kept. Levels into L.
*/
static bool quant_offset(const float *x, int nmax, uint16_t *dh, uint16_t *mh, uint8_t *L) {
    float lo = x[0], hi = x[0];
    for (int i = 0; i < SM_QK; i++) {
        if (!isfinite(x[i])) return false;
        lo = x[i] < lo ? x[i] : lo, hi = x[i] > hi ? x[i] : hi;
    }
    float m = f16_round(lo), d = f16_round((hi - m) / (float)nmax);
    if (!isfinite(d) || !isfinite(m)) return false;
    float best = offset_levels(L, x, nmax, d, m);
    uint8_t t[SM_QK];
    for (int k = -4; k <= 4 && hi > lo; k++) {
        offset_levels(t, x, nmax, (hi - lo) / ((float)nmax + 0.25f * (float)k), lo);
        float sq = 0.0f, sqq = 0.0f, sx = 0.0f, sqx = 0.0f;
        for (int i = 0; i < SM_QK; i++) sq += t[i], sqq += (float)t[i] * t[i], sx += x[i], sqx += (float)t[i] * x[i];
        float det = (float)SM_QK * sqq - sq * sq;
        if (det <= 0.0f) continue;
        float fd = f16_round(((float)SM_QK * sqx - sq * sx) / det), fm = f16_round((sqq * sx - sq * sqx) / det);
        if (!(fd >= 0.0f) || !isfinite(fm)) continue;
        float e = offset_levels(t, x, nmax, fd, fm);
        if (e < best) best = e, d = fd, m = fm, memcpy(L, t, SM_QK);
    }
    *dh = sm_f32_to_f16(d), *mh = sm_f32_to_f16(m);
    return true;
}

/* Squared error of 32 weights on iq4_nl's levels of w = d SM_IQ4NL[q]: each the nearest, into L. */
static float iq4_levels(uint8_t *L, const float *x, float d) {
    float id = d != 0.0f ? 1.0f / d : 0.0f, err = 0.0f;
    for (int i = 0; i < SM_QK; i++) {
        float v = x[i] * id, be = INFINITY;
        for (int k = 0; k < 16; k++) {
            float e = fabsf(v - (float)SM_IQ4NL[k]);
            if (e < be) be = e, L[i] = (uint8_t)k;
        }
        float e = d * (float)SM_IQ4NL[L[i]] - x[i];
        err += e * e;
    }
    return err;
}

/* From scale d (its error the one to beat), the steps m / (-127 + k), |k| <= 7, for x's 32 weights (m: the
   one of largest magnitude), each refitted by least squares for its levels (rounded to f16 if f16): the
   best scale, its levels into L. */
static float iq4_search(const float *x, float m, float d, bool f16, uint8_t *L) {
    float best = iq4_levels(L, x, d);
    uint8_t t[SM_QK];
    for (int k = -7; k <= 7 && m != 0.0f; k++) {
        iq4_levels(t, x, m / (-127.0f + (float)k));
        float skk = 0.0f, skx = 0.0f;
        for (int i = 0; i < SM_QK; i++) {
            float q = (float)SM_IQ4NL[t[i]];
            skk += q * q, skx += q * x[i];
        }
        float fd = f16 ? f16_round(skx / skk) : skx / skk, e = iq4_levels(t, x, fd);
        if (e < best) best = e, d = fd, memcpy(L, t, SM_QK);
    }
    return d;
}

/*
** iq4_nl: the plain choice d = m / -127 (m the weight of largest magnitude, so it meets the
** lowest level), then 14 steps around it, each refitted by least squares for its levels, all
** rounded to f16; the least error kept. Levels into L.
*/
static bool quant_iq4nl(const float *x, uint16_t *dh, uint8_t *L) {
    float m = 0.0f;
    for (int i = 0; i < SM_QK; i++) {
        if (!isfinite(x[i])) return false;
        m = fabsf(x[i]) > fabsf(m) ? x[i] : m;
    }
    float d = f16_round(m / -127.0f);
    if (!isfinite(d)) return false;
    *dh = sm_f32_to_f16(iq4_search(x, m, d, true, L));
    return true;
}

/*
** iq4_xs: each block's own best scale s_j (quant_iq4nl's search, unrounded) is to become d (ls_j
** - 32) with one f16 d for the eight. Candidates for d: the plain choice m / (127 32) (m the
** super-block's weight of largest magnitude: every ls - 32 = -32 meets it at the lowest level)
** and s / -32, s / 31 for the s_j of largest magnitude, each with 4 steps around it; for each d,
** each block's ls among 0 (the plain one) and the nearest to s_j / d with its neighbours, its
** levels the nearest; the least total error kept.
*/
static bool quant_iq4xs(const float *x, sm_block_iq4_xs *o) {
    float m = 0.0f, s[8], smax = 0.0f;
    uint8_t L[SM_QK_K], t[SM_QK], ls[8];
    for (int i = 0; i < SM_QK_K; i++) m = fabsf(x[i]) > fabsf(m) ? x[i] : m;
    for (int j = 0; j < 8; j++) {
        float mj = 0.0f;
        for (int i = 0; i < SM_QK; i++) mj = fabsf(x[32 * j + i]) > fabsf(mj) ? x[32 * j + i] : mj;
        s[j] = iq4_search(x + 32 * j, mj, mj / -127.0f, false, t);
        smax = fabsf(s[j]) > fabsf(smax) ? s[j] : smax;
    }
    float cand[1 + 2 * 9], best = INFINITY, bd = 0.0f;
    int nc = 0;
    cand[nc++] = m / (127.0f * 32.0f);
    for (int k = -4; k <= 4 && smax != 0.0f; k++)
        cand[nc++] = smax / (-32.0f + 0.25f * (float)k), cand[nc++] = smax / (31.0f + 0.25f * (float)k);
    for (int c = 0; c < nc; c++) {
        float d = f16_round(cand[c]), e = 0.0f;
        if (!isfinite(d)) continue;
        uint8_t l[8], lt[SM_QK_K];
        for (int j = 0; j < 8 && e < best; j++) {
            float r = d != 0.0f ? nearbyintf(s[j] / d) : 0.0f;
            int n0 = r < -32.0f ? -32 : r > 31.0f ? 31 : (int)r, bj = -32;
            float ej = iq4_levels(lt + 32 * j, x + 32 * j, d * -32.0f);
            for (int n = n0 - 1; n <= n0 + 1; n++) {
                if (n < -32 || n > 31 || n == -32) continue;
                float en = iq4_levels(t, x + 32 * j, d * (float)n);
                if (en < ej) ej = en, bj = n, memcpy(lt + 32 * j, t, SM_QK);
            }
            l[j] = (uint8_t)(bj + 32), e += ej;
        }
        if (e < best) best = e, bd = d, memcpy(ls, l, 8), memcpy(L, lt, SM_QK_K);
    }
    if (!isfinite(best)) return false; /* no candidate had a finite f16 d */
    memset(o, 0, sizeof *o);
    o->d = sm_f32_to_f16(bd);
    for (int j = 0; j < 8; j++) {
        o->scales_l[j / 2] |= (uint8_t)((ls[j] & 15) << 4 * (j % 2));
        o->scales_h |= (uint16_t)((ls[j] >> 4) << 2 * j);
        for (int i = 0; i < SM_QK / 2; i++)
            o->qs[16 * j + i] = (uint8_t)(L[32 * j + i] | L[32 * j + i + 16] << 4);
    }
    return true;
}

/* Block b of a q4_1 / q5_0 / q5_1 / iq4_nl row from x (32 weights); false as sm_quant_quantize says. */
static bool quantize_small(void *dst, const float *x, sm_dtype dt) {
    uint8_t L[SM_QK];
    uint16_t d = 0, m = 0;
    bool ok;
    if (dt == SM_DTYPE_IQ4_NL) {
        ok = quant_iq4nl(x, &d, L);
    } else if (dt == SM_DTYPE_Q5_0) {
        int8_t q[SM_QK];
        d = search(q, x, cand_q5, 8, 0, 31, 16);
        for (int i = 0; i < SM_QK; i++) L[i] = (uint8_t)(q[i] + 16);
        ok = isfinite(sm_f16_to_f32(d));
    } else {
        ok = quant_offset(x, dt == SM_DTYPE_Q4_1 ? 15 : 31, &d, &m, L);
    }
    uint8_t qs[SM_QK / 2], qh[4] = {0, 0, 0, 0};
    for (int j = 0; j < SM_QK / 2; j++) qs[j] = (uint8_t)((L[j] & 15) | (L[j + 16] & 15) << 4);
    for (int j = 0; j < SM_QK; j++) qh[j / 8] |= (uint8_t)((L[j] >> 4) << j % 8);
    if (dt == SM_DTYPE_IQ4_NL) {
        sm_block_q4_0 *o = dst; /* q4_0's layout */
        o->d = d, memcpy(o->qs, qs, sizeof qs);
    } else if (dt == SM_DTYPE_Q4_1) {
        sm_block_q4_1 *o = dst;
        o->d = d, o->m = m, memcpy(o->qs, qs, sizeof qs);
    } else if (dt == SM_DTYPE_Q5_0) {
        sm_block_q5_0 *o = dst;
        o->d = d, memcpy(o->qh, qh, 4), memcpy(o->qs, qs, sizeof qs);
    } else {
        sm_block_q5_1 *o = dst;
        o->d = d, o->m = m, memcpy(o->qh, qh, 4), memcpy(o->qs, qs, sizeof qs);
    }
    if (!ok) memset(dst, 0, sm_dtype_row_bytes(dt, SM_QK));
    return ok;
}

size_t sm_quant_quantize(void *restrict dst, const float *restrict src, sm_dtype dt, size_t n) {
    if (dt == SM_DTYPE_Q4_1 || dt == SM_DTYPE_Q5_0 || dt == SM_DTYPE_Q5_1 || dt == SM_DTYPE_IQ4_NL) {
        size_t bytes = sm_dtype_row_bytes(dt, SM_QK);
        for (size_t b = 0; b < n / SM_QK; b++)
            if (!quantize_small((char *)dst + b * bytes, src + b * SM_QK, dt)) return b;
        return n / SM_QK;
    }
    if (sm_dtype_block(dt) == SM_QK_K) {
        size_t bytes = sm_dtype_row_bytes(dt, SM_QK_K);
        for (size_t b = 0; b < n / SM_QK_K; b++)
            if (!quantize_k((char *)dst + b * bytes, src + b * SM_QK_K, dt)) return b;
        return n / SM_QK_K;
    }
    int8_t q[SM_QK];
    for (size_t b = 0; b < n / SM_QK; b++) {
        uint16_t d;
        const float *x = src + b * SM_QK;
        if (dt == SM_DTYPE_Q8_0) {
            sm_block_q8_0 *o = (sm_block_q8_0 *)dst + b;
            o->d = d = search(q, x, cand_q8, 4, -128, 127, 0);
            memcpy(o->qs, q, SM_QK);
        } else {
            sm_block_q4_0 *o = (sm_block_q4_0 *)dst + b;
            o->d = d = search(q, x, cand_q4, 12, 0, 15, 8);
            for (int j = 0; j < SM_QK / 2; j++)
                o->qs[j] = (uint8_t)((q[j] + 8) | ((q[j + SM_QK / 2] + 8) << 4));
        }
        if (!isfinite(sm_f16_to_f32(d))) return b;
    }
    return n / SM_QK;
}

/* The levels 0..31 of a q5_0 / q5_1 block: nibbles qs as q4_0's, fifth bits qh. */
static void q5_levels(int *ws, const uint8_t *qs, const uint8_t *qh4, int z) {
    uint32_t qh = (uint32_t)qh4[0] | (uint32_t)qh4[1] << 8 | (uint32_t)qh4[2] << 16 | (uint32_t)qh4[3] << 24;
    for (int j = 0; j < SM_QK / 2; j++) {
        ws[j] = ((qs[j] & 15) | (int)(qh >> j & 1) << 4) - z;
        ws[j + SM_QK / 2] = ((qs[j] >> 4) | (int)(qh >> (j + 16) & 1) << 4) - z;
    }
}

void sm_quant_block_ints(int ws[SM_QK], const void *row, sm_dtype dt, size_t b, float *D,
                         float M[2]) {
    M[0] = M[1] = 0.0f;
    if (dt == SM_DTYPE_Q4_1) {
        const sm_block_q4_1 *x = (const sm_block_q4_1 *)row + b;
        *D = sm_f16_to_f32(x->d);
        M[0] = M[1] = -sm_f16_to_f32(x->m);
        for (int j = 0; j < SM_QK / 2; j++) ws[j] = x->qs[j] & 15, ws[j + SM_QK / 2] = x->qs[j] >> 4;
    } else if (dt == SM_DTYPE_IQ4_NL) {
        const sm_block_q4_0 *x = (const sm_block_q4_0 *)row + b; /* q4_0's layout */
        *D = sm_f16_to_f32(x->d);
        for (int j = 0; j < SM_QK / 2; j++)
            ws[j] = SM_IQ4NL[x->qs[j] & 15], ws[j + SM_QK / 2] = SM_IQ4NL[x->qs[j] >> 4];
    } else if (dt == SM_DTYPE_IQ4_XS) {
        const sm_block_iq4_xs *x = (const sm_block_iq4_xs *)row + b / 8;
        const int j = (int)(b % 8);
        *D = sm_f16_to_f32(x->d) * (float)(sm_quant_iq4xs_scale(x, j) - 32); /* exact */
        for (int l = 0; l < SM_QK / 2; l++)
            ws[l] = SM_IQ4NL[x->qs[16 * j + l] & 15], ws[l + SM_QK / 2] = SM_IQ4NL[x->qs[16 * j + l] >> 4];
    } else if (dt == SM_DTYPE_Q5_0) {
        const sm_block_q5_0 *x = (const sm_block_q5_0 *)row + b;
        *D = sm_f16_to_f32(x->d);
        q5_levels(ws, x->qs, x->qh, 16);
    } else if (dt == SM_DTYPE_Q5_1) {
        const sm_block_q5_1 *x = (const sm_block_q5_1 *)row + b;
        *D = sm_f16_to_f32(x->d);
        M[0] = M[1] = -sm_f16_to_f32(x->m);
        q5_levels(ws, x->qs, x->qh, 0);
    } else if (dt == SM_DTYPE_Q2_K || dt == SM_DTYPE_Q3_K) {
        const sm_block_q2_k *x2 = (const sm_block_q2_k *)row + b / 8;
        const sm_block_q3_k *x3 = (const sm_block_q3_k *)row + b / 8;
        size_t h = b % 8 / 4, k = b % 4, j = b % 8; /* 128-weight half, 32-weight quarter of it */
        const uint8_t *qs = dt == SM_DTYPE_Q2_K ? x2->qs : x3->qs;
        uint8_t sc[16];
        if (dt == SM_DTYPE_Q3_K) sm_quant_k3_scales(x3->scales, sc);
        *D = sm_f16_to_f32(dt == SM_DTYPE_Q2_K ? x2->d : x3->d);
        for (size_t l = 0; l < SM_QK; l++) {
            int q = qs[32 * h + l] >> 2 * k & 3;
            if (dt == SM_DTYPE_Q2_K)
                ws[l] = (x2->scales[2 * j + l / 16] & 15) * q;
            else
                ws[l] = (sc[2 * j + l / 16] - 32) * (q + (x3->hmask[l] >> (4 * h + k) & 1) * 4 - 4);
        }
        if (dt == SM_DTYPE_Q2_K)
            for (size_t c = 0; c < 2; c++) M[c] = sm_f16_to_f32(x2->dmin) * (float)(x2->scales[2 * j + c] >> 4);
    } else if (dt == SM_DTYPE_Q8_0) {
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
        for (size_t l = 0; l < SM_QK; l++) {
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
        M[0] = M[1] = sm_f16_to_f32(hd->dmin) * (float)m[j];
        for (size_t l = 0; l < SM_QK; l++) {
            int q = j & 1 ? qs[32 * (j / 2) + l] >> 4 : qs[32 * (j / 2) + l] & 15;
            if (dt == SM_DTYPE_Q5_K) q += (x5->qh[l] >> j & 1) << 4;
            ws[l] = sc[j] * q;
        }
    }
}

void sm_quant_dequant(float *restrict out, const void *restrict src, sm_dtype dt, size_t n) {
    int ws[SM_QK];
    float D, M[2];
    for (size_t b = 0; b < n / SM_QK; b++, out += SM_QK) {
        sm_quant_block_ints(ws, src, dt, b, &D, M);
        for (int j = 0; j < SM_QK; j++) out[j] = D * (float)ws[j] - M[j / 16]; /* the product exact */
    }
}

size_t sm_quant_first_bad(const void *src, sm_dtype dt, size_t n) {
    size_t nb = n / sm_dtype_block(dt), bytes = sm_dtype_row_bytes(dt, sm_dtype_block(dt));
    for (size_t b = 0; b < nb; b++) {
        const char *x = (const char *)src + b * bytes;
        uint16_t d[2] = {0, 0};
        if (dt == SM_DTYPE_Q6_K) /* d last */
            memcpy(d, x + offsetof(sm_block_q6_k, d), sizeof d[0]);
        else if (dt == SM_DTYPE_Q3_K)
            memcpy(d, x + offsetof(sm_block_q3_k, d), sizeof d[0]);
        else if (dt == SM_DTYPE_Q2_K) /* d, dmin last */
            memcpy(d, x + offsetof(sm_block_q2_k, d), sizeof d);
        else /* d first, then the k types' dmin or q4_1 / q5_1's m */
            memcpy(d, x, (dt == SM_DTYPE_Q4_K || dt == SM_DTYPE_Q5_K || dt == SM_DTYPE_Q4_1 || dt == SM_DTYPE_Q5_1 ? 2 : 1) * sizeof d[0]);
        if (!isfinite(sm_f16_to_f32(d[0])) || !isfinite(sm_f16_to_f32(d[1]))) return b;
    }
    return nb;
}
