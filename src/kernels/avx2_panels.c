/*
** avx2_panels.c -- the AVX2 table's packed product on panels laid out at load
** (sm_kernels_repack): SM_DTYPE_F32_P32, and the 16-bit SM_DTYPE_F16_P32 /
** SM_DTYPE_BF16_P32 widened as they are read. A panel is 32 weight rows side
** by side (the AVX-512 table's NR), twice this table's 16: each micro-kernel
** takes its 16-column halves in turn, MR = 6 token rows x 16 columns a pass
** (12 accumulators), each output the same chain over a slice's k as the
** packed product on the file's rows (avx2.c's micro, NR = 16), so every
** output is bit for bit what the file's rows give, whatever T. A lone token
** row (one_row) runs two panels' 8 chains side by side. Compiled with -mavx2
** -mfma -mf16c, called only where the CPU has them.
*/
#if defined(__x86_64__) || defined(__i386__)
#include "kernels_internal.h"
#include "avx2_load.h"

#include <immintrin.h>
#include <stdint.h>

#define NR SM_R32 /* a panel's rows */
#define HR 16     /* the columns of a pass */
#define MR SM_AVX2_MR
#define KC 256

/* The micro-kernel on columns [16 h, 16 h + 16) of a panel's slice (sm_avx2_micro, its k steps
   32 elements apart), each half its own function (a set per panel type and row count), and the
   micro-kernel runs both. next, the slice read after this one: f32, each half asks for its own
   line of a k step; 16-bit, the first half for the k step's one line. */
#define MICRO(name, pd, r)                                                                         \
    static void name##_half(size_t h, float *restrict out, size_t ldo, const float *restrict x,    \
                            size_t ldx, const float *restrict panel, size_t kc,                    \
                            const float *restrict bias, int first, size_t nr, const float *next) { \
        sm_avx2_micro(pd, r, NR, out + HR * h, ldo, x, ldx, sm_kernels_elem(panel, pd, HR * h), kc,  \
                      bias ? bias + HR * h : NULL, first, nr,                                      \
                      next && (pd == SM_DTYPE_F32 || h == 0) ? sm_kernels_elem(next, pd, HR * h) : NULL); \
    }                                                                                              \
    static void name(float *restrict out, size_t ldo, const float *restrict x, size_t ldx,         \
                     const float *restrict panel, size_t kc, const float *restrict bias,           \
                     int first, size_t nr, const float *restrict next) {                           \
        name##_half(0, out, ldo, x, ldx, panel, kc, bias, first, nr < HR ? nr : HR, next); \
        if (nr > HR) name##_half(1, out, ldo, x, ldx, panel, kc, bias, first, nr - HR, next); \
    }
