/*
** peak.c -- the core's arithmetic peaks: register-only loops that issue one
** kind of instruction as fast as the core takes it (sm_kernels_peak in
** sm_kernels.h), the ceiling `bench --peaks` sets the products beside.
**
** Each loop keeps ACC independent accumulators in registers (more than any
** x86 core's latency times its issue width for these instructions, so the
** rate is the throughput, not a dependency chain), touches no memory, and
** returns a value made of every accumulator, so no step can be dropped.
** The int8 product without VNNI is the sequence the tables use
** (vpmaddubsw to int16 pairs, vpmaddwd by ones to int32, vpaddd): its rate
** is counted in int8 multiply-adds like vpdpbusd's. An empty asm statement
** hides the multiplicand from the compiler before each use, so the product
** of loop-invariant operands is not hoisted out of the loop or shared
** between accumulators.
**
** Functions carry their ISA as a target attribute (one file for all);
** sm_kernels_peak runs only what dispatch.c found on this CPU.
*/
#include "sm_kernels.h"

static const char *const names[SM_PEAK_COUNT] = {
    [SM_PEAK_FMA256] = "f32 FMA, 256-bit",
    [SM_PEAK_FMA512] = "f32 FMA, 512-bit",
    [SM_PEAK_MADDUBS256] = "int8 vpmaddubsw+vpmaddwd, 256-bit",
    [SM_PEAK_VNNI256] = "int8 AVX-VNNI vpdpbusd, 256-bit",
    [SM_PEAK_VNNI512] = "int8 AVX512-VNNI vpdpbusd, 512-bit",
    [SM_PEAK_BF16_512] = "bf16 AVX512-BF16 vdpbf16ps, 512-bit",
    [SM_PEAK_VNNI512_BLOCK] = "VNNI-512 + q8_0 blocks' f32 step",
    [SM_PEAK_VNNI512_ISTEP] = "VNNI-512 + an integer scale step",
    [SM_PEAK_MADDUBS256_RUN] = "int8 vpmaddubsw+vpaddw runs, 256-bit",
};

const char *sm_kernels_peak_name(sm_peak p) {
    return p < SM_PEAK_COUNT ? names[p] : "";
}

#if defined(SM_X86_KERNELS) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>

enum { ACC = 12 };

#define LOOP(body)                                                                                 \
    for (size_t it = 0; it < iters; it++)                                                          \
        for (int i = 0; i < ACC; i++) { body; }

__attribute__((target("avx2,fma"))) static float fma256(size_t iters) {
    __m256 a[ACC], x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-6f);
    for (int i = 0; i < ACC; i++) a[i] = _mm256_set1_ps((float)i);
    LOOP(a[i] = _mm256_fmadd_ps(a[i], x, y));
    __m256 s = a[0];
    for (int i = 1; i < ACC; i++) s = _mm256_add_ps(s, a[i]);
    return _mm256_cvtss_f32(s);
}

__attribute__((target("avx512f"))) static float fma512(size_t iters) {
    __m512 a[ACC], x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-6f);
    for (int i = 0; i < ACC; i++) a[i] = _mm512_set1_ps((float)i);
    LOOP(a[i] = _mm512_fmadd_ps(a[i], x, y));
    __m512 s = a[0];
    for (int i = 1; i < ACC; i++) s = _mm512_add_ps(s, a[i]);
    return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2"))) static float maddubs256(size_t iters) {
    __m256i a[ACC], u = _mm256_set1_epi8(3), s = _mm256_set1_epi8(-2), ones = _mm256_set1_epi16(1);
    for (int i = 0; i < ACC; i++) a[i] = _mm256_set1_epi32(i);
    LOOP(__asm__("" : "+x"(u)); a[i] = _mm256_add_epi32(a[i], _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), ones)));
    __m256i t = a[0];
    for (int i = 1; i < ACC; i++) t = _mm256_add_epi32(t, a[i]);
    return (float)_mm256_extract_epi32(t, 0);
}

