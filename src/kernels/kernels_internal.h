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

/*
** A table's micro-kernel: out rows i < mr (its own mr: a full block, or
** one row), columns [0, nr), get x rows i (stride ldx) . panel (kc, the
** table's NR) added, or on the first column slice the bias (NULL: zero)
** plus the product written.
*/
typedef void (*sm_micro_fn)(float *restrict out, size_t ldo, const float *restrict x, size_t ldx,
                            const float *restrict panel, size_t kc, const float *restrict bias,
                            int first, size_t nr);

/* A table's packed product: its panel shape, micro-kernels and packer. */
typedef struct {
    size_t nr, mr, kc;     /* panel rows (outputs), tokens per full micro call, columns */
    sm_micro_fn full, one; /* mr token rows; one token row */
    void (*pack)(float *restrict dst, const void *restrict w, sm_dtype dt, size_t K, size_t n,
                 size_t nr, size_t width, size_t k0, size_t kc);
} sm_gemm_kernel;

/*
** matmul for T >= 4 with a table's kernel (pack.c, plain C): token rows in
** blocks that stay in L2, then kc-column slices, then the thread's panels,
** each packed once per block and slice into panel (nr x kc floats).
*/
void sm_kernels_gemm(const sm_gemm_kernel *g, float *restrict out, const float *restrict x,
                     const void *restrict w, sm_dtype dt, const float *restrict bias, size_t T,
                     size_t N, size_t K, size_t n0, size_t n1, float *restrict panel);

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
