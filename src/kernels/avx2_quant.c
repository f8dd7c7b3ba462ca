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
** Levels go in unsigned as they are stored (q4_0's nibbles 0..15; q8_0's
** bytes made unsigned, w + 128, for vpdpbusd); a zero point z comes off as
** z d_w times the activation block's scaled sum (sm_qx.xs), once per eight
** blocks, or, where the scale changes within a block (q6_k's 16-weight halves),
** from each lane's start at z times minus its 4 activations' sum (sm_qx.s).
**
** gemv streams one weight row at a time (one sequential stream, as the f32
** decode does) against up to SM_QX_ROWS token rows, blocks alternating
** between two accumulators per row.
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
                qx.d[i * nb + b] = qx.xs[i * nb + b] = NAN;
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
            __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s4), _mm256_extracti128_si256(s4, 1));
            h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4E));
            h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xB1));
            qx.d[i * nb + b] = d;
            qx.xs[i * nb + b] = d * (float)-_mm_cvtsi128_si32(h);
        }
}

/* Block b of a q4_0 row as 32 unsigned bytes 0..15, in weight order. */
static AI __m256i q4_bytes(const sm_block_q4_0 *x) {
    __m128i b = _mm_loadu_si128((const __m128i *)x->qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(15));
}

/* n < 8 floats at p, zeros after (the last group of a row; nothing past it is read). */
static AI __m256 load_head(const float *p, size_t n) {
    __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_maskload_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), lane));
}

/*
** Blocks b0..b0+nbk-1 (nbk <= 8) of a q8_0 / q4_0 row against x rows i < r,
** even blocks into a0, odd into a1: the f16 scales widened in one
** instruction and multiplied by the activations' scales in one more; the
** zero point z (q4_0's 8, q8_0's 128 under vpdpbusd; vpmaddubsw takes
** q8_0 as |w| against x with w's sign, no zero point) comes off once for
** the group, as z d_w times xs (d_x sum q), so each block's integer
** product starts from zero.
*/
static AI void qgroup(sm_dtype dt, size_t r, __m256 *a0, __m256 *a1, sm_qx qx, size_t K,
                      const void *row, size_t b0, size_t nbk) {
    const size_t nb = K / SM_QK;
    const bool q8 = dt == SM_DTYPE_Q8_0, zp = !q8 || SM_QFLAVOUR != 0;
    const size_t bs = q8 ? sizeof(sm_block_q8_0) : sizeof(sm_block_q4_0);
    const char *base = (const char *)row + b0 * bs;
    uint16_t h[8] = {0};
    for (size_t k = 0; k < nbk; k++) memcpy(&h[k], base + k * bs, sizeof h[k]);
    __m256 dw = _mm256_cvtph_ps(_mm_set_epi16((short)h[7], (short)h[6], (short)h[5], (short)h[4],
                                              (short)h[3], (short)h[2], (short)h[1], (short)h[0]));
    __m256 dz = _mm256_mul_ps(dw, _mm256_set1_ps(q8 ? 128.0f : 8.0f));
    float f[SM_QX_ROWS][8];
    for (size_t i = 0; i < r; i++) {
        const float *d = qx.d + i * nb + b0, *xs = qx.xs + i * nb + b0;
        _mm256_storeu_ps(f[i], _mm256_mul_ps(dw, nbk == 8 ? _mm256_loadu_ps(d) : load_head(d, nbk)));
        if (zp)
            a1[i] = _mm256_fnmadd_ps(dz, nbk == 8 ? _mm256_loadu_ps(xs) : load_head(xs, nbk), a1[i]);
    }
    for (size_t j = 0; j < nbk; j++) {
        __m256i u, wq = _mm256_setzero_si256();
        if (q8) {
            wq = _mm256_loadu_si256((const __m256i *)((const sm_block_q8_0 *)(const void *)base + j)->qs);
            u = SM_QFLAVOUR ? _mm256_xor_si256(wq, _mm256_set1_epi8((char)0x80)) : _mm256_sign_epi8(wq, wq);
        } else {
            u = q4_bytes((const sm_block_q4_0 *)(const void *)base + j);
        }
        __m256 *acc = j & 1 ? a1 : a0;
        for (size_t i = 0; i < r; i++) {
            __m256i xq = _mm256_loadu_si256((const __m256i *)(qx.q + i * K + (b0 + j) * SM_QK));
            if (q8 && !SM_QFLAVOUR) xq = _mm256_sign_epi8(xq, wq);
            __m256 p = _mm256_cvtepi32_ps(dot_u8s8(_mm256_setzero_si256(), u, xq));
            acc[i] = _mm256_fmadd_ps(p, _mm256_broadcast_ss(&f[i][j]), acc[i]);
        }
    }
}

