/*
** avx2_qpack.h -- the packed quantized product's panels made from a
** weight matrix's file rows (pack: each row unpacked to levels and its
** blocks' D and M, then interleaved four bytes at a time; q4_0 straight
** into the layout on AVX512-VNNI). Part of avx2_qgemm.c, included once
** after its vector types and panel sizes (GNR, GBS, GBS_Q2, KB); split out along
** that seam to keep the file short.
*/
#ifndef SM_AVX2_QPACK_H
#define SM_AVX2_QPACK_H

/* A block's 32 signed levels q as base + s0 q (its first 16 weights) and base + s1 q (the other
   16: each half's sub-block scale) in 16 bits, then as unsigned bytes (q2_k's and q3_k's u). */
static AI __m256i scaled_halves(__m256i q, int s0, int s1, int base) {
    const __m256i b = _mm256_set1_epi16((short)base);
    const __m256i lo = _mm256_add_epi16(b, _mm256_mullo_epi16(_mm256_cvtepi8_epi16(_mm256_castsi256_si128(q)),
                                                              _mm256_set1_epi16((short)s0)));
    const __m256i hi = _mm256_add_epi16(b, _mm256_mullo_epi16(_mm256_cvtepi8_epi16(_mm256_extracti128_si256(q, 1)),
                                                              _mm256_set1_epi16((short)s1)));
    return _mm256_permute4x64_epi64(_mm256_packus_epi16(lo, hi), 0xd8);
}

/*
** nbk blocks of one weight row from `row` (its block or super-block at the
** slice's start) as unsigned levels (dst, in weight order) and each block's
** D and M (q2_k: M, M2 its halves' mins).
*/
static void unpack_row(uint8_t *restrict dst, float *restrict D, float *restrict M, float *restrict M2,
                       const void *restrict row, sm_dtype dt, size_t nbk) {
    if (dt == SM_DTYPE_Q6_K) {
        for (size_t sb = 0; sb < nbk / 8; sb++) {
            const sm_block_q6_k *x = (const sm_block_q6_k *)row + sb;
            float d = f16(x->d);
            for (int j = 0; j < 8; j++) {
                _mm256_storeu_si256((__m256i *)(dst + SM_QK_K * sb + SM_QK * j), q6_block(x, j));
                D[8 * sb + (size_t)j] = d * (float)x->scales[2 * j];
                M[8 * sb + (size_t)j] = d * (float)x->scales[2 * j + 1];
            }
        }
        return;
    }
    if (dt == SM_DTYPE_Q4_0 || dt == SM_DTYPE_Q8_0) {
        for (size_t b = 0; b < nbk; b++) {
            __m256i u;
            float d;
            if (dt == SM_DTYPE_Q4_0) {
                const sm_block_q4_0 *x = (const sm_block_q4_0 *)row + b;
                u = q4_bytes(x), d = f16(x->d), M[b] = 8.0f * d;
            } else {
                const sm_block_q8_0 *x = (const sm_block_q8_0 *)row + b;
                u = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)x->qs), _mm256_set1_epi8((char)0x80));
                d = f16(x->d), M[b] = 128.0f * d;
            }
            D[b] = d;
            _mm256_storeu_si256((__m256i *)(dst + SM_QK * b), u);
        }
        return;
    }
    if (dt == SM_DTYPE_Q4_1 || dt == SM_DTYPE_Q5_0 || dt == SM_DTYPE_Q5_1 || dt == SM_DTYPE_IQ4_NL) {
        /* w = D u - M: q4_1 / q5_1 M = -m, q5_0 16 d; iq4_nl's table made unsigned as q8_0's bytes */
        const size_t bs = sbytes(dt);
        for (size_t b = 0; b < nbk; b++) {
            const char *p = (const char *)row + b * bs;
            uint16_t dh, mh = 0;
            memcpy(&dh, p, 2);
            if (dt == SM_DTYPE_Q4_1 || dt == SM_DTYPE_Q5_1) memcpy(&mh, p + 2, 2);
            const float d = f16(dh);
            __m256i u;
            if (dt == SM_DTYPE_IQ4_NL)
                u = iq4_levels_u(p + 2), M[b] = 128.0f * d;
            else
                u = small_levels(dt, p), M[b] = dt == SM_DTYPE_Q5_0 ? 16.0f * d : -f16(mh);
            D[b] = d;
            _mm256_storeu_si256((__m256i *)(dst + SM_QK * b), u);
        }
        return;
    }
    if (dt == SM_DTYPE_IQ4_XS) { /* as iq4_nl's, D = d (ls - 32) */
        for (size_t sb = 0; sb < nbk / 8; sb++) {
            const sm_block_iq4_xs *x = (const sm_block_iq4_xs *)row + sb;
            const __m256 d = iq4xs_scales(x);
            _mm256_storeu_ps(D + 8 * sb, d);
            _mm256_storeu_ps(M + 8 * sb, _mm256_mul_ps(d, _mm256_set1_ps(128.0f)));
            for (int j = 0; j < 8; j++)
                _mm256_storeu_si256((__m256i *)(dst + SM_QK_K * sb + SM_QK * (size_t)j), iq4_levels_u(x->qs + 16 * j));
        }
        return;
    }
    if (dt == SM_DTYPE_Q2_K) { /* u = sc q in 0..45 (sc 4 bits), D = d; each half's min dmin m: M, M2 */
        for (size_t sb = 0; sb < nbk / 8; sb++) {
            const sm_block_q2_k *x = (const sm_block_q2_k *)row + sb;
            const float d = f16(x->d), dmin = f16(x->dmin);
            for (int j = 0; j < 8; j++) {
                const uint8_t s0 = x->scales[2 * j], s1 = x->scales[2 * j + 1];
                const __m256i u = scaled_halves(k23_levels(dt, x->qs, NULL, j), s0 & 15, s1 & 15, 0);
                _mm256_storeu_si256((__m256i *)(dst + SM_QK_K * sb + SM_QK * (size_t)j), u);
                D[8 * sb + (size_t)j] = d;
                M[8 * sb + (size_t)j] = dmin * (float)(s0 >> 4), M2[8 * sb + (size_t)j] = dmin * (float)(s1 >> 4);
            }
        }
        return;
    }
    if (dt == SM_DTYPE_Q3_K) { /* v = (sc - 32) q in -124..128 (q -4..3) as u = 128 - v: D = -d, M = -128 d */
        for (size_t sb = 0; sb < nbk / 8; sb++) {
            const sm_block_q3_k *x = (const sm_block_q3_k *)row + sb;
            uint8_t sc[16];
            sm_quant_k3_scales(x->scales, sc);
            const float d = f16(x->d);
            for (int j = 0; j < 8; j++) {
                const __m256i q = _mm256_sub_epi8(k23_levels(dt, x->qs, x->hmask, j), _mm256_set1_epi8(4));
                const __m256i u = scaled_halves(q, 32 - sc[2 * j], 32 - sc[2 * j + 1], 128); /* 128 - v */
                _mm256_storeu_si256((__m256i *)(dst + SM_QK_K * sb + SM_QK * (size_t)j), u);
                D[8 * sb + (size_t)j] = -d, M[8 * sb + (size_t)j] = -128.0f * d;
            }
        }
        return;
    }
    for (size_t sb = 0; sb < nbk / 8; sb++) {
        __m256i qh;
        __m256 dsc, dm;
        const uint8_t *qs = k45_super(dt, row, sb, &qh, &dsc, &dm);
        _mm256_storeu_ps(D + 8 * sb, dsc);
        _mm256_storeu_ps(M + 8 * sb, dm);
        for (int c = 0; c < 4; c++) {
            __m256i lo, hi;
            k45_pair(dt, qs, qh, c, &lo, &hi);
            _mm256_storeu_si256((__m256i *)(dst + SM_QK_K * sb + 64 * c), lo);
            _mm256_storeu_si256((__m256i *)(dst + SM_QK_K * sb + 64 * c + 32), hi);
        }
    }
}

