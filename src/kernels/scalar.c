/*
** scalar.c -- the reference kernels: plain C, one obvious loop order, no
** intrinsics. The SIMD tables are tested against these; CPUs without AVX2
** run them. Attention still has the product structure (a scores block from
** Q.K^T, then P.V), not one dot-product call per query-key pair.
*/
#include "kernels_internal.h"

#include "sm_half.h"

#include <math.h>
#include <stdint.h>

/* dt is a constant wherever this is inlined, so the element type is not tested per weight.
   Weight (n, k) is element n sn + k sk of w: (K, 1) for rows, (1, N) for w held transposed
   (SM_DTYPE_F32_T); either way the sum runs over k in order. */
static inline __attribute__((always_inline)) void
matmul_dt(sm_dtype dt, float *restrict out, const float *restrict x, const void *restrict w,
          const float *restrict bias, size_t T, size_t N, size_t K, size_t n0, size_t n1, size_t sn,
          size_t sk) {
    for (size_t t = 0; t < T; t++) {
        const float *xr = x + t * K;
        for (size_t n = n0; n < n1; n++) {
            float s = 0.0f;
            for (size_t k = 0; k < K; k++) s += xr[k] * sm_elem_f32(w, dt, n * sn + k * sk);
            out[t * N + n] = s + (bias ? bias[n] : 0.0f);
        }
    }
}

/* Quantized w with T >= 4, as the SIMD tables do it: rows dequantized, f32 products. */
static void matmul_deq(float *restrict out, const float *restrict x, const void *restrict w,
                       sm_dtype wt, const float *restrict bias, size_t T, size_t N, size_t K,
                       size_t n0, size_t n1, float *restrict row) {
    for (size_t n = n0; n < n1; n++) {
        sm_quant_dequant(row, sm_kernels_elem(w, wt, n * K), wt, K);
        for (size_t t = 0; t < T; t++) {
            float s = 0.0f;
            for (size_t k = 0; k < K; k++) s += x[t * K + k] * row[k];
            out[t * N + n] = s + (bias ? bias[n] : 0.0f);
        }
    }
}

static void matmul(const sm_kernels *k, float *restrict out, const float *restrict x, const void *restrict w,
                   sm_dtype wt, const float *restrict bias, size_t T, size_t N, size_t K,
                   size_t n0, size_t n1, float *restrict scratch) {
    if (sm_dtype_quantized(wt) && T < 4)
        sm_kernels_qmatmul(k->quant, out, x, w, wt, bias, T, N, K, n0, n1, scratch);
    else if (sm_dtype_quantized(wt))
        matmul_deq(out, x, w, wt, bias, T, N, K, n0, n1, scratch);
    else if (wt == SM_DTYPE_F16)
        matmul_dt(SM_DTYPE_F16, out, x, w, bias, T, N, K, n0, n1, K, 1);
    else if (wt == SM_DTYPE_BF16)
        matmul_dt(SM_DTYPE_BF16, out, x, w, bias, T, N, K, n0, n1, K, 1);
    else if (wt == SM_DTYPE_F32_T)
        matmul_dt(SM_DTYPE_F32, out, x, w, bias, T, N, K, n0, n1, 1, N);
    else
        matmul_dt(SM_DTYPE_F32, out, x, w, bias, T, N, K, n0, n1, K, 1);
}

/* Quantized w: every row as it is alone (quantized activations), whatever T is. */
static void matmul_rows(const sm_kernels *k, float *restrict out, const float *restrict x, const void *restrict w,
                        sm_dtype wt, const float *restrict bias, size_t T, size_t N, size_t K,
                        size_t n0, size_t n1, float *restrict scratch) {
    if (sm_dtype_quantized(wt))
        sm_kernels_qmatmul(k->quant, out, x, w, wt, bias, T, N, K, n0, n1, scratch);
    else
        matmul(k, out, x, w, wt, bias, T, N, K, n0, n1, scratch);
}

static void to_f32(float *restrict out, const void *restrict src, sm_dtype dt, size_t n) {
    if (sm_dtype_quantized(dt)) {
        sm_quant_dequant(out, src, dt, n);
        return;
    }
    for (size_t i = 0; i < n; i++) out[i] = sm_elem_f32(src, dt, i);
}

