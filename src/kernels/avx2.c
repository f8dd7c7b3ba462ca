/*
** avx2.c -- AVX2 + FMA kernels. Compiled with -mavx2 -mfma; only called when
** the CPU has both (see dispatch.c). Same algorithms as avx512.c at 8 lanes:
** matmul packs NR = 16 weight rows x KC = 256 into a panel and runs an
** MR = 6 x NR micro-kernel (12 accumulators); tails use masked loads/stores;
** the matrix-vector products (one row, and batched rows) are in avx2_rows.c.
** f16 weights are widened with F16C (vcvtph2ps), which dispatch.c requires
** with AVX2; bf16 weights by a 16-bit shift.
*/
#if defined(__x86_64__) || defined(__i386__)
#include "kernels_internal.h"
#include "avx2_reduce.h"
#include "avx2_load.h"

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define NR 16
#define MR SM_AVX2_MR
#define KC 256


/* exp(x) to about 2 ulp; same reduction and polynomial as avx512_tile.h's exp16. */
static inline __m256 exp8(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.33654f)), _mm256_set1_ps(88.37626f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187e-06f), r);
    __m256 p = _mm256_set1_ps(1.0f / 720.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

static void to_f32(float *restrict out, const void *restrict src, sm_dtype dt, size_t n) {
    size_t i = 0;
    if (sm_dtype_quantized(dt)) {
        sm_qkernel_avx2_maddubs.dequant(out, src, dt, n);
        return;
    }
    if (dt == SM_DTYPE_F32) {
        memcpy(out, src, n * sizeof *out);
        return;
    }
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, dt == SM_DTYPE_F16 ? load_w(SM_DTYPE_F16, src, i)
                                                     : load_w(SM_DTYPE_BF16, src, i));
    if (i < n) {
        __m256i m = tail_mask(n - i);
        _mm256_maskstore_ps(out + i, m,
                            dt == SM_DTYPE_F16 ? load_w_tail(SM_DTYPE_F16, src, i, n - i, m)
                                               : load_w_tail(SM_DTYPE_BF16, src, i, n - i, m));
    }
}

/*
** The micro-kernel for a full block of MR token rows and for a block's last
** 1 to MR - 1 rows (sm_gemm_kernel.few), each compiled on its own: inlined
** into the loop nest, GCC ran out of registers and kept an accumulator on
** the stack (half the speed).
*/
#define MICRO(name, rows)                                                                          \
    static void name(float *restrict out, size_t ldo, const float *restrict x, size_t ldx,         \
                     const float *restrict panel, size_t kc, const float *restrict bias,           \
                     int first, size_t nr, const float *restrict next) {                           \
        sm_avx2_micro(SM_DTYPE_F32, rows, NR, out, ldo, x, ldx, panel, kc, bias, first, nr, next);  \
    }
MICRO(micro_mr, MR)
MICRO(micro_1, 1)
MICRO(micro_2, 2)
MICRO(micro_3, 3)
MICRO(micro_4, 4)
MICRO(micro_5, 5)
#undef MICRO

