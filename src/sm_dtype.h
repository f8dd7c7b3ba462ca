/*
** sm_dtype.h -- the element types of tensors, in one place: the enum and
** each type's facts (name, elements per block, bytes per block). How a type
** becomes f32 or is quantized is sm_half.h (f16, bf16) and sm_quant.h (the
** block types); which kernel multiplies it is the kernel table's business.
*/
#ifndef SM_DTYPE_H
#define SM_DTYPE_H

#include "sm_base.h"

/*
** Element types of weight tensors (little-endian on disk). The q types are
** GGUF's block formats, byte for byte (sm_quant.h): a row is whole blocks.
*/
typedef enum {
    SM_DTYPE_F32 = 0,
    SM_DTYPE_F16,
    SM_DTYPE_BF16,
    SM_DTYPE_Q8_0,
    SM_DTYPE_Q4_0,
    SM_DTYPE_Q4_K,
    SM_DTYPE_Q5_K,
    SM_DTYPE_Q6_K,
    SM_DTYPE_Q4_1, /* GGUF's older and smaller types: read and multiplied as they are, */
    SM_DTYPE_Q5_0, /* never repacked (iq4_nl and iq4_xs are, under AVX512-VNNI) */
    SM_DTYPE_Q5_1,
    SM_DTYPE_Q2_K,
    SM_DTYPE_Q3_K,
    SM_DTYPE_IQ4_NL,
    SM_DTYPE_IQ4_XS,
    SM_DTYPE_COUNT, /* the file types end here: never a tensor's type */
    /*
    ** Layouts the kernels make at load (sm_kernels_repack), never in a file:
    ** the same blocks with 32 rows' levels interleaved four bytes at a time
    ** (sm_kernels.h), their bytes the base type's; or panels of f32 weights.
    ** Each is quantized where its base type is.
    */
    SM_DTYPE_Q8_0_R32,
    SM_DTYPE_Q4_0_R32,
    SM_DTYPE_Q6_K_R32, /* q6_k's 32 rows a group, blocks as q4_0_r32's low nibbles, the top
                          two bits in planes, the int8 scales as bytes: the file's 210 bytes
                          per 256 weights */
    SM_DTYPE_Q4_K_R32, /* q4_k's 32 rows a group, blocks as q4_0_r32's levels with the rows'
                          6-bit scales and mins as bytes: 148 bytes per 256 weights, not 144 */
    SM_DTYPE_Q5_K_R32, /* q5_k the same, the levels' fifth bits after each block's nibbles:
                          180 bytes per 256 weights, not 176 */
    SM_DTYPE_F32_P32,  /* f32 as the packed product's panels: 32 rows' weights side by side,
                          column after column (sm_kernels.h); the file's bytes, rows padded
                          with zeros to a multiple of 32 */
    SM_DTYPE_F16_P32,  /* f16 and bf16 as the same panels, 16-bit: the file's bytes, rows */
    SM_DTYPE_BF16_P32, /* padded with zeros to a multiple of 32 (widened as they are read) */
    SM_DTYPE_IQ4_NL_R32, /* iq4_nl's 32 rows a group as q4_0_r32's (the same block bytes) */
    SM_DTYPE_IQ4_XS_R32, /* iq4_xs's: per super-block its 8 blocks' levels as q4_0_r32's, the
                            rows' block scales ls - 32 as int8 bytes, their f16 d: 138 bytes
                            per 256 weights, not 136 */
    SM_DTYPE_F32_T,    /* f32 weights (N, K) held transposed, as (K, N): weight (n, k) at
                          k N + n; a caller's own matrix (training's weights, activations),
                          never made at load; only a table's matmul takes it */
    SM_DTYPE_LAYOUT_END
} sm_dtype;

/* The file type a layout holds (q8_0 for q8_0_r32); t itself for a file type. */
static inline sm_dtype sm_dtype_base(sm_dtype t) {
    return t == SM_DTYPE_Q8_0_R32   ? SM_DTYPE_Q8_0
           : t == SM_DTYPE_Q4_0_R32 ? SM_DTYPE_Q4_0
           : t == SM_DTYPE_Q6_K_R32 ? SM_DTYPE_Q6_K
           : t == SM_DTYPE_Q4_K_R32 ? SM_DTYPE_Q4_K
           : t == SM_DTYPE_Q5_K_R32 ? SM_DTYPE_Q5_K
           : t == SM_DTYPE_F32_P32  ? SM_DTYPE_F32
           : t == SM_DTYPE_F16_P32  ? SM_DTYPE_F16
           : t == SM_DTYPE_BF16_P32 ? SM_DTYPE_BF16
           : t == SM_DTYPE_IQ4_NL_R32 ? SM_DTYPE_IQ4_NL
           : t == SM_DTYPE_IQ4_XS_R32 ? SM_DTYPE_IQ4_XS
           : t == SM_DTYPE_F32_T    ? SM_DTYPE_F32
                                    : t;
}

/* Whether t is a block-quantized type (or a layout of one). */
static inline bool sm_dtype_quantized(sm_dtype t) {
    t = sm_dtype_base(t);
    return t >= SM_DTYPE_Q8_0 && t < SM_DTYPE_COUNT;
}

/* Elements per block of t: 1 for f32, f16, bf16; 32 for q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl; 256 for
** the k types and iq4_xs
** (a layout: its base type's; its bytes its own: q4_k_r32's 148 a block). */
size_t sm_dtype_block(sm_dtype t);
/* Bytes of n elements of type t (n a multiple of its block). */
size_t sm_dtype_row_bytes(sm_dtype t, size_t n);
const char *sm_dtype_name(sm_dtype t);
/* The dtype named name ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q5_k", "q6_k", "q4_1",
** "q5_0", "q5_1", "q2_k", "q3_k", "iq4_nl", "iq4_xs"),
** or SM_DTYPE_COUNT. */
sm_dtype sm_dtype_parse(const char *name);

#endif
