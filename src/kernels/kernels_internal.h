/*
** kernels_internal.h -- the per-ISA tables (for dispatch.c) and plain-C
** helpers the ISA files share.
*/
#ifndef SM_KERNELS_INTERNAL_H
#define SM_KERNELS_INTERNAL_H

#include "sm_kernels.h"

extern const sm_kernels sm_kernels_scalar;
#ifdef SM_X86_KERNELS
extern const sm_kernels sm_kernels_avx2;
extern const sm_kernels sm_kernels_avx512;
#endif

/*
** Packs rows n..n+nr-1, columns k0..k0+kc-1 of w (N, K) into dst (kc, width),
** transposed so one k step is `width` contiguous floats; rows nr..width-1 of
** the panel are zero. Plain C, shared by the SIMD matmuls (pack.c).
*/
void sm_kernels_pack_panel(float *restrict dst, const float *restrict w, size_t K, size_t n,
                           size_t nr, size_t width, size_t k0, size_t kc);

#endif