/* c[i] = column i of the 8 x 8 block whose rows are r[0..7]. */
static inline __attribute__((always_inline)) void transpose8(const __m256 r[8], __m256 c[8]) {
    __m256 t[8], u[8];
    for (size_t j = 0; j < 8; j += 2) {
        t[j] = _mm256_unpacklo_ps(r[j], r[j + 1]);
        t[j + 1] = _mm256_unpackhi_ps(r[j], r[j + 1]);
    }
    for (size_t j = 0; j < 8; j += 4) {
        u[j] = _mm256_shuffle_ps(t[j], t[j + 2], 0x44);
        u[j + 1] = _mm256_shuffle_ps(t[j], t[j + 2], 0xEE);
        u[j + 2] = _mm256_shuffle_ps(t[j + 1], t[j + 3], 0x44);
        u[j + 3] = _mm256_shuffle_ps(t[j + 1], t[j + 3], 0xEE);
    }
    for (size_t i = 0; i < 4; i++) {
        c[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
        c[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
}

/*
** Panel packing by 8 x 8 transposes in registers (16-bit rows widened as
** they load): full panels whose width is a multiple of 8 columns, which is
** every panel of the models' shapes; the rest goes through the plain-C
** packer. Several times faster than copying element by element, or than
** AVX-512 gathers on AMD; the AVX-512 table packs with it too
** (kernels_internal.h).
*/
static inline __attribute__((always_inline)) void
pack_dt(sm_dtype dt, float *restrict panel, const void *restrict w, size_t K, size_t n,
        size_t width, size_t k0, size_t kc) {
    for (size_t h = 0; h < width; h += 8)
        for (size_t kk = 0; kk < kc; kk += 8) {
            __m256 r[8], c[8];
            for (size_t j = 0; j < 8; j++) r[j] = load_w(dt, w, (n + h + j) * K + k0 + kk);
            transpose8(r, c);
            for (size_t i = 0; i < 8; i++) _mm256_store_ps(panel + (kk + i) * width + h, c[i]);
        }
}

void sm_kernels_pack_avx2(float *restrict panel, const void *restrict w, sm_dtype dt, size_t K,
                          size_t n, size_t nr, size_t width, size_t k0, size_t kc) {
    if (nr == width && width % 8 == 0 && kc % 8 == 0 && width <= 32 && sm_dtype_quantized(dt)) {
        float rows[32 * SM_PACK_KC_MAX]; /* the rows' slice dequantized, then transposed */
        for (size_t j = 0; j < width; j++)
            sm_qkernel_avx2_maddubs.dequant(rows + j * kc, sm_kernels_elem(w, dt, (n + j) * K + k0), dt, kc);
        pack_dt(SM_DTYPE_F32, panel, rows, kc, 0, width, 0, kc);
    } else if (nr < width || width % 8 || kc % 8)
        sm_kernels_pack_panel(panel, w, dt, K, n, nr, width, k0, kc, to_f32);
    else if (dt == SM_DTYPE_F16)
        pack_dt(SM_DTYPE_F16, panel, w, K, n, width, k0, kc);
    else if (dt == SM_DTYPE_BF16)
        pack_dt(SM_DTYPE_BF16, panel, w, K, n, width, k0, kc);
    else
        pack_dt(SM_DTYPE_F32, panel, w, K, n, width, k0, kc);
}

static const sm_gemm_kernel gemm_kernel = {NR, MR, KC, micro_mr, sm_kernels_pack_avx2,
                                           {NULL, micro_1, micro_2, micro_3, micro_4, micro_5}, NULL, NULL, 0};


/*
** Panels laid out at load (SM_DTYPE_F32_P32, and the 16-bit ones widened) for many token rows:
** the 16 rows from n of a slice copied out of their 32-row panel into this table's own packed
** panel, then its micro-kernels: the same chains as on the panels in place (avx2_panels.c), so
** the same outputs; a slice read in place was a 32 KB stride the tiles re-read from L2 (GPT-2
** small f32, 512 rows: 466 tokens/s against 590 packed).
*/
static inline __attribute__((always_inline)) void
pack_p32_dt(sm_dtype dt, float *restrict dst, const void *restrict w, size_t at, size_t kc) {
    for (size_t kk = 0; kk < kc; kk++) {
        _mm256_store_ps(dst + kk * NR, load_w(dt, w, at + kk * SM_R32));
        _mm256_store_ps(dst + kk * NR + 8, load_w(dt, w, at + kk * SM_R32 + 8));
    }
}
static void pack_p32(float *restrict dst, const void *restrict w, sm_dtype dt, size_t K, size_t n,
                     size_t nr, size_t width, size_t k0, size_t kc) {
    (void)nr, (void)width; /* rows past N are zeros in the panels */
    const size_t at = n / SM_R32 * SM_R32 * K + k0 * SM_R32 + n % SM_R32;
    if (dt == SM_DTYPE_F16) pack_p32_dt(SM_DTYPE_F16, dst, w, at, kc);
    else if (dt == SM_DTYPE_BF16) pack_p32_dt(SM_DTYPE_BF16, dst, w, at, kc);
    else pack_p32_dt(SM_DTYPE_F32, dst, w, at, kc);
}
static const sm_gemm_kernel gemm_p32 = {NR, MR, KC, micro_mr, pack_p32,
                                        {NULL, micro_1, micro_2, micro_3, micro_4, micro_5}, NULL, NULL, 0};

static void matmul(const sm_kernels *k, float *restrict out, const float *restrict x, const void *restrict w,
                   sm_dtype wt, const float *restrict bias, size_t T, size_t N, size_t K,
                   size_t n0, size_t n1, float *restrict scratch) {
    if (wt == SM_DTYPE_F32_P32 || wt == SM_DTYPE_F16_P32 || wt == SM_DTYPE_BF16_P32) /* panels: in place,
                                                                                        or packed for many rows */
        sm_kernels_gemm(T >= SM_PANELS_PACK_T         ? &gemm_p32
                        : wt == SM_DTYPE_F32_P32 ? &sm_avx2_gemm_panels
                        : wt == SM_DTYPE_F16_P32 ? &sm_avx2_gemm_panels_f16
                                                 : &sm_avx2_gemm_panels_bf16,
                        k, out, x, w, sm_dtype_base(wt), bias, T, N, K, n0, n1, scratch);
    else if (sm_dtype_quantized(wt) && wt != sm_dtype_base(wt)) /* repacked: one product for every T */
        k->quant->gemm_r32(out, x, w, sm_dtype_base(wt), bias, T, N, K, n0, n1, scratch);
    else if (sm_kernels_qgemm_takes(k->quant, wt, T))
        k->quant->gemm(out, x, w, wt, bias, T, N, K, n0, n1, scratch);
    else if (sm_dtype_quantized(wt) && T < 4)
        sm_kernels_qmatmul(k->quant, out, x, w, wt, bias, T, N, K, n0, n1, scratch);
    else if (T >= 4 || wt == SM_DTYPE_F32_T) /* weights held transposed: packed, for every T */
        sm_kernels_gemm(&gemm_kernel, k, out, x, w, wt, bias, T, N, K, n0, n1, scratch);
    else
        sm_avx2_gemv(out, x, w, wt, bias, T, N, K, n0, n1);
}

static float vmax(const float *x, size_t n) {
    __m256 m = _mm256_set1_ps(-INFINITY);
    for (size_t i = 0; i < n; i += 8) {
        __m256i k = tail_mask(n - i);
        __m256 v = _mm256_blendv_ps(m, _mm256_maskload_ps(x + i, k), _mm256_castsi256_ps(k));
        m = _mm256_max_ps(m, v);
    }
    return hmax8(m);
}

static float exp_sum(float *x, size_t n, float mx) {
    __m256 s = _mm256_setzero_ps(), vm = _mm256_set1_ps(mx);
    for (size_t i = 0; i < n; i += 8) {
        __m256i k = tail_mask(n - i);
        __m256 e = exp8(_mm256_sub_ps(_mm256_maskload_ps(x + i, k), vm));
        e = _mm256_and_ps(e, _mm256_castsi256_ps(k));
        _mm256_maskstore_ps(x + i, k, e);
        s = _mm256_add_ps(s, e);
    }
    return hsum(s);
}

static void scale_inplace(float *x, size_t n, float f) {
    __m256 vf = _mm256_set1_ps(f);
    for (size_t i = 0; i < n; i += 8) {
        __m256i k = tail_mask(n - i);
        _mm256_maskstore_ps(x + i, k, _mm256_mul_ps(_mm256_maskload_ps(x + i, k), vf));
    }
}

static void softmax(float *x, size_t n) {
    float sum = exp_sum(x, n, vmax(x, n));
    scale_inplace(x, n, 1.0f / sum);
}

/*
** The attention pieces (sm_attn_kernel; the streaming loop is attention.c's)
** on 8 lanes. Tiles keep up to 8 independent accumulators: prefill 4
** queries x 2 chunks (queries share each key and value load), decode 1 query
** x 4 key chunks for the scores and 4 interleaved key partial sums x 2
** chunks for P.V.
*/
#define GQ SM_ATTN_QGROUP
#define KB SM_ATTN_KBLOCK

/* 8 floats at p, the lanes of m alone (zeros past them) unless full (a constant where inlined):
   a masked load is many times a plain one's cost on some CPUs (Zen 1: the attention's time). */
static inline __attribute__((always_inline)) __m256 load_part(const float *p, __m256i m, bool full) {
    return full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m);
}

/* s[i, c*8 + lane] = scale * q_i . key (j + c*8 + lane) of key block kb, 0 past nk
** keys; i < nq, c < nc. */
static inline __attribute__((always_inline)) void
score_tile(size_t nq, size_t nc, bool full, float *restrict s, const float *const *qr,
           const float *restrict kb, size_t hs, size_t j, size_t nk, __m256 vs) {
    __m256 a[4][4];
    __m256i m[4];
    for (size_t c = 0; c < nc; c++) m[c] = tail_mask(nk > c * 8 ? nk - c * 8 : 0);
    for (size_t i = 0; i < nq; i++)
        for (size_t c = 0; c < nc; c++) a[i][c] = _mm256_setzero_ps();
    for (size_t d = 0; d < hs; d++) {
        __m256 kv[4];
        for (size_t c = 0; c < nc; c++) kv[c] = load_part(kb + d * KB + j + c * 8, m[c], full);
        for (size_t i = 0; i < nq; i++) {
            __m256 qv = _mm256_broadcast_ss(qr[i] + d);
            for (size_t c = 0; c < nc; c++) a[i][c] = _mm256_fmadd_ps(qv, kv[c], a[i][c]);
        }
    }
    for (size_t i = 0; i < nq; i++)
        for (size_t c = 0; c < nc; c++)
            _mm256_storeu_ps(s + i * KB + c * 8, _mm256_mul_ps(a[i][c], vs));
}

/*
** acc[i, d0 .. d0 + 16) = corr[i] * acc[i, ...] + sum_{j < nk} p[i, j] v[j, ...]
** for i < nq; the keys are summed in np interleaved partial sums.
*/
static inline __attribute__((always_inline)) void
pv_tile(size_t nq, size_t np, bool full, float *restrict acc, size_t as, const float *restrict p,
        const float *corr, const float *restrict v, size_t hs, size_t nk, size_t d0) {
    __m256i m0 = tail_mask(hs - d0), m1 = tail_mask(hs - d0 > 8 ? hs - d0 - 8 : 0);
    __m256 a[4][4][2];
    for (size_t i = 0; i < nq; i++) {
        __m256 cf = _mm256_set1_ps(corr[i]);
        a[0][i][0] = _mm256_mul_ps(_mm256_maskload_ps(acc + i * as + d0, m0), cf);
        a[0][i][1] = _mm256_mul_ps(_mm256_maskload_ps(acc + i * as + d0 + 8, m1), cf);
        for (size_t r = 1; r < np; r++) a[r][i][0] = a[r][i][1] = _mm256_setzero_ps();
    }
    size_t j = 0;
    for (; j + np <= nk; j += np)
        for (size_t r = 0; r < np; r++) {
            const float *vr = v + (j + r) * hs + d0;
            __m256 v0 = load_part(vr, m0, full), v1 = load_part(vr + 8, m1, full);
            for (size_t i = 0; i < nq; i++) {
                __m256 pv = _mm256_broadcast_ss(p + i * KB + j + r);
                a[r][i][0] = _mm256_fmadd_ps(pv, v0, a[r][i][0]);
                a[r][i][1] = _mm256_fmadd_ps(pv, v1, a[r][i][1]);
            }
        }
    for (; j < nk; j++) {
        const float *vr = v + j * hs + d0;
        __m256 v0 = load_part(vr, m0, full), v1 = load_part(vr + 8, m1, full);
        for (size_t i = 0; i < nq; i++) {
            __m256 pv = _mm256_broadcast_ss(p + i * KB + j);
            a[0][i][0] = _mm256_fmadd_ps(pv, v0, a[0][i][0]);
            a[0][i][1] = _mm256_fmadd_ps(pv, v1, a[0][i][1]);
        }
    }
    for (size_t i = 0; i < nq; i++) {
        for (size_t r = 1; r < np; r++) {
            a[0][i][0] = _mm256_add_ps(a[0][i][0], a[r][i][0]);
            a[0][i][1] = _mm256_add_ps(a[0][i][1], a[r][i][1]);
        }
        _mm256_maskstore_ps(acc + i * as + d0, m0, a[0][i][0]);
        _mm256_maskstore_ps(acc + i * as + d0 + 8, m1, a[0][i][1]);
    }
}

static void attn_scores(float *restrict p, const float *const *qr, size_t nq,
                        const float *restrict kb, size_t hs, size_t nk, float scale) {
    const __m256 vs = _mm256_set1_ps(scale);
    for (size_t j = 0; j < nk; j += nq == 1 ? 32 : 16) {
        if (nq == 1 && nk - j >= 32)
            score_tile(1, 4, true, p + j, qr, kb, hs, j, nk - j, vs);
        else if (nq == 1)
            score_tile(1, 4, false, p + j, qr, kb, hs, j, nk - j, vs);
        else if (nk - j >= 16)
            score_tile(4, 2, true, p + j, qr, kb, hs, j, nk - j, vs);
        else
            score_tile(4, 2, false, p + j, qr, kb, hs, j, nk - j, vs);
    }
}

static void attn_pv(float *restrict acc, size_t as, const float *restrict p, const float *corr,
                    const float *restrict v, size_t nq, size_t hs, size_t nk) {
    for (size_t d0 = 0; d0 < hs; d0 += 16) {
        const bool full = hs - d0 >= 16;
        if (nq == 1 && full)
            pv_tile(1, 4, true, acc, as, p, corr, v, hs, nk, d0);
        else if (nq == 1)
            pv_tile(1, 4, false, acc, as, p, corr, v, hs, nk, d0);
        else if (full)
            pv_tile(4, 1, true, acc, as, p, corr, v, hs, nk, d0);
        else
            pv_tile(4, 1, false, acc, as, p, corr, v, hs, nk, d0);
    }
}

/* (no pv_lone: 4 rows of a lone query's partial sums outgrow the 16 registers) */
static const sm_attn_kernel attn_kernel = {attn_scores, attn_pv, vmax, exp_sum, to_f32, NULL, NULL, NULL};

static void attention(float *restrict out, const float *restrict q, const sm_kv_head *kv,
                      float *restrict scratch, size_t T, size_t pos, size_t hs, size_t nh,
                      size_t q_stride, size_t out_stride, float scale, size_t window) {
    sm_kernels_attention(&attn_kernel, out, q, kv, scratch, T, pos, hs, nh, q_stride, out_stride,
                         scale, window);
}

static void attention_rows(const sm_attn_row *const *rows, size_t n, float *restrict scratch, size_t hs, float scale) {
    sm_kernels_attention_rows(&attn_kernel, rows, n, scratch, hs, scale);
}

static void layernorm(float *restrict out, const float *restrict x, const float *restrict g,
                      const float *restrict b, size_t C, float eps) {
    __m256 s = _mm256_setzero_ps();
    for (size_t i = 0; i < C; i += 8) s = _mm256_add_ps(s, _mm256_maskload_ps(x + i, tail_mask(C - i)));
    float mean = hsum(s) / (float)C;
    __m256 vm = _mm256_set1_ps(mean), v2 = _mm256_setzero_ps();
    for (size_t i = 0; i < C; i += 8) {
        __m256i k = tail_mask(C - i);
        __m256 d = _mm256_and_ps(_mm256_sub_ps(_mm256_maskload_ps(x + i, k), vm), _mm256_castsi256_ps(k));
        v2 = _mm256_fmadd_ps(d, d, v2);
    }
    float rstd = 1.0f / sqrtf(hsum(v2) / (float)C + eps);
    __m256 vr = _mm256_set1_ps(rstd);
    for (size_t i = 0; i < C; i += 8) {
        __m256i k = tail_mask(C - i);
        __m256 d = _mm256_mul_ps(_mm256_sub_ps(_mm256_maskload_ps(x + i, k), vm), vr);
        __m256 y = _mm256_fmadd_ps(d, _mm256_maskload_ps(g + i, k),
                                   b ? _mm256_maskload_ps(b + i, k) : _mm256_setzero_ps());
        _mm256_maskstore_ps(out + i, k, y);
    }
}

static void rmsnorm(float *out, const float *x, const float *restrict g, size_t C, float eps) {
    __m256 s = _mm256_setzero_ps();
    for (size_t i = 0; i < C; i += 8) {
        __m256 v = _mm256_maskload_ps(x + i, tail_mask(C - i));
        s = _mm256_fmadd_ps(v, v, s);
    }
    __m256 r = _mm256_set1_ps(1.0f / sqrtf(hsum(s) / (float)C + eps));
    for (size_t i = 0; i < C; i += 8) {
        __m256i k = tail_mask(C - i);
        __m256 y = _mm256_mul_ps(_mm256_mul_ps(_mm256_maskload_ps(x + i, k), r),
                                 _mm256_maskload_ps(g + i, k));
        _mm256_maskstore_ps(out + i, k, y);
    }
}

static void swiglu(float *restrict gate, const float *restrict up, size_t n) {
    const __m256 one = _mm256_set1_ps(1.0f);
    for (size_t i = 0; i < n; i += 8) {
        __m256i k = tail_mask(n - i);
        __m256 u = _mm256_maskload_ps(gate + i, k);
        __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), u));
        __m256 y = _mm256_mul_ps(_mm256_div_ps(u, _mm256_add_ps(one, e)),
                                 _mm256_maskload_ps(up + i, k));
        _mm256_maskstore_ps(gate + i, k, y);
    }
}