/* out[i * N] = row . x row i (+ bias) for i < r (a constant where inlined), eight blocks at a time. */
static AI void qrow(sm_dtype dt, size_t r, float *restrict out, size_t N, sm_qx qx, size_t K,
                    const void *restrict row, float bias) {
    const size_t nb = K / SM_QK;
    __m256 a0[SM_QX_ROWS], a1[SM_QX_ROWS];
    for (size_t i = 0; i < r; i++) a0[i] = a1[i] = _mm256_setzero_ps();
    size_t b = 0;
    for (; b + 8 <= nb; b += 8) qgroup(dt, r, a0, a1, qx, K, row, b, 8);
    if (b < nb) qgroup(dt, r, a0, a1, qx, K, row, b, nb - b);
    for (size_t i = 0; i < r; i++) out[i * N] = hsum(_mm256_add_ps(a0[i], a1[i])) + bias;
}


/*
** The k types: a super-block's sub-block scales are applied in f32 per
** 32-weight block, d sc_j d_x (q6_k: d d_x times sc per half-block of 16,
** a lane vector), to an exact integer dot product, as for q4_0; q4_k / q5_k
** mins come off once per super-block: dmin m_j times xs_j (d_x sum q) as
** one 8-lane product. Levels go in unsigned (q4_k 0..15, q5_k 0..31,
** q6_k 0..63 with lanes from 32 s for its zero point), so no flavour saturates.
*/

/* Bit j of each byte of qh moved to bit 4 (16), other bits clear. */
static AI __m256i bit_to_16(__m256i qh, int j) {
    __m256i v = j < 4 ? _mm256_slli_epi16(qh, 4 - j) : _mm256_srli_epi16(qh, j - 4);
    return _mm256_and_si256(v, _mm256_set1_epi8(16));
}

/* Bits 2k, 2k + 1 of each byte of qh moved to bits 4, 5 (16, 32), others clear. */
static AI __m256i bits_to_48(__m256i qh, int k) {
    __m256i v = k == 0 ? _mm256_slli_epi16(qh, 4) : k == 1 ? _mm256_slli_epi16(qh, 2)
              : k == 2 ? qh : _mm256_srli_epi16(qh, 2);
    return _mm256_and_si256(v, _mm256_set1_epi8(48));
}

/* The levels of sub-blocks 2c (lo) and 2c + 1 (hi) of a q4_k / q5_k super-block (nibbles qs,
** fifth bits qh), as unsigned bytes. */
static AI void k45_pair(sm_dtype dt, const uint8_t *qs, __m256i qh, int c, __m256i *lo, __m256i *hi) {
    const __m256i m4 = _mm256_set1_epi8(15);
    __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
    *lo = _mm256_and_si256(v, m4), *hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    if (dt == SM_DTYPE_Q5_K) {
        *lo = _mm256_or_si256(*lo, bit_to_16(qh, 2 * c));
        *hi = _mm256_or_si256(*hi, bit_to_16(qh, 2 * c + 1));
    }
}

/* The 32 levels (0..63) of 32-weight block j (< 8) of q6_k super-block x, as unsigned bytes. */
static AI __m256i q6_block(const sm_block_q6_k *x, int j) {
    int h = j / 4, k = j % 4;
    __m256i lo = _mm256_loadu_si256((const __m256i *)(x->ql + 64 * h + 32 * (k & 1)));
    __m256i qh = _mm256_loadu_si256((const __m256i *)(x->qh + 32 * h));
    lo = _mm256_and_si256(k < 2 ? lo : _mm256_srli_epi16(lo, 4), _mm256_set1_epi8(15));
    return _mm256_or_si256(lo, bits_to_48(qh, k));
}

