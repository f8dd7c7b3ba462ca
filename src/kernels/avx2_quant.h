/*
** avx2_quant.h -- what the quantized products' two files (avx2_quant.c, the
** row-streaming products; avx2_qgemm.c, the packed one) share: the flavour
** (SM_QFLAVOUR, see avx2_quant.c), the four-byte dot product, the levels
** of each block type as unsigned bytes, and the activation quantizer.
** Included only by files built with AVX2 and an SM_QFLAVOUR.
*/
#ifndef SM_AVX2_QUANT_H
#define SM_AVX2_QUANT_H

#include "kernels_internal.h"
#include "avx2_reduce.h"

#include <immintrin.h>
#include <float.h>
#include <math.h>
#include <string.h>

#if SM_QFLAVOUR == 2
#define QNAME "avx512-vnni"
#define QSYM sm_qkernel_avx512vnni
#define QGEMM sm_qgemm_avx512vnni
#define QGEMM_R32 sm_qgemm_r32_avx512vnni
#define XQUANT_R32 sm_xquant_r32_avx512vnni
#define QPEAK SM_PEAK_VNNI512 /* the packed product's 512-bit vectors */
#elif SM_QFLAVOUR == 1
#define QNAME "avx-vnni"
#define QSYM sm_qkernel_avxvnni
#define QGEMM sm_qgemm_avxvnni
#define QGEMM_R32 sm_qgemm_r32_avxvnni
#define XQUANT_R32 sm_xquant_r32_avxvnni
#define QPEAK SM_PEAK_VNNI256
#else
#define QNAME "avx2"
#define QSYM sm_qkernel_avx2_maddubs
#define QGEMM sm_qgemm_avx2_maddubs
#define QGEMM_R32 sm_qgemm_r32_avx2_maddubs
#define XQUANT_R32 sm_xquant_r32_avx2_maddubs
#define QPEAK SM_PEAK_MADDUBS256_RUN /* its int16 runs (avx2_qgemm.c) */
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

/* Block b of a q4_0 row as 32 unsigned bytes 0..15, in weight order. */
static AI __m256i q4_bytes(const sm_block_q4_0 *x) {
    __m128i b = _mm_loadu_si128((const __m128i *)x->qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(15));
}

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

/* Bytes of a block (32 weights) or super-block (256) of dt, and whether it is a k type: constants
   where inlined (sm_dtype_row_bytes is a call). */
static AI size_t sbytes(sm_dtype dt) {
    return dt == SM_DTYPE_Q8_0 ? sizeof(sm_block_q8_0) : dt == SM_DTYPE_Q4_0 ? sizeof(sm_block_q4_0)
         : dt == SM_DTYPE_Q4_1 ? sizeof(sm_block_q4_1) : dt == SM_DTYPE_Q5_0 ? sizeof(sm_block_q5_0)
         : dt == SM_DTYPE_Q5_1 ? sizeof(sm_block_q5_1) : dt == SM_DTYPE_IQ4_NL ? sizeof(sm_block_q4_0)
         : dt == SM_DTYPE_Q2_K ? sizeof(sm_block_q2_k) : dt == SM_DTYPE_IQ4_XS ? sizeof(sm_block_iq4_xs)
                               : sizeof(sm_block_q3_k);
}
static AI bool skt(sm_dtype dt) {
    return dt == SM_DTYPE_Q2_K || dt == SM_DTYPE_Q3_K;
}
/* The types of 32-weight blocks with one scale each: q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, and iq4_xs
   (eight iq4_nl blocks whose scales come from one super-block). */
static AI bool q32(sm_dtype dt) {
    return dt == SM_DTYPE_Q8_0 || dt == SM_DTYPE_Q4_0 || dt == SM_DTYPE_Q4_1 || dt == SM_DTYPE_Q5_0 ||
           dt == SM_DTYPE_Q5_1 || dt == SM_DTYPE_IQ4_NL || dt == SM_DTYPE_IQ4_XS;
}

/* Bit j of the 32-bit qh (4 bytes at p, little-endian) as 16 in byte j, 0 elsewhere. */
static AI __m256i fifth_bits(const uint8_t *p) {
    uint32_t qh;
    memcpy(&qh, p, sizeof qh);
    const __m256i pick = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2,
                                          2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), pick);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
    return _mm256_and_si256(v, _mm256_set1_epi8(16));
}

/* The 32 levels of block p of a q4_1 / q5_0 / q5_1 row, unsigned (0..31), in weight order. */
/* Where a q4_1 / q5_0 / q5_1 block's 16 bytes of nibbles start (q5's 4 bytes of fifth bits before). */
static AI size_t small_qs(sm_dtype dt) {
    return dt == SM_DTYPE_Q4_1 ? 4 : dt == SM_DTYPE_Q5_0 ? 6 : 8;
}

