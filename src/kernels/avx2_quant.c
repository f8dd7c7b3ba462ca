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
** Levels go in unsigned as they are stored (q4_0's nibbles 0..15, q4_1's,
** q5_0 / q5_1's 0..31; q8_0's and iq4_nl's signed bytes made unsigned, w +
** 128, for vpdpbusd); a zero point z comes off as
** z d_w times the activation block's scaled sum (sm_qx.xs), once per eight
** blocks, or, where the scale changes within a block (q6_k's 16-weight halves),
** from each lane's start at z times minus its 4 activations' sum (sm_qx.s).
**
** gemv streams one weight row at a time (one sequential stream, asked for
** 4 KB ahead: gemv_dt) against up to SM_QX_ROWS token rows, blocks
** alternating between two accumulators per row (8 token rows at a time on
** 256-bit registers; AVX512-VNNI takes a k type's rows, and q4_1 / q5_0 /
** q5_1's, all at once, the two accumulators halves of one 512-bit
** register: krow_z, qrow_z); one token row
** of a k type reads four rows side by side (krow4), and one of a 32-weight
** block type as stored (qrow4).
*/
#if defined(__x86_64__) || defined(__i386__)
#include "avx2_quant.h"

/* Bit for bit quant_ref.c's quant_x. */
static void quant_x(sm_qx qx, const float *restrict x, size_t r, size_t K) {
    const size_t nb = K / SM_QK;
    for (size_t i = 0; i < r; i++)
        for (size_t b = 0; b < nb; b++) {
            int32_t *s = qx.s + i * (K / 4) + b * (SM_QK / 4);
            quant_block(x + i * K + b * SM_QK, qx.q + i * K + b * SM_QK, s, qx.d + i * nb + b, qx.xs + i * nb + b);
            sm_qx_halves(s, qx.h + i * (K / 16) + 2 * b);
        }
}

/* n < 8 floats at p, zeros after (the last group of a row; nothing past it is read). */
static AI __m256 load_head(const float *p, size_t n) {
    __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_maskload_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), lane));
}

/* A group's zero point z d_w (q4_0's 8, q5_0's 16, the signed types' 128; q4_1 / q5_1: minus their
   offsets m) for nbk blocks at base, their scales dw. */
static AI __m256 group_dz(sm_dtype dt, const char *base, size_t bs, size_t nbk, __m256 dw) {
    if (dt == SM_DTYPE_Q4_1 || dt == SM_DTYPE_Q5_1) return _mm256_sub_ps(_mm256_setzero_ps(), halves(base + 2, bs, nbk));
    const bool sgn = dt == SM_DTYPE_Q8_0 || dt == SM_DTYPE_IQ4_NL || dt == SM_DTYPE_IQ4_XS;
    return _mm256_mul_ps(dw, _mm256_set1_ps(sgn ? 128.0f : dt == SM_DTYPE_Q5_0 ? 16.0f : 8.0f));
}

