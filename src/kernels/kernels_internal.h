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

/* Most columns one packed panel holds (the KC of every table is at most this). */
#define SM_PACK_KC_MAX 256

/*
** Packs rows n..n+nr-1, columns k0..k0+kc-1 of w (N, K, elements of type dt)
** into dst (kc, width) as f32, transposed so one k step is `width`
** contiguous floats; rows nr..width-1 of the panel are zero. 16-bit rows are
** widened by `widen` (the table's to_f32) first. kc <= SM_PACK_KC_MAX. Plain
** C, shared by the SIMD matmuls (pack.c).
*/
void sm_kernels_pack_panel(float *restrict dst, const void *restrict w, sm_dtype dt, size_t K,
                           size_t n, size_t nr, size_t width, size_t k0, size_t kc,
                           void (*widen)(float *restrict, const void *restrict, sm_dtype,
                                         size_t));

/*
** Bytes of L2 cache per core (512 KiB until sm_kernels_available has read
** it at start-up). The packed products take token rows in blocks whose
** KC-column slice fills half of it, so the rows a panel meets stay in L2.
*/
extern size_t sm_kernels_l2_bytes;

/* Token rows per block for panels of kc columns and a micro-kernel of mr rows. */
static inline size_t sm_kernels_block_rows(size_t kc, size_t mr) {
    size_t mc = sm_kernels_l2_bytes / 2 / (kc * sizeof(float)) / mr * mr;
    return mc < 4 * mr ? 4 * mr : mc;
}

/*
** The same packing, by 8 x 8 transposes with AVX2 (avx2.c) where nr ==
** width, width % 8 == 0 and kc % 8 == 0, else by sm_kernels_pack_panel.
** Only on CPUs with AVX2 (the AVX2 and AVX-512 tables).
*/
void sm_kernels_pack_avx2(float *restrict dst, const void *restrict w, sm_dtype dt, size_t K,
                          size_t n, size_t nr, size_t width, size_t k0, size_t kc);

/* Address of element i of a tensor of type dt. */
static inline const void *sm_kernels_elem(const void *w, sm_dtype dt, size_t i) {
    return (const char *)w + i * (dt == SM_DTYPE_F32 ? 4 : 2);
}

#endif