static void softmax(float *x, size_t n) {
    float mx = x[0];
    for (size_t i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    float sum = 0.0f;
    for (size_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    float inv = 1.0f / sum;
    for (size_t i = 0; i < n; i++) x[i] *= inv;
}

static void attention(float *restrict out, const float *restrict q, const sm_kv_head *kv,
                      float *restrict scores, size_t T, size_t pos, size_t hs, size_t nh,
                      size_t q_stride, size_t out_stride, float scale, size_t window) {
    const size_t ring = kv->ring, bs = sm_kv_stride(kv, hs);
    for (size_t u = 0; u < nh * T; u++) { /* head u / T, query t */
        size_t t = u % T, h = u / T;
        size_t L = pos + t + 1; /* keys this query may see: lo .. L-1 */
        size_t lo = window && L > window ? L - window : 0, n = L - lo;
        const float *qr = q + t * q_stride + h * hs;
        float *s = scores;
        for (size_t j = 0; j < n; j++) s[j] = 0.0f;
        for (size_t d = 0; d < hs; d++) {
            for (size_t j = 0; j < n; j++) {
                size_t sl = ring ? (lo + j) % ring : lo + j; /* its slot */
                s[j] += qr[d] * sm_elem_f32(sm_kv_keys(kv, sl), kv->type, sm_kv_key_at(bs, sl, d));
            }
        }
        for (size_t j = 0; j < n; j++) s[j] *= scale;
        softmax(s, n);
        float *o = out + t * out_stride + h * hs;
        for (size_t d = 0; d < hs; d++) o[d] = 0.0f;
        for (size_t j = 0; j < n; j++) {
            size_t sl = ring ? (lo + j) % ring : lo + j;
            const void *v = sm_kv_values(kv, sl);
            for (size_t d = 0; d < hs; d++) o[d] += s[j] * sm_elem_f32(v, kv->type, sm_kv_value_at(bs, sl, hs) + d);
        }
    }
}

static void layernorm(float *restrict out, const float *restrict x, const float *restrict g,
                      const float *restrict b, size_t C, float eps) {
    float mean = 0.0f;
    for (size_t i = 0; i < C; i++) mean += x[i];
    mean /= (float)C;
    float var = 0.0f;
    for (size_t i = 0; i < C; i++) var += (x[i] - mean) * (x[i] - mean);
    var /= (float)C;
    float rstd = 1.0f / sqrtf(var + eps);
    for (size_t i = 0; i < C; i++) out[i] = (x[i] - mean) * rstd * g[i] + (b ? b[i] : 0.0f);
}

static void rmsnorm(float *out, const float *x, const float *restrict g, size_t C, float eps) {
    float ss = 0.0f;
    for (size_t i = 0; i < C; i++) ss += x[i] * x[i];
    float r = 1.0f / sqrtf(ss / (float)C + eps);
    for (size_t i = 0; i < C; i++) out[i] = x[i] * r * g[i];
}

static void swiglu(float *restrict gate, const float *restrict up, size_t n) {
    for (size_t i = 0; i < n; i++) gate[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

static void rope(float *restrict x, const float *restrict cs, const float *restrict sn,
                 size_t hs) {
    for (size_t i = 0; i < hs / 2; i++) {
        float a = x[2 * i], b = x[2 * i + 1];
        x[2 * i] = a * cs[i] - b * sn[i];
        x[2 * i + 1] = a * sn[i] + b * cs[i];
    }
}

static void gelu_tanh(float *x, size_t n) {
    const float c = 0.7978845608028654f; /* sqrt(2/pi) */
    for (size_t i = 0; i < n; i++) {
        float u = x[i];
        x[i] = 0.5f * u * (1.0f + tanhf(c * (u + 0.044715f * u * u * u)));
    }
}

static void gelu_tanh_grad(float *restrict d, const float *restrict x, size_t n) {
    const float c = 0.7978845608028654f, k = 0.044715f;
    for (size_t i = 0; i < n; i++) {
        float u = x[i], th = tanhf(c * (u + k * u * u * u));
        d[i] *= 0.5f * (1.0f + th) + 0.5f * u * (1.0f - th * th) * c * (1.0f + 3.0f * k * u * u);
    }
}

static void gelu_erf(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.7071067811865476f));
}

static void vexp(float *restrict out, const float *restrict x, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = expf(x[i]);
}

static float vsum(const float *x, size_t n) {
    float s = 0.0f;
    for (size_t i = 0; i < n; i++) s += x[i];
    return s;
}

static void transpose(float *restrict out, size_t ldo, const float *restrict in, size_t ldi, size_t R,
                      size_t c0, size_t c1) {
    for (size_t rb = 0; rb < R; rb += 32) /* 32 x 32 blocks: both sides' lines stay cached */
        for (size_t cb = c0; cb < c1; cb += 32) {
            size_t re = rb + 32 < R ? rb + 32 : R, ce = cb + 32 < c1 ? cb + 32 : c1;
            for (size_t c = cb; c < ce; c++)
                for (size_t r = rb; r < re; r++) out[c * ldo + r] = in[r * ldi + c];
        }
}

const sm_kernels sm_kernels_scalar = {
    .name = "scalar",
    .quant = &sm_qkernel_scalar,
    .l2_bytes = SM_L2_DEFAULT,
    .matmul_scratch = 0,
    .gemm_peak = SM_PEAK_COUNT,
    .matmul = matmul,
    .matmul_rows = matmul_rows,
    .attention = attention,
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
    .sum = vsum,
    .transpose = transpose,
};