static AI __m256i small_levels(sm_dtype dt, const char *p) {
    const size_t qs = small_qs(dt);
    __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(p + qs));
    __m256i u = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(15));
    if (dt != SM_DTYPE_Q4_1) u = _mm256_or_si256(u, fifth_bits((const uint8_t *)p + qs - 4));
    return u;
}

/* Block j (0..7) of a q2_k / q3_k super-block's 32 levels, unsigned, in weight order: q2_k's two
   bits (0..3); q3_k's with its hmask bit as the third (0..7, the signed level this less 4). */
static AI __m256i k23_levels(sm_dtype dt, const uint8_t *qs, const uint8_t *hmask, int j) {
    const int h = j / 4, k = j % 4;
    __m256i u = _mm256_and_si256(_mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)(const void *)(qs + 32 * h)), 2 * k),
                                 _mm256_set1_epi8(3));
    if (dt == SM_DTYPE_Q3_K) {
        __m256i hb = _mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)(const void *)hmask), 4 * h + k);
        u = _mm256_or_si256(u, _mm256_slli_epi16(_mm256_and_si256(hb, _mm256_set1_epi8(1)), 2));
    }
    return u;
}

/* The 32 levels of an iq4_nl block's 16 bytes of nibbles qs (q4_0's layout), signed, in weight order. */
static AI __m256i iq4_levels(const void *qs) {
    const __m128i kv = _mm_loadu_si128((const __m128i *)(const void *)SM_IQ4NL);
    const __m128i b = _mm_loadu_si128((const __m128i *)qs);
    const __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(15));
    return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(kv), nib);
}

/* The same levels made unsigned (+ 128, as q8_0's bytes for vpdpbusd). */
static AI __m256i iq4_levels_u(const void *qs) {
    return _mm256_xor_si256(iq4_levels(qs), _mm256_set1_epi8((char)0x80));
}

/* The eight block scales d (ls - 32) of iq4_xs super-block x as f32 lanes (exact). */
static AI __m256 iq4xs_scales(const sm_block_iq4_xs *x) {
    uint32_t lo;
    memcpy(&lo, x->scales_l, sizeof lo);
    const __m256i l = _mm256_srlv_epi32(_mm256_set1_epi32((int)lo), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
    const __m256i h = _mm256_srlv_epi32(_mm256_set1_epi32(x->scales_h), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14));
    const __m256i ls = _mm256_or_si256(_mm256_and_si256(l, _mm256_set1_epi32(15)),
                                       _mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi32(3)), 4));
    return _mm256_mul_ps(_mm256_set1_ps(f16(x->d)), _mm256_cvtepi32_ps(_mm256_sub_epi32(ls, _mm256_set1_epi32(32))));
}

/* Eight (or nbk < 8) f16 values at p, bs bytes apart, as f32 lanes (zeros after nbk). */
static AI __m256 halves(const char *p, size_t bs, size_t nbk) {
    uint16_t h[8] = {0}; /* gathered as scalars (a vector load of them just stored would stall) */
    for (size_t k = 0; k < nbk; k++) memcpy(&h[k], p + k * bs, sizeof h[k]);
    return _mm256_cvtph_ps(_mm_set_epi16((short)h[7], (short)h[6], (short)h[5], (short)h[4], (short)h[3],
                                         (short)h[2], (short)h[1], (short)h[0]));
}