/*
** Blocks b0..b0+nbk-1 (nbk <= 8) of a row of 32-weight blocks (q32) against
** x rows i < r, even blocks into a0, odd into a1: the f16 scales widened in
** one instruction (iq4_xs: its super-block's eight d (ls - 32), nbk = 8)
** and multiplied by the activations' scales in one more;
** the zero point z (q4_0's 8, q5_0's 16, q8_0 / iq4_nl's 128 under
** vpdpbusd; vpmaddubsw takes those two as |w| against x with w's sign, no
** zero point) comes off once for the group as z d_w times xs (d_x sum q),
** q4_1 / q5_1's offset m goes on as m xs, so each block's integer product
** starts from zero.
*/
static AI void qgroup(sm_dtype dt, size_t r, __m256 *a0, __m256 *a1, sm_qx qx, size_t K,
                      const void *row, size_t b0, size_t nbk) {
    const size_t nb = K / SM_QK, bs = sbytes(dt);
    const bool q8 = dt == SM_DTYPE_Q8_0, xs4 = dt == SM_DTYPE_IQ4_XS, iq = dt == SM_DTYPE_IQ4_NL || xs4;
    const bool sgn = q8 || iq, zp = !sgn || SM_QFLAVOUR != 0;
    const char *base = (const char *)row + (xs4 ? b0 / 8 : b0) * bs; /* iq4_xs: b0 starts a super-block */
    const sm_block_iq4_xs *sx = (const sm_block_iq4_xs *)(const void *)base;
    __m256 dw = xs4 ? iq4xs_scales(sx) : halves(base, bs, nbk), dz = group_dz(dt, base, bs, nbk, dw);
    float f[SM_QX_ROWS][8];
    for (size_t i = 0; i < r; i++) {
        const float *d = qx.d + i * nb + b0, *xs = qx.xs + i * nb + b0;
        _mm256_storeu_ps(f[i], _mm256_mul_ps(dw, nbk == 8 ? _mm256_loadu_ps(d) : load_head(d, nbk)));
        if (zp)
            a1[i] = _mm256_fnmadd_ps(dz, nbk == 8 ? _mm256_loadu_ps(xs) : load_head(xs, nbk), a1[i]);
    }
    for (size_t j = 0; j < nbk; j++) {
        __m256i u, wq = _mm256_setzero_si256();
        if (sgn) {
            wq = q8 ? _mm256_loadu_si256((const __m256i *)((const sm_block_q8_0 *)(const void *)base + j)->qs)
                    : iq4_levels(xs4 ? (const void *)(sx->qs + 16 * j) : base + j * bs + 2);
            u = SM_QFLAVOUR ? _mm256_xor_si256(wq, _mm256_set1_epi8((char)0x80)) : _mm256_sign_epi8(wq, wq);
        } else {
            u = dt == SM_DTYPE_Q4_0 ? q4_bytes((const sm_block_q4_0 *)(const void *)base + j)
                                    : small_levels(dt, base + j * bs);
        }
        __m256 *acc = j & 1 ? a1 : a0;
        for (size_t i = 0; i < r; i++) {
            __m256i xq = _mm256_loadu_si256((const __m256i *)(qx.q + i * K + (b0 + j) * SM_QK));
            if (sgn && !SM_QFLAVOUR) xq = _mm256_sign_epi8(xq, wq);
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

/* Super-block sb of a q4_k / q5_k row against x rows i < r, into acc[i][2] (even, odd blocks). */
static AI void ksuper45(sm_dtype dt, size_t r, __m256 (*acc)[2], sm_qx qx, size_t K,
                        const void *row, size_t sb) {
    const size_t nb = K / SM_QK, b0 = sb * 8;
    __m256i qh;
    __m256 dsc, dmv;
    const uint8_t *qs = k45_super(dt, row, sb, &qh, &dsc, &dmv);
    float f[SM_QX_ROWS][8];
    for (size_t i = 0; i < r; i++) {
        _mm256_storeu_ps(f[i], _mm256_mul_ps(dsc, _mm256_loadu_ps(qx.d + i * nb + b0)));
        acc[i][1] = _mm256_fnmadd_ps(dmv, _mm256_loadu_ps(qx.xs + i * nb + b0), acc[i][1]);
    }
    for (int c = 0; c < 4; c++) {
        __m256i lo, hi;
        k45_pair(dt, qs, qh, c, &lo, &hi);
        __m256 a0[SM_QX_ROWS], a1[SM_QX_ROWS];
        for (size_t i = 0; i < r; i++) a0[i] = acc[i][0], a1[i] = acc[i][1];
        kblock(r, a0, f, 2 * c, lo, qx, K, b0 + 2 * (size_t)c, 0, NULL);
        kblock(r, a1, f, 2 * c + 1, hi, qx, K, b0 + 2 * (size_t)c + 1, 0, NULL);
        for (size_t i = 0; i < r; i++) acc[i][0] = a0[i], acc[i][1] = a1[i];
    }
}

/* Block j's lane scales from a q6_k super-block's 16 scales sc: lanes 0-3 (weights 0-15) sc[2j],
   lanes 4-7 sc[2j + 1]. */
static AI __m256i q6_lanes_i(__m128i sc, int j) {
    const __m128i pick = _mm_set_epi8(0, 0, 0, 0, 0, 0, 0, 0, (char)(2 * j + 1), (char)(2 * j + 1),
                                      (char)(2 * j + 1), (char)(2 * j + 1), (char)(2 * j), (char)(2 * j),
                                      (char)(2 * j), (char)(2 * j));
    return _mm256_cvtepi8_epi32(_mm_shuffle_epi8(sc, pick));
}

static AI __m256 q6_lanes(__m128i sc, int j) { /* the same as f32 */
    return _mm256_cvtepi32_ps(q6_lanes_i(sc, j));
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
        __m256 lanes = q6_lanes(sc, j);
        __m256 a[SM_QX_ROWS];
        for (size_t i = 0; i < r; i++) a[i] = acc[i][j & 1];
        kblock(r, a, f, j, u, qx, K, b0 + (size_t)j, 5, &lanes);
        for (size_t i = 0; i < r; i++) acc[i][j & 1] = a[i];
    }
}

#include "avx2_qsmall.h" /* q2_k / q3_k's super-block (ssuper), the older types' dequantization */

static AI void krow(sm_dtype dt, size_t r, float *restrict out, size_t N, sm_qx qx, size_t K,
                    const void *restrict row, float bias) {
    __m256 acc[SM_QX_ROWS][2], accm[SM_QX_ROWS];
    for (size_t i = 0; i < r; i++) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    for (size_t i = 0; dt == SM_DTYPE_Q2_K && i < r; i++) accm[i] = _mm256_setzero_ps();
    for (size_t sb = 0; sb < K / SM_QK_K; sb++) {
        if (skt(dt))
            ssuper(dt, r, acc, accm, qx, K, row, sb);
        else if (dt == SM_DTYPE_Q6_K)
            ksuper6(r, acc, qx, K, row, sb);
        else
            ksuper45(dt, r, acc, qx, K, row, sb);
    }
    for (size_t i = 0; i < r; i++) {
        __m256 a = _mm256_add_ps(acc[i][0], acc[i][1]);
        out[i * N] = hsum(dt == SM_DTYPE_Q2_K ? _mm256_add_ps(a, accm[i]) : a) + bias;
    }
}

#if SM_QFLAVOUR == 2
/*
** Token rows of a k type on 512-bit registers (AVX512-VNNI): each row's two
** accumulators, acc[i][0] (even blocks) and acc[i][1] (odd), are the low and
** high halves of one vector, so a block pair (2c, 2c + 1: 64 bytes of the
** row's levels, contiguous) takes one dot product, one conversion and one
** FMA where krow takes two of each; the halves' scales f[i][2c] and
** f[i][2c + 1] are lanes of f[i] spread over them by a permute, the mins
** come off the high half alone (a masked fnmadd), and the halves are added
** as krow adds its two sums. Each lane meets the operations it meets in
** krow, in the same order: bit for bit krow's results (the other flavours'
** sums: test_quant_gemv). Batched decoding's 16 rows in one pass (the
** weights unpacked once for all): on a 2-vCPU Emerald Rapids (bench_gemv
** --rows 16, 2 threads, the 1.1B ffn shape) q4_k 183 -> 240 GFLOPS, q5_k
** 153 -> 231, q6_k 96 -> 159 against krow 8 rows at a time. krow4's one
** token row runs on them too (kacc): fewer instructions a byte, and
** GPT-2's q4_k down product read 71-75% of the probe -> 76-80%.
*/
static AI __m512 bcast8(__m256 v) { /* v in both halves */
    return _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(v)));
}