/*
** maddubs256 as the vpmaddubsw flavour's packed products run it
** (avx2_qgemm.c's int16 runs): 8 vpmaddubsw added up in int16 (vpaddw),
** then widened once (vpmaddwd by ones, vpaddd). Half as many accumulators,
** each with its int16 run beside it, so all stay in 16 registers (the runs'
** sums depend on vpaddw alone, one cycle). Its rate counts the vpmaddubsw.
*/
__attribute__((target("avx2"))) static float maddubs256_run(size_t iters) {
    enum { H = ACC / 2 };
    __m256i a[H], h[H], u = _mm256_set1_epi8(3), s = _mm256_set1_epi8(-2), ones = _mm256_set1_epi16(1);
    for (int i = 0; i < H; i++) a[i] = _mm256_set1_epi32(i);
    for (size_t it = 0; it < iters; it++)
        for (int run = 0; run < 2; run++) { /* 2 runs of 8 for H accumulators: 8 ACC vpmaddubsw */
            for (int i = 0; i < H; i++) {
                __asm__("" : "+x"(u));
                h[i] = _mm256_maddubs_epi16(u, s);
            }
            for (int g = 1; g < 8; g++)
                for (int i = 0; i < H; i++) {
                    __asm__("" : "+x"(u));
                    h[i] = _mm256_add_epi16(h[i], _mm256_maddubs_epi16(u, s));
                }
            for (int i = 0; i < H; i++) a[i] = _mm256_add_epi32(a[i], _mm256_madd_epi16(h[i], ones));
        }
    __m256i t = a[0];
    for (int i = 1; i < H; i++) t = _mm256_add_epi32(t, a[i]);
    return (float)_mm256_extract_epi32(t, 0);
}
__attribute__((target("avx2,avxvnni"))) static float vnni256(size_t iters) {
    __m256i a[ACC], u = _mm256_set1_epi8(3), s = _mm256_set1_epi8(-2);
    for (int i = 0; i < ACC; i++) a[i] = _mm256_set1_epi32(i);
    LOOP(a[i] = _mm256_dpbusd_avx_epi32(a[i], u, s));
    __m256i t = a[0];
    for (int i = 1; i < ACC; i++) t = _mm256_add_epi32(t, a[i]);
    return (float)_mm256_extract_epi32(t, 0);
}

__attribute__((target("avx512f,avx512vnni"))) static float vnni512(size_t iters) {
    __m512i a[ACC], u = _mm512_set1_epi8(3), s = _mm512_set1_epi8(-2);
    for (int i = 0; i < ACC; i++) a[i] = _mm512_set1_epi32(i);
    LOOP(a[i] = _mm512_dpbusd_epi32(a[i], u, s));
    __m512i t = a[0];
    for (int i = 1; i < ACC; i++) t = _mm512_add_epi32(t, a[i]);
    return (float)_mm512_reduce_add_epi32(t);
}

/*
** vnni512 as a quantized product's blocks run it: after every 8 vpdpbusd
** (a 32-weight block of 16 rows and one token) an accumulator's integer sum
** becomes f32 and is added in with the weights' and the activations' block
** scales (convert, multiply, multiply-add), as q4_0 and q8_0 weights times
** llama.cpp's q8_0 activations must per block. Where the multiplies take
** the pipes vpdpbusd uses, this is the ceiling of such a product's
** arithmetic below vnni512's; its rate counts the vpdpbusd alone.
*/
__attribute__((target("avx512f,avx512vnni"))) static float vnni512_block(size_t iters) {
    __m512i a[ACC], u = _mm512_set1_epi8(3), s = _mm512_set1_epi8(-2);
    __m512 f[ACC], dx = _mm512_set1_ps(0.5f), d = _mm512_set1_ps(1e-3f);
    for (int i = 0; i < ACC; i++) a[i] = _mm512_set1_epi32(i), f[i] = _mm512_setzero_ps();
    for (size_t it = 0; it < iters; it++) {
        for (int g = 0; g < 8; g++)
            for (int i = 0; i < ACC; i++) a[i] = _mm512_dpbusd_epi32(a[i], u, s);
        for (int i = 0; i < ACC; i++) f[i] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(a[i]), dx), d, f[i]);
    }
    __m512 t = f[0];
    for (int i = 1; i < ACC; i++) t = _mm512_add_ps(t, f[i]);
    return _mm512_reduce_add_ps(t);
}

