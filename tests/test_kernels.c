/*
** Every SIMD kernel table against the scalar reference, on odd sizes, with
** per-kernel tolerances. On a CPU without AVX2 only the scalar table exists
** and these tests check it against itself; the model tests still run.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sm_half.h"
#include "sm_kernels.h"
#include "kernels/kernels_internal.h"
#include "test.h"

static size_t tables(const sm_kernels **k) {
    return sm_kernels_available(k, 8);
}

void test_kernels_matmul(void) {
    const sm_kernels *avail[8], *ref = sm_kernels_reference(), *ks[8];
    size_t nk = tables(avail);
    /* each table as it is, and with a 64 KiB "L2": blocks of about 32 token rows, so T = 80
       crosses two */
    sm_kernels small[8];
    for (size_t i = 0; i < nk; i++) {
        small[i] = *avail[i];
        small[i].l2_bytes = 64 * 1024;
        ks[i] = avail[i], ks[nk + i] = &small[i];
    }
    nk *= 2;
    static const size_t Ts[] = {1, 2, 3, 4, 5, 8, 9, 17, 80};
    static const size_t Ns[] = {1, 3, 17, 33, 64, 255};
    /* 64 and 296 (256 + 40) pack whole panels by 8 x 8 transposes */
    static const size_t Ks[] = {1, 3, 17, 64, 255, 257, 296, 513};
    unsigned long long s = 1;
    for (size_t a = 0; a < sizeof Ts / sizeof *Ts; a++)
        for (size_t b = 0; b < sizeof Ns / sizeof *Ns; b++)
            for (size_t c = 0; c < sizeof Ks / sizeof *Ks; c++) {
                size_t T = Ts[a], N = Ns[b], K = Ks[c];
                float *x = test_rnd(T * K, &s, 1), *w = test_rnd(N * K, &s, 1), *bias = test_rnd(N, &s, 1);
                float *want = test_rnd(T * N, &s, 0), *got = test_rnd(T * N, &s, 0);
                /* a column range that is not panel-aligned, and the full range */
                size_t ranges[2][2] = {{N / 3, N - (N > 1)}, {0, N}};
                for (int r = 0; r < 2; r++) {
                    size_t n0 = ranges[r][0], n1 = ranges[r][1];
                    const float *bb = r ? bias : NULL;
                    ref->matmul(ref, want, x, w, SM_DTYPE_F32, bb, T, N, K, n0, n1, NULL);
                    for (size_t i = 1; i < nk; i++) {
                        float *scratch = test_rnd(ks[i]->matmul_scratch, &s, 0);
                        for (size_t j = 0; j < T * N; j++) got[j] = 12345.0f;
                        ks[i]->matmul(ks[i], got, x, w, SM_DTYPE_F32, bb, T, N, K, n0, n1, scratch);
                        free(scratch);
                        for (size_t t = 0; t < T; t++)
                            for (size_t n = 0; n < N; n++) {
                                float g = got[t * N + n];
                                if (n < n0 || n >= n1) {
                                    CHECKF(g == 12345.0f, "%s matmul T=%zu N=%zu K=%zu wrote column %zu outside [%zu,%zu)",
                                           ks[i]->name, T, N, K, n, n0, n1);
                                    continue;
                                }
                                double mag = bb ? fabs(bb[n]) : 0;
                                for (size_t k = 0; k < K; k++) mag += fabs(x[t * K + k] * w[n * K + k]);
                                double tol = 1e-5 * mag + 1e-7; /* float rounding of a K-term sum */
                                CHECKF(fabs(g - want[t * N + n]) <= tol,
                                       "%s matmul T=%zu N=%zu K=%zu [%zu,%zu]: %g vs %g (tol %g)", ks[i]->name,
                                       T, N, K, t, n, g, want[t * N + n], tol);
                            }
                    }
                }
                free(x), free(w), free(bias), free(want), free(got);
            }
}

/*
** matmul_rows: each row bit for bit what matmul gives that row alone (the
** promise batched decoding rests on), for every table and row count, with
** and without bias, on a column range that is not panel-aligned.
*/
void test_kernels_matmul_rows(void) {
    const sm_kernels *ks[8];
    size_t nk = tables(ks);
    static const size_t Ts[] = {1, 2, 3, 4, 5, 7, 16, 17};
    /* every way chunks fall into the four partial sums, with and without a tail; from 1,024
       up the rows go in blocks (avx2's gemv_kblocks): one block and a bit, a partial last one */
    static const size_t Ks[] = {1, 15, 16, 17, 61, 88, 181, 256, 257, 1024, 1031, 1541, 2055};
    unsigned long long s = 7;
    for (size_t i = 0; i < nk; i++)
        for (size_t a = 0; a < sizeof Ts / sizeof *Ts; a++)
            for (size_t c = 0; c < sizeof Ks / sizeof *Ks; c++) {
                size_t T = Ts[a], N = 37, K = Ks[c], n0 = 3, n1 = 34;
                float *x = test_rnd(T * K, &s, 1), *w = test_rnd(N * K, &s, 1), *bias = test_rnd(N, &s, 1);
                float *rows = test_rnd(T * N, &s, 0), *one = test_rnd(N, &s, 0);
                float *scratch = test_rnd(ks[i]->matmul_scratch, &s, 0);
                for (int b = 0; b < 2; b++) {
                    const float *bb = b ? bias : NULL;
                    ks[i]->matmul_rows(ks[i], rows, x, w, SM_DTYPE_F32, bb, T, N, K, n0, n1, scratch);
                    for (size_t t = 0; t < T; t++) {
                        ks[i]->matmul(ks[i], one, x + t * K, w, SM_DTYPE_F32, bb, 1, N, K, n0, n1, scratch);
                        CHECKF(memcmp(rows + t * N + n0, one + n0, (n1 - n0) * sizeof(float)) == 0,
                               "%s matmul_rows T=%zu K=%zu bias=%d: row %zu differs from the row alone",
                               ks[i]->name, T, K, b, t);
                    }
                }
                free(x), free(w), free(bias), free(rows), free(one), free(scratch);
            }
}

