/*
** The plain-C reference (sm_quant_dequant) on hand-made blocks of every
** block type, each weight worked out by hand from the layout that
** docs/model-format.md describes (so a layout misread the same way in the
** reference and in NumPy's scripts/sm_quant.py still fails here).
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sm_half.h"
#include "sm_kernels.h"
#include "kernels/kernels_internal.h"
#include "sm_quant.h"
#include "test.h"

void test_quant_blocks(void) {
    unsigned char blk[256] = {0};
    float got[256];
    uint16_t half = sm_f32_to_f16(0.5f), quarter = sm_f32_to_f16(0.25f);
    /* q8_0: w = d q */
    memcpy(blk, &half, 2);
    blk[2] = 0x83; /* -125 */
    sm_quant_dequant(got, blk, SM_DTYPE_Q8_0, 32);
    CHECKF(got[0] == -62.5f && got[1] == 0.0f, "q8_0 reference: %g %g", got[0], got[1]);
    /* q4_0: w = d (q - 8); byte 0 holds weights 0 (low) and 16 (high) */
    blk[2] = 0x2F;
    sm_quant_dequant(got, blk, SM_DTYPE_Q4_0, 32);
    CHECKF(got[0] == 3.5f && got[16] == -3.0f && got[1] == -4.0f, "q4_0 reference: %g %g %g",
           got[0], got[16], got[1]);
    /* q4_k: d 0.5, dmin 0.25; sc[0] 3, m[0] 2 (bytes 0, 4), sc[1] 5, m[1] 1; sc[5] 33 = 1 + 2 * 16
    ** (byte 9's low nibble 1, byte 1's top bits 2), m[5] 18 = 2 + 16 (byte 9's high nibble 2, byte
    ** 5's top bits 1); qs[0] 0x2F: weight 0 level 15, weight 32 level 2; qs[64] 0x70: weight 160
    ** (sub-block 5, high nibbles of bytes 64..95) level 7 */
    memset(blk, 0, sizeof blk);
    memcpy(blk, &half, 2), memcpy(blk + 2, &quarter, 2);
    blk[4] = 3, blk[8] = 2, blk[5] = 5 | 2 << 6, blk[9] = 1 | 1 << 6, blk[13] = 1 | 2 << 4;
    blk[16] = 0x2F, blk[16 + 64] = 0x70;
    sm_quant_dequant(got, blk, SM_DTYPE_Q4_K, 256);
    CHECKF(got[0] == 22.0f && got[32] == 4.75f && got[1] == -0.5f && got[160] == 0.5f * 33 * 7 - 0.25f * 18,
           "q4_k reference: %g %g %g %g", got[0], got[32], got[1], got[160]);
    /* q5_k: the same scales; qh[0] bit 1 adds 16 to weight 32 (sub-block 1, weight 0) */
    memmove(blk + 48, blk + 16, 128), memset(blk + 16, 0, 32);
    blk[16] = 2;
    sm_quant_dequant(got, blk, SM_DTYPE_Q5_K, 256);
    CHECKF(got[0] == 22.0f && got[32] == 0.5f * 5 * 18 - 0.25f, "q5_k reference: %g %g", got[0],
           got[32]);
    /* q6_k: d 0.5 at byte 208, sc[0] -2, sc[9] 3 (weights 144..159); ql[0] 0x31 and qh[0] 0x09
    ** (bits 0-1: 1, bits 2-3: 2): weight 0 level 1 + 16 = 17, weight 64 (ql[0] high nibble, qh
    ** bits 4-5: 0) level 3; ql[16 + 64] = 5 and qh[16 + 32] = 3: weight 144 level 5 + 48 = 53 */
    memset(blk, 0, sizeof blk);
    memcpy(blk + 208, &half, 2);
    blk[192] = (unsigned char)-2, blk[192 + 9] = 3;
    blk[0] = 0x31, blk[128] = 0x09, blk[16 + 64] = 5, blk[128 + 32 + 16] = 3;
    sm_quant_dequant(got, blk, SM_DTYPE_Q6_K, 256);
    CHECKF(got[0] == 0.5f * -2 * (17 - 32) && got[64] == 0.5f * 0 * (3 - 32) + 0.0f &&
           got[144] == 0.5f * 3 * (53 - 32) && got[1] == 0.5f * -2 * -32,
           "q6_k reference: %g %g %g %g", got[0], got[64], got[144], got[1]);
    /* q4_1: d 0.5, m 0.25, w = d q + m; qs[0] 0x2F: weight 0 level 15, weight 16 level 2 */
    memset(blk, 0, sizeof blk);
    memcpy(blk, &half, 2), memcpy(blk + 2, &quarter, 2);
    blk[4] = 0x2F;
    sm_quant_dequant(got, blk, SM_DTYPE_Q4_1, 32);
    CHECKF(got[0] == 7.75f && got[16] == 1.25f && got[1] == 0.25f, "q4_1 reference: %g %g %g", got[0], got[16],
           got[1]);
    /* q5_0: d 0.5, qh (bytes 2-5) bits 0 and 17, qs (from byte 6) [0] 0x2F: weight 0 level 31,
       weight 16 level 2, weight 17 level 16, weight 1 level 0; w = d (q - 16) */
    memset(blk, 0, sizeof blk);
    memcpy(blk, &half, 2);
    blk[2] = 0x01, blk[4] = 0x02, blk[6] = 0x2F;
    sm_quant_dequant(got, blk, SM_DTYPE_Q5_0, 32);
    CHECKF(got[0] == 7.5f && got[16] == -7.0f && got[17] == 0.0f && got[1] == -8.0f,
           "q5_0 reference: %g %g %g %g", got[0], got[16], got[17], got[1]);
    /* q5_1: d 0.5, m 0.25, qh (bytes 4-7) bit 0, qs from byte 8: weight 0 level 31 */
    memset(blk, 0, sizeof blk);
    memcpy(blk, &half, 2), memcpy(blk + 2, &quarter, 2);
    blk[4] = 0x01, blk[8] = 0x0F;
    sm_quant_dequant(got, blk, SM_DTYPE_Q5_1, 32);
    CHECKF(got[0] == 15.75f && got[16] == 0.25f, "q5_1 reference: %g %g", got[0], got[16]);
    /* q2_k: scales at 0 (low nibble the scale, high the min), qs at 16, d 0.5 at 80, dmin 0.25 at
       82. sub-block 0 (3, 2): weight 0 level 3 (qs[0] bits 0-1); weight 48 (k 1, l 16: sub-block
       3 (5, 1)) level 2 (qs[16] bits 2-3); weight 192 (h 1, k 2, l 0: sub-block 12 (7, 3)) level 1
       (qs[32] bits 4-5) */
    memset(blk, 0, sizeof blk);
    memcpy(blk + 80, &half, 2), memcpy(blk + 82, &quarter, 2);
    blk[0] = 3 | 2 << 4, blk[3] = 5 | 1 << 4, blk[12] = 7 | 3 << 4;
    blk[16] = 3, blk[16 + 16] = 2 << 2, blk[16 + 32] = 1 << 4;
    sm_quant_dequant(got, blk, SM_DTYPE_Q2_K, 256);
    CHECKF(got[0] == 4.0f && got[1] == -0.5f && got[48] == 4.75f && got[192] == 2.75f && got[193] == -0.75f,
           "q2_k reference: %g %g %g %g %g", got[0], got[1], got[48], got[192], got[193]);
    /* q3_k: hmask at 0, qs at 32, scales at 96, d 0.5 at 108. Scale 0 stored 35 (3: byte 96's low
       nibble 3, byte 104's bits 0-1 2), scale 13 stored 20 (-12: byte 101's high nibble 4, byte
       105's bits 6-7 1), the rest 0 (-32). Weight 0: qs bits 2, hmask[0] bit 0 set: level 6;
       weight 1: level 0; weight 208 (h 1, k 2, l 16: sub-block 13): qs[48] bits 4-5 3, hmask[16]
       bit 6 clear: level 3; weight 32 (sub-block 2): level 0. w = d (sc - 32) (q - 4) */
    memset(blk, 0, sizeof blk);
    memcpy(blk + 108, &half, 2);
    blk[96] = 3, blk[104] = 2, blk[101] = 4 << 4, blk[105] = 1 << 6;
    blk[0] = 1, blk[32] = 2, blk[32 + 48] = 3 << 4;
    sm_quant_dequant(got, blk, SM_DTYPE_Q3_K, 256);
    CHECKF(got[0] == 3.0f && got[1] == -6.0f && got[208] == 6.0f && got[32] == 64.0f,
           "q3_k reference: %g %g %g %g", got[0], got[1], got[208], got[32]);
    /* iq4_nl: d 0.5, q4_0's nibbles looked up in GGUF's table; qs[0] 0x2F: weight 0 level 15
       (113), weight 16 level 2 (-83), weight 1 level 0 (-127) */
    memset(blk, 0, sizeof blk);
    memcpy(blk, &half, 2);
    blk[2] = 0x2F;
    sm_quant_dequant(got, blk, SM_DTYPE_IQ4_NL, 32);
    CHECKF(got[0] == 56.5f && got[16] == -41.5f && got[1] == -63.5f, "iq4_nl reference: %g %g %g", got[0],
           got[16], got[1]);
    /* iq4_xs: d 0.5, scales_h at 2, scales_l at 4, qs at 8. Block 0's scale 35 (3: scales_l[0]'s low
       nibble 3, scales_h bits 0-1 2), block 3's 20 (-12: scales_l[1]'s high nibble 4, scales_h bits
       6-7 1), the rest 0 (-32). qs[0] 0x2F: weight 0 level 15 (113), weight 16 level 2 (-83); qs[48]
       (block 3) 0x08: weight 96 level 8 (1), weight 112 level 0 (-127); weight 32 (block 1) level 0.
       w = d (ls - 32) SM_IQ4NL[q] */
    memset(blk, 0, sizeof blk);
    memcpy(blk, &half, 2);
    blk[2] = 2 | 1 << 6, blk[4] = 3, blk[5] = 4 << 4;
    blk[8] = 0x2F, blk[8 + 48] = 0x08;
    sm_quant_dequant(got, blk, SM_DTYPE_IQ4_XS, 256);
    CHECKF(got[0] == 169.5f && got[16] == -124.5f && got[96] == -6.0f && got[112] == 762.0f && got[32] == 2032.0f,
           "iq4_xs reference: %g %g %g %g %g", got[0], got[16], got[96], got[112], got[32]);
}

