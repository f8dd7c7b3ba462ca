/*
** avx2_qsmall.h -- the super-block step of q2_k and q3_k's row-streaming
** products (ssuper, which avx2_quant.c's krow takes, and k23_super, the
** scales that krow_z's ssuper_z reads as well; krow4's four weight rows side
** by side measured slower for them),
** and the dequantization of GGUF's older and smaller types (q4_1, q5_0,
** q5_1, iq4_nl, iq4_xs, q2_k, q3_k), in each flavour of avx2_quant.c (which
** includes this file once, inside its own build). The 32-weight types' products are
** avx2_quant.c's qgroup (one scale a block, as q4_0 / q8_0); prefill takes
** the packed integer product for them (avx2_qpack.h; iq4_nl and q3_k only
** with vpdpbusd).
**
** q2_k and q3_k scale each 16 weights on their own, as q6_k does: each
** block's levels go in unsigned (q2_k's 0..3, q3_k's 0..7), the product's
** lanes (4 weights each) times a lane vector of the sub-block scales, then
** d d_x in f32; q3_k's zero point 4 from each lane's start (4 times minus
** its 4 activations' sum, sm_qx.s), q2_k's mins as dmin d_x times each
** block's sum of its two mins times their 16 activations' sums (sm_qx.h;
** kmins: one multiply-add of 16-bit pairs, a conversion and an FMA for a
** super-block's eight blocks). A lane's sum times its scale is taken in
** integers (vpmulld: exact, below 2^17, so the f32 values are what a float
** multiply gave), and q2_k's mins are summed in accumulators of their own,
** added to the others' last: one row's products were a chain of two FMAs a
** block (on Zen 5, bench_gemv 2 threads, one token row, q2_k 11-12 -> 18-22
** GB/s with krow_z's 512-bit step). Every flavour takes the same
** f32 operations, so the k types' sums are the same bits in each. Rows of
** one weight row's product take the same steps whatever r is, so a row's
** result does not depend on its neighbours.
*/
#ifndef SM_AVX2_QSMALL_H
#define SM_AVX2_QSMALL_H

/* Super-block sb of a q2_k / q3_k row: its 16 sub-block scales sc (q3_k's less 32) and q2_k's mins
   mn (zeros for q3_k) as bytes, d, dmin (0 for q3_k), q3_k's third bits hmask (NULL for q2_k);
   returns its 2-bit levels. */
static AI const uint8_t *k23_super(sm_dtype dt, const void *row, size_t sb, __m128i *scp, __m128i *mnp,
                                   float *d, float *dmin, const uint8_t **hmask) {
    __m128i sc, mn = _mm_setzero_si128();
    if (dt == SM_DTYPE_Q2_K) {
        const sm_block_q2_k *x2 = (const sm_block_q2_k *)row + sb;
        const __m128i v = _mm_loadu_si128((const __m128i *)x2->scales), m4 = _mm_set1_epi8(15);
        sc = _mm_and_si128(v, m4), mn = _mm_and_si128(_mm_srli_epi16(v, 4), m4);
        *scp = sc, *mnp = mn, *d = f16(x2->d), *dmin = f16(x2->dmin), *hmask = NULL;
        return x2->qs;
    } else { /* sm_quant_k3_scales in 32-bit words (no bytes through memory: see k4_scales) */
        const sm_block_q3_k *x3 = (const sm_block_q3_k *)row + sb;
        uint32_t u0, u1, u2;
        memcpy(&u0, x3->scales, 4), memcpy(&u1, x3->scales + 4, 4), memcpy(&u2, x3->scales + 8, 4);
        const uint32_t lo = 0x0f0f0f0fu, hi = 0x03030303u;
        sc = _mm_set_epi32((int)(((u1 >> 4) & lo) | ((u2 >> 6 & hi) << 4)), (int)(((u0 >> 4) & lo) | ((u2 >> 4 & hi) << 4)),
                           (int)((u1 & lo) | ((u2 >> 2 & hi) << 4)), (int)((u0 & lo) | ((u2 & hi) << 4)));
        sc = _mm_sub_epi8(sc, _mm_set1_epi8(32));
        *scp = sc, *mnp = mn, *d = f16(x3->d), *dmin = 0.0f, *hmask = x3->hmask;
        return x3->qs;
    }
}