/*
** The packed product (T >= 4) computes each row the same whatever the call's
** other rows: a row at the start of a call of T rows and at the end of one
** (where a block's last rows go through the smaller micro-kernels) equals the
** same row in a call of 4, bit for bit; prompts prefilled together and
** prefix reuse rest on it (docs/architecture.md).
*/
void test_kernels_matmul_any_rows(void) {
    const sm_kernels *ks[8];
    size_t nk = tables(ks);
    static const size_t Ks[] = {17, 256, 300};
    unsigned long long s = 13;
    for (size_t i = 1; i < nk; i++)
        for (size_t c = 0; c < sizeof Ks / sizeof *Ks; c++)
            for (size_t T = 4; T <= 21; T++) {
                size_t N = 37, K = Ks[c], n0 = 2, n1 = 35;
                float *x = test_rnd(T * K, &s, 1), *w = test_rnd(N * K, &s, 1), *bias = test_rnd(N, &s, 1);
                float *all = test_rnd(T * N, &s, 0), *four = test_rnd(4 * N, &s, 0);
                float *scratch = test_rnd(ks[i]->matmul_scratch, &s, 0);
                ks[i]->matmul(ks[i], all, x, w, SM_DTYPE_F32, bias, T, N, K, n0, n1, scratch);
                for (int end = 0; end < 2; end++) {
                    size_t t0 = end ? T - 4 : 0;
                    ks[i]->matmul(ks[i], four, x + t0 * K, w, SM_DTYPE_F32, bias, 4, N, K, n0, n1, scratch);
                    for (size_t t = 0; t < 4; t++)
                        CHECKF(memcmp(all + (t0 + t) * N + n0, four + t * N + n0, (n1 - n0) * sizeof(float)) == 0,
                               "%s matmul T=%zu K=%zu: row %zu differs from the same row in a call of 4",
                               ks[i]->name, T, K, t0 + t);
                }
                free(x), free(w), free(bias), free(all), free(four), free(scratch);
            }
}

/*
** transpose: every table's out rows [c0, c1) are in's columns, exactly, on
** sizes with and without whole 8 x 8 tiles and 32-wide blocks, with rows
** packed (ldi = C, ldo = R) and strided on both sides (training's causal
** blocks); rows outside the range and the gaps between rows untouched.
*/
void test_kernels_transpose(void) {
    const sm_kernels *ks[8];
    size_t nk = tables(ks);
    static const size_t Rs[] = {1, 7, 8, 33, 64, 100}, Cs[] = {1, 9, 16, 40, 65};
    unsigned long long s = 17;
    for (size_t i = 0; i < nk; i++)
        for (size_t a = 0; a < sizeof Rs / sizeof *Rs; a++)
            for (size_t b = 0; b < sizeof Cs / sizeof *Cs; b++)
                for (size_t pad = 0; pad < 2; pad++) {
                    size_t R = Rs[a], C = Cs[b], c0 = C / 4, c1 = C - C / 5;
                    size_t ldi = C + 3 * pad, ldo = R + 5 * pad;
                    float *in = test_rnd(R * ldi, &s, 1), *out = test_rnd(C * ldo, &s, 0);
                    for (size_t j = 0; j < C * ldo; j++) out[j] = -7.0f;
                    ks[i]->transpose(out, ldo, in, ldi, R, c0, c1);
                    size_t bad = 0;
                    for (size_t c = 0; c < C; c++)
                        for (size_t r = 0; r < ldo; r++)
                            bad += out[c * ldo + r] != (c >= c0 && c < c1 && r < R ? in[r * ldi + c] : -7.0f);
                    CHECKF(bad == 0, "%s transpose R=%zu C=%zu ldi=%zu ldo=%zu [%zu,%zu): %zu elements wrong",
                           ks[i]->name, R, C, ldi, ldo, c0, c1, bad);
                    free(in), free(out);
                }
}