/* Pairs (2i, 2i+1): even lanes a, odd lanes b; cos and sin duplicated to both. */
static void rope(float *restrict x, const float *restrict cs, const float *restrict sn,
                 size_t hs) {
    const __m256i dup = _mm256_set_epi32(3, 3, 2, 2, 1, 1, 0, 0);
    for (size_t i = 0; i < hs; i += 8) {
        __m256i k = tail_mask(hs - i), kh = tail_mask((hs - i) / 2);
        __m256 v = _mm256_maskload_ps(x + i, k);
        __m256 c = _mm256_permutevar8x32_ps(_mm256_maskload_ps(cs + i / 2, kh), dup);
        __m256 sv = _mm256_permutevar8x32_ps(_mm256_maskload_ps(sn + i / 2, kh), dup);
        __m256 sw = _mm256_permute_ps(v, 0xB1); /* (b, a) per pair */
        /* (a cos - b sin, b cos + a sin): fmaddsub adds on odd lanes, subtracts on even */
        __m256 y = _mm256_fmaddsub_ps(v, c, _mm256_mul_ps(sw, sv));
        _mm256_maskstore_ps(x + i, k, y);
    }
}

/* tanh(c (u + c3 u^3)), its argument clamped to +-lim: 1 - 2 / (exp(2z) + 1). u2 = u u. */
static inline __m256 gelu_th(__m256 u, __m256 u2, float lim) {
    const __m256 c = _mm256_set1_ps(0.7978845608028654f), c3 = _mm256_set1_ps(0.044715f);
    const __m256 one = _mm256_set1_ps(1.0f);
    __m256 z = _mm256_mul_ps(c, _mm256_fmadd_ps(_mm256_mul_ps(c3, u), u2, u));
    z = _mm256_min_ps(_mm256_max_ps(z, _mm256_set1_ps(-lim)), _mm256_set1_ps(lim));
    return _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(exp8(_mm256_add_ps(z, z)), one)));
}

