/*
** dtype.c -- the facts of each tensor element type (sm_dtype.h).
*/
#include "sm_dtype.h"

#include <string.h>

static const struct {
    const char *name;
    size_t block, bytes; /* elements per block and its bytes (1 and the size if not blocked) */
} dtype_info[SM_DTYPE_COUNT] = {
    [SM_DTYPE_F32] = {"f32", 1, 4},   [SM_DTYPE_F16] = {"f16", 1, 2},
    [SM_DTYPE_BF16] = {"bf16", 1, 2}, [SM_DTYPE_Q8_0] = {"q8_0", 32, 34},
    [SM_DTYPE_Q4_0] = {"q4_0", 32, 18},   [SM_DTYPE_Q4_K] = {"q4_k", 256, 144},
    [SM_DTYPE_Q5_K] = {"q5_k", 256, 176}, [SM_DTYPE_Q6_K] = {"q6_k", 256, 210},
    [SM_DTYPE_Q4_1] = {"q4_1", 32, 20},   [SM_DTYPE_Q5_0] = {"q5_0", 32, 22},
    [SM_DTYPE_Q5_1] = {"q5_1", 32, 24},   [SM_DTYPE_Q2_K] = {"q2_k", 256, 84},
    [SM_DTYPE_Q3_K] = {"q3_k", 256, 110}, [SM_DTYPE_IQ4_NL] = {"iq4_nl", 32, 18},
    [SM_DTYPE_IQ4_XS] = {"iq4_xs", 256, 136},
};

size_t sm_dtype_block(sm_dtype t) {
    t = sm_dtype_base(t);
    return (unsigned)t < SM_DTYPE_COUNT ? dtype_info[t].block : 0;
}

size_t sm_dtype_row_bytes(sm_dtype t, size_t n) {
    if (t == SM_DTYPE_Q4_K_R32) return n / 256 * 148;
    if (t == SM_DTYPE_Q5_K_R32) return n / 256 * 180;
    if (t == SM_DTYPE_IQ4_XS_R32) return n / 256 * 138;
    t = sm_dtype_base(t);
    if ((unsigned)t >= SM_DTYPE_COUNT) return 0;
    return n / dtype_info[t].block * dtype_info[t].bytes;
}

const char *sm_dtype_name(sm_dtype t) {
    if (t == SM_DTYPE_Q8_0_R32) return "q8_0_r32";
    if (t == SM_DTYPE_Q4_0_R32) return "q4_0_r32";
    if (t == SM_DTYPE_Q6_K_R32) return "q6_k_r32";
    if (t == SM_DTYPE_Q4_K_R32) return "q4_k_r32";
    if (t == SM_DTYPE_Q5_K_R32) return "q5_k_r32";
    if (t == SM_DTYPE_IQ4_NL_R32) return "iq4_nl_r32";
    if (t == SM_DTYPE_IQ4_XS_R32) return "iq4_xs_r32";
    if (t == SM_DTYPE_F32_P32) return "f32_p32";
    if (t == SM_DTYPE_F16_P32) return "f16_p32";
    if (t == SM_DTYPE_BF16_P32) return "bf16_p32";
    if (t == SM_DTYPE_F32_T) return "f32_t";
    return (unsigned)t < SM_DTYPE_COUNT ? dtype_info[t].name : "?";
}

sm_dtype sm_dtype_parse(const char *name) {
    int k = 0;
    while (k < SM_DTYPE_COUNT && strcmp(name, dtype_info[k].name) != 0) k++;
    return (sm_dtype)k;
}