/* w narrowed to dt (16-bit) into q, and q widened back into wide (what the kernels must use). */
static void narrow(sm_dtype dt, const float *w, size_t n, uint16_t *q, float *wide) {
    for (size_t i = 0; i < n; i++) {
        q[i] = dt == SM_DTYPE_F16 ? sm_f32_to_f16(w[i]) : sm_f32_to_bf16(w[i]);
        wide[i] = dt == SM_DTYPE_F16 ? sm_f16_to_f32(q[i]) : sm_bf16_to_f32(q[i]);
    }
}

/*
** A composed table taking decoding's products from the AVX2 table on a CPU
** with AVX-512 ("avx512,rows=avx2", a Zen 4's auto choice) runs its batches
** on 512-bit registers (avx512_rows.c): every row of matmul_rows, f32, f16
** and bf16 weights, bit for bit the AVX2 table's one-row product of it, for
** row lengths whose chunks of 8 end in every place of the two 16-lane sums
** (a partial last chunk in either half, a last vector of one chunk), token
** counts with and without whole tiles of 4, and a column range whose last
** weight rows are not a whole tile.
*/
void test_kernels_rows_on_512(void) {
    const sm_kernels *zen4 = sm_kernels_select("avx512,rows=avx2"), *avx2 = sm_kernels_select("avx2");
    if (!zen4 || !avx2) {
        test_skip("the CPU lacks AVX-512 (or the build the x86 tables): no batches on 512-bit registers");
        return;
    }
    char desc[256]; /* info says so */
    sm_kernels_describe(zen4, desc, sizeof desc);
    CHECKF(strstr(desc, "rows avx2 (batches on 512-bit registers)") != NULL, "describe: '%s'", desc);
    static const size_t Ts[] = {3, 4, 5, 8, 13, 16};
    static const size_t Ks[] = {1, 7, 8, 9, 15, 16, 17, 24, 25, 31, 33, 40, 288, 767, 768, 1031, 3072};
    static const sm_dtype dts[] = {SM_DTYPE_F32, SM_DTYPE_F16, SM_DTYPE_BF16};
    unsigned long long s = 29;
    for (size_t d = 0; d < 3; d++)
        for (size_t a = 0; a < sizeof Ts / sizeof *Ts; a++)
            for (size_t c = 0; c < sizeof Ks / sizeof *Ks; c++) {
                size_t T = Ts[a], N = 37, K = Ks[c], n0 = 3, n1 = 34;
                float *x = test_rnd(T * K, &s, 1), *w = test_rnd(N * K, &s, 1), *bias = test_rnd(N, &s, 1);
                float *rows = test_rnd(T * N, &s, 0), *one = test_rnd(N, &s, 0), *wide = test_rnd(N * K, &s, 0);
                uint16_t *q = malloc(N * K * sizeof *q);
                const void *wt = w;
                if (dts[d] != SM_DTYPE_F32) narrow(dts[d], w, N * K, q, wide), wt = q;
                size_t sc = zen4->matmul_scratch > avx2->matmul_scratch ? zen4->matmul_scratch : avx2->matmul_scratch;
                float *scratch = test_rnd(sc, &s, 0);
                for (int b = 0; b < 2; b++) {
                    const float *bb = b ? bias : NULL;
                    zen4->matmul_rows(zen4, rows, x, wt, dts[d], bb, T, N, K, n0, n1, scratch);
                    for (size_t t = 0; t < T; t++) {
                        avx2->matmul(avx2, one, x + t * K, wt, dts[d], bb, 1, N, K, n0, n1, scratch);
                        CHECKF(memcmp(rows + t * N + n0, one + n0, (n1 - n0) * sizeof(float)) == 0,
                               "%s matmul_rows %s T=%zu K=%zu bias=%d: row %zu differs from the AVX2 row alone",
                               zen4->name, sm_dtype_name(dts[d]), T, K, b, t);
                    }
                }
                free(x), free(w), free(bias), free(rows), free(one), free(wide), free(q), free(scratch);
            }
}

