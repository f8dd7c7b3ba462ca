/*
** avx2_quant.c -- the quantized products (kernels_internal.h: sm_qkernel)
** with 256-bit integer instructions. Built three times by the Makefile, one
** object per way of summing four u8 x s8 products into an int32 lane:
**   SM_QFLAVOUR 0  "avx2"         vpmaddubsw + vpmaddwd (AVX2)
**   SM_QFLAVOUR 1  "avx-vnni"     vpdpbusd, VEX (AVX-VNNI: Alder Lake, Zen 5)
**   SM_QFLAVOUR 2  "avx512-vnni"  vpdpbusd, EVEX 256-bit (AVX512-VNNI + VL:
**                                 Cascade Lake, Zen 4)
** dispatch.c picks one from cpuid. vpmaddubsw multiplies unsigned by signed
** bytes with int16 pair sums, so q8_0 weights go in as |w| against x with
** w's sign (|w| <= 128: a pair is at most 2 x 128 x 127, no saturation).
** Zero points cost nothing: q4_0's nibbles (0..15) go in as they are, and
** vpdpbusd takes q8_0's bytes made unsigned (w + 128), each lane starting
** from the zero point times minus its 4 activations' sum (sm_qx.s).
**
** gemv streams one weight row at a time (one sequential stream, as the f32
** decode does) against up to SM_QX_ROWS token rows, two blocks per step into
** two accumulators per row.
*/
#if defined(__x86_64__) || defined(__i386__)
#include "kernels_internal.h"
#include "avx2_reduce.h"

#include <immintrin.h>
#include <float.h>
#include <math.h>
#include <string.h>

#if SM_QFLAVOUR == 2
#define QNAME "avx512-vnni"
#define QSYM sm_qkernel_avx512vnni
#elif SM_QFLAVOUR == 1
#define QNAME "avx-vnni"
#define QSYM sm_qkernel_avxvnni
#else
#define QNAME "avx2"
#define QSYM sm_qkernel_avx2_maddubs
#endif

#define AI inline __attribute__((always_inline))

/* acc + the sums of each 4 adjacent u8 x s8 products, as 8 int32. */
static AI __m256i dot_u8s8(__m256i acc, __m256i u, __m256i s) {
#if SM_QFLAVOUR == 2
    return _mm256_dpbusd_epi32(acc, u, s);
#elif SM_QFLAVOUR == 1
    return _mm256_dpbusd_avx_epi32(acc, u, s);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}

static AI float f16(uint16_t h) {
    return _cvtsh_ss(h);
}

/* Bit for bit quant_ref.c's quant_x: the same scale, product and rounding. */
static void quant_x(sm_qx qx, const float *restrict x, size_t r, size_t K) {
    const size_t nb = K / SM_QK;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (size_t i = 0; i < r; i++)
        for (size_t b = 0; b < nb; b++) {
            const float *xb = x + i * K + b * SM_QK;
            int8_t *q = qx.q + i * K + b * SM_QK;
            __m256 v[4], mx = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
            for (int j = 0; j < 4; j++) {
                v[j] = _mm256_loadu_ps(xb + 8 * j);
                mx = _mm256_max_ps(mx, _mm256_andnot_ps(sign, v[j]));
                bad = _mm256_or_ps(bad, _mm256_cmp_ps(v[j], v[j], _CMP_UNORD_Q));
            }
            float amax = hmax8(mx);
            int32_t *s = qx.s + i * (K / 4) + b * (SM_QK / 4);
            if (_mm256_movemask_ps(bad) || amax > FLT_MAX) {
                memset(q, 0, SM_QK);
                memset(s, 0, SM_QK / 4 * sizeof *s);
                qx.d[i * nb + b] = NAN;
                continue;
            }
            float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
            __m256 vid = _mm256_set1_ps(id);
            __m256i n[4];
            for (int j = 0; j < 4; j++) n[j] = _mm256_cvtps_epi32(_mm256_mul_ps(v[j], vid));
            /* sums of 4: hadd twice gives them in the order 0 2 4 6 | 1 3 5 7 */
            __m256i s4 = _mm256_hadd_epi32(_mm256_hadd_epi32(n[0], n[1]), _mm256_hadd_epi32(n[2], n[3]));
            s4 = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_permutevar8x32_epi32(s4, order));
            _mm256_storeu_si256((__m256i *)s, s4);
            __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(n[0], n[1]),
                                           _mm256_packs_epi32(n[2], n[3]));
            _mm256_storeu_si256((__m256i *)q, _mm256_permutevar8x32_epi32(p, order));
            qx.d[i * nb + b] = d;
        }
}

/* Block b of a q4_0 row as 32 unsigned bytes 0..15, in weight order. */
static AI __m256i q4_bytes(const sm_block_q4_0 *x) {
    __m128i b = _mm_loadu_si128((const __m128i *)x->qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(15));
}