/* acc[i] += f[i][j] (the dot product of block j's levels u with x row i, lanes from init z s). */
static AI void kblock(size_t r, __m256 *acc, const float f[][8], int j, __m256i u, sm_qx qx,
                      size_t K, size_t b, int zshift, const __m256 *lanes) {
    const size_t nb = K / SM_QK;
    for (size_t i = 0; i < r; i++) {
        __m256i xq = _mm256_loadu_si256((const __m256i *)(qx.q + i * K + b * SM_QK));
        __m256i z = _mm256_setzero_si256();
        if (zshift)
            z = _mm256_slli_epi32(_mm256_loadu_si256((const __m256i *)(qx.s + (i * nb + b) * (SM_QK / 4))), zshift);
        __m256 p = _mm256_cvtepi32_ps(dot_u8s8(z, u, xq));
        if (lanes) p = _mm256_mul_ps(p, *lanes);
        acc[i] = _mm256_fmadd_ps(p, _mm256_broadcast_ss(&f[i][j]), acc[i]);
    }
}

/*
** The 8 scales and 8 mins of a q4_k / q5_k block (sm_quant_k4_scales) as f32
** lanes, decoded in 32-bit words (no bytes through memory: a vector load of
** bytes just stored one by one stalls store forwarding).
*/
static AI void k4_scales(const uint8_t *s12, __m256 *sc, __m256 *m) {
    uint32_t u0, u1, u2;
    memcpy(&u0, s12, 4), memcpy(&u1, s12 + 4, 4), memcpy(&u2, s12 + 8, 4);
    uint32_t sc_lo = u0 & 0x3f3f3f3fu, m_lo = u1 & 0x3f3f3f3fu;
    uint32_t sc_hi = (u2 & 0x0f0f0f0fu) | ((u0 >> 2) & 0x30303030u);
    uint32_t m_hi = ((u2 >> 4) & 0x0f0f0f0fu) | ((u1 >> 2) & 0x30303030u);
    __m128i v = _mm_set_epi32((int)m_hi, (int)m_lo, (int)sc_hi, (int)sc_lo);
    *sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v));
    *m = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8)));
}

/* Super-block sb of a q4_k / q5_k row against x rows i < r, into acc[i][2] (even, odd blocks). */
static AI void ksuper45(sm_dtype dt, size_t r, __m256 (*acc)[2], sm_qx qx, size_t K,
                        const void *row, size_t sb) {
    const size_t nb = K / SM_QK, b0 = sb * 8;
    const sm_block_q4_k *x4 = (const sm_block_q4_k *)row + sb;
    const sm_block_q5_k *x5 = (const sm_block_q5_k *)row + sb;
    const sm_block_q4_k *hd = dt == SM_DTYPE_Q4_K ? x4 : (const sm_block_q4_k *)(const void *)x5;
    const uint8_t *qs = dt == SM_DTYPE_Q4_K ? x4->qs : x5->qs;
    __m256 scf, mf;
    k4_scales(hd->scales, &scf, &mf);
    __m256 dsc = _mm256_mul_ps(_mm256_set1_ps(f16(hd->d)), scf);
    __m256 dmv = _mm256_mul_ps(_mm256_set1_ps(f16(hd->dmin)), mf);
    float f[SM_QX_ROWS][8];
    for (size_t i = 0; i < r; i++) {
        _mm256_storeu_ps(f[i], _mm256_mul_ps(dsc, _mm256_loadu_ps(qx.d + i * nb + b0)));
        acc[i][1] = _mm256_fnmadd_ps(dmv, _mm256_loadu_ps(qx.xs + i * nb + b0), acc[i][1]);
    }
    __m256i qh = dt == SM_DTYPE_Q5_K ? _mm256_loadu_si256((const __m256i *)x5->qh) : _mm256_setzero_si256();
    for (int c = 0; c < 4; c++) {
        __m256i lo, hi;
        k45_pair(dt, qs, qh, c, &lo, &hi);
        __m256 a0[SM_QX_ROWS], a1[SM_QX_ROWS];
        for (size_t i = 0; i < r; i++) a0[i] = acc[i][0], a1[i] = acc[i][1];
        kblock(r, a0, f, 2 * c, lo, qx, K, b0 + 2 * c, 0, NULL);
        kblock(r, a1, f, 2 * c + 1, hi, qx, K, b0 + 2 * c + 1, 0, NULL);
        for (size_t i = 0; i < r; i++) acc[i][0] = a0[i], acc[i][1] = a1[i];
    }
}