/*
** 16-bit weights: every table's matmul and matmul_rows on f16 and bf16
** weights give bit for bit what the same table gives on their f32 widening,
** on both paths (matrix-vector T < 4, packed panels T >= 4), vector tails
** (K not a multiple of 16 or 8) and a column range that is not aligned. With
** test_kernels_matmul that puts every table within tolerance of the scalar
** reference for every dtype. The products a table runs on vdpbf16ps (its
** dot16_types) are test_kernels_matmul_dot16's; where they exist, the
** composition that asks for f32 instead (bf16=f32) is tested here.
*/
void test_kernels_matmul_16bit(void) {
    const sm_kernels *ks[8];
    size_t nk = tables(ks);
    if (ks[nk - 1]->dot16_types) ks[nk++] = sm_kernels_select("avx512,bf16=f32"); /* its exact GEMM */
    static const size_t Ts[] = {1, 2, 3, 4, 9, 17};
    static const size_t Ks[] = {1, 7, 16, 17, 255, 257, 513, 1031, 2053};
    static const sm_dtype dts[] = {SM_DTYPE_F16, SM_DTYPE_BF16};
    unsigned long long s = 11;
    for (size_t d = 0; d < 2; d++)
        for (size_t a = 0; a < sizeof Ts / sizeof *Ts; a++)
            for (size_t c = 0; c < sizeof Ks / sizeof *Ks; c++) {
                size_t T = Ts[a], N = 37, K = Ks[c], n0 = 3, n1 = 35;
                float *x = test_rnd(T * K, &s, 1), *w = test_rnd(N * K, &s, 1), *bias = test_rnd(N, &s, 1);
                float *wide = test_rnd(N * K, &s, 0), *want = test_rnd(T * N, &s, 0), *got = test_rnd(T * N, &s, 0);
                uint16_t *q = malloc(N * K * sizeof *q);
                narrow(dts[d], w, N * K, q, wide);
                for (size_t i = 0; i < nk; i++)
                    for (int rows = 0; rows < 2; rows++) {
                        if (!rows && sm_kernels_dot16_takes(ks[i], dts[d], T, K)) continue;
                        sm_matmul_fn mm = rows ? ks[i]->matmul_rows : ks[i]->matmul;
                        float *scratch = test_rnd(ks[i]->matmul_scratch, &s, 0);
                        for (size_t j = 0; j < T * N; j++) want[j] = got[j] = 12345.0f;
                        mm(ks[i], want, x, wide, SM_DTYPE_F32, bias, T, N, K, n0, n1, scratch);
                        mm(ks[i], got, x, q, dts[d], bias, T, N, K, n0, n1, scratch);
                        free(scratch);
                        CHECKF(memcmp(want, got, T * N * sizeof *got) == 0,
                               "%s %s %s T=%zu K=%zu: differs from the f32-widened weights",
                               ks[i]->name, rows ? "matmul_rows" : "matmul",
                               dts[d] == SM_DTYPE_F16 ? "f16" : "bf16", T, K);
                    }
                free(x), free(w), free(bias), free(wide), free(want), free(got), free(q);
            }
}

/*
** The packed products on vdpbf16ps (tables whose dot16_types has the type;
** f16 in a copy of the table that asks for it): every output within f32
** rounding of sum_k bf16(x) bf16(w) (+ bias) computed in double, where the
** unrounded x would be far off (one case is exact: x = 1 + 2^-10 rounds to
** 1); each row bit for bit the same computed in a call of 4 rows, and the
** columns in two calls; columns outside [n0, n1) untouched. T crosses the
** blocks of SM_BF16_MC rows, K the slices of SM_BF16_KC columns and the
** panels' 8-pair transposes.
*/
void test_kernels_matmul_dot16(void) {
    const sm_kernels *avail[8];
    size_t na = tables(avail), tested = 0;
    static const size_t Ts[] = {4, 5, 9, 17, 80, 200, 401};
    static const size_t Ks[] = {2, 16, 34, 64, 510, 512, 530, 1040, 2048};
    unsigned long long s = 17;
    for (size_t i = 0; i < na; i++) {
        if (!avail[i]->dot16_types) continue;
        sm_kernels k = *avail[i];
        k.dot16_types |= 1u << SM_DTYPE_F16;
        float *scratch = test_rnd(k.matmul_scratch, &s, 0);
        for (int d = 0; d < 2; d++) {
            sm_dtype dt = d ? SM_DTYPE_BF16 : SM_DTYPE_F16;
            const char *dn = d ? "bf16" : "f16";
            for (size_t a = 0; a < sizeof Ts / sizeof *Ts; a++)
                for (size_t c = 0; c < sizeof Ks / sizeof *Ks; c++) {
                    size_t T = Ts[a], N = 37 + 32 * (a % 2), K = Ks[c], n0 = 3, n1 = N - 2;
                    CHECK(sm_kernels_dot16_takes(&k, dt, T, K) && !sm_kernels_dot16_takes(&k, dt, 3, K) &&
                          !sm_kernels_dot16_takes(&k, dt, T, K + 1));
                    float *x = test_rnd(T * K, &s, 1), *w = test_rnd(N * K, &s, 1), *bias = test_rnd(N, &s, 1);
                    float *wide = test_rnd(N * K, &s, 0), *got = test_rnd(T * N, &s, 0), *part = test_rnd(T * N, &s, 0);
                    uint16_t *q = malloc(N * K * sizeof *q);
                    narrow(dt, w, N * K, q, wide);
                    if (c == 1) /* the exact case: rounding x is the whole answer */
                        for (size_t j = 0; j < T * K; j++) x[j] = 1.0f + 0x1p-10f;
                    if (c == 1)
                        for (size_t j = 0; j < N * K; j++) q[j] = d ? 0x3F80 : 0x3C00, wide[j] = 1.0f;
                    for (size_t j = 0; j < T * N; j++) got[j] = part[j] = 12345.0f;
                    k.matmul(&k, got, x, q, dt, bias, T, N, K, n0, n1, scratch);
                    size_t bad = 0, far = 0;
                    for (size_t t = 0; t < T; t++)
                        for (size_t n = 0; n < N; n++) {
                            double want = 0, mag = 0, raw = 0;
                            for (size_t j = 0; j < K; j++) {
                                double wb = sm_bf16_to_f32(sm_f32_to_bf16(wide[n * K + j]));
                                double p = sm_bf16_to_f32(sm_f32_to_bf16(x[t * K + j])) * wb;
                                want += p, mag += fabs(p), raw += (double)x[t * K + j] * wb;
                            }
                            want += bias[n], raw += bias[n], mag += fabs(bias[n]);
                            double g = got[t * N + n];
                            if (n < n0 || n >= n1) bad += g != 12345.0f;
                            else bad += !(fabs(g - want) <= 2e-6 * mag * (1 + sqrt((double)K) / 8));
                            if (n >= n0 && n < n1) far += fabs(raw - want) > 2e-6 * mag * (1 + sqrt((double)K) / 8);
                            if (c == 1 && n >= n0 && n < n1) bad += g != (double)((float)K + bias[n]);
                        }
                    CHECKF(bad == 0, "%s %s T=%zu K=%zu: %zu outputs off sum bf16(x) w", k.name, dn, T, K, bad);
                    if (c == 1 || K >= 64) /* unrounded activations would be told apart */
                        CHECKF(far > 0, "%s %s T=%zu K=%zu: the test cannot tell rounded x", k.name, dn, T, K);
                    /* rows 4 at a time (the last call may overlap), columns in two calls */
                    for (size_t t = 0; t < T; t += 4) {
                        size_t t4 = t + 4 <= T ? t : T - 4;
                        size_t mid = n0 + (n1 - n0) / 2;
                        k.matmul(&k, part + t4 * N, x + t4 * K, q, dt, bias, 4, N, K, n0, mid, scratch);
                        k.matmul(&k, part + t4 * N, x + t4 * K, q, dt, bias, 4, N, K, mid, n1, scratch);
                    }
                    CHECKF(memcmp(got, part, T * N * sizeof *got) == 0,
                           "%s %s T=%zu K=%zu: a row differs computed 4 rows at a time", k.name, dn, T, K);
                    free(x), free(w), free(bias), free(wide), free(got), free(part), free(q);
                    tested++;
                }
        }
        free(scratch);
    }
    if (!tested) test_skip("no kernel table runs vdpbf16ps here (the CPU lacks AVX512-BF16, or the build the x86 tables)");
}

