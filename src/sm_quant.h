/*
** sm_quant.h -- block-quantized weights: GGUF's block layouts, plain C.
**
** A quantized row is a run of blocks; each block holds SM_QK (32) or, for
** the k types, SM_QK_K (256) weights as small integers with f16 scales:
**   q8_0  34 bytes: d, then 32 int8 q;            w[i] = d * q[i]
**   q4_0  18 bytes: d, then 16 bytes of nibbles;  byte j holds weight j in
**         its low nibble and weight j + 16 in its high nibble, w = d * (q - 8)
**   q4_k  144 bytes: d, dmin, 12 bytes of 6-bit scales sc[8] and mins m[8]
**         (sm_quant_k4_scales), 128 bytes of nibbles. Sub-block j of 32
**         weights: w = d sc[j] q - dmin m[j], q in 0..15; bytes 32c..32c+31
**         hold sub-block 2c in their low nibbles, 2c + 1 in their high ones
**   q5_k  176 bytes: as q4_k, with qh[32] before the nibbles: bit j of
**         qh[l] is the fifth bit (16) of weight l of sub-block j
**   q6_k  210 bytes: ql[128] (low 4 bits), qh[64] (high 2 bits), int8
**         sc[16], d last. Sub-block j of 16 weights: w = d sc[j] (q - 32),
**         q in 0..63; each 128 weights take 64 bytes of ql and 32 of qh:
**         weight 32 k + l (k < 4, l < 32) has low bits ql[l + 32 (k & 1)]
**         (low nibble for k < 2, else high) and bits 2k, 2k + 1 of qh[l]
**   q4_1  20 bytes: d, m, 16 bytes of nibbles as q4_0's; w = d q + m
**   q5_0  22 bytes: d, qh (32 bits, little-endian), nibbles as q4_0's; bit
**         j of qh is weight j's fifth bit (16); w = d (q - 16)
**   q5_1  24 bytes: d, m, qh, nibbles: q5_0's levels, w = d q + m
**   iq4_nl 18 bytes: d, nibbles as q4_0's; w = d SM_IQ4NL[q]: 16 levels
**         spaced more closely near zero
**   iq4_xs 136 bytes: d, scales_h (16 bits), scales_l[4], qs[128]: eight
**         iq4_nl blocks under one d. Block j's 6-bit scale ls (sm_quant_iq4xs_scale)
**         has its low 4 bits in nibble j % 2 of scales_l[j / 2], its top 2 at
**         bits 2j, 2j + 1 of scales_h; its nibbles are qs[16 j ..], as iq4_nl's;
**         w = d (ls - 32) SM_IQ4NL[q]
**   q2_k  84 bytes: sc[16] (a 4-bit scale, the 4-bit min above it), qs[64],
**         d, dmin. Sub-block j of 16: w = d (sc[j] & 15) q - dmin (sc[j] >> 4)
**   q3_k  110 bytes: hmask[32], qs[64], 12 bytes of 6-bit scales
**         (sm_quant_k3_scales), d. Sub-block j of 16: w = d (sc[j] - 32) (q - 4),
**         q in 0..7: its third bit from hmask
**         In both, weight 32 k + l of each 128 (k < 4, l < 32) has its two
**         low bits at bits 2k, 2k + 1 of qs[l + 32 h] (h: which 128), q3_k's
**         third at bit 4h + k of hmask[l]; its sub-block is 8h + 2k + l / 16
** (docs/model-format.md). These are the reference conversions the kernels
** are tested against, and the quantizer `convert --dtype` uses.
*/
#ifndef SM_QUANT_H
#define SM_QUANT_H

#include "sm_base.h"
#include "sm_dtype.h"

#include <stddef.h>
#include <stdint.h>

#define SM_QK 32
#define SM_QK_K 256

typedef struct {
    uint16_t d;
    int8_t qs[SM_QK];
} sm_block_q8_0;

typedef struct {
    uint16_t d;
    uint8_t qs[SM_QK / 2];
} sm_block_q4_0;

typedef struct {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qs[SM_QK_K / 2];
} sm_block_q4_k;

typedef struct {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qh[SM_QK_K / 8];
    uint8_t qs[SM_QK_K / 2];
} sm_block_q5_k;

typedef struct {
    uint8_t ql[SM_QK_K / 2];
    uint8_t qh[SM_QK_K / 4];
    int8_t scales[SM_QK_K / 16];
    uint16_t d;
} sm_block_q6_k;

typedef struct {
    uint16_t d, m;
    uint8_t qs[SM_QK / 2];
} sm_block_q4_1;