static void gelu_tanh(float *x, size_t n) {
    const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
    for (size_t i = 0; i < n; i += 8) {
        __m256i k = tail_mask(n - i);
        __m256 u = _mm256_maskload_ps(x + i, k), th = gelu_th(u, _mm256_mul_ps(u, u), 9.0f);
        _mm256_maskstore_ps(x + i, k, _mm256_mul_ps(_mm256_mul_ps(half, u), _mm256_add_ps(one, th)));
    }
}

/* d *= gelu'(x): 0.5 (1 + th) + 0.5 u (1 - th^2) c (1 + 3 c3 u^2), th gelu_tanh's but clamped at
   +-20, where it is +-1 exactly (at +-9, 1 - th^2 times u's cube is off by 1e-5). */
static void gelu_tanh_grad(float *restrict d, const float *restrict x, size_t n) {
    const __m256 c = _mm256_set1_ps(0.7978845608028654f), c33 = _mm256_set1_ps(3 * 0.044715f);
    const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
    for (size_t i = 0; i < n; i += 8) {
        __m256i k = tail_mask(n - i);
        __m256 u = _mm256_maskload_ps(x + i, k), u2 = _mm256_mul_ps(u, u), th = gelu_th(u, u2, 20.0f);
        __m256 dz = _mm256_mul_ps(c, _mm256_fmadd_ps(c33, u2, one)); /* dz/du */
        __m256 sech2 = _mm256_fnmadd_ps(th, th, one);                  /* 1 - th^2 */
        __m256 g = _mm256_mul_ps(half, _mm256_fmadd_ps(_mm256_mul_ps(u, sech2), dz, _mm256_add_ps(one, th)));
        _mm256_maskstore_ps(d + i, k, _mm256_mul_ps(_mm256_maskload_ps(d + i, k), g));
    }
}