/*
** Conversions. The scalar ones against values worked out by hand (IEEE
** binary16: 1 sign, 5 exponent bits biased by 15, 10 mantissa bits; bf16:
** the top half of an f32), rounding to nearest even included; then every
** table's to_f32 against them on all 65,536 bit patterns of each format, at
** every length up to 40 (the vector tails).
*/
void test_kernels_to_f32(void) {
    static const struct { uint16_t h; float f; } f16[] = {
        {0x0000, 0.0f}, {0x8000, -0.0f}, {0x3C00, 1.0f}, {0xC000, -2.0f}, {0x3555, 0.333251953125f},
        {0x7BFF, 65504.0f}, {0x0400, 6.103515625e-05f}, {0x0001, 5.960464477539063e-08f},
        {0x03FF, 6.097555160522461e-05f}, {0x7C00, INFINITY}, {0xFC00, -INFINITY}};
    for (size_t i = 0; i < sizeof f16 / sizeof *f16; i++) {
        float g = sm_f16_to_f32(f16[i].h);
        CHECKF(memcmp(&g, &f16[i].f, 4) == 0, "f16 0x%04x widened to %g, expected %g", f16[i].h, g,
               f16[i].f);
        CHECKF(sm_f32_to_f16(f16[i].f) == f16[i].h, "%g narrowed to f16 0x%04x, expected 0x%04x",
               f16[i].f, sm_f32_to_f16(f16[i].f), f16[i].h);
    }
    CHECK(isnan(sm_f16_to_f32(0x7E00)) && isnan(sm_f16_to_f32(0xFC01)));
    CHECK(isnan(sm_f16_to_f32(sm_f32_to_f16(NAN))) && isnan(sm_bf16_to_f32(sm_f32_to_bf16(NAN))));
    /* rounding: ties to even, overflow to inf, underflow to zero */
    CHECK(sm_f32_to_f16(1.0f + 0x1p-11f) == 0x3C00);     /* tie, even is down */
    CHECK(sm_f32_to_f16(1.0f + 3 * 0x1p-11f) == 0x3C02); /* tie, even is up */
    CHECK(sm_f32_to_f16(1.0f + 0x1p-11f + 0x1p-20f) == 0x3C01);
    CHECK(sm_f32_to_f16(65519.0f) == 0x7BFF && sm_f32_to_f16(65520.0f) == 0x7C00);
    CHECK(sm_f32_to_f16(1e10f) == 0x7C00 && sm_f32_to_f16(-1e10f) == 0xFC00);
    CHECK(sm_f32_to_f16(0x1p-25f) == 0x0000 && sm_f32_to_f16(0x1.0p-25f * 1.5f) == 0x0001);
    CHECK(sm_f32_to_f16(3 * 0x1p-25f) == 0x0002); /* 1.5 subnormal units: tie to even 2 */
    CHECK(sm_f32_to_bf16(1.0f) == 0x3F80 && sm_f32_to_bf16(-2.0f) == 0xC000);
    CHECK(sm_f32_to_bf16(1.0f + 0x1p-8f) == 0x3F80);          /* tie, even is down */
    CHECK(sm_f32_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3F82);      /* tie, even is up */
    CHECK(sm_f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f) == 0x3F81);
    CHECK(sm_bf16_to_f32(0x3F80) == 1.0f && sm_bf16_to_f32(0x7F80) == INFINITY);
    for (uint32_t h = 0; h < 65536; h++) /* narrowing a widened value gives it back */
        if (!isnan(sm_f16_to_f32((uint16_t)h)))
            CHECKF(sm_f32_to_f16(sm_f16_to_f32((uint16_t)h)) == h, "f16 0x%04x does not round-trip", h);

    const sm_kernels *ks[8];
    size_t nk = tables(ks);
    uint16_t *all = malloc(65536 * sizeof *all);
    float *want = malloc(65536 * sizeof *want), *got = malloc(65536 * sizeof *got);
    for (uint32_t h = 0; h < 65536; h++) all[h] = (uint16_t)h;
    for (int d = 0; d < 2; d++) {
        sm_dtype dt = d ? SM_DTYPE_BF16 : SM_DTYPE_F16;
        for (uint32_t h = 0; h < 65536; h++)
            want[h] = d ? sm_bf16_to_f32((uint16_t)h) : sm_f16_to_f32((uint16_t)h);
        for (size_t i = 0; i < nk; i++) {
            ks[i]->to_f32(got, all, dt, 65536);
            CHECKF(memcmp(got, want, 65536 * sizeof *got) == 0, "%s to_f32 %s: a value differs",
                   ks[i]->name, d ? "bf16" : "f16");
            for (size_t n = 0; n <= 40; n++) {
                for (size_t j = 0; j < 48; j++) got[j] = 12345.0f;
                ks[i]->to_f32(got, all + 15360, dt, n);
                for (size_t j = 0; j < 48; j++)
                    CHECKF(j < n ? memcmp(&got[j], &want[15360 + j], 4) == 0 : got[j] == 12345.0f,
                           "%s to_f32 n=%zu: element %zu", ks[i]->name, n, j);
            }
        }
    }
    free(all), free(want), free(got);
}