/* q2_k's mins of super-block sb (16 as bytes mn, dmin) against x row i < r into accm[i], lane j block
   b0 + j: its two 16 weights' mins times their activations' minus-sums (sm_qx.h) summed in integers
   (vpmaddwd, exact), then dmin d_x. In every flavour (ssuper, ssuper_z): the same bits. */
static AI void kmins(size_t r, __m256 *accm, sm_qx qx, size_t K, __m128i mn, float dmin, size_t sb) {
    const __m256i m = _mm256_cvtepu8_epi16(mn);
    const __m256 dm = _mm256_set1_ps(dmin);
    for (size_t i = 0; i < r; i++) {
        const __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)(qx.h + i * (K / 16) + 16 * sb));
        const __m256 dx = _mm256_loadu_ps(qx.d + i * (K / SM_QK) + 8 * sb);
        accm[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(m, h)), _mm256_mul_ps(dm, dx), accm[i]);
    }
}

/* Super-block sb of a q2_k / q3_k row against x rows i < r, into acc[i][2] (even, odd blocks); q2_k's
   mins into accm[i] (a chain of sums of their own: krow adds them last). */
static AI void ssuper(sm_dtype dt, size_t r, __m256 (*acc)[2], __m256 *accm, sm_qx qx, size_t K,
                      const void *row, size_t sb) {
    const size_t nb = K / SM_QK, b0 = sb * 8;
    __m128i sc, mn;
    float ds, dm;
    const uint8_t *hmask, *qs = k23_super(dt, row, sb, &sc, &mn, &ds, &dm, &hmask);
    const __m256 d = _mm256_set1_ps(ds);
    float f[SM_QX_ROWS][8];
    for (size_t i = 0; i < r; i++) _mm256_storeu_ps(f[i], _mm256_mul_ps(d, _mm256_loadu_ps(qx.d + i * nb + b0)));
    for (int j = 0; j < 8; j++) {
        const __m256i u = k23_levels(dt, qs, hmask, j);
        const __m256i lanes = q6_lanes_i(sc, j);
        for (size_t i = 0; i < r; i++) {
            const size_t b = b0 + (size_t)j;
            __m256i xq = _mm256_loadu_si256((const __m256i *)(qx.q + i * K + b * SM_QK)), z = _mm256_setzero_si256();
            if (dt == SM_DTYPE_Q3_K) /* zero point 4: 4 times minus each lane's sum */
                z = _mm256_slli_epi32(_mm256_loadu_si256((const __m256i *)(qx.s + (i * nb + b) * (SM_QK / 4))), 2);
            __m256 p = _mm256_cvtepi32_ps(_mm256_mullo_epi32(dot_u8s8(z, u, xq), lanes));
            acc[i][j & 1] = _mm256_fmadd_ps(p, _mm256_broadcast_ss(&f[i][j]), acc[i][j & 1]);
        }
    }
    if (dt == SM_DTYPE_Q2_K) kmins(r, accm, qx, K, mn, dm, sb);
}

/* out (8) = D * ws - M: the C reference's two roundings (sm_quant_dequant), ws exact. */
static AI void store8(float *out, __m256 ws, __m256 D, __m256 M) {
    _mm256_storeu_ps(out, _mm256_sub_ps(_mm256_mul_ps(D, ws), M));
}

/* The low 8 bytes of v, signed, as f32 lanes. */
static AI __m256 bytes8(__m128i v) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v));
}