/* Lanes 0-7 from lane 2c of v, lanes 8-15 from lane 2c + 1. */
static AI __m512 pair_lanes(__m512 v, int c) {
    return _mm512_permutexvar_ps(_mm512_inserti64x4(_mm512_set1_epi32(2 * c), _mm256_set1_epi32(2 * c + 1), 1), v);
}

/* A block pair's two 256-bit halves of levels as one register. */
static AI __m512i pair_u(__m256i lo, __m256i hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

/* A block pair's lane scales from a super-block's 16 sub-block scales sc, as 32-bit integers: lanes
   0-3 sc[4c], 4-7 sc[4c + 1], 8-11 sc[4c + 2], 12-15 sc[4c + 3] (q6_lanes of blocks 2c, 2c + 1). */
static AI __m512i pair_sc(__m128i sc, int c) {
    const char a = (char)(4 * c), b = (char)(a + 1), e = (char)(a + 2), h = (char)(a + 3);
    return _mm512_cvtepi8_epi32(_mm_shuffle_epi8(sc, _mm_setr_epi8(a, a, a, a, b, b, b, b, e, e, e, e, h, h, h, h)));
}

static AI void ksuper45_z(sm_dtype dt, size_t r, __m512 *acc, sm_qx qx, size_t K, const void *row, size_t sb) {
    const size_t nb = K / SM_QK, b0 = sb * 8;
    __m256i qh;
    __m256 dsc, dmv;
    const uint8_t *qs = k45_super(dt, row, sb, &qh, &dsc, &dmv);
    const __m512 dscb = bcast8(dsc), dmvb = bcast8(dmv);
    /* k45_pair's levels, both halves at once: the pair's 32 bytes of nibbles in both, the
       low half shifted by 0 and the high by 4; q5_k's fifth bits 2c, 2c + 1 to bit 4. Against
       k45_pair's two halves joined (pair_u), 241-243 GFLOPS to 230-233 at 16 rows of q4_k
       (bench_gemv, Emerald Rapids): it unpacks once a weight row, but the rows are short. */
    const __m512i m4 = _mm512_set1_epi8(15), b4 = _mm512_set1_epi8(16);
    const __m512i nib = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi32(4), 1);
    const __m512i qhz = _mm512_broadcast_i64x4(qh);
    __m512i u[4];
    for (int c = 0; c < 4; c++) {
        const __m512i v = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(qs + 32 * c)));
        u[c] = _mm512_and_si512(_mm512_srlv_epi32(v, nib), m4);
        if (dt == SM_DTYPE_Q5_K) {
            const __m512i sh = _mm512_inserti64x4(_mm512_set1_epi32(c < 2 ? 4 - 2 * c : 2 * c - 4),
                                                  _mm256_set1_epi32(c < 2 ? 3 - 2 * c : 2 * c - 3), 1);
            const __m512i h = c < 2 ? _mm512_sllv_epi32(qhz, sh) : _mm512_srlv_epi32(qhz, sh);
            u[c] = _mm512_or_si512(u[c], _mm512_and_si512(h, b4));
        }
    }
    for (size_t i = 0; i < r; i++) {
        const __m512 f = _mm512_mul_ps(dscb, bcast8(_mm256_loadu_ps(qx.d + i * nb + b0)));
        acc[i] = _mm512_mask3_fnmadd_ps(dmvb, bcast8(_mm256_loadu_ps(qx.xs + i * nb + b0)), acc[i], 0xFF00);
        for (int c = 0; c < 4; c++) {
            __m512i xq = _mm512_loadu_si512((const void *)(qx.q + i * K + (b0 + 2 * (size_t)c) * SM_QK));
            __m512 p = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), u[c], xq));
            acc[i] = _mm512_fmadd_ps(p, pair_lanes(f, c), acc[i]);
        }
    }
}