/* The tables the f32 and 16-bit layout tests run (ks: room for 11): every table and composition,
   and Zen 4's entry. */
static size_t f32_tables(const sm_kernels **ks) {
    const char *specs[10];
    size_t nk = test_kernel_specs(specs, 9);
    for (size_t i = 0; i < nk; i++) ks[i] = sm_kernels_select(specs[i]);
    if ((ks[nk] = sm_kernels_select("avx512,rows=avx2")) != NULL) nk++;
    /* bf16 on f32 arithmetic where the CPU has vdpbf16ps (its bf16 panels; Emerald Rapids' pick) */
    const sm_kernels *a = sm_kernels_select("avx512");
    if (a && a->dot16_types && (ks[nk] = sm_kernels_select("avx512,bf16=f32")) != NULL) nk++;
    /* f16 on vdpbf16ps too (opt-in): its pairs packed from the f16 panels */
    if (a && a->dot16_types && (ks[nk] = sm_kernels_select("avx512,f16=bf16")) != NULL) nk++;
    /* a lone row leaving the next panels to the hardware (Zen 5's pick), or asking (the default) */
    if ((ks[nk] = sm_kernels_select("avx512,prefetch=hw")) != NULL) nk++;
    return nk;
}

/*
** want <- k's matmul of T4 >= 4 token rows x against the f32 rows w (the packed product, the
** reference of the laid-out forms), its T-row got filled with a sentinel for the form's own.
*/
static void rows_product(const sm_kernels *k, float *want, float *got, const float *x, const void *w,
                         sm_dtype dt, const float *bias, size_t T, size_t T4, size_t N, size_t K, size_t n0,
                         size_t n1, float *scr) {
    for (size_t j = 0; j < T4 * N; j++) want[j] = 12345.0f;
    for (size_t j = 0; j < T * N; j++) got[j] = 12345.0f;
    k->matmul(k, want, x, w, dt, bias, T4, N, K, n0, n1, scr);
}