static void gelu_erf(float *x, size_t n) {
    const __m256 one = _mm256_set1_ps(1.0f), half = _mm256_set1_ps(0.5f);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (size_t i = 0; i < n; i += 8) {
        __m256i k = tail_mask(n - i);
        __m256 u = _mm256_maskload_ps(x + i, k);
        __m256 z = _mm256_mul_ps(u, _mm256_set1_ps(0.7071067811865476f));
        __m256 az = _mm256_andnot_ps(sign, z);
        __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(_mm256_set1_ps(0.3275911f), az, one));
        __m256 p = _mm256_set1_ps(1.061405429f);
        p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-1.453152027f));
        p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.421413741f));
        p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.284496736f));
        p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.254829592f));
        p = _mm256_mul_ps(p, t);
        __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), _mm256_mul_ps(az, az)));
        __m256 erfz = _mm256_or_ps(_mm256_fnmadd_ps(p, e, one), _mm256_and_ps(sign, z));
        _mm256_maskstore_ps(x + i, k, _mm256_mul_ps(_mm256_mul_ps(half, u), _mm256_add_ps(one, erfz)));
    }
}

static void vexp(float *restrict out, const float *restrict x, size_t n) {
    for (size_t i = 0; i < n; i += 8) {
        __m256i k = tail_mask(n - i);
        _mm256_maskstore_ps(out + i, k, exp8(_mm256_maskload_ps(x + i, k)));
    }
}

