/*
** kernels_internal.h -- the per-ISA tables, for dispatch.c only.
*/
#ifndef SM_KERNELS_INTERNAL_H
#define SM_KERNELS_INTERNAL_H

#include "sm_kernels.h"

extern const sm_kernels sm_kernels_scalar;
#ifdef SM_X86_KERNELS
extern const sm_kernels sm_kernels_avx2;
extern const sm_kernels sm_kernels_avx512;
#endif

#endif
