/*
** sm_half.h -- IEEE binary16 (f16) and bfloat16 (bf16) conversions, plain C.
**
** Widening to f32 is exact for both formats (a signalling f16 NaN comes
** out quiet, as the F16C instruction makes it). Narrowing rounds to nearest,
** ties to even (what numpy's astype(float16) and torch's bfloat16 do);
** values past f16's range become infinities, NaN stays NaN. The SIMD kernels
** convert 16 or 8 values at a time; these are the reference they are tested
** against, and what plain-C code (convert, packing tails) uses.
*/
#ifndef SM_HALF_H
#define SM_HALF_H

#include <stdint.h>
#include <string.h>

#include "sm_base.h"
#include "sm_dtype.h"

static inline float sm_bits_to_f32(uint32_t b) {
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

static inline uint32_t sm_f32_to_bits(float f) {
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

static inline float sm_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31u, m = h & 1023u;
    if (e == 31) /* inf; NaN quietened, as vcvtph2ps does */
        return sm_bits_to_f32(sign | 0x7F800000u | (m ? 0x400000u | (m << 13) : 0));
    if (e) return sm_bits_to_f32(sign | ((e + 112) << 23) | (m << 13));
    if (!m) return sm_bits_to_f32(sign);
    uint32_t sh = 0; /* subnormal m * 2^-24: normalise */
    while (!(m & 1024u)) m <<= 1, sh++;
    return sm_bits_to_f32(sign | ((113 - sh) << 23) | ((m & 1023u) << 13));
}

static inline float sm_bf16_to_f32(uint16_t h) {
    return sm_bits_to_f32((uint32_t)h << 16);
}

/* Element i of a native array of type dt (f32, f16 or bf16), as f32. */
static inline float sm_elem_f32(const void *p, sm_dtype dt, size_t i) {
    if (dt == SM_DTYPE_F16) return sm_f16_to_f32(((const uint16_t *)p)[i]);
    if (dt == SM_DTYPE_BF16) return sm_bf16_to_f32(((const uint16_t *)p)[i]);
    return ((const float *)p)[i];
}

/* q (an integer mantissa) + the discarded low `shift` bits of v, rounded half to even. */
static inline uint32_t sm_round_shift(uint32_t v, uint32_t shift) {
    uint32_t q = v >> shift, rem = v & ((1u << shift) - 1u), half = 1u << (shift - 1);
    return q + (rem > half || (rem == half && (q & 1u)));
}

static inline uint16_t sm_f32_to_f16(float f) {
    uint32_t x = sm_f32_to_bits(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7FFFFFFFu;
    if (ax > 0x7F800000u) return (uint16_t)(sign | 0x7E00u | ((ax >> 13) & 0x3FFu)); /* NaN */
    if (ax >= 0x47800000u) return (uint16_t)(sign | 0x7C00u); /* >= 2^16 (or inf): inf */
    if (ax >= 0x38800000u) /* normal: rebias 127 -> 15; a carry may round up to inf */
        return (uint16_t)(sign | sm_round_shift(ax - (112u << 23), 13));
    if (ax < 0x33000000u) return (uint16_t)sign; /* below 2^-25: rounds to zero */
    uint32_t e = ax >> 23, mant = (ax & 0x7FFFFFu) | 0x800000u; /* subnormal: units of 2^-24 */
    return (uint16_t)(sign | sm_round_shift(mant, 126 - e));
}

static inline uint16_t sm_f32_to_bf16(float f) {
    uint32_t x = sm_f32_to_bits(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
    return (uint16_t)((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

#endif
