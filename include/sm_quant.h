/*
** sm_quant.h -- block-quantized weights: GGUF's block layouts, plain C.
**
** A quantized row is a run of blocks; each block holds SM_QK weights (the q
** types of this header) as small integers and an f16 scale d:
**   q8_0  34 bytes: d, then 32 int8 q;            w[i] = d * q[i]
**   q4_0  18 bytes: d, then 16 bytes of nibbles;  byte j holds weight j in
**         its low nibble and weight j + 16 in its high nibble, w = d * (q - 8)
** (docs/model-format.md). These are the reference conversions the kernels
** are tested against, and the quantizer `convert --dtype` uses.
*/
#ifndef SM_QUANT_H
#define SM_QUANT_H

#include "sm_base.h"

#include <stddef.h>
#include <stdint.h>

#define SM_QK 32

typedef struct {
    uint16_t d;
    int8_t qs[SM_QK];
} sm_block_q8_0;

typedef struct {
    uint16_t d;
    uint8_t qs[SM_QK / 2];
} sm_block_q4_0;

_Static_assert(sizeof(sm_block_q8_0) == 34, "q8_0 block is 34 bytes");
_Static_assert(sizeof(sm_block_q4_0) == 18, "q4_0 block is 18 bytes");

/* out (n) = the n weights at src (type dt, n a multiple of its block) as f32. */
void sm_quant_dequant(float *restrict out, const void *restrict src, sm_dtype dt, size_t n);

/*
** dst = src (n floats, a multiple of SM_QK) quantized to dt, block by block,
** each block's scale chosen to minimise the block's squared error over a
** set of candidates (see quant.c). Returns n / SM_QK, or the first block
** that cannot be quantized (a NaN or infinite weight, or weights too large
** for an f16 scale); dst is then incomplete.
*/
size_t sm_quant_quantize(void *restrict dst, const float *restrict src, sm_dtype dt, size_t n);

/*
** The first block (of n weights at src) whose scale is NaN or infinite, or
** n / block if none: a quantized tensor's only non-finite values.
*/
size_t sm_quant_first_bad(const void *src, sm_dtype dt, size_t n);

#endif