/*
** Four streams side by side, the quarters of x (256 bytes of each in turn),
** then what is left (a masked load for the last n % 8: any n, any
** alignment, as training's bias gradients need): one core's hardware
** prefetchers keep more reads in flight over several streams than over one
** (on a Zen 3, 17-20 GB/s against 11-13 from one core), and the probe is
** to find what the reads can reach.
** The AVX-512 table's too: 256-bit loads outrun memory as 512-bit ones do.
*/
float sm_kernels_sum_avx2(const float *x, size_t n) {
    __m256 s[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    const size_t q = n / 4 / 64 * 64;
    for (size_t i = 0; i < q; i += 64)
        for (size_t j = 0; j < 4; j++)
            for (size_t e = 0; e < 64; e += 8) s[j] = _mm256_add_ps(s[j], _mm256_loadu_ps(x + j * q + i + e));
    size_t i = 4 * q;
    for (; i + 8 <= n; i += 8) s[0] = _mm256_add_ps(s[0], _mm256_loadu_ps(x + i));
    if (i < n) s[1] = _mm256_add_ps(s[1], _mm256_maskload_ps(x + i, tail_mask(n - i)));
    return hsum(_mm256_add_ps(_mm256_add_ps(s[0], s[1]), _mm256_add_ps(s[2], s[3])));
}

/*
** out = in^T for in's columns [c0, c1) (rows ldi and ldo apart): 8 x 8 tiles transposed in
** registers (transpose8) over 32-row x 32-column blocks, the edges
** element by element.
*/
void sm_kernels_transpose_avx2(float *restrict out, size_t ldo, const float *restrict in, size_t ldi,
                               size_t R, size_t c0, size_t c1) {
    for (size_t rb = 0; rb < R; rb += 32)
        for (size_t cb = c0; cb < c1; cb += 32) {
            size_t re = rb + 32 < R ? rb + 32 : R, ce = cb + 32 < c1 ? cb + 32 : c1;
            size_t r8 = rb + (re - rb) / 8 * 8, c8 = cb + (ce - cb) / 8 * 8;
            for (size_t r = rb; r < r8; r += 8)
                for (size_t c = cb; c < c8; c += 8) {
                    __m256 v[8], t[8];
                    for (size_t j = 0; j < 8; j++) v[j] = _mm256_loadu_ps(in + (r + j) * ldi + c);
                    transpose8(v, t);
                    for (size_t i = 0; i < 8; i++) _mm256_storeu_ps(out + (c + i) * ldo + r, t[i]);
                }
            for (size_t c = cb; c < ce; c++) /* the edges: columns past c8, rows past r8 */
                for (size_t r = c < c8 ? r8 : rb; r < re; r++) out[c * ldo + r] = in[r * ldi + c];
        }
}

const sm_kernels sm_kernels_avx2 = {
    .name = "avx2",
    .quant = &sm_qkernel_avx2_maddubs,
    .l2_bytes = SM_L2_DEFAULT,
    .matmul_scratch = (size_t)NR * KC,
    .gemm_peak = SM_PEAK_FMA256,
    .f32_panels = true,
    .matmul = matmul,
    .matmul_rows = sm_avx2_matmul_rows,
    .attention = attention,
    .attention_rows = attention_rows,
    .softmax = softmax,
    .layernorm = layernorm,
    .rmsnorm = rmsnorm,
    .swiglu = swiglu,
    .add = sm_kernels_add,
    .rope = rope,
    .rope_halves = sm_kernels_rope_halves,
    .gelu_tanh = gelu_tanh,
    .gelu_tanh_grad = gelu_tanh_grad,
    .gelu_erf = gelu_erf,
    .to_f32 = to_f32,
    .exp = vexp,
    .sum = sm_kernels_sum_avx2,
    .transpose = sm_kernels_transpose_avx2,
};
#endif