/*
** Panels laid out at load (SM_DTYPE_F32_P32, SM_DTYPE_F16_P32, SM_DTYPE_BF16_P32:
** sm_kernels_repack): the layout as sm_kernels.h states it (rows past N zeros),
** and every table that takes them, the composed ones included, gives for any T
** (1 to 37, across the micro-kernels' row counts) each output bit for bit what
** the same table's packed product on the file's rows gives (T >= 4: rows added
** after x's, which change no other row), each row the same alone; columns
** outside [n0, n1) untouched; near the exact product. A 16-bit type a table
** multiplies on vdpbf16ps: its matmul of T >= 4 rows bit for bit what it
** gives on the file's rows (the column pairs packed from the panels), and
** its matmul_rows (every T, each row alone) and matmul of fewer rows bit for
** bit the exact product of a table without vdpbf16ps on the same panels.
** Skips, saying so, where no table takes them.
*/
void test_kernels_f32_panels(void) {
    const sm_kernels *ks[12];
    size_t nk = f32_tables(ks), tested = 0;
    const sm_kernels *exact = sm_kernels_select("avx512,bf16=f32,f16=f32"); /* NULL without AVX-512 */
    static const size_t Ts[] = {1, 2, 3, 5, 7, 8, 9, 16, 37}, Ks[] = {8, 100, 288, 600};
    static const sm_dtype dts[] = {SM_DTYPE_F32, SM_DTYPE_F16, SM_DTYPE_BF16};
    unsigned long long s = 41;
    for (size_t di = 0; di < sizeof dts / sizeof *dts; di++)
    for (size_t c = 0; c < sizeof Ks / sizeof *Ks; c++) {
        const sm_dtype dt = dts[di], pt = sm_kernels_repacked(dt);
        const size_t K = Ks[c], N = 80, n0 = 32, n1 = 80; /* the last group half padding */
        const size_t G = (N + SM_R32 - 1) / SM_R32, es = dt == SM_DTYPE_F32 ? 4 : 2;
        float *wf = test_rnd(N * K, &s, 1), *r = test_rnd(G * SM_R32 * K, &s, 0);
        uint16_t *wh = malloc(N * K * sizeof *wh);
        for (size_t i = 0; i < N * K; i++) { /* the file's 16-bit rows, and wf what they hold */
            wh[i] = dt == SM_DTYPE_F16 ? sm_f32_to_f16(wf[i]) : sm_f32_to_bf16(wf[i]);
            if (dt != SM_DTYPE_F32) wf[i] = dt == SM_DTYPE_F16 ? sm_f16_to_f32(wh[i]) : sm_bf16_to_f32(wh[i]);
        }
        const void *w = dt == SM_DTYPE_F32 ? (const void *)wf : (const void *)wh;
        CHECK(sm_kernels_repackable(dt, N, K) && sm_dtype_base(pt) == dt && pt != dt);
        sm_kernels_repack(r, w, dt, N, K, 0, G);
        size_t bad = 0;
        for (size_t n = 0; n < G * SM_R32; n++)
            for (size_t k = 0; k < K; k++)
                bad += memcmp((const char *)r + (n / SM_R32 * SM_R32 * K + k * SM_R32 + n % SM_R32) * es,
                              n < N ? (const char *)w + (n * K + k) * es : (const char *)&(float){0}, es) != 0;
        CHECKF(bad == 0, "%s K=%zu: %zu weights of the panels misplaced", sm_dtype_name(dt), K, bad);
        for (size_t ti = 0; ti < sizeof Ts / sizeof *Ts; ti++) {
            const size_t T = Ts[ti], T4 = T < 4 ? 4 : T;
            float *x = test_rnd(T4 * K, &s, 2), *bias = test_rnd(N, &s, 1);
            float *want = test_rnd(T4 * N, &s, 0), *got = test_rnd(T * N, &s, 0), *one = test_rnd(N, &s, 0);
            size_t here = 0;
            for (size_t ki = 0; ki < nk; ki++) {
                const sm_kernels *k = ks[ki];
                if (!(sm_kernels_repack_types(k) >> dt & 1u)) continue;
                float *scr = test_rnd(sm_kernels_scratch(k, K), &s, 0);
                for (int bi = 0; bi < 2 && !sm_kernels_rows_alike(k, pt); bi++) { /* on vdpbf16ps */
                    const float *bb = bi ? bias : NULL;
                    float *ex = test_rnd(T * N, &s, 0);
                    CHECK(exact && (sm_kernels_repack_types(exact) >> dt & 1u) && sm_kernels_rows_alike(exact, pt));
                    rows_product(k, want, got, x, w, dt, bb, T, T4, N, K, n0, n1, scr);
                    for (size_t j = 0; j < T * N; j++) ex[j] = 12345.0f;
                    if (exact) exact->matmul(exact, ex, x, r, pt, bb, T, N, K, n0, n1, scr);
                    k->matmul(k, got, x, r, pt, bb, T, N, K, n0, n1, scr);
                    CHECKF(memcmp(T >= 4 ? want : ex, got, T * N * sizeof *got) == 0,
                           "%s %s T=%zu K=%zu bias %d: matmul on the panels differs from %s", k->name,
                           sm_dtype_name(dt), T, K, bi, T >= 4 ? "the file's rows" : "the exact product");
                    for (size_t j = 0; j < T * N; j++) got[j] = 12345.0f;
                    k->matmul_rows(k, got, x, r, pt, bb, T, N, K, n0, n1, scr);
                    CHECKF(memcmp(ex, got, T * N * sizeof *got) == 0,
                           "%s %s T=%zu K=%zu bias %d: matmul_rows on the panels differs from the exact product",
                           k->name, sm_dtype_name(dt), T, K, bi);
                    for (size_t i = 0; i < T; i += 1 + T / 3) { /* a row alone */
                        for (size_t j = 0; j < N; j++) one[j] = 12345.0f;
                        k->matmul_rows(k, one, x + i * K, r, pt, bb, 1, N, K, n0, n1, scr);
                        CHECKF(memcmp(one, ex + i * N, N * sizeof *one) == 0,
                               "%s %s T=%zu K=%zu: row %zu alone differs", k->name, sm_dtype_name(dt), T, K, i);
                    }
                    free(ex);
                    tested++;
                }
                for (int bi = 0; bi < 2 && sm_kernels_rows_alike(k, pt); bi++) {
                    const float *bb = bi ? bias : NULL;
                    rows_product(k, want, got, x, w, dt, bb, T, T4, N, K, n0, n1, scr);
                    k->matmul(k, got, x, r, pt, bb, T, N, K, n0, 64, scr);
                    k->matmul_rows(k, got, x, r, pt, bb, T, N, K, 64, n1, scr);
                    CHECKF(memcmp(want, got, T * N * sizeof *got) == 0,
                           "%s %s T=%zu K=%zu bias %d: panels differ from the packed product", k->name,
                           sm_dtype_name(dt), T, K, bi);
                    for (size_t i = 0; i < T; i += 1 + T / 3) { /* a row alone */
                        for (size_t j = 0; j < N; j++) one[j] = 12345.0f;
                        k->matmul_rows(k, one, x + i * K, r, pt, bb, 1, N, K, n0, n1, scr);
                        CHECKF(memcmp(one, got + i * N, N * sizeof *one) == 0,
                               "%s %s T=%zu K=%zu: row %zu alone differs", k->name, sm_dtype_name(dt), T, K, i);
                    }
                    tested++, here++;
                }
                free(scr);
            }
            double err = 0, mag = 0; /* the packed product itself near the exact sum */
            for (size_t t = 0; here && t < T; t++)
                for (size_t n = n0; n < n1; n++) {
                    double e = bias[n];
                    for (size_t kk = 0; kk < K; kk++) e += (double)x[t * K + kk] * wf[n * K + kk];
                    mag += fabs(e), err += fabs(e - got[t * N + n]);
                }
            CHECKF(err <= 1e-5 * mag, "%s K=%zu T=%zu: far from the exact product (%g of %g)", sm_dtype_name(dt),
                   K, T, err, mag);
            free(x), free(bias), free(want), free(got), free(one);
        }
        free(wf), free(wh), free(r);
    }
    if (!tested) test_skip("no kernel table here multiplies f32 panels (the avx512 table's packed product)");
}