/* r[i] (8 int32 each) transposed: r[g] gets element g of every r[i]. */
static AI void transpose8(__m256i r[8]) {
    __m256i a[8], b[8];
    for (int i = 0; i < 8; i += 2) {
        a[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
        a[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        b[i] = _mm256_unpacklo_epi64(a[i], a[i + 2]);
        b[i + 1] = _mm256_unpackhi_epi64(a[i], a[i + 2]);
        b[i + 2] = _mm256_unpacklo_epi64(a[i + 1], a[i + 3]);
        b[i + 3] = _mm256_unpackhi_epi64(a[i + 1], a[i + 3]);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2x128_si256(b[i], b[i + 4], 0x20);
        r[i + 4] = _mm256_permute2x128_si256(b[i], b[i + 4], 0x31);
    }
}

#if SM_QFLAVOUR == 2
/*
** A q4_0 panel of GNR whole rows written straight in the interleaved layout
** (no pass through `rows`): per block, 16 rows at a time, each row's 16
** bytes of nibbles in a 128-bit lane, the four-byte groups of the 16 rows
** brought together by two-source permutes (groups 4-7 are the high
** nibbles of 0-3), and their scales widened 16 at a time. The same bytes
** and floats as unpack_row and pack give. (q8_0's rows, 32 bytes a block,
** gain nothing from it on Zen 5: they take the general path.)
*/
static void pack_q4_0(uint8_t *restrict panel, const void *restrict w, size_t K, size_t n, size_t k0,
                      size_t nbk) {
    const size_t bsz = sizeof(sm_block_q4_0), stride = K / SM_QK * bsz;
    const uint8_t *base = (const uint8_t *)w + n * stride + k0 / SM_QK * bsz;
    const __m512i m4 = _mm512_set1_epi8(15);
    for (size_t b = 0; b < nbk; b++) {
        uint8_t *pb = panel + b * GBS;
        float *pd = (float *)(void *)(pb + 32 * GNR);
        for (size_t h = 0; h < GNR; h += 16) {
            const uint8_t *x = base + h * stride + b * bsz; /* row h's block: d, then the nibbles */
            __m512i r4[4];
            for (size_t q = 0; q < 4; q++) {
                const uint8_t *xr = x + 4 * q * stride + 2;
                __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(const void *)xr));
                v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(const void *)(xr + stride)), 1);
                v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(const void *)(xr + 2 * stride)), 2);
                r4[q] = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(const void *)(xr + 3 * stride)), 3);
            }
            for (int g = 0; g < 4; g++) {
                const __m512i idx = _mm512_setr_epi32(g, 4 + g, 8 + g, 12 + g, 16 + g, 20 + g, 24 + g, 28 + g,
                                                      g, 4 + g, 8 + g, 12 + g, 16 + g, 20 + g, 24 + g, 28 + g);
                __m512i lo = _mm512_permutex2var_epi32(r4[0], idx, r4[1]); /* rows 0-7 */
                __m512i hi = _mm512_permutex2var_epi32(r4[2], idx, r4[3]); /* rows 8-15 */
                __m512i all = _mm512_inserti64x4(lo, _mm512_castsi512_si256(hi), 1);
                _mm512_storeu_si512((void *)(pb + 4 * ((size_t)g * GNR + h)), _mm512_and_si512(all, m4));
                _mm512_storeu_si512((void *)(pb + 4 * ((size_t)(g + 4) * GNR + h)),
                                    _mm512_and_si512(_mm512_srli_epi32(all, 4), m4));
            }
            uint16_t d16[16]; /* (a gather of them is slower on Zen 5) */
            for (size_t j = 0; j < 16; j++) memcpy(&d16[j], x + j * stride, 2);
            __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)d16));
            _mm512_storeu_ps(pd + h, d);
            _mm512_storeu_ps(pd + GNR + h, _mm512_mul_ps(d, _mm512_set1_ps(8.0f)));
        }
    }
}
#endif