/* out (32) = D * w - M for a block's 32 signed levels w (store8 on each 8). */
static AI void store32(float *out, __m256i w, __m256 D, __m256 M) {
    const __m128i lo = _mm256_castsi256_si128(w), hi = _mm256_extracti128_si256(w, 1);
    const __m128i part[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
    for (int c = 0; c < 4; c++) store8(out + 8 * c, bytes8(part[c]), D, M);
}

/*
** dequant for these types, bit for bit sm_quant_dequant: each block's integers ws as f32
** (exact), times D, less M. The k types' ws = sc level is formed as a product of two exact f32
** values, + 0 turning its -0 into the integer's +0.
*/
static void dequant_small(float *restrict out, const void *restrict src, sm_dtype dt, size_t n) {
    if (skt(dt)) {
        for (size_t sb = 0; sb < n / SM_QK_K; sb++) {
            const sm_block_q2_k *x2 = (const sm_block_q2_k *)src + sb;
            const sm_block_q3_k *x3 = (const sm_block_q3_k *)src + sb;
            const uint8_t *qs = dt == SM_DTYPE_Q2_K ? x2->qs : x3->qs;
            uint8_t sc3[16];
            if (dt == SM_DTYPE_Q3_K) sm_quant_k3_scales(x3->scales, sc3);
            const __m256 D = _mm256_set1_ps(f16(dt == SM_DTYPE_Q2_K ? x2->d : x3->d));
            const float dmin = dt == SM_DTYPE_Q2_K ? f16(x2->dmin) : 0.0f;
            for (int j = 0; j < 8; j++) {
                __m256i u = k23_levels(dt, qs, x3->hmask, j);
                if (dt == SM_DTYPE_Q3_K) u = _mm256_sub_epi8(u, _mm256_set1_epi8(4));
                const __m128i lo = _mm256_castsi256_si128(u), hi = _mm256_extracti128_si256(u, 1);
                const __m128i part[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
                for (int c = 0; c < 4; c++) {
                    const int s = 2 * j + c / 2; /* the sub-block of these 8 weights */
                    const float sc = dt == SM_DTYPE_Q2_K ? (float)(x2->scales[s] & 15) : (float)(sc3[s] - 32);
                    const float M = dt == SM_DTYPE_Q2_K ? dmin * (float)(x2->scales[s] >> 4) : 0.0f;
                    const __m256 ws = _mm256_add_ps(_mm256_mul_ps(bytes8(part[c]), _mm256_set1_ps(sc)), _mm256_setzero_ps());
                    store8(out + 256 * sb + 32 * j + 8 * c, ws, D, _mm256_set1_ps(M));
                }
            }
        }
        return;
    }
    if (dt == SM_DTYPE_IQ4_XS) {
        for (size_t sb = 0; sb < n / SM_QK_K; sb++) {
            const sm_block_iq4_xs *x = (const sm_block_iq4_xs *)src + sb;
            float D[8];
            _mm256_storeu_ps(D, iq4xs_scales(x));
            for (int j = 0; j < 8; j++, out += SM_QK)
                store32(out, iq4_levels(x->qs + 16 * j), _mm256_set1_ps(D[j]), _mm256_setzero_ps());
        }
        return;
    }
    const size_t bs = sbytes(dt);
    for (size_t b = 0; b < n / SM_QK; b++, out += SM_QK) {
        const char *p = (const char *)src + b * bs;
        const bool off = dt == SM_DTYPE_Q4_1 || dt == SM_DTYPE_Q5_1; /* else M is +0, as the C's */
        uint16_t dh, mh = 0;
        memcpy(&dh, p, 2);
        if (off) memcpy(&mh, p + 2, 2); /* m */
        const __m256 D = _mm256_set1_ps(f16(dh)), M = _mm256_set1_ps(off ? -f16(mh) : 0.0f);
        __m256i w = dt == SM_DTYPE_IQ4_NL ? iq4_levels(p + 2) : small_levels(dt, p); /* q4_1 / q5: 0..31 */
        if (dt == SM_DTYPE_Q5_0) w = _mm256_sub_epi8(w, _mm256_set1_epi8(16));
        store32(out, w, D, M);
    }
}

#endif