/*
** Weights held transposed (SM_DTYPE_F32_T, training's backward products):
** every table's matmul, any T (1 to 37), gives each output bit for bit what
** the same table's matmul gives on the weights as rows with at least 4 token
** rows (the packed product; rows added after x's change no other row), with
** and without a bias; columns outside [n0, n1) untouched.
*/
void test_kernels_f32_transposed(void) {
    const sm_kernels *ks[11];
    size_t nk = f32_tables(ks);
    static const size_t Ts[] = {1, 2, 3, 4, 5, 8, 9, 17, 37}, Ks[] = {8, 100, 288};
    unsigned long long s = 43;
    for (size_t c = 0; c < sizeof Ks / sizeof *Ks; c++) {
        const size_t K = Ks[c], N = 80, n0 = 16, n1 = 77;
        float *w = test_rnd(N * K, &s, 1), *wt = test_rnd(K * N, &s, 0);
        for (size_t n = 0; n < N; n++)
            for (size_t k = 0; k < K; k++) wt[k * N + n] = w[n * K + k];
        for (size_t ti = 0; ti < sizeof Ts / sizeof *Ts; ti++) {
            const size_t T = Ts[ti], T4 = T < 4 ? 4 : T;
            float *x = test_rnd(T4 * K, &s, 2), *bias = test_rnd(N, &s, 1);
            float *want = test_rnd(T4 * N, &s, 0), *got = test_rnd(T * N, &s, 0);
            for (size_t ki = 0; ki < nk; ki++) {
                const sm_kernels *k = ks[ki];
                float *scr = test_rnd(sm_kernels_scratch(k, K), &s, 0);
                for (int bi = 0; bi < 2; bi++) {
                    const float *bb = bi ? bias : NULL;
                    rows_product(k, want, got, x, w, SM_DTYPE_F32, bb, T, T4, N, K, n0, n1, scr);
                    k->matmul(k, got, x, wt, SM_DTYPE_F32_T, bb, T, N, K, n0, n1, scr);
                    CHECKF(memcmp(want, got, T * N * sizeof *got) == 0,
                           "%s T=%zu K=%zu bias %d: transposed weights differ from the rows' product",
                           k->name, T, K, bi);
                }
                free(scr);
            }
            free(x), free(bias), free(want), free(got);
        }
        free(w), free(wt);
    }
}