static AI void ksuper6_z(size_t r, __m512 *acc, sm_qx qx, size_t K, const void *row, size_t sb) {
    const size_t nb = K / SM_QK, b0 = sb * 8;
    const sm_block_q6_k *x = (const sm_block_q6_k *)row + sb;
    const __m512 d = _mm512_set1_ps(f16(x->d));
    const __m128i sc = _mm_loadu_si128((const __m128i *)x->scales);
    __m512i u[4];
    __m512 lanes[4];
    for (int c = 0; c < 4; c++) {
        u[c] = pair_u(q6_block(x, 2 * c), q6_block(x, 2 * c + 1));
        lanes[c] = _mm512_cvtepi32_ps(pair_sc(sc, c));
    }
    for (size_t i = 0; i < r; i++) {
        const __m512 f = _mm512_mul_ps(d, bcast8(_mm256_loadu_ps(qx.d + i * nb + b0)));
        for (int c = 0; c < 4; c++) {
            const size_t b = b0 + 2 * (size_t)c;
            __m512i xq = _mm512_loadu_si512((const void *)(qx.q + i * K + b * SM_QK));
            __m512i z = _mm512_slli_epi32(_mm512_loadu_si512((const void *)(qx.s + (i * nb + b) * (SM_QK / 4))), 5);
            __m512 p = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_dpbusd_epi32(z, u[c], xq)), lanes[c]);
            acc[i] = _mm512_fmadd_ps(p, pair_lanes(f, c), acc[i]);
        }
    }
}

/* The levels of a q2_k / q3_k super-block's blocks 2c and 2c + 1 (k23_levels) in one register's
   halves: a block j's are bits 2 (j % 4) of the 32 bytes qs + 32 (j / 4), q3_k's third bit bit
   4 (j / 4) + j % 4 of hmask's 32 bytes (hm: in both halves), rotated to bit 2 (in its byte).
   Against pair_u of two k23_levels, bench_gemv 2 threads on Zen 5, one token row: q3_k 26.3 -> 29.3
   GB/s, q2_k 21.1 -> 21.9; 16 rows: q3_k 144 -> 198 GFLOPS. */
static AI __m512i k23_pair(sm_dtype dt, const uint8_t *qs, __m512i hm, int c) {
    const int h = c / 2, k = 2 * (c % 2);
    const __m512i v = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(const void *)(qs + 32 * h)));
    __m512i u = _mm512_and_si512(_mm512_srlv_epi32(v, _mm512_inserti64x4(_mm512_set1_epi32(2 * k), _mm256_set1_epi32(2 * k + 2), 1)),
                                 _mm512_set1_epi8(3));
    if (dt == SM_DTYPE_Q3_K) {
        const int s0 = 4 * h + k - 2, s1 = s0 + 1; /* right rotations (mod 32) to bit 2 */
        const __m512i rot = _mm512_inserti64x4(_mm512_set1_epi32(s0 & 31), _mm256_set1_epi32(s1 & 31), 1);
        u = _mm512_or_si512(u, _mm512_and_si512(_mm512_rorv_epi32(hm, rot), _mm512_set1_epi8(4)));
    }
    return u;
}

/* ssuper on 512-bit registers: a block pair's levels, lane scales and sums in one register each;
   a lane's sum times its sub-block scale in integers, which is exact, so every lane's f32 values
   and operations are ssuper's (bit for bit krow's sums); q2_k's mins are kmins', as ssuper's. */
static AI void ssuper_z(sm_dtype dt, size_t r, __m512 *acc, __m256 *accm, sm_qx qx, size_t K, const void *row,
                        size_t sb) {
    const size_t nb = K / SM_QK, b0 = sb * 8;
    __m128i sc, mn;
    float ds, dm;
    const uint8_t *hmask, *qs = k23_super(dt, row, sb, &sc, &mn, &ds, &dm, &hmask);
    const __m512 d = _mm512_set1_ps(ds);
    const __m512i hm = dt == SM_DTYPE_Q3_K ? _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(const void *)hmask))
                                           : _mm512_setzero_si512();
    __m512i u[4], lanes[4];
    for (int c = 0; c < 4; c++) u[c] = k23_pair(dt, qs, hm, c), lanes[c] = pair_sc(sc, c);
    for (size_t i = 0; i < r; i++) {
        const __m512 f = _mm512_mul_ps(d, bcast8(_mm256_loadu_ps(qx.d + i * nb + b0)));
        for (int c = 0; c < 4; c++) {
            const size_t b = b0 + 2 * (size_t)c;
            __m512i xq = _mm512_loadu_si512((const void *)(qx.q + i * K + b * SM_QK)), z = _mm512_setzero_si512();
            if (dt == SM_DTYPE_Q3_K) /* zero point 4: 4 times minus each lane's sum */
                z = _mm512_slli_epi32(_mm512_loadu_si512((const void *)(qx.s + (i * nb + b) * (SM_QK / 4))), 2);
            __m512 p = _mm512_cvtepi32_ps(_mm512_mullo_epi32(_mm512_dpbusd_epi32(z, u[c], xq), lanes[c]));
            acc[i] = _mm512_fmadd_ps(p, pair_lanes(f, c), acc[i]);
        }
    }
    if (dt == SM_DTYPE_Q2_K) kmins(r, accm, qx, K, mn, dm, sb);
}

