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
    SM_DTYPE_COUNT
} sm_dtype;

/* Whether t is a block-quantized type. */
static inline bool sm_dtype_quantized(sm_dtype t) {
    return t >= SM_DTYPE_Q8_0 && t < SM_DTYPE_COUNT;
}

/* Elements per block of t: 1 for f32, f16, bf16; 32 for q8_0, q4_0; 256 for the k types. */
size_t sm_dtype_block(sm_dtype t);
/* Bytes of n elements of type t (n a multiple of its block). */
size_t sm_dtype_row_bytes(sm_dtype t, size_t n);
const char *sm_dtype_name(sm_dtype t);
/* The dtype named name ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q5_k", "q6_k"),
** or SM_DTYPE_COUNT. */
sm_dtype sm_dtype_parse(const char *name);

#endif