#define MICROS(sfx, pd)                                                                            \
    MICRO(micro_mr##sfx, pd, MR)                                                                   \
    MICRO(micro_1##sfx, pd, 1)                                                                     \
    MICRO(micro_2##sfx, pd, 2)                                                                     \
    MICRO(micro_3##sfx, pd, 3)                                                                     \
    MICRO(micro_4##sfx, pd, 4)                                                                     \
    MICRO(micro_5##sfx, pd, 5)
MICROS(, SM_DTYPE_F32)
MICROS(_f16, SM_DTYPE_F16)
MICROS(_bf16, SM_DTYPE_BF16)
#undef MICROS
#undef MICRO

/*
** One token row over g <= 2 panels (ps elements apart): 4 chains a panel, micro(1)'s per
** output. Each panel's lines are asked for ROW_AHEAD k steps ahead (the panel runs on into
** its next slice, the next call's).
*/
enum { ROW_AHEAD = 16 };
static inline __attribute__((always_inline)) void
row_panels(sm_dtype pd, size_t g, float *restrict out, const float *restrict x, const void *restrict panel,
           size_t ps, size_t kc, const float *restrict bias, int first, size_t nr) {
    __m256 c[2][4];
    for (size_t j = 0; j < g; j++)
        for (size_t v = 0; v < 4; v++) c[j][v] = _mm256_setzero_ps();
    for (size_t kk = 0; kk < kc; kk++) {
        __m256 a = _mm256_broadcast_ss(x + kk);
        for (size_t j = 0; j < g; j++) {
            const char *ask = sm_kernels_elem(panel, pd, j * ps + (kk + ROW_AHEAD) * NR);
            _mm_prefetch(ask, _MM_HINT_T0);
            if (pd == SM_DTYPE_F32) _mm_prefetch(ask + 64, _MM_HINT_T0);
            for (size_t v = 0; v < 4; v++)
                c[j][v] = _mm256_fmadd_ps(a, load_w(pd, panel, j * ps + kk * NR + 8 * v), c[j][v]);
        }
    }
    for (size_t j = 0; j < g; j++) {
        const size_t nj = nr - j * NR < NR ? nr - j * NR : NR; /* this panel's columns */
        const float *b = bias ? bias + j * NR : NULL;
        sm_avx2_row_store(out + j * NR, c[j][0], c[j][1], b, first, nj < HR ? nj : HR);
        if (nj > HR) sm_avx2_row_store(out + j * NR + HR, c[j][2], c[j][3], b ? b + HR : NULL, first, nj - HR);
    }
}

/* One token row over the nr <= SM_ROW_GROUPS NR columns of the panels from panel (one_row in
   kernels_internal.h), two panels at a time. */
static inline __attribute__((always_inline)) void
one_row_of(sm_dtype pd, float *restrict out, const float *restrict x, const void *restrict panel, size_t ps,
           size_t kc, const float *restrict bias, int first, size_t nr) {
    for (size_t j = 0; j * NR < nr; j += 2) {
        const size_t left = nr - j * NR;
        const void *p = sm_kernels_elem(panel, pd, j * ps);
        const float *b = bias ? bias + j * NR : NULL;
        if (left > NR)
            row_panels(pd, 2, out + j * NR, x, p, ps, kc, b, first, left < 2 * NR ? left : 2 * NR);
        else
            row_panels(pd, 1, out + j * NR, x, p, ps, kc, b, first, left);
    }
}
#define ONE_ROW(name, pd)                                                                               \
    static void name(float *restrict out, const float *restrict x, const float *restrict panel, size_t ps, \
                     size_t kc, const float *restrict bias, int first, size_t nr, size_t next) {          \
        (void)next;                                                                                     \
        one_row_of(pd, out, x, panel, ps, kc, bias, first, nr);                                         \
    }
ONE_ROW(one_row, SM_DTYPE_F32)
ONE_ROW(one_row_f16, SM_DTYPE_F16)
ONE_ROW(one_row_bf16, SM_DTYPE_BF16)
#undef ONE_ROW

const sm_gemm_kernel sm_avx2_gemm_panels = {
    NR, MR, KC, micro_mr, NULL, {NULL, micro_1, micro_2, micro_3, micro_4, micro_5}, one_row, NULL, 0};
const sm_gemm_kernel sm_avx2_gemm_panels_f16 = {
    NR, MR, KC, micro_mr_f16, NULL,
    {NULL, micro_1_f16, micro_2_f16, micro_3_f16, micro_4_f16, micro_5_f16}, one_row_f16, NULL, 2};
const sm_gemm_kernel sm_avx2_gemm_panels_bf16 = {
    NR, MR, KC, micro_mr_bf16, NULL,
    {NULL, micro_1_bf16, micro_2_bf16, micro_3_bf16, micro_4_bf16, micro_5_bf16}, one_row_bf16, NULL, 2};

/*
** A row group of 16-bit rows (even K) as its panel (sm_kernels_repack): 64
** columns at a time, the 32 rows' column pairs as 32-bit words by the 8 x 8
** word transposes the packed product uses (the rows as rows of K / 2
** words), then each pair's 32 words split into its two columns' 16-bit
** values. Moves bits, never values.
*/
void sm_kernels_repack16_avx2(uint16_t *restrict dst, const void *restrict w, size_t K, size_t n, size_t nr) {
    _Alignas(32) uint32_t pairs[32 * NR];
    const __m256i low = _mm256_set1_epi32(0xFFFF);
    for (size_t k0 = 0; k0 < K; k0 += 64) {
        const size_t kp = (K - k0 < 64 ? K - k0 : 64) / 2;
        sm_kernels_pack_avx2((float *)(void *)pairs, w, SM_DTYPE_F32, K / 2, n, nr, NR, k0 / 2, kp);
        for (size_t p = 0; p < kp; p++)
            for (int h = 0; h < 2; h++) { /* rows 16 h .. 16 h + 15 */
                __m256i a = _mm256_load_si256((const __m256i *)(const void *)(pairs + p * NR + 16 * h));
                __m256i b = _mm256_load_si256((const __m256i *)(const void *)(pairs + p * NR + 16 * h + 8));
                /* packus keeps 128-bit lanes apart: a0-3 b0-3 a4-7 b4-7, put in order */
                __m256i e = _mm256_permute4x64_epi64(
                    _mm256_packus_epi32(_mm256_and_si256(a, low), _mm256_and_si256(b, low)), 0xD8);
                __m256i o = _mm256_permute4x64_epi64(
                    _mm256_packus_epi32(_mm256_srli_epi32(a, 16), _mm256_srli_epi32(b, 16)), 0xD8);
                _mm256_storeu_si256((__m256i *)(void *)(dst + (k0 + 2 * p) * NR + 16 * h), e);
                _mm256_storeu_si256((__m256i *)(void *)(dst + (k0 + 2 * p + 1) * NR + 16 * h), o);
            }
    }
}
#endif