/* The high half of a row's accumulator (the odd blocks' sums), and the two halves joined. */
static AI __m256 hi_f(__m512 a) {
    return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1));
}
static AI __m512 join_f(__m256 lo, __m256 hi) {
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(lo)), _mm256_castps_pd(hi), 1));
}

/* krow's sum of a row's two accumulators (low and high half), q2_k's mins m (if not NULL) added last. */
static AI float sum_z(__m512 a, const __m256 *m) {
    __m256 s = _mm256_add_ps(_mm512_castps512_ps256(a), hi_f(a));
    return hsum(m ? _mm256_add_ps(s, *m) : s);
}

static AI void krow_z(sm_dtype dt, size_t r, float *restrict out, size_t N, sm_qx qx, size_t K,
                      const void *restrict row, float bias) {
    __m512 acc[SM_QX_ROWS];
    __m256 accm[SM_QX_ROWS];
    for (size_t i = 0; i < r; i++) acc[i] = _mm512_setzero_ps();
    for (size_t i = 0; dt == SM_DTYPE_Q2_K && i < r; i++) accm[i] = _mm256_setzero_ps();
    for (size_t sb = 0; sb < K / SM_QK_K; sb++) {
        if (skt(dt))
            ssuper_z(dt, r, acc, accm, qx, K, row, sb);
        else if (dt == SM_DTYPE_Q6_K)
            ksuper6_z(r, acc, qx, K, row, sb);
        else
            ksuper45_z(dt, r, acc, qx, K, row, sb);
    }
    for (size_t i = 0; i < r; i++) out[i * N] = sum_z(acc[i], dt == SM_DTYPE_Q2_K ? &accm[i] : NULL) + bias;
}

/* The levels of blocks p and p + bs of a q4_1 / q5_0 / q5_1 row (small_levels) in one register's
   halves: the two blocks' 16 bytes of nibbles each in two 64-bit lanes, the second shifted by 4;
   q5's fifth bits (qh, bit k for weight k) a mask of the 64 bytes, 16 where set. */
static AI __m512i small_pair(sm_dtype dt, const char *p, size_t bs) {
    const size_t qs = small_qs(dt);
    const __m256i b = _mm256_loadu2_m128i((const __m128i *)(const void *)(p + bs + qs), (const __m128i *)(const void *)(p + qs));
    const __m512i v = _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 1, 0, 1, 2, 3, 2, 3), _mm512_castsi256_si512(b));
    __m512i u = _mm512_and_si512(_mm512_srlv_epi64(v, _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4)), _mm512_set1_epi8(15));
    if (dt != SM_DTYPE_Q4_1) {
        uint32_t h0, h1;
        memcpy(&h0, p + qs - 4, 4), memcpy(&h1, p + bs + qs - 4, 4);
        u = _mm512_or_si512(u, _mm512_maskz_mov_epi8((__mmask64)h0 | (__mmask64)h1 << 32, _mm512_set1_epi8(16)));
    }
    return u;
}

/* qgroup of eight q4_1 / q5_0 / q5_1 blocks on 512-bit registers (a block pair a register, acc[i]'s
   low half qgroup's a0[i], its high half a1[i], the zero point off the high half alone): each lane
   meets qgroup's operations in qgroup's order, so bit for bit qrow's sums. */
static AI void qgroup_z(sm_dtype dt, size_t r, __m512 *acc, sm_qx qx, size_t K, const void *row, size_t b0) {
    const size_t nb = K / SM_QK, bs = sbytes(dt);
    const char *base = (const char *)row + b0 * bs;
    const __m256 dw = halves(base, bs, 8);
    const __m512 dzb = bcast8(group_dz(dt, base, bs, 8, dw));
    __m512i u[4];
    for (int c = 0; c < 4; c++) u[c] = small_pair(dt, base + 2 * (size_t)c * bs, bs);
    for (size_t i = 0; i < r; i++) {
        const __m512 f = bcast8(_mm256_mul_ps(dw, _mm256_loadu_ps(qx.d + i * nb + b0)));
        acc[i] = _mm512_mask3_fnmadd_ps(dzb, bcast8(_mm256_loadu_ps(qx.xs + i * nb + b0)), acc[i], 0xFF00);
        for (int c = 0; c < 4; c++) {
            __m512i xq = _mm512_loadu_si512((const void *)(qx.q + i * K + (b0 + 2 * (size_t)c) * SM_QK));
            __m512 p = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), u[c], xq));
            acc[i] = _mm512_fmadd_ps(p, pair_lanes(f, c), acc[i]);
        }
    }
}