/*
** Every level at its type's top (4-bit 15, 5-bit 31, 6-bit 63, q2_k's 3
** under scale 15, q8_0's 127), against activations of one magnitude (so
** each quantizes to +-127): the integer sums a product may hold narrower
** than int32 (the vpmaddubsw flavour adds runs of groups in int16) meet
** their largest values. Every table's packed product, its repacked product
** and a lone row on the repacked rows must still give the scalar table's
** product within rounding.
*/
#define SET_TOP(T, f, v) for (size_t b = 0; b < nblk; b++) memset(((T *)(void *)q)[b].f, v, sizeof((T *)0)->f)
static void top_levels(unsigned char *q, sm_dtype dt, size_t nblk) {
    switch (dt) {
    case SM_DTYPE_Q8_0: SET_TOP(sm_block_q8_0, qs, 127); break;
    case SM_DTYPE_Q4_0: case SM_DTYPE_IQ4_NL: SET_TOP(sm_block_q4_0, qs, 0xff); break; /* iq4_nl: q4_0's layout */
    case SM_DTYPE_Q4_1: SET_TOP(sm_block_q4_1, qs, 0xff); break;
    case SM_DTYPE_Q5_0: SET_TOP(sm_block_q5_0, qs, 0xff); SET_TOP(sm_block_q5_0, qh, 0xff); break;
    case SM_DTYPE_Q5_1: SET_TOP(sm_block_q5_1, qs, 0xff); SET_TOP(sm_block_q5_1, qh, 0xff); break;
    case SM_DTYPE_Q4_K: SET_TOP(sm_block_q4_k, qs, 0xff); break;
    case SM_DTYPE_Q5_K: SET_TOP(sm_block_q5_k, qs, 0xff); SET_TOP(sm_block_q5_k, qh, 0xff); break;
    case SM_DTYPE_Q6_K: SET_TOP(sm_block_q6_k, ql, 0xff); SET_TOP(sm_block_q6_k, qh, 0xff); break;
    case SM_DTYPE_Q3_K: SET_TOP(sm_block_q3_k, qs, 0xff); SET_TOP(sm_block_q3_k, hmask, 0xff); break;
    case SM_DTYPE_IQ4_XS: SET_TOP(sm_block_iq4_xs, qs, 0xff); break;
    case SM_DTYPE_Q2_K:
        SET_TOP(sm_block_q2_k, qs, 0xff);
        for (size_t b = 0; b < nblk; b++)
            for (int j = 0; j < SM_QK_K / 16; j++) ((sm_block_q2_k *)(void *)q)[b].scales[j] |= 15;
        break;
    default: break;
    }
}

