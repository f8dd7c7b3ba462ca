/*
** pack.c -- weight-panel packing for the matrix-matrix kernels (plain C).
*/
#include "kernels_internal.h"

void sm_kernels_pack_panel(float *restrict dst, const void *restrict w, sm_dtype dt, size_t K,
                           size_t n, size_t nr, size_t width, size_t k0, size_t kc,
                           void (*widen)(float *restrict, const void *restrict, sm_dtype,
                                         size_t)) {
    float row[SM_PACK_KC_MAX];
    for (size_t j = 0; j < nr; j++) {
        const void *src = sm_kernels_elem(w, dt, (n + j) * K + k0);
        const float *r = src;
        if (dt != SM_DTYPE_F32) {
            widen(row, src, dt, kc);
            r = row;
        }
        for (size_t kk = 0; kk < kc; kk++) dst[kk * width + j] = r[kk];
    }
    for (size_t j = nr; j < width; j++)
        for (size_t kk = 0; kk < kc; kk++) dst[kk * width + j] = 0.0f;
}