/* qrow of q4_1 / q5_0 / q5_1 with qgroup_z, all r rows at once; a group of fewer than eight blocks
   at a row's end takes qgroup on the halves. On Zen 5 (bench_gemv 2 threads, one token row, the
   1.1B ffn shape) q5_0 34 -> 44 GB/s, q4_1 34 -> 41, q5_1 33 -> 42; krow4's four weight rows side
   by side on it measured slower (q5_0 39 -> 29), so decoding's one row takes it alone. */
static AI void qrow_z(sm_dtype dt, size_t r, float *restrict out, size_t N, sm_qx qx, size_t K,
                      const void *restrict row, float bias) {
    const size_t nb = K / SM_QK;
    __m512 acc[SM_QX_ROWS];
    for (size_t i = 0; i < r; i++) acc[i] = _mm512_setzero_ps();
    size_t b = 0;
    for (; b + 8 <= nb; b += 8) qgroup_z(dt, r, acc, qx, K, row, b);
    if (b < nb) {
        __m256 a0[SM_QX_ROWS], a1[SM_QX_ROWS];
        for (size_t i = 0; i < r; i++) a0[i] = _mm512_castps512_ps256(acc[i]), a1[i] = hi_f(acc[i]);
        qgroup(dt, r, a0, a1, qx, K, row, b, nb - b);
        for (size_t i = 0; i < r; i++) acc[i] = join_f(a0[i], a1[i]);
    }
    for (size_t i = 0; i < r; i++) out[i * N] = sum_z(acc[i], NULL) + bias;
}

/* One token row's accumulators for krow4: krow_z's on AVX512-VNNI, krow's otherwise. */
typedef __m512 kacc;
static AI kacc kacc_zero(void) { return _mm512_setzero_ps(); }
static AI float kacc_sum(kacc a) { return sum_z(a, NULL); }
static AI void kacc_super(sm_dtype dt, kacc *a, sm_qx qx, size_t K, const void *row, size_t sb) {
    if (dt == SM_DTYPE_Q6_K)
        ksuper6_z(1, a, qx, K, row, sb);
    else
        ksuper45_z(dt, 1, a, qx, K, row, sb);
}
#else
typedef struct { __m256 v[1][2]; } kacc;
static AI kacc kacc_zero(void) { return (kacc){{{_mm256_setzero_ps(), _mm256_setzero_ps()}}}; }
static AI float kacc_sum(kacc a) { return hsum(_mm256_add_ps(a.v[0][0], a.v[0][1])); }
static AI void kacc_super(sm_dtype dt, kacc *a, sm_qx qx, size_t K, const void *row, size_t sb) {
    if (dt == SM_DTYPE_Q6_K)
        ksuper6(1, a->v, qx, K, row, sb);
    else
        ksuper45(dt, 1, a->v, qx, K, row, sb);
}
#endif

/*
** The rows are one stream; each row asks for the stream ROW_AHEAD bytes on
** (into L2) as it starts. On a 2-vCPU Emerald Rapids (bench_gemv, 2
** threads, one token row, share of the read probe) the hardware's
** prefetchers alone kept q4_k / q5_k / q6_k at 41-46% and q4_0 / q8_0 as
** stored at 38-56%; asking 4 KB ahead, 55-65% and 50-80% (2 KB: 54-59%,
** 8 KB: as 4 KB). Two neighbouring rows in turn (two chains of sums) read
** as one: still one stream, the wait is memory's (krow4 below).
*/
enum { ROW_AHEAD = 4096 };

/*
** One token row of a k type: four weight rows q apart (one from each
** quarter of the thread's rows), their super-blocks in turn, each row's
** sums krow's (kacc: krow_z's on AVX512-VNNI), so four streams are read side by side,
** each asking for the lines of its super-block K_AHEAD bytes on. On a
** 2-vCPU Emerald Rapids (bench_gemv, 2 threads, share of the read probe)
** one row after another (one stream) read 55-65% with ROW_AHEAD, the
** super-blocks' lines asked for one by one 64-70%, four streams 67-83%
** (1 KB ahead as 2 KB, but q6_k's rows of 6 KB at 58-59% against 67%).
** Asking for every line a super-block spans (q6_k's 210 bytes and q5_k's
** 176 can span five and four, which three asks at 0, 64 and the last byte
** left one short of): q6_k 67-75% -> 80-87%, q5_k 72-75% -> 73-80%, q4_k
** the same (74-84%).
*/
enum { K_AHEAD = 2048 };
/* Every line of the n bytes at p into L2 (the last byte's too: a span can end in one more line). */
static AI void ask_span(const char *p, size_t n) {
    for (size_t o = 0; o < n; o += 64) _mm_prefetch(p + o, _MM_HINT_T1);
    _mm_prefetch(p + n - 1, _MM_HINT_T1);
}