/* The 32 levels (0..63) of 32-weight block j (< 8) of q6_k super-block x, as unsigned bytes. */
static AI __m256i q6_block(const sm_block_q6_k *x, int j) {
    int h = j / 4, k = j % 4;
    __m256i lo = _mm256_loadu_si256((const __m256i *)(x->ql + 64 * h + 32 * (k & 1)));
    __m256i qh = _mm256_loadu_si256((const __m256i *)(x->qh + 32 * h));
    lo = _mm256_and_si256(k < 2 ? lo : _mm256_srli_epi16(lo, 4), _mm256_set1_epi8(15));
    return _mm256_or_si256(lo, bits_to_48(qh, k));
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

/*
** Super-block sb of a q4_k / q5_k row: its nibbles (returned), fifth bits
** (*qh; zero for q4_k) and the 8 sub-blocks' scales d sc (*dsc) and mins
** dmin m (*dm) as f32 lanes.
*/
static AI const uint8_t *k45_super(sm_dtype dt, const void *row, size_t sb, __m256i *qh,
                                   __m256 *dsc, __m256 *dm) {
    const sm_block_q4_k *x4 = (const sm_block_q4_k *)row + sb;
    const sm_block_q5_k *x5 = (const sm_block_q5_k *)row + sb;
    const sm_block_q4_k *hd = dt == SM_DTYPE_Q4_K ? x4 : (const sm_block_q4_k *)(const void *)x5;
    __m256 scf, mf;
    k4_scales(hd->scales, &scf, &mf);
    *dsc = _mm256_mul_ps(_mm256_set1_ps(f16(hd->d)), scf);
    *dm = _mm256_mul_ps(_mm256_set1_ps(f16(hd->dmin)), mf);
    *qh = dt == SM_DTYPE_Q5_K ? _mm256_loadu_si256((const __m256i *)x5->qh) : _mm256_setzero_si256();
    return dt == SM_DTYPE_Q4_K ? x4->qs : x5->qs;
}

/*
** Block xb (SM_QK floats) quantized: q = x / d rounded to nearest even, d =
** amax / 127; s (if not NULL) minus each 4 consecutive q's sum; *d and *xs
** (d times the sum of q). A NaN or infinity gives q = 0 and d = xs = NaN.
** Bit for bit quant_ref.c's quant_x.
*/
#if SM_QFLAVOUR == 2
/* On 512-bit registers: the same operations per element, the levels narrowed in order (no
   permutes) and the sums of 4 taken by vpdpbusd against ones (exact); about half the time. */
static AI void quant_block(const float *restrict xb, int8_t *restrict q, int32_t *restrict s,
                           float *d_out, float *xs_out) {
    const __m512i absm = _mm512_set1_epi32(0x7fffffff);
    const __m512 v0 = _mm512_loadu_ps(xb), v1 = _mm512_loadu_ps(xb + 16);
    const __mmask16 bad = (__mmask16)(_mm512_cmp_ps_mask(v0, v0, _CMP_UNORD_Q) |
                                      _mm512_cmp_ps_mask(v1, v1, _CMP_UNORD_Q));
    const __m512 a0 = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v0), absm));
    const __m512 a1 = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v1), absm));
    float amax = _mm512_reduce_max_ps(_mm512_max_ps(a0, a1));
    if (bad || amax > FLT_MAX) {
        memset(q, 0, SM_QK);
        if (s) memset(s, 0, SM_QK / 4 * sizeof *s);
        *d_out = *xs_out = NAN;
        return;
    }
    float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    const __m512 vid = _mm512_set1_ps(id);
    const __m512i n0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, vid)), n1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, vid));
    const __m256i p = _mm256_set_m128i(_mm512_cvtsepi32_epi8(n1), _mm512_cvtsepi32_epi8(n0));
    _mm256_storeu_si256((__m256i *)(void *)q, p);
    const __m256i s4 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1), p);
    if (s) _mm256_storeu_si256((__m256i *)(void *)s, _mm256_sub_epi32(_mm256_setzero_si256(), s4));
    *d_out = d;
    *xs_out = d * (float)_mm512_reduce_add_epi32(_mm512_add_epi32(n0, n1));
}
#else
static AI void quant_block(const float *restrict xb, int8_t *restrict q, int32_t *restrict s,
                           float *d_out, float *xs_out) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    __m256 v[4], mx = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
    for (int j = 0; j < 4; j++) {
        v[j] = _mm256_loadu_ps(xb + 8 * j);
        mx = _mm256_max_ps(mx, _mm256_andnot_ps(sign, v[j]));
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(v[j], v[j], _CMP_UNORD_Q));
    }
    float amax = hmax8(mx);
    if (_mm256_movemask_ps(bad) || amax > FLT_MAX) {
        memset(q, 0, SM_QK);
        if (s) memset(s, 0, SM_QK / 4 * sizeof *s);
        *d_out = *xs_out = NAN;
        return;
    }
    float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    __m256 vid = _mm256_set1_ps(id);
    __m256i n[4];
    for (int j = 0; j < 4; j++) n[j] = _mm256_cvtps_epi32(_mm256_mul_ps(v[j], vid));
    /* sums of 4: hadd twice gives them in the order 0 2 4 6 | 1 3 5 7 */
    __m256i s4 = _mm256_hadd_epi32(_mm256_hadd_epi32(n[0], n[1]), _mm256_hadd_epi32(n[2], n[3]));
    s4 = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_permutevar8x32_epi32(s4, order));
    if (s) _mm256_storeu_si256((__m256i *)s, s4);
    __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(n[0], n[1]), _mm256_packs_epi32(n[2], n[3]));
    _mm256_storeu_si256((__m256i *)q, _mm256_permutevar8x32_epi32(p, order));
    __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s4), _mm256_extracti128_si256(s4, 1));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4E));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xB1));
    *d_out = d;
    *xs_out = d * (float)-_mm_cvtsi128_si32(h);
}
#endif

#endif