/*
** vnni512 with an integer step instead: after every 8 vpdpbusd a block's
** integer sum is multiplied by an integer scale and added to a second
** integer accumulator (vpmulld, vpaddd), as a k-quant's 6-bit sub-block
** scales could be applied against activations with one scale per 256
** values (llama.cpp's q8_K), leaving one f32 step per super-block. The
** ceiling such a product's arithmetic would have; its rate counts the
** vpdpbusd alone.
*/
__attribute__((target("avx512f,avx512vnni"))) static float vnni512_istep(size_t iters) {
    __m512i a[ACC], t[ACC], u = _mm512_set1_epi8(3), s = _mm512_set1_epi8(-2), sc = _mm512_set1_epi32(5);
    for (int i = 0; i < ACC; i++) a[i] = _mm512_set1_epi32(i), t[i] = _mm512_setzero_si512();
    for (size_t it = 0; it < iters; it++) {
        for (int g = 0; g < 8; g++)
            for (int i = 0; i < ACC; i++) a[i] = _mm512_dpbusd_epi32(a[i], u, s);
        for (int i = 0; i < ACC; i++) t[i] = _mm512_add_epi32(t[i], _mm512_mullo_epi32(a[i], sc));
    }
    __m512i r = t[0];
    for (int i = 1; i < ACC; i++) r = _mm512_add_epi32(r, t[i]);
    return (float)_mm512_reduce_add_epi32(r);
}

__attribute__((target("avx512f,avx512bf16"))) static float bf16_512(size_t iters) {
    __m512 a[ACC];
    __m512bh x = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.5f), _mm512_set1_ps(0.25f));
    __m512bh y = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-6f), _mm512_set1_ps(2e-6f));
    for (int i = 0; i < ACC; i++) a[i] = _mm512_set1_ps((float)i);
    LOOP(a[i] = _mm512_dpbf16_ps(a[i], x, y));
    __m512 s = a[0];
    for (int i = 1; i < ACC; i++) s = _mm512_add_ps(s, a[i]);
    return _mm512_reduce_add_ps(s);
}

/* Arithmetic operations of one instruction (a multiply-add counts two). */
static const struct {
    float (*loop)(size_t);
    double ops;
} peaks[SM_PEAK_COUNT] = {
    [SM_PEAK_FMA256] = {fma256, 16},     [SM_PEAK_FMA512] = {fma512, 32},
    [SM_PEAK_MADDUBS256] = {maddubs256, 64}, [SM_PEAK_VNNI256] = {vnni256, 64},
    [SM_PEAK_VNNI512] = {vnni512, 128},  [SM_PEAK_BF16_512] = {bf16_512, 64},
    [SM_PEAK_VNNI512_BLOCK] = {vnni512_block, 8 * 128}, [SM_PEAK_VNNI512_ISTEP] = {vnni512_istep, 8 * 128},
    [SM_PEAK_MADDUBS256_RUN] = {maddubs256_run, 8 * 64},
};

double sm_kernels_peak(sm_peak p, size_t iters, float *sink) {
    if (p >= SM_PEAK_COUNT || !sm_kernels_peak_runs(p)) return 0;
    *sink += peaks[p].loop(iters);
    return peaks[p].ops * ACC * (double)iters;
}

#else

double sm_kernels_peak(sm_peak p, size_t iters, float *sink) {
    (void)p, (void)iters, (void)sink;
    return 0;
}

#endif