static AI void krow4(sm_dtype dt, float *restrict out, sm_qx qx, size_t K, const void *restrict row,
                     size_t qb, size_t q, const float *restrict bias) {
    const size_t sbb = sm_dtype_row_bytes(dt, SM_QK_K);
    kacc acc[4];
    for (size_t j = 0; j < 4; j++) acc[j] = kacc_zero();
    for (size_t sb = 0; sb < K / SM_QK_K; sb++)
        for (size_t j = 0; j < 4; j++) {
            const char *rj = (const char *)row + j * qb;
            ask_span(rj + sb * sbb + K_AHEAD, sbb);
            kacc_super(dt, &acc[j], qx, K, rj, sb);
        }
    for (size_t j = 0; j < 4; j++) out[j * q] = kacc_sum(acc[j]) + (bias ? bias[j * q] : 0.0f);
}

/*
** One token row of a 32-weight-block type as stored (q8_0, q4_0, iq4_nl;
** q4_1, q5_0, q5_1 but on AVX512-VNNI, whose qrow_z takes them): four weight rows q
** apart, eight blocks of each in turn (qgroup, each row's own accumulators:
** the sums and their order are qrow's), so four streams are read side by
** side, each asking for its group's lines K_AHEAD bytes on. On a 2-vCPU
** Zen 1 (bench_gemv --kernels avx2 --types q8_0 2, share of the read probe)
** q8_0, which the vpmaddubsw flavour leaves unrepacked, went from one stream's
** 47-48% to 82-86% at K 768-3072 (47 -> 49-54% at K 288); q5_0 33-40% -> 41-43%.
*/
static AI void qrow4(sm_dtype dt, float *restrict out, sm_qx qx, size_t K, const void *restrict row,
                     size_t qb, size_t q, const float *restrict bias) {
    const size_t nb = K / SM_QK, gb = sm_dtype_row_bytes(dt, 8 * SM_QK);
    __m256 a0[4][1], a1[4][1];
    for (size_t j = 0; j < 4; j++) a0[j][0] = a1[j][0] = _mm256_setzero_ps();
    size_t b = 0;
    for (; b + 8 <= nb; b += 8)
        for (size_t j = 0; j < 4; j++) {
            const char *rj = (const char *)row + j * qb;
            ask_span(rj + b / 8 * gb + K_AHEAD, gb);
            qgroup(dt, 1, a0[j], a1[j], qx, K, rj, b, 8);
        }
    if (b < nb)
        for (size_t j = 0; j < 4; j++) qgroup(dt, 1, a0[j], a1[j], qx, K, (const char *)row + j * qb, b, nb - b);
    for (size_t j = 0; j < 4; j++) out[j * q] = hsum(_mm256_add_ps(a0[j][0], a1[j][0])) + (bias ? bias[j * q] : 0.0f);
}

/* The 32-weight block types row_dt hands to AVX512-VNNI's qrow_z (all token rows at once). */
static AI bool zrow(sm_dtype dt) {
    return SM_QFLAVOUR == 2 && (dt == SM_DTYPE_Q4_1 || dt == SM_DTYPE_Q5_0 || dt == SM_DTYPE_Q5_1);
}

/* qx from its token row i0 on. */
static AI sm_qx qx_from(sm_qx qx, size_t i0, size_t K) {
    return (sm_qx){qx.q + i0 * K, qx.d + i0 * (K / SM_QK), qx.s + i0 * (K / 4), qx.xs + i0 * (K / SM_QK),
                   qx.h + i0 * (K / 16)};
}

/*
** One weight row against r token rows: the 256-bit products take them 8
** at a time, each count a constant (their 2 accumulators a row fill 16
** registers), krow_z all at once (one register a row).
*/
static AI void row_dt(sm_dtype dt, size_t r, float *restrict out, size_t N, sm_qx qx, size_t K,
                      const void *restrict row, float b) {
    const bool q = q32(dt);
#if SM_QFLAVOUR == 2
    if (!q) { /* the k types */
        krow_z(dt, r, out, N, qx, K, row, b);
        return;
    }
    if (zrow(dt)) {
        qrow_z(dt, r, out, N, qx, K, row, b);
        return;
    }
#endif
    for (size_t i0 = 0; i0 < r; i0 += 8) {
        const sm_qx qi = qx_from(qx, i0, K);
        float *o = out + i0 * N;
        switch (r - i0) { /* a constant count for each */
#define ROWS(n) if (q) qrow(dt, n, o, N, qi, K, row, b); else krow(dt, n, o, N, qi, K, row, b); break
        case 1: ROWS(1);
        case 2: ROWS(2);
        case 3: ROWS(3);
        case 4: ROWS(4);
        case 5: ROWS(5);
        case 6: ROWS(6);
        case 7: ROWS(7);
        default: ROWS(8);
#undef ROWS
        }
    }
}

