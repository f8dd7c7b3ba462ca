/*
** pack.c -- weight-panel packing for the matrix-matrix kernels (plain C).
*/
#include "kernels_internal.h"

void sm_kernels_pack_panel(float *restrict dst, const float *restrict w, size_t K, size_t n,
                           size_t nr, size_t width, size_t k0, size_t kc) {
    for (size_t j = 0; j < nr; j++) {
        const float *src = w + (n + j) * K + k0;
        for (size_t kk = 0; kk < kc; kk++) dst[kk * width + j] = src[kk];
    }
    for (size_t j = nr; j < width; j++)
        for (size_t kk = 0; kk < kc; kk++) dst[kk * width + j] = 0.0f;
}