void test_quant_top_levels(void) {
    static const sm_dtype dts[] = {SM_DTYPE_Q8_0, SM_DTYPE_Q4_0, SM_DTYPE_Q4_1, SM_DTYPE_Q5_0,
                                   SM_DTYPE_Q5_1, SM_DTYPE_Q4_K, SM_DTYPE_Q5_K, SM_DTYPE_Q6_K,
                                   SM_DTYPE_Q2_K, SM_DTYPE_Q3_K, SM_DTYPE_IQ4_NL, SM_DTYPE_IQ4_XS};
    const sm_kernels *ks[8], *ref = sm_kernels_reference();
    size_t nk = sm_kernels_available(ks, 8), tested = 0;
    unsigned long long s = 77;
    enum { T = 9, N = 40 };
    for (size_t di = 0; di < sizeof dts / sizeof *dts; di++) {
        const sm_dtype dt = dts[di];
        const size_t K = sm_dtype_block(dt) == SM_QK ? 96 : 512, rb = sm_dtype_row_bytes(dt, K);
        const size_t G = (N + SM_R32 - 1) / SM_R32, lb = sm_dtype_row_bytes(sm_kernels_repacked(dt), K);
        float *w = test_rnd(N * K, &s, 1), *x = test_alloc(T * K * sizeof *x), *deq = test_alloc(N * K * sizeof *deq);
        unsigned char *q = test_alloc(N * rb), *r = test_alloc(G * SM_R32 * lb + 64);
        for (size_t n = 0; n < N; n++) sm_quant_quantize(q + n * rb, w + n * K, dt, K);
        top_levels(q, dt, N * K / sm_dtype_block(dt));
        for (size_t n = 0; n < N; n++) sm_quant_dequant(deq + n * K, q + n * rb, dt, K);
        /* rows all +0.5, all -0.5, and the sign turning every 4 and every 16 values */
        for (size_t i = 0; i < T; i++)
            for (size_t k = 0; k < K; k++)
                x[i * K + k] = i % 3 == 0 ? 0.5f : i % 3 == 1 ? -0.5f : (k / (i % 2 ? 4 : 16)) % 2 ? 0.5f : -0.5f;
        float want[T * N], got[T * N];
        double mag[T * N];
        float *scr0 = test_alloc(sm_kernels_scratch(ref, K) * sizeof(float));
        ref->matmul(ref, want, x, q, dt, NULL, T, N, K, 0, N, scr0);
        for (size_t i = 0; i < T; i++)
            for (size_t n = 0; n < N; n++) {
                mag[i * N + n] = 0;
                for (size_t k = 0; k < K; k++) mag[i * N + n] += fabs((double)x[i * K + k] * deq[n * K + k]);
            }
        const bool rep = sm_kernels_repackable(dt, N, K);
        if (rep) sm_kernels_repack(r, q, dt, N, K, 0, G);
        for (size_t ki = 0; ki < nk; ki++) {
            const sm_kernels *k = ks[ki];
            float *scr = test_alloc(sm_kernels_scratch(k, K) * sizeof(float));
            for (int way = 0; way < 3; way++) { /* the packed product, the repacked rows, one repacked row */
                const bool on_r = way > 0 && rep && (sm_kernels_repack_types(k) >> dt & 1u);
                if (way == 0 ? !sm_kernels_qgemm_takes(k->quant, dt, T) : !on_r) continue;
                const size_t t = way == 2 ? 1 : T;
                for (size_t j = 0; j < T * N; j++) got[j] = 12345.0f;
                if (way == 0) k->quant->gemm(got, x, q, dt, NULL, t, N, K, 0, N, scr);
                else k->matmul(k, got, x, r, sm_kernels_repacked(dt), NULL, t, N, K, 0, N, scr);
                tested++;
                size_t bad = 0, at = 0;
                for (size_t j = 0; j < t * N; j++)
                    if (!(fabs(got[j] - want[j]) <= 2e-5 * mag[j] + 1e-6)) bad++, at = j;
                CHECKF(bad == 0, "%s %s, levels at the top, %s: %zu of %zu outputs off (%zu: %g, scalar %g)", k->name,
                       sm_dtype_name(dt), way == 0 ? "packed product" : way == 1 ? "repacked rows" : "one repacked row",
                       bad, t * N, at, got[at], want[at]);
            }
            free(scr);
        }
        free(w), free(x), free(deq), free(q), free(r), free(scr0);
    }
    CHECKF(tested > 0, "no table's product tested");
}
