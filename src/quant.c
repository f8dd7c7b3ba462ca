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
#include <string.h>

static float f16_round(float d) {
    return sm_f16_to_f32(sm_f32_to_f16(d));
}

/* Levels q[i] in [lo, hi] nearest x[i] / d (ties to even), zero point z; the block's squared error. */
static float levels(int8_t *q, const float *x, float d, int lo, int hi, int z) {
    float id = d != 0.0f ? 1.0f / d : 0.0f, err = 0.0f;
    for (int i = 0; i < SM_QK; i++) {
        float v = nearbyintf(x[i] * id);
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

size_t sm_quant_quantize(void *restrict dst, const float *restrict src, sm_dtype dt, size_t n) {
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

void sm_quant_dequant(float *restrict out, const void *restrict src, sm_dtype dt, size_t n) {
    for (size_t b = 0; b < n / SM_QK; b++, out += SM_QK) {
        if (dt == SM_DTYPE_Q8_0) {
            const sm_block_q8_0 *x = (const sm_block_q8_0 *)src + b;
            float d = sm_f16_to_f32(x->d);
            for (int i = 0; i < SM_QK; i++) out[i] = d * (float)x->qs[i];
        } else {
            const sm_block_q4_0 *x = (const sm_block_q4_0 *)src + b;
            float d = sm_f16_to_f32(x->d);
            for (int j = 0; j < SM_QK / 2; j++) {
                out[j] = d * (float)((x->qs[j] & 15) - 8);
                out[j + SM_QK / 2] = d * (float)((x->qs[j] >> 4) - 8);
            }
        }
    }
}

size_t sm_quant_first_bad(const void *src, sm_dtype dt, size_t n) {
    size_t nb = n / sm_dtype_block(dt), bytes = sm_dtype_row_bytes(dt, sm_dtype_block(dt));
    for (size_t b = 0; b < nb; b++) {
        uint16_t d;
        memcpy(&d, (const char *)src + b * bytes, sizeof d); /* every type starts with its f16 d */
        if (!isfinite(sm_f16_to_f32(d))) return b;
    }
    return nb;
}