/* Super-block sb of a q6_k row against x rows i < r, into acc[i][2]. */
static AI void ksuper6(size_t r, __m256 (*acc)[2], sm_qx qx, size_t K, const void *row, size_t sb) {
    const size_t nb = K / SM_QK, b0 = sb * 8;
    const sm_block_q6_k *x = (const sm_block_q6_k *)row + sb;
    __m256 d = _mm256_set1_ps(f16(x->d));
    float f[SM_QX_ROWS][8];
    for (size_t i = 0; i < r; i++) _mm256_storeu_ps(f[i], _mm256_mul_ps(d, _mm256_loadu_ps(qx.d + i * nb + b0)));
    __m128i sc = _mm_loadu_si128((const __m128i *)x->scales);
    for (int j = 0; j < 8; j++) {
        __m256i u = q6_block(x, j);
        /* lanes 0-3 (weights 0-15) scale sc[2j], lanes 4-7 sc[2j + 1] */
        __m128i pick = _mm_set_epi8(0, 0, 0, 0, 0, 0, 0, 0, (char)(2 * j + 1), (char)(2 * j + 1),
                                    (char)(2 * j + 1), (char)(2 * j + 1), (char)(2 * j),
                                    (char)(2 * j), (char)(2 * j), (char)(2 * j));
        __m256 lanes = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_shuffle_epi8(sc, pick)));
        __m256 a[SM_QX_ROWS];
        for (size_t i = 0; i < r; i++) a[i] = acc[i][j & 1];
        kblock(r, a, f, j, u, qx, K, b0 + j, 5, &lanes);
        for (size_t i = 0; i < r; i++) acc[i][j & 1] = a[i];
    }
}

static AI void krow(sm_dtype dt, size_t r, float *restrict out, size_t N, sm_qx qx, size_t K,
                    const void *restrict row, float bias) {
    __m256 acc[SM_QX_ROWS][2];
    for (size_t i = 0; i < r; i++) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    for (size_t sb = 0; sb < K / SM_QK_K; sb++) {
        if (dt == SM_DTYPE_Q6_K)
            ksuper6(r, acc, qx, K, row, sb);
        else
            ksuper45(dt, r, acc, qx, K, row, sb);
    }
    for (size_t i = 0; i < r; i++) out[i * N] = hsum(_mm256_add_ps(acc[i][0], acc[i][1])) + bias;
}

static AI void gemv_dt(sm_dtype dt, float *restrict out, sm_qx qx, size_t r,
                       const void *restrict w, const float *restrict bias, size_t N, size_t K,
                       size_t n0, size_t n1) {
    for (size_t n = n0; n < n1; n++) {
        const void *row = sm_kernels_elem(w, dt, n * K);
        float b = bias ? bias[n] : 0.0f;
        if (dt == SM_DTYPE_Q8_0 || dt == SM_DTYPE_Q4_0) switch (r) {
            case 1: qrow(dt, 1, out + n, N, qx, K, row, b); break;
            case 2: qrow(dt, 2, out + n, N, qx, K, row, b); break;
            case 3: qrow(dt, 3, out + n, N, qx, K, row, b); break;
            default: qrow(dt, 4, out + n, N, qx, K, row, b); break;
            }
        else switch (r) {
            case 1: krow(dt, 1, out + n, N, qx, K, row, b); break;
            case 2: krow(dt, 2, out + n, N, qx, K, row, b); break;
            case 3: krow(dt, 3, out + n, N, qx, K, row, b); break;
            default: krow(dt, 4, out + n, N, qx, K, row, b); break;
            }
    }
}