/*
** The panel of rows n..n+nr-1 (nr <= GNR; the rest zero) over nbk blocks
** from column k0: rows unpacked into `rows` (GNR x SM_QGEMM_KC) and dm, then
** interleaved by 8 x 8 transposes of four-byte groups.
*/
static void pack(uint8_t *restrict panel, uint8_t *restrict rows, float *restrict dm,
                 const void *restrict w, sm_dtype dt, size_t K, size_t n, size_t nr, size_t k0,
                 size_t nbk) {
#if SM_QFLAVOUR == 2
    if (nr == GNR && dt == SM_DTYPE_Q4_0) {
        pack_q4_0(panel, w, K, n, k0, nbk);
        return;
    }
#endif
    float *D = dm, *M = dm + GNR * KB, *M2 = dm + 2 * GNR * KB;
    for (size_t j = 0; j < GNR; j++) {
        if (j < nr) {
            unpack_row(rows + j * SM_QGEMM_KC, D + j * KB, M + j * KB, M2 + j * KB,
                       sm_kernels_elem(w, dt, (n + j) * K + k0), dt, nbk);
        } else {
            memset(rows + j * SM_QGEMM_KC, 0, nbk * SM_QK);
            for (size_t b = 0; b < nbk; b++) D[j * KB + b] = M[j * KB + b] = M2[j * KB + b] = 0.0f;
        }
    }
    for (size_t b = 0; b < nbk; b++) {
        uint8_t *pb = panel + b * gbs(dt == SM_DTYPE_Q2_K);
        for (size_t j8 = 0; j8 < GNR; j8 += 8) {
            __m256i r[8];
            for (int i = 0; i < 8; i++)
                r[i] = _mm256_loadu_si256((const __m256i *)(rows + (j8 + (size_t)i) * SM_QGEMM_KC + SM_QK * b));
            transpose8(r);
            for (int g = 0; g < 8; g++) _mm256_storeu_si256((__m256i *)(pb + 4 * ((size_t)g * GNR + j8)), r[g]);
        }
        float *pd = (float *)(void *)(pb + 32 * GNR);
        for (size_t j = 0; j < GNR; j++) pd[j] = D[j * KB + b], pd[GNR + j] = M[j * KB + b];
        for (size_t j = 0; dt == SM_DTYPE_Q2_K && j < GNR; j++) pd[2 * GNR + j] = M2[j * KB + b];
    }
}

#endif