static AI void gemv_dt(sm_dtype dt, float *restrict out, sm_qx qx, size_t r,
                       const void *restrict w, const float *restrict bias, size_t N, size_t K,
                       size_t n0, size_t n1) {
    const size_t rb = sm_dtype_row_bytes(dt, K);
    /* one token row as four streams: q4_k, q5_k, q6_k (q2_k, q3_k: no faster; slower with ssuper_z)
       and the 32-weight block types but iq4_xs and those qrow_z takes */
    const bool q = q32(dt);
    if (r == 1 && (q ? dt != SM_DTYPE_IQ4_XS && !zrow(dt) : !skt(dt))) {
        const size_t qn = (n1 - n0) / 4;
        for (size_t n = n0; n < n0 + qn; n++) {
            const void *row = sm_kernels_elem(w, dt, n * K);
            if (q)
                qrow4(dt, out + n, qx, K, row, qn * rb, qn, bias ? bias + n : NULL);
            else
                krow4(dt, out + n, qx, K, row, qn * rb, qn, bias ? bias + n : NULL);
        }
        n0 += 4 * qn;
    }
    for (size_t n = n0; n < n1; n++) {
        const void *row = sm_kernels_elem(w, dt, n * K);
        for (size_t o = 0; o < rb; o += 64) _mm_prefetch((const char *)row + ROW_AHEAD + o, _MM_HINT_T1);
        float b = bias ? bias[n] : 0.0f;
        if (r == 1) /* a constant: decoding's one row its own code */
            row_dt(dt, 1, out + n, N, qx, K, row, b);
        else
            row_dt(dt, r, out + n, N, qx, K, row, b);
    }
}

static void gemv(float *restrict out, sm_qx qx, size_t r, const void *restrict w, sm_dtype dt,
                 const float *restrict bias, size_t N, size_t K, size_t n0, size_t n1) {
    switch (dt) {
    case SM_DTYPE_Q4_1: gemv_dt(SM_DTYPE_Q4_1, out, qx, r, w, bias, N, K, n0, n1); break;
    case SM_DTYPE_Q5_0: gemv_dt(SM_DTYPE_Q5_0, out, qx, r, w, bias, N, K, n0, n1); break;
    case SM_DTYPE_Q5_1: gemv_dt(SM_DTYPE_Q5_1, out, qx, r, w, bias, N, K, n0, n1); break;
    case SM_DTYPE_IQ4_NL: gemv_dt(SM_DTYPE_IQ4_NL, out, qx, r, w, bias, N, K, n0, n1); break;
    case SM_DTYPE_IQ4_XS: gemv_dt(SM_DTYPE_IQ4_XS, out, qx, r, w, bias, N, K, n0, n1); break;
    case SM_DTYPE_Q2_K: gemv_dt(SM_DTYPE_Q2_K, out, qx, r, w, bias, N, K, n0, n1); break;
    case SM_DTYPE_Q3_K: gemv_dt(SM_DTYPE_Q3_K, out, qx, r, w, bias, N, K, n0, n1); break;
    case SM_DTYPE_Q8_0: gemv_dt(SM_DTYPE_Q8_0, out, qx, r, w, bias, N, K, n0, n1); break;
    case SM_DTYPE_Q4_0: gemv_dt(SM_DTYPE_Q4_0, out, qx, r, w, bias, N, K, n0, n1); break;
    case SM_DTYPE_Q4_K: gemv_dt(SM_DTYPE_Q4_K, out, qx, r, w, bias, N, K, n0, n1); break;
    case SM_DTYPE_Q5_K: gemv_dt(SM_DTYPE_Q5_K, out, qx, r, w, bias, N, K, n0, n1); break;
    case SM_DTYPE_Q6_K: gemv_dt(SM_DTYPE_Q6_K, out, qx, r, w, bias, N, K, n0, n1); break;
    default: break; /* no other type reaches a quantized product */
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
    if (dt == SM_DTYPE_Q4_1 || dt == SM_DTYPE_Q5_0 || dt == SM_DTYPE_Q5_1 || dt == SM_DTYPE_Q2_K ||
        dt == SM_DTYPE_Q3_K || dt == SM_DTYPE_IQ4_NL || dt == SM_DTYPE_IQ4_XS) {
        dequant_small(out, src, dt, n);
        return;
    }
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

/* The packed product takes q8_0, iq4_nl / iq4_xs and q3_k (bytes up to 255 made unsigned; q3_k's
   levels times their 16 weights' scale) only with vpdpbusd (avx2_qgemm.c); q2_k's levels times
   their scale (0..45) in every flavour, its two mins a block apart (mode Q2). */
const sm_qkernel QSYM = {QNAME, quant_x, gemv, dequant, QGEMM,
                         1u << SM_DTYPE_Q4_0 | 1u << SM_DTYPE_Q4_K | 1u << SM_DTYPE_Q5_K |
                             1u << SM_DTYPE_Q6_K | 1u << SM_DTYPE_Q4_1 | 1u << SM_DTYPE_Q5_0 |
                             1u << SM_DTYPE_Q5_1 | 1u << SM_DTYPE_Q2_K |
                             (SM_QFLAVOUR ? 1u << SM_DTYPE_Q8_0 | 1u << SM_DTYPE_IQ4_NL | 1u << SM_DTYPE_IQ4_XS |
                                              1u << SM_DTYPE_Q3_K
                                        : 0u),
                         QPEAK, QGEMM_R32, XQUANT_R32};

#endif