static void gemv(float *restrict out, sm_qx qx, size_t r, const void *restrict w, sm_dtype dt,
                 const float *restrict bias, size_t N, size_t K, size_t n0, size_t n1) {
    switch (dt) {
    case SM_DTYPE_Q8_0: gemv_dt(SM_DTYPE_Q8_0, out, qx, r, w, bias, N, K, n0, n1); break;
    case SM_DTYPE_Q4_0: gemv_dt(SM_DTYPE_Q4_0, out, qx, r, w, bias, N, K, n0, n1); break;
    case SM_DTYPE_Q4_K: gemv_dt(SM_DTYPE_Q4_K, out, qx, r, w, bias, N, K, n0, n1); break;
    case SM_DTYPE_Q5_K: gemv_dt(SM_DTYPE_Q5_K, out, qx, r, w, bias, N, K, n0, n1); break;
    default: gemv_dt(SM_DTYPE_Q6_K, out, qx, r, w, bias, N, K, n0, n1); break;
    }
}

/* 32 unsigned levels u as f32, each a * level - b (a * level exact, so the fused form rounds once, as
** sm_quant_dequant's product then difference does). */
static AI void store_levels(float *out, __m256i u, __m256 a, __m256 b) {
    __m128i lo = _mm256_castsi256_si128(u), hi = _mm256_extracti128_si256(u, 1);
    __m128i part[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
    for (int k = 0; k < 4; k++)
        _mm256_storeu_ps(out + 8 * k, _mm256_fmsub_ps(a, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(part[k])), b));
}

/* Super-blocks of a k type (bit for bit sm_quant_dequant). */
static void dequant_k(float *restrict out, const void *restrict src, sm_dtype dt, size_t n) {
    for (size_t sb = 0; sb < n / SM_QK_K; sb++, out += SM_QK_K) {
        if (dt == SM_DTYPE_Q6_K) {
            const sm_block_q6_k *x = (const sm_block_q6_k *)src + sb;
            __m256 d = _mm256_set1_ps(f16(x->d)), z = _mm256_set1_ps(32.0f);
            for (int j = 0; j < 8; j++) {
                /* (q - 32) sc exact in f32 (|.| <= 4096; + 0 turns -0 into the integer's +0),
                ** then times d: one rounding */
                float buf[32];
                store_levels(buf, q6_block(x, j), _mm256_set1_ps(1.0f), z);
                for (int half = 0; half < 2; half++) {
                    __m256 sc = _mm256_set1_ps((float)x->scales[2 * j + half]);
                    for (int c = 0; c < 2; c++) {
                        __m256 v = _mm256_mul_ps(sc, _mm256_loadu_ps(buf + 16 * half + 8 * c));
                        _mm256_storeu_ps(out + 32 * j + 16 * half + 8 * c,
                                         _mm256_mul_ps(d, _mm256_add_ps(v, _mm256_setzero_ps())));
                    }
                }
            }
            continue;
        }
        const sm_block_q4_k *x4 = (const sm_block_q4_k *)src + sb;
        const sm_block_q5_k *x5 = (const sm_block_q5_k *)src + sb;
        const sm_block_q4_k *hd = dt == SM_DTYPE_Q4_K ? x4 : (const sm_block_q4_k *)(const void *)x5;
        const uint8_t *qs = dt == SM_DTYPE_Q4_K ? x4->qs : x5->qs;
        uint8_t sc[8], m[8];
        sm_quant_k4_scales(hd->scales, sc, m);
        float d = f16(hd->d), dmin = f16(hd->dmin);
        __m256i qh = dt == SM_DTYPE_Q5_K ? _mm256_loadu_si256((const __m256i *)x5->qh) : _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            __m256i lo, hi;
            k45_pair(dt, qs, qh, c, &lo, &hi);
            int j = 2 * c;
            store_levels(out + 32 * j, lo, _mm256_set1_ps(d * (float)sc[j]), _mm256_set1_ps(dmin * (float)m[j]));
            store_levels(out + 32 * j + 32, hi, _mm256_set1_ps(d * (float)sc[j + 1]),
                         _mm256_set1_ps(dmin * (float)m[j + 1]));
        }
    }
}

/* Bit for bit sm_quant_dequant: one product d * q per weight. */
static void dequant(float *restrict out, const void *restrict src, sm_dtype dt, size_t n) {
    if (dt != SM_DTYPE_Q8_0 && dt != SM_DTYPE_Q4_0) {
        dequant_k(out, src, dt, n);
        return;
    }
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