/*
** Block b of a row against x rows i < r: acc[i] += d_w d_x (integer dot
** product). q4_0: nibbles as unsigned bytes, each lane starting from 8 s
** (s = minus the sum of its 4 x values), so it ends at sum (q - 8) x.
** q8_0 with vpdpbusd: w + 128 (w xor 0x80) as unsigned bytes, lanes from
** 128 s; with vpmaddubsw, |w| against x with w's sign.
*/
static AI void qblock(sm_dtype dt, size_t r, __m256 *acc, sm_qx qx, size_t K, const void *row,
                      size_t b) {
    const size_t nb = K / SM_QK;
    float dw;
    __m256i u, wq = _mm256_setzero_si256();
    if (dt == SM_DTYPE_Q8_0) {
        const sm_block_q8_0 *x = (const sm_block_q8_0 *)row + b;
        dw = f16(x->d);
        wq = _mm256_loadu_si256((const __m256i *)x->qs);
        u = SM_QFLAVOUR ? _mm256_xor_si256(wq, _mm256_set1_epi8((char)0x80)) : _mm256_sign_epi8(wq, wq);
    } else {
        const sm_block_q4_0 *x = (const sm_block_q4_0 *)row + b;
        dw = f16(x->d);
        u = q4_bytes(x);
    }
    for (size_t i = 0; i < r; i++) {
        const size_t bi = i * nb + b;
        __m256i xq = _mm256_loadu_si256((const __m256i *)(qx.q + i * K + b * SM_QK));
        __m256i s = _mm256_loadu_si256((const __m256i *)(qx.s + bi * (SM_QK / 4)));
        __m256i p;
        if (dt == SM_DTYPE_Q8_0 && !SM_QFLAVOUR)
            p = dot_u8s8(_mm256_setzero_si256(), u, _mm256_sign_epi8(xq, wq));
        else
            p = dot_u8s8(_mm256_slli_epi32(s, dt == SM_DTYPE_Q8_0 ? 7 : 3), u, xq);
        acc[i] = _mm256_fmadd_ps(_mm256_set1_ps(dw * qx.d[bi]), _mm256_cvtepi32_ps(p), acc[i]);
    }
}

/* out[i * N] = row . x row i (+ bias) for i < r (a constant where inlined); blocks alternate
** between two accumulators. */
static AI void qrow(sm_dtype dt, size_t r, float *restrict out, size_t N, sm_qx qx, size_t K,
                    const void *restrict row, float bias) {
    const size_t nb = K / SM_QK;
    __m256 a0[SM_QX_ROWS], a1[SM_QX_ROWS];
    for (size_t i = 0; i < r; i++) a0[i] = a1[i] = _mm256_setzero_ps();
    size_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        qblock(dt, r, a0, qx, K, row, b);
        qblock(dt, r, a1, qx, K, row, b + 1);
    }
    if (b < nb) qblock(dt, r, a0, qx, K, row, b);
    for (size_t i = 0; i < r; i++) out[i * N] = hsum(_mm256_add_ps(a0[i], a1[i])) + bias;
}

static AI void gemv_dt(sm_dtype dt, float *restrict out, sm_qx qx, size_t r,
                       const void *restrict w, const float *restrict bias, size_t N, size_t K,
                       size_t n0, size_t n1) {
    for (size_t n = n0; n < n1; n++) {
        const void *row = sm_kernels_elem(w, dt, n * K);
        float b = bias ? bias[n] : 0.0f;
        switch (r) {
        case 1: qrow(dt, 1, out + n, N, qx, K, row, b); break;
        case 2: qrow(dt, 2, out + n, N, qx, K, row, b); break;
        case 3: qrow(dt, 3, out + n, N, qx, K, row, b); break;
        default: qrow(dt, 4, out + n, N, qx, K, row, b); break;
        }
    }
}

static void gemv(float *restrict out, sm_qx qx, size_t r, const void *restrict w, sm_dtype dt,
                 const float *restrict bias, size_t N, size_t K, size_t n0, size_t n1) {
    if (dt == SM_DTYPE_Q8_0)
        gemv_dt(SM_DTYPE_Q8_0, out, qx, r, w, bias, N, K, n0, n1);
    else
        gemv_dt(SM_DTYPE_Q4_0, out, qx, r, w, bias, N, K, n0, n1);
}

/* Bit for bit sm_quant_dequant: one product d * q per weight. */
static void dequant(float *restrict out, const void *restrict src, sm_dtype dt, size_t n) {
    for (size_t b = 0; b < n / SM_QK; b++, out += SM_QK) {
        __m128i q[4];
        float d;
        if (dt == SM_DTYPE_Q8_0) {
            const sm_block_q8_0 *x = (const sm_block_q8_0 *)src + b;
            d = f16(x->d);
            for (int j = 0; j < 4; j++) q[j] = _mm_loadl_epi64((const __m128i *)(x->qs + 8 * j));
            for (int j = 0; j < 4; j++)
                _mm256_storeu_ps(out + 8 * j, _mm256_mul_ps(_mm256_set1_ps(d),
                                                           _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q[j]))));
        } else {
            const sm_block_q4_0 *x = (const sm_block_q4_0 *)src + b;
            d = f16(x->d);
            __m128i by = _mm_loadu_si128((const __m128i *)x->qs), m = _mm_set1_epi8(15);
            __m128i lo = _mm_sub_epi8(_mm_and_si128(by, m), _mm_set1_epi8(8));
            __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(by, 4), m), _mm_set1_epi8(8));
            q[0] = lo, q[1] = _mm_srli_si128(lo, 8), q[2] = hi, q[3] = _mm_srli_si128(hi, 8);
            for (int j = 0; j < 4; j++)
                _mm256_storeu_ps(out + 8 * j, _mm256_mul_ps(_mm256_set1_ps(d),
                                                           _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q[j]))));
        }
    }
}

const sm_qkernel QSYM = {QNAME, quant_x, gemv, dequant};

#endif