/* iq4_nl's levels (GGUF's table): a nibble q stands for SM_IQ4NL[q]. */
static const int8_t SM_IQ4NL[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

typedef struct {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[SM_QK / 2];
} sm_block_q5_0;

typedef struct {
    uint16_t d, m;
    uint8_t qh[4];
    uint8_t qs[SM_QK / 2];
} sm_block_q5_1;

typedef struct {
    uint8_t scales[SM_QK_K / 16];
    uint8_t qs[SM_QK_K / 4];
    uint16_t d, dmin;
} sm_block_q2_k;

typedef struct {
    uint8_t hmask[SM_QK_K / 8];
    uint8_t qs[SM_QK_K / 4];
    uint8_t scales[12];
    uint16_t d;
} sm_block_q3_k;

typedef struct {
    uint16_t d, scales_h;
    uint8_t scales_l[SM_QK_K / 64];
    uint8_t qs[SM_QK_K / 2];
} sm_block_iq4_xs;

_Static_assert(sizeof(sm_block_iq4_xs) == 136, "iq4_xs block is 136 bytes");
_Static_assert(sizeof(sm_block_q4_1) == 20, "q4_1 block is 20 bytes");
_Static_assert(sizeof(sm_block_q5_0) == 22, "q5_0 block is 22 bytes");
_Static_assert(sizeof(sm_block_q5_1) == 24, "q5_1 block is 24 bytes");
_Static_assert(sizeof(sm_block_q2_k) == 84, "q2_k block is 84 bytes");
_Static_assert(sizeof(sm_block_q3_k) == 110, "q3_k block is 110 bytes");
_Static_assert(sizeof(sm_block_q8_0) == 34, "q8_0 block is 34 bytes");
_Static_assert(sizeof(sm_block_q4_0) == 18, "q4_0 block is 18 bytes");
_Static_assert(sizeof(sm_block_q4_k) == 144, "q4_k block is 144 bytes");
_Static_assert(sizeof(sm_block_q5_k) == 176, "q5_k block is 176 bytes");
_Static_assert(sizeof(sm_block_q6_k) == 210, "q6_k block is 210 bytes");

/*
** The 6-bit scales sc[8] and mins m[8] of a q4_k / q5_k block from its 12
** bytes: for j < 4, sc[j] and m[j] are the low 6 bits of bytes j and j + 4;
** for j >= 4, the low 4 bits come from byte j + 4 (sc: its low nibble, m:
** its high one) and the top 2 from the top bits of bytes j - 4 (sc) and j (m).
*/
static inline void sm_quant_k4_scales(const uint8_t s[12], uint8_t sc[8], uint8_t m[8]) {
    for (int j = 0; j < 4; j++) {
        sc[j] = s[j] & 63;
        m[j] = s[j + 4] & 63;
        sc[j + 4] = (uint8_t)((s[j + 8] & 15) | ((s[j] >> 6) << 4));
        m[j + 4] = (uint8_t)((s[j + 8] >> 4) | ((s[j + 4] >> 6) << 4));
    }
}

/* The inverse: 12 bytes from sc[8], m[8] (each < 64). */
static inline void sm_quant_k4_pack(uint8_t s[12], const uint8_t sc[8], const uint8_t m[8]) {
    for (int j = 0; j < 4; j++) {
        s[j] = (uint8_t)((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
        s[j + 4] = (uint8_t)((m[j] & 63) | ((m[j + 4] >> 4) << 6));
        s[j + 8] = (uint8_t)((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
    }
}

/*
** The 16 6-bit scales of a q3_k block (as stored, 0..63; the scale is less
** 32) from its 12 bytes: scale j's low 4 bits are byte j's low nibble (j <
** 8) or byte j - 8's high one, its top 2 bits bits 2 (j / 4), + 1 of byte
** 8 + j % 4.
*/
static inline void sm_quant_k3_scales(const uint8_t s[12], uint8_t sc[16]) {
    for (int j = 0; j < 16; j++)
        sc[j] = (uint8_t)((j < 8 ? (s[j] & 15) : (s[j - 8] >> 4)) | (((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4));
}

/* The inverse: 12 bytes from sc[16] (each < 64). */
static inline void sm_quant_k3_pack(uint8_t s[12], const uint8_t sc[16]) {
    for (int j = 0; j < 12; j++) s[j] = 0;
    for (int j = 0; j < 16; j++) {
        s[j % 8] |= (uint8_t)((sc[j] & 15) << (j < 8 ? 0 : 4));
        s[8 + j % 4] |= (uint8_t)((sc[j] >> 4) << 2 * (j / 4));
    }
}

/* Block j's (< 8) 6-bit scale of an iq4_xs super-block (0..63; the scale is less 32). */
static inline int sm_quant_iq4xs_scale(const sm_block_iq4_xs *x, int j) {
    return (x->scales_l[j / 2] >> 4 * (j % 2) & 15) | (x->scales_h >> 2 * j & 3) << 4;
}

/*
** Block b (of 32 weights; the k types' super-blocks are 8 such blocks) of
** the quantized row at row as w[j] = D ws[j] - M[j / 16] with integers ws:
** q8_0 q, q4_0 q - 8, q5_0 q - 16, iq4_nl SM_IQ4NL[q] (D = d, M = 0), iq4_xs SM_IQ4NL[q]
** (D = d (ls - 32), exact, M = 0); q4_1, q5_1 q (D = d, M =
** -m); q4_k / q5_k sc q (D = d, M = dmin m of its sub-block); q6_k sc (q -
** 32), q3_k (sc - 32) (q - 4) (D = d, M = 0); q2_k sc q (D = d, M = dmin m
** of each half's sub-block: the only type whose two halves' M differ).
** Every D ws[j] is exact in f32 (at most 24 significant bits), so a weight
** is rounded once.
*/
void sm_quant_block_ints(int ws[SM_QK], const void *row, sm_dtype dt, size_t b, float *D,
                         float M[2]);

/* out (n) = the n weights at src (type dt, n a multiple of its block) as f32: D ws - M (llama.cpp's
** dequantization's bits). */
void sm_quant_dequant(float *restrict out, const void *restrict src, sm_dtype dt, size_t n);

/*
** dst = src (n floats, a multiple of dt's block) quantized to dt, block by
** block, each block's scales chosen to minimise the block's squared error
** by a search (see quant.c). Returns n / block, or the first block that
** cannot be quantized (a NaN or infinite weight, or weights too large for
** an f16 scale); dst is then incomplete.
*/
size_t sm_quant_quantize(void *restrict dst, const float *restrict src, sm_dtype dt, size_t n);

/*
** The first block (of n weights at src) with a NaN or infinite scale (d, or
** dmin, or q4_1 / q5_1's m), or n / block if none: a quantized tensor's only non-finite values.
*/
size_t sm_quant_first_bad(const void *src, sm_dtype dt, size_t n);

#endif
