/*
** avx2_qgemm.c -- the packed quantized product (sm_qkernel.gemm), built
** once per flavour like avx2_quant.c: prefill's many token rows against
** one pass over the weights, as integer dot products on 8-bit activations.
**
** A panel of GNR weight rows holds, per 32-weight block, the rows' levels
** as unsigned bytes interleaved four at a time ([8 groups][GNR rows][4
** bytes]), then the rows' block scales D and zero-point terms M as floats,
** w = D u - M (q4_0: D = d, M = 8 d; q8_0: u = w + 128, M = 128 d; q4_k /
** q5_k: D = d sc, M = dmin m). So one vector load is four columns of GV
** rows, and one broadcast of four activation bytes feeds a dot product per
** vector: int32 lanes are output rows, and a block's integer sums are
** exact. Each block then adds D (d_x sum) - M xs per row and token, in f32;
** where M is a fixed multiple z of D (q4_0: 8, q8_0: 128) the integer sum
** starts instead from -z times the block's activation sum (xz), so the
** block adds D d_x sum alone: one f32 operation fewer per row and token.
** q6_k's scale changes every 16 weights: its two halves keep separate
** integer sums, each started from its zero point, -32 times the half's
** activation sum (xz), and D, M hold the halves' scales d sc. q2_k's
** levels come times their 16 weights' scale (u = sc q, D = d), its
** halves' mins apart: M and M2 (dmin m) times d_x and each half's
** activation sum (xz), taken off after the block's one integer sum.
**
** The micro-kernel keeps GMR tokens x GNR rows of accumulators in
** registers: AVX512-VNNI on 512-bit vectors (32 of them: 2 x 16 rows x 5
** tokens of int32 and f32 sums, with room for a block's levels; at 6 GCC
** spilled in the block loop and TinyLlama's q4_0 prefill ran 9% slower on a
** Zen 5), the 256-bit flavours on 8 rows x 6 tokens (16 registers).
** vpmaddubsw's int16 pair sums would saturate on q8_0's unsigned bytes
** (2 x 255 x 127), so that flavour leaves q8_0 to the dequantizing path
** (gemm_types).
**
** Loops: token blocks of SM_QGEMM_MC, column slices of SM_QGEMM_KC (the
** slice's activations quantized, then each panel packed once and met by
** every token of the block). Each output's sums run in the same order
** whatever the panel or token tile it falls in, so splitting the rows
** between threads changes no bit.
*/
#if defined(__x86_64__) || defined(__i386__)
#include "avx2_quant.h"

/* The vector type of the flavour: 512-bit for AVX512-VNNI, else 256-bit; VOP(op) its intrinsic. */
#if SM_QFLAVOUR == 2
enum { GV = 16, GNV = 2 };
typedef __m512i gvi;
typedef __m512 gvf;
#define VOP(op) _mm512_##op
static AI gvi g_zero(void) { return _mm512_setzero_si512(); }
static AI gvi g_dot(gvi a, gvi u, gvi s) { return _mm512_dpbusd_epi32(a, u, s); }
static AI gvi g_load(const uint8_t *p) { return _mm512_loadu_si512((const void *)p); }
static AI void g_store(uint8_t *p, gvi v) { _mm512_storeu_si512((void *)p, v); }
static AI gvi g_and(gvi a, gvi b) { return _mm512_and_si512(a, b); }
static AI gvi g_or(gvi a, gvi b) { return _mm512_or_si512(a, b); }
static AI gvi g_srli32(gvi a, unsigned n) { return _mm512_srli_epi32(a, n); }
static AI gvi g_slli32(gvi a, unsigned n) { return _mm512_slli_epi32(a, n); }
static AI gvi g_shuffle(gvi t, gvi i) { return _mm512_shuffle_epi8(t, i); }
static AI gvi g_bcast128(__m128i v) { return _mm512_broadcast_i32x4(v); }
/* GV f16 at p as f32; GV unsigned (signed) bytes at p as f32 */
static AI gvf g_f16(const uint8_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)p)); }
static AI gvf g_u8f(const uint8_t *p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)p)));
}
static AI gvf g_i8f(const uint8_t *p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)p)));
}
#else
enum { GV = 8, GNV = 1 };
typedef __m256i gvi;
typedef __m256 gvf;
#define VOP(op) _mm256_##op
static AI gvi g_zero(void) { return _mm256_setzero_si256(); }
static AI gvi g_dot(gvi a, gvi u, gvi s) { return dot_u8s8(a, u, s); }
static AI gvi g_load(const uint8_t *p) { return _mm256_loadu_si256((const __m256i *)(const void *)p); }
static AI void g_store(uint8_t *p, gvi v) { _mm256_storeu_si256((__m256i *)(void *)p, v); }
static AI gvi g_and(gvi a, gvi b) { return _mm256_and_si256(a, b); }
static AI gvi g_or(gvi a, gvi b) { return _mm256_or_si256(a, b); }
static AI gvi g_srli32(gvi a, unsigned n) { return _mm256_srli_epi32(a, (int)n); }
static AI gvi g_slli32(gvi a, unsigned n) { return _mm256_slli_epi32(a, (int)n); }
static AI gvi g_shuffle(gvi t, gvi i) { return _mm256_shuffle_epi8(t, i); }
static AI gvi g_bcast128(__m128i v) { return _mm256_broadcastsi128_si256(v); }
static AI gvf g_f16(const uint8_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p)); }
static AI gvf g_u8f(const uint8_t *p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p)));
}
static AI gvf g_i8f(const uint8_t *p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p)));
}
#endif
static AI gvi g_set1b(char c) { return VOP(set1_epi8)(c); }
/* iq4_nl's 16 levels made unsigned (+ 128) in every 128-bit lane: a nibble's through g_shuffle */
static AI gvi g_iq4u(void) {
    return g_bcast128(_mm_xor_si128(_mm_loadu_si128((const __m128i *)(const void *)SM_IQ4NL), _mm_set1_epi8((char)0x80)));
}
static AI gvi g_bcast(int32_t v) { return VOP(set1_epi32)(v); }
static AI gvf g_cvt(gvi v) { return VOP(cvtepi32_ps)(v); }
static AI gvf g_loadf(const float *p) { return VOP(loadu_ps)(p); }
static AI void g_storef(float *p, gvf v) { VOP(storeu_ps)(p, v); }
static AI gvf g_set1f(float v) { return VOP(set1_ps)(v); }
static AI gvf g_zerof(void) { return VOP(setzero_ps)(); }
static AI gvf g_mul(gvf a, gvf b) { return VOP(mul_ps)(a, b); }
static AI gvf g_add(gvf a, gvf b) { return VOP(add_ps)(a, b); }
static AI gvf g_fmadd(gvf a, gvf b, gvf c) { return VOP(fmadd_ps)(a, b, c); }
static AI gvf g_fnmadd(gvf a, gvf b, gvf c) { return VOP(fnmadd_ps)(a, b, c); }
#if SM_QFLAVOUR == 0
/*
** vpmaddubsw's int16 pair sums added up in int16 (vpaddw) over a run of a
** block's 4-byte groups, then widened once by vpmaddwd: one multiply a
** group instead of two (the two share the multiply ports; a Zen 1 has one
** for them). Activations are within 128 of zero, so a run of n groups of
** levels up to L sums to at most n 2 L 128 in a lane: 8 groups of 4-bit
** levels (30,720), 4 of 5-bit ones (31,744), 2 of 6-bit ones or of q2_k's
** scaled 2-bit ones (up to 45). Integer sums are exact however grouped:
** the same bits as a vpmaddwd a group. fresh: a run's first group.
*/
static AI gvi g_dot16(gvi a16, gvi u, gvi s, bool fresh) {
    const gvi p = _mm256_maddubs_epi16(u, s);
    return fresh ? p : _mm256_add_epi16(a16, p);
}
static AI gvi g_widen(gvi a, gvi a16) { return _mm256_add_epi32(a, _mm256_madd_epi16(a16, _mm256_set1_epi16(1))); }
/* groups a run may add for levels up to top: n 2 top 128 within int16 */
#define RUN_GROUPS(top) (32767 / (256 * (top)))
#endif

enum {
    GMR = SM_QFLAVOUR == 2 ? 5 : 6,   /* tokens per micro-kernel call: 2 GMR GNV accumulators */
    GMR_Q6 = 4,                       /* q6_k's (3 GMR GNV: its halves' integer sums apart) */
    GNR = GV * GNV,                   /* rows per panel */
    GBS = 40 * GNR,                   /* bytes per packed block: levels, D, M */
    GBS_Q2 = 44 * GNR,                /* q2_k's: and M2 (apart, the others' panels read 10% fewer lines) */
    KB = SM_QGEMM_KC / SM_QK,         /* blocks per column slice */
};
_Static_assert(GNR <= SM_QGEMM_NR, "panel wider than SM_QGEMM_NR");
/* a packed block's bytes: q2_k's panels (q2) or the others' */
static AI size_t gbs(bool q2) { return q2 ? GBS_Q2 : GBS; }
/* Vectors of rows a micro-kernel call takes at most: GNV, and a lone token row on the 256-bit
   flavours two (a 16-row half of a repacked row group: ONE_NV). */
enum { ONE_NV = 2, NVMAX = GNV > ONE_NV ? GNV : ONE_NV };

#include "avx2_qpack.h" /* pack: a panel from the file's rows */

/*
** out rows i < r (stride N), columns < nr: plus (or, on the first slice,
** bias plus) the products of token rows i (quantized levels xq, stride
** SM_QGEMM_KC; scales xd and scaled sums xs, stride KB) with the panel's
** nbk blocks. A whole call (one token row, nbk > KB: its rows' every
** slice, first; a kernel of its own, whole a constant) adds each slice's sums in a
** register to those of the slices before it, as out would hold them
** between calls of one slice each: the same f32 operations in the same
** order, so the same bits.
*/
/* How a block's integer sums become f32 (see the top): D d_x sum - M xs (MIN), from zero point
   xz (ZP), two halves from their zero points (Q6). */
enum { MIN, ZP, Q6, Q2 };

#include "avx2_qr32.h" /* the repacked layouts, read in place */

static AI void micro(int mode, int nv, size_t r, float *restrict out, size_t N, const int8_t *restrict xq,
                     const float *restrict xd, const float *restrict xs, const int32_t *restrict xz,
                     wsrc src, size_t nbk, const float *restrict bias, int first, size_t nr, bool whole) {
    gvf acc[GMR][NVMAX];
    /* the tile's outputs asked for, to be written, while its sums run: a product's outputs (T x N
       floats) outgrow L2, and each store missing it stalled the tile's end (a fifth of a Zen 4's
       time at 256 x 8,192) */
    for (size_t i = 0; i < r; i++)
        for (int v = 0; v < nv && nr > (size_t)v * GV; v++) __builtin_prefetch(out + i * N + v * GV, 1, 3);
    for (size_t i = 0; i < r; i++)
        for (int v = 0; v < nv; v++) acc[i][v] = g_zerof();
    gvf part[GMR][NVMAX]; /* (whole) the slices' sums so far: first bias, or zero */
    for (size_t i = 0; i < r; i++)
        for (int v = 0; v < nv; v++) {
            const size_t c0 = (size_t)v * GV;
            if (!whole || !bias || nr <= c0) part[i][v] = g_zerof();
            else if (nr >= c0 + GV) part[i][v] = g_loadf(bias + c0);
            else {
                float a[GV] = {0};
                for (size_t l = 0; l < nr - c0; l++) a[l] = bias[c0 + l];
                part[i][v] = g_loadf(a);
            }
        }
    for (size_t b = 0; b < nbk; b++) {
        const bool q6 = mode == Q6;
        if (whole && b && b % KB == 0) /* a slice's end */
            for (size_t i = 0; i < r; i++)
                for (int v = 0; v < nv; v++) part[i][v] = g_add(acc[i][v], part[i][v]), acc[i][v] = g_zerof();
        gvi ia[GMR][NVMAX], ih[GMR][NVMAX]; /* q6_k: groups 0-3 in ih, 4-7 in ia */
        for (size_t i = 0; i < r; i++)
            for (int v = 0; v < nv; v++) ia[i][v] = mode == ZP || q6 ? g_bcast(xz[2 * (i * KB + b)]) : g_zero();
        gvf D[NVMAX], M[NVMAX], M2[NVMAX]; /* M2: q2_k's second half's min (its panel only) */
        if (src.lay != PANEL) { /* repacked rows: the same levels and scales, read in place */
            const size_t ob = r_off(src.lay, b);
            ahead pf = {NULL, 0}; /* what r32_block asks for as it goes */
            if (src.ahead) { /* the row group's block (to the next one's start), into L2: */
                const size_t lines = (r_off(src.lay, b + 1) - ob) / 64;
#if SM_QFLAVOUR == 2 /* R32_AHEAD bytes on: a lone token row's spread over the block's groups
                        (ask_share), more rows' asked at once */
                const ahead a = {(const char *)src.base + ob + R32_AHEAD, lines};
                if (r == 1) pf = a;
                else ask_share(a, 0, 1);
#else /* a slice on, a share of its lines by each of the group's passes (AHEAD_256); a whole
         row's call (whole): all of them by its first pass, the next row group's (nbk blocks
         on: whole super-blocks) by its second */
                const bool second = whole && src.part;
                const ahead a = {(const char *)src.base + ob + r_off(src.lay, second ? nbk : KB), lines};
                if (!whole) ask_share(a, src.part, SM_R32 / (GV * (size_t)nv));
                else if (!second || src.next) ask_share(a, 0, 1);
#endif
            }
            if (q6) /* the halves from their zero points */
                for (size_t i = 0; i < r; i++)
                    for (int v = 0; v < nv; v++) ih[i][v] = ia[i][v], ia[i][v] = g_bcast(xz[2 * (i * KB + b) + 1]);
            r32_block(nv, src, b, r, ia, ih, xq + SM_QK * b, pf);
            for (int v = 0; v < nv; v++) r32_dm(src, v, b, &D[v], &M[v]), M2[v] = g_zerof();
        } else
        {
            const uint8_t *pb = src.panel + b * gbs(mode == Q2);
#if SM_QFLAVOUR == 0 /* int16 runs (g_dot16): this flavour's ZP type is q4_0, its MIN ones 4- or 5-bit */
            const int run = mode == ZP ? RUN_GROUPS(15) : mode == MIN ? RUN_GROUPS(31) : RUN_GROUPS(63);
            gvi a16[GMR][NVMAX] = {{g_zero()}}; /* (all set by a run's first group) */
#endif
            for (int g = 0; g < 8; g++) {
                if (q6 && g == 4)
                    for (size_t i = 0; i < r; i++)
                        for (int v = 0; v < nv; v++)
                            ih[i][v] = ia[i][v], ia[i][v] = g_bcast(xz[2 * (i * KB + b) + 1]);
                gvi wv[NVMAX];
                for (int v = 0; v < nv; v++) wv[v] = g_load(pb + 4 * (g * GNR + v * GV));
                for (size_t i = 0; i < r; i++) {
                    int32_t x4;
                    memcpy(&x4, xq + i * SM_QGEMM_KC + SM_QK * b + 4 * g, 4);
                    gvi xb = g_bcast(x4);
#if SM_QFLAVOUR == 0
                    for (int v = 0; v < nv; v++) {
                        a16[i][v] = g_dot16(a16[i][v], wv[v], xb, g % run == 0);
                        if (g % run == run - 1) ia[i][v] = g_widen(ia[i][v], a16[i][v]);
                    }
#else
                    for (int v = 0; v < nv; v++) ia[i][v] = g_dot(ia[i][v], wv[v], xb);
#endif
                }
            }
            const float *pd = (const float *)(const void *)(pb + 32 * GNR);
            for (int v = 0; v < nv; v++)
                D[v] = g_loadf(pd + v * GV), M[v] = g_loadf(pd + GNR + v * GV),
                M2[v] = mode == Q2 ? g_loadf(pd + 2 * GNR + v * GV) : g_zerof();
        }
        /* the block's integer sums into f32, the same operations whatever the weights' source */
        for (size_t i = 0; i < r; i++) {
            const float d = xd[i * KB + b];
            const gvf dx = g_set1f(d), sx = g_set1f(xs[i * KB + b]);
            const int32_t *hs = xz + 2 * (i * KB + b); /* q2_k: d_x times minus each half's sum */
            const gvf s1 = mode == Q2 ? g_set1f(d * (float)hs[0]) : sx, s2 = mode == Q2 ? g_set1f(d * (float)hs[1]) : sx;
            for (int v = 0; v < nv; v++) {
                if (q6) {
                    gvf h = g_fmadd(g_cvt(ih[i][v]), D[v], g_mul(g_cvt(ia[i][v]), M[v]));
                    acc[i][v] = g_fmadd(h, dx, acc[i][v]);
                    continue;
                }
                acc[i][v] = g_fmadd(g_mul(g_cvt(ia[i][v]), dx), D[v], acc[i][v]);
                if (mode == MIN) acc[i][v] = g_fnmadd(M[v], sx, acc[i][v]);
                if (mode == Q2) acc[i][v] = g_fmadd(M2[v], s2, g_fmadd(M[v], s1, acc[i][v]));
            }
        }
    }
    for (size_t i = 0; i < r; i++)
        for (int v = 0; v < nv; v++) {
            float *o = out + i * N + v * GV;
            size_t c0 = (size_t)v * GV;
            if (nr >= c0 + GV) { /* plus the slices' before (whole), bias or zero (first), or out */
                gvf base = whole ? part[i][v] : first ? (bias ? g_loadf(bias + c0) : g_zerof()) : g_loadf(o);
                g_storef(o, g_add(acc[i][v], base));
            } else if (nr > c0) {
                float a[GV], pa[GV];
                g_storef(a, acc[i][v]), g_storef(pa, part[i][v]);
                for (size_t l = 0; l < nr - c0; l++)
                    o[l] = a[l] + (whole ? pa[l] : first ? (bias ? bias[c0 + l] : 0.0f) : o[l]);
            }
        }
}

/* micro for r token rows (at most the mode's GMR), each count its own unrolled kernel; mode is a
   constant at every call, so only its counts are built (q6_k's stop at GMR_Q6 = 4). */
static AI void micro_rows(int mode, size_t r, float *restrict out, size_t N, const int8_t *restrict xq,
                          const float *restrict xd, const float *restrict xs, const int32_t *restrict xz,
                          wsrc src, size_t nbk, const float *restrict bias, int first, size_t nr) {
#define MICRO(rr) micro(mode, GNV, rr, out, N, xq, xd, xs, xz, src, nbk, bias, first, nr, false)
    _Static_assert(GMR_Q6 == 4 && GMR >= 5 && GMR <= 6, "the cases below");
    if (nbk > KB) { /* a lone row's every slice (QGEMM_R32): its own kernel, the others keep no part[] */
        micro(mode, ONE_NV, 1, out, N, xq, xd, xs, xz, src, nbk, bias, first, nr, true);
        return;
    }
    if ((int)ONE_NV != (int)GNV && src.nv == ONE_NV) { /* a lone row's half row group (r32_src) */
        micro(mode, ONE_NV, 1, out, N, xq, xd, xs, xz, src, nbk, bias, first, nr, false);
        return;
    }
    switch (r) {
    case 1: MICRO(1); break;
    case 2: MICRO(2); break;
    case 3: MICRO(3); break;
    case 4: MICRO(4); break;
    case 5: if (mode != Q6) MICRO(5); break;
    default: if (mode != Q6 && GMR > 5) MICRO(GMR); break; /* none where GMR is 5 */
    }
#undef MICRO
}

/*
** The next panel's weights (rows n..n+GNR-1 below n1, the slice's nbk blocks
** from k0) asked into L2 while this panel's products run: the panel is read
** once per token block, 32 rows far apart, so without it each pack waits on
** memory for every line (most of a pack's time at 128 tokens).
*/
static void prefetch_panel(const void *w, sm_dtype dt, size_t K, size_t n, size_t n1, size_t k0,
                           size_t nbk) {
    size_t bytes = sm_dtype_row_bytes(dt, nbk * SM_QK), stride = sm_dtype_row_bytes(dt, K);
    size_t first = sm_dtype_row_bytes(dt, k0);
    for (size_t j = n; j < n1 && j < n + GNR; j++) {
        const char *row = (const char *)w + j * stride + first;
        for (size_t off = 0; off < bytes; off += 64) _mm_prefetch(row + off, _MM_HINT_T1);
        _mm_prefetch(row + bytes - 1, _MM_HINT_T1);
    }
}

static uint8_t *align64(uint8_t *p) {
    return (uint8_t *)(((uintptr_t)p + 63) & ~(uintptr_t)63);
}

/* Token rows t0..t1-1 of x, columns from k0 (nbk blocks), quantized as the micro-kernels read
   them: levels xq, scales xd, scaled sums xs, zero-point starts xz (mode ZP: zp times minus the
   block's sum; Q6: 32 times minus each half's). */
static void quant_slice(int mode, int32_t zp, const float *restrict x, size_t K, size_t t0, size_t t1,
                        size_t k0, size_t nbk, int8_t *restrict xq, float *restrict xd, float *restrict xs,
                        int32_t *restrict xz) {
    for (size_t t = t0; t < t1; t++)
        for (size_t b = 0, i = t - t0; b < nbk; b++) {
            int32_t s4[SM_QK / 4]; /* minus each 4 levels' sum */
            quant_block(x + t * K + k0 + SM_QK * b, xq + i * SM_QGEMM_KC + SM_QK * b,
                        mode != MIN ? s4 : NULL, xd + i * KB + b, xs + i * KB + b);
            if (mode == Q6 || mode == Q2) /* q6_k's zero point 32, q2_k's sums for its mins */
                for (int h = 0; h < 2; h++)
                    xz[2 * (i * KB + b) + (size_t)h] =
                        (mode == Q6 ? 32 : 1) * (s4[4 * h] + s4[4 * h + 1] + s4[4 * h + 2] + s4[4 * h + 3]);
            else if (mode == ZP) {
                int32_t sum = 0;
                for (int g = 0; g < SM_QK / 4; g++) sum += s4[g];
                xz[2 * (i * KB + b)] = zp * sum;
            }
        }
}

/* The activation buffers in scratch (after the panel and row buffers). */
typedef struct {
    uint8_t *panel, *rows;
    float *dm, *xd, *xs;
    int8_t *xq;
    int32_t *xz;
} qbufs;

static qbufs bufs_of(void *scratch) {
    qbufs q;
    q.panel = align64(scratch);
    q.rows = align64(q.panel + (size_t)KB * GBS_Q2);
    q.dm = (float *)(void *)align64(q.rows + (size_t)GNR * SM_QGEMM_KC);
    q.xq = (int8_t *)align64((uint8_t *)(q.dm + 3 * GNR * KB));
    q.xd = (float *)(void *)(q.xq + (size_t)SM_QGEMM_MC * SM_QGEMM_KC), q.xs = q.xd + SM_QGEMM_MC * KB;
    q.xz = (int32_t *)(void *)(q.xs + SM_QGEMM_MC * KB);
    return q;
}

/* Blocks in the column slice from k0 of a row of K (the last slice may be shorter). */
static size_t slice_blocks(size_t K, size_t k0) {
    return (K - k0 < SM_QGEMM_KC ? K - k0 : SM_QGEMM_KC) / SM_QK;
}

/* The end of the token block from t0 (of SM_QGEMM_MC rows, the last one shorter) in T rows. */
static size_t block_end(size_t T, size_t t0) {
    return T - t0 < SM_QGEMM_MC ? T : t0 + SM_QGEMM_MC;
}

/* Token rows t0..t1-1 (the block's rows from t0) against one panel's weights src, GMR (q6_k:
   GMR_Q6) at a time; pfl lines from pf (if any) asked into L2, a share before each tile (but
   the first, when it streams src from memory). */
static AI void tiles(int mode, const qbufs *q, wsrc src, float *restrict out, size_t N, size_t t0,
                     size_t t1, size_t n, size_t nbk, const float *restrict bn, int first, size_t nr,
                     const char *pf, size_t pfl) {
    const size_t mr = mode == Q6 ? GMR_Q6 : GMR, nt = (t1 - t0 + mr - 1) / mr;
    const size_t sk = src.ahead && nt > 1, na = nt - sk;
    for (size_t c = 0, t = t0; t < t1; c++) {
        if (pf && c >= sk) ask_share((ahead){pf, pfl}, c - sk, na);
        /* tiles of as even a size as the rows allow (128 rows: 24 of 5, 2 of 4, not 25 of 5 and
           one of 3): a short tile's few accumulators wait on vpdpbusd's latency */
        size_t i = t - t0, r = (t1 - t0) / nt + (c < (t1 - t0) % nt);
        float *o = out + t * N + n;
        const int8_t *xq = q->xq + i * SM_QGEMM_KC;
        const float *d = q->xd + i * KB, *s = q->xs + i * KB;
        const int32_t *z = q->xz + 2 * i * KB;
        src.ahead = src.ahead && t == t0;
        micro_rows(mode, r, o, N, xq, d, s, z, src, nbk, bn, first, nr);
        t += r;
    }
}

/* q2_k's tiles in a function of their own: built inside tiles_of, they slowed the other modes'
   (q4_k's prefill, 128 tokens, Zen 5: 4,300-4,450 -> 3,950-4,170 tokens/s, interleaved). */
static __attribute__((noinline)) void tiles_q2(const qbufs *q, wsrc src, float *restrict out, size_t N, size_t t0,
                     size_t t1, size_t n, size_t nbk, const float *restrict bn, int first, size_t nr,
                     const char *pf, size_t pfl) {
    tiles(Q2, q, src, out, N, t0, t1, n, nbk, bn, first, nr, pf, pfl);
}

/* tiles for this mode and layout, each pair built on its own (the micro-kernels' constants). */
static void tiles_of(int mode, const qbufs *q, wsrc src, float *restrict out, size_t N, size_t t0,
                     size_t t1, size_t n, size_t nbk, const float *restrict bn, int first, size_t nr,
                     const char *pf, size_t pfl) {
#define TILES(m) tiles(m, q, src, out, N, t0, t1, n, nbk, bn, first, nr, pf, pfl)
    if (src.lay == R4) src.lay = R4, TILES(ZP);
    else if (src.lay == R8) src.lay = R8, TILES(ZP);
    else if (src.lay == R4K) src.lay = R4K, TILES(MIN);
    else if (src.lay == R5K) src.lay = R5K, TILES(MIN);
    else if (src.lay == R6K) src.lay = R6K, TILES(Q6);
    else if (src.lay == RI4) src.lay = RI4, TILES(ZP);
    else if (src.lay == RXS) src.lay = RXS, TILES(ZP);
    else if (mode == Q6) TILES(Q6);
    else if (mode == Q2) tiles_q2(q, src, out, N, t0, t1, n, nbk, bn, first, nr, pf, pfl);
    else if (mode == ZP) TILES(ZP);
    else TILES(MIN);
#undef TILES
}

/*
** Rows n..n+nv GV-1 of a repacked matrix of type dt (nb blocks a row; n a
** multiple of nv GV) from block b0 (the k types: a super-block's first), as a
** micro-kernel reads them: q4_0 / q8_0 / q4_k / q5_k / q6_k row groups of
** SM_R32 rows (R4, R8, R4K, R5K, R6K), whose levels lie in 16-row halves,
** four bytes a row, and scales one a row. Vector v takes rows ro = n % 32 +
** v GV: half ro / 16, from byte 4 (ro % 16) of each of its groups (the
** 512-bit flavour's two vectors are the halves; a 256-bit one's, a half's
** first or last 8 rows; nv vectors from n: ONE_NV for a lone token row); part
** says which (micro's ahead, AHEAD_256).
*/
static wsrc r32_src(sm_dtype dt, const void *w, size_t n, size_t nb, size_t b0, int nv) {
    const size_t grp = n / SM_R32;
    wsrc src = {.ahead = true, .part = n % SM_R32 / (GV * (size_t)nv), .nv = nv};
    if (dt == SM_DTYPE_IQ4_XS) { /* a super-block: 8 blocks' levels, the rows' 8 scales, their d */
        const uint8_t *g = (const uint8_t *)w + (grp * nb + b0) / 8 * RXS_SUPER;
        src.lay = RXS, src.base = g;
        for (int v = 0; v < nv; v++) {
            const size_t ro = n % SM_R32 + (size_t)v * GV;
            src.lv[v] = g + ro / 16 * 256 + 4 * (ro % 16), src.sc[v] = g + 8 * RXS_BLOCK + ro;
            src.dd[v] = g + 8 * RXS_BLOCK + 8 * SM_R32 + 2 * ro;
        }
        return src;
    }
    if (dt == SM_DTYPE_Q4_K || dt == SM_DTYPE_Q5_K || dt == SM_DTYPE_Q6_K) {
        /* a block: 16 bytes a row of nibbles, pl of high bits (q5_k 4, q6_k 8), 2 of scales; a
           super-block: 8 blocks, then d (and q4_k's, q5_k's dmin) */
        const bool q6 = dt == SM_DTYPE_Q6_K;
        const size_t pl = q6 ? 8 : dt == SM_DTYPE_Q5_K ? 4 : 0, blk = (18 + pl) * SM_R32;
        const size_t sup = 8 * blk + (q6 ? 2u : 4u) * SM_R32;
        _Static_assert(18 * SM_R32 == R4_BLOCK && 22 * SM_R32 == R5K_BLOCK && 26 * SM_R32 == R6K_BLOCK &&
                           8 * R4_BLOCK + 4 * SM_R32 == R4K_SUPER && 8 * R5K_BLOCK + 4 * SM_R32 == R5K_SUPER &&
                           8 * R6K_BLOCK + 2 * SM_R32 == R6K_SUPER,
                       "the layouts' sizes");
        const uint8_t *g = (const uint8_t *)w + (grp * nb + b0) / 8 * sup;
        src.lay = q6 ? R6K : pl ? R5K : R4K, src.base = g;
        for (int v = 0; v < nv; v++) {
            const size_t ro = n % SM_R32 + (size_t)v * GV, h = ro / 16, l = 4 * (ro % 16);
            src.lv[v] = g + h * 256 + l, src.hb[v] = g + 16 * SM_R32 + h * 16 * pl + l;
            src.sc[v] = g + (16 + pl) * SM_R32 + ro, src.dd[v] = g + 8 * blk + 2 * ro;
        }
        return src;
    }
    const size_t bb = dt == SM_DTYPE_Q8_0 ? R8_BLOCK : R4_BLOCK;
    const uint8_t *g = (const uint8_t *)w + (grp * nb + b0) * bb;
    src.lay = dt == SM_DTYPE_Q8_0 ? R8 : dt == SM_DTYPE_IQ4_NL ? RI4 : R4, src.base = g;
    for (int v = 0; v < nv; v++) {
        const size_t ro = n % SM_R32 + (size_t)v * GV;
        src.lv[v] = g + ro / 16 * (bb - 2 * SM_R32) / 2 + 4 * (ro % 16), src.sc[v] = g + bb - 2 * SM_R32 + 2 * ro;
    }
    return src;
}

/*
** The lines of the slice after src's (nbk blocks on in the row group's stream; after a row
** group's last slice, the next group's first), to ask for while several tiles of token rows
** read src's slice in place: the first tile reads it from memory, asking R32_AHEAD bytes on,
** and the others from L1, so without it memory idled through them (tiles() leaves the asking
** to those others: shared by every tile, it lost 5% on q4_0's K = 768 rows). 16 rows (4 tiles),
** Zen 5, AVX512-VNNI, 2 threads (bench_gemv --rows 16, 3 rounds interleaved), GOPS at 2,048 x
** 5,632: q4_k 766-862 -> 930-952, q8_0 676-771 -> 909-917, q4_0 906-993 -> 1,031-1,083; q4_0
** at 768 x 2,304 914-965 -> 894-935. Asking 2 or 3 slices on gained less. The 256-bit
** flavours' passes ask one slice on already (AHEAD_256).
*/
static size_t next_slice(wsrc src, size_t nbk, size_t rows, bool more, const char **pf) {
    const bool ask = SM_QFLAVOUR == 2 && src.lay != PANEL && rows > GMR && more;
    *pf = ask ? (const char *)src.base + r_off(src.lay, nbk) : NULL;
    return ask ? r_off(src.lay, nbk) / 64 : 0;
}

/*
** A repacked q4_0, q4_k, q5_k or q6_k panel's nbk blocks (src) unpacked
** into the packed panel layout (pack's bytes and floats: levels, D, M = 8 D;
** q4_k's and q5_k's D = d sc, M = dmin m; q6_k's the halves' d sc), for a
** block of many token rows: each nibble split once, not once per
** micro-kernel call.
*/
static void unpack_r4(uint8_t *restrict panel, wsrc src, size_t nbk) {
    for (size_t b = 0; b < nbk; b++) {
        uint8_t *pb = panel + b * GBS;
        float *pd = (float *)(void *)(pb + 32 * GNR);
        for (int v = 0; v < GNV; v++) {
            for (int q = 0; q < 4; q++) {
                gvi lo, hi;
                r4_levels(src, v, b, q, &lo, &hi);
                g_store(pb + 4 * ((size_t)q * GNR + (size_t)v * GV), lo);
                g_store(pb + 4 * ((size_t)(q + 4) * GNR + (size_t)v * GV), hi);
            }
            gvf D, M;
            r32_dm(src, v, b, &D, &M);
            g_storef(pd + v * GV, D), g_storef(pd + GNR + v * GV, M);
        }
    }
}


/* How a block's integer sums of type dt become f32, and the zero point of q4_0, q8_0, iq4_nl and
   iq4_xs (ZP: M / D; the last two levels through their table, + 128). */
static int mode_of(sm_dtype dt) {
    return dt == SM_DTYPE_Q6_K ? Q6
           : dt == SM_DTYPE_Q2_K ? Q2
           : dt == SM_DTYPE_Q4_0 || dt == SM_DTYPE_Q8_0 || dt == SM_DTYPE_IQ4_NL || dt == SM_DTYPE_IQ4_XS ? ZP
                                                                                                    : MIN;
}
static int32_t zp_of(sm_dtype dt) {
    return dt == SM_DTYPE_Q4_0 ? 8 : 128;
}

/*
** The blocked loop: token blocks of SM_QGEMM_MC, column slices of
** SM_QGEMM_KC (the slice's activations quantized), then each panel of GNR
** rows packed from the file's rows and met by every token of the block.
*/
static void blocked(const qbufs *q, float *restrict out, const float *restrict x, const void *restrict w,
                    sm_dtype dt, const float *restrict bias, size_t T, size_t N, size_t K, size_t n0, size_t n1) {
    const int mode = mode_of(dt);
    for (size_t t0 = 0; t0 < T; t0 += SM_QGEMM_MC) {
        size_t t1 = block_end(T, t0);
        for (size_t k0 = 0; k0 < K; k0 += SM_QGEMM_KC) {
            size_t nbk = slice_blocks(K, k0);
            quant_slice(mode, zp_of(dt), x, K, t0, t1, k0, nbk, q->xq, q->xd, q->xs, q->xz);
            for (size_t n = n0; n < n1; n += GNR) {
                size_t nr = n1 - n < GNR ? n1 - n : GNR;
                pack(q->panel, q->rows, q->dm, w, dt, K, n, nr, k0, nbk);
                prefetch_panel(w, dt, K, n + GNR, n1, k0, nbk);
                tiles_of(mode, q, (wsrc){.lay = PANEL, .panel = q->panel}, out, N, t0, t1, n, nbk,
                         bias ? bias + n : NULL, k0 == 0, nr, NULL, 0);
            }
        }
    }
}

/*
** The repacked product's scratch (SM_QGEMM_R32_BYTES(K, rows), after the
** memo): a whole-row panel of ns column slices, then token blocks' (blk: the
** block, 0 when the buffers hold one) activations for every slice (slice j's
** rows at j tn, tn the block's rows). Both of QGEMM_R32's loops use it, so
** the memo's rows are where either reads them.
*/
static qbufs r32_bufs(void *scratch, const void *xbuf, size_t ns, size_t blk) {
    qbufs q;
    q.panel = align64(scratch);
    /* the activations after the panel, or in the threads' shared buffer (xbuf: XQUANT_R32) */
    uint8_t *xb = xbuf ? align64((void *)(uintptr_t)xbuf) : align64(q.panel + ns * KB * GBS);
    q.xq = (int8_t *)xb + blk * SM_QGEMM_XBLOCK_BYTES(ns * SM_QGEMM_KC);
    q.xd = (float *)(void *)align64((uint8_t *)(q.xq + (size_t)SM_QGEMM_MC * ns * SM_QGEMM_KC));
    q.xs = q.xd + SM_QGEMM_MC * ns * KB;
    q.xz = (int32_t *)(void *)(q.xs + SM_QGEMM_MC * ns * KB);
    q.rows = NULL, q.dm = NULL;
    return q;
}

/* q's buffers from row i of slice j, in a token block of tn rows. */
static qbufs r32_rows(const qbufs *q, size_t j, size_t tn, size_t i) {
    qbufs r = *q;
    r.xq += (j * tn + i) * SM_QGEMM_KC, r.xd += (j * tn + i) * KB, r.xs += (j * tn + i) * KB;
    r.xz += 2 * (j * tn + i) * KB;
    return r;
}

/* Token rows a..b-1 of the block t0..t1-1 of x quantized into q for every column slice: row after
   row, so x is read as one stream (slice after slice, each row's 1 KB runs K floats apart waited
   on memory: at 512 rows, x is past L2). */
static void r32_quant_rows(int mode, int32_t zp, const float *restrict x, size_t K, size_t t0, size_t t1,
                           size_t a, size_t b, const qbufs *q) {
    for (size_t t = a; t < b; t++)
        for (size_t j = 0, k0 = 0; k0 < K; j++, k0 += SM_QGEMM_KC) {
            qbufs qj = r32_rows(q, j, t1 - t0, t - t0);
            quant_slice(mode, zp, x, K, t, t + 1, k0, slice_blocks(K, k0), qj.xq, qj.xd, qj.xs, qj.xz);
        }
}

static void r32_quant(int mode, int32_t zp, const float *restrict x, size_t K, size_t t0, size_t t1,
                      const qbufs *q) {
    r32_quant_rows(mode, zp, x, K, t0, t1, t0, t1, q);
}

/*
** The token rows of a block above which blocked_r32 splits each row group
** of type dt once into the unpacked panel, where fewer read it in place
** (each tile splitting the nibbles of its slice): q8_0 never (its levels
** are bytes already), the k types beyond two tiles, q4_0 beyond
** SPLIT_Q4_0, its 576-byte blocks read in place against 1,280 unpacked.
** TinyLlama's q4_0 prefill, Zen 5, 2 threads, interleaved medians of 5
** (docs/performance.md, 2026-12-03, night), split -> in place: 64 tokens
** 534 -> 548 tokens/s, 128 520 -> 543 (one thread 275 -> 287); 256
** and 512 rows (token blocks of 256) the same either way, so they split;
** the k types lose in place (q4_k_m, 128 tokens: 479 -> 461).
*/
enum { SPLIT_Q4_0 = 128 };
static size_t split_above(sm_dtype dt) {
    return dt == SM_DTYPE_Q8_0 ? SIZE_MAX : dt == SM_DTYPE_Q4_0 ? SPLIT_Q4_0 : 2 * GMR;
}

/*
** The repacked product's loop for many rows: token blocks of SM_QGEMM_MC
** with every column slice's activations quantized, then per row group
** (its nibbles split once into a whole-row panel when the block has more
** rows than split_above says) slice after slice, each slice met by every
** tile of GMR token rows. So a slice's weights (at most 20 KB) stay in L1
** for all the block's tiles, and the row group's outputs (the block's rows
** x 32 floats, at most 32 KB) stay in L1/L2 from one slice to the next;
** with the slices outermost over all row groups (QGEMM's order) they were
** re-read from memory for every slice (a fifth of a 2,048-wide prefill's
** time on a Zen 4, the output of 256 rows x 5,632 being 5.8 MB), and with
** the tiles outermost each tile re-read the row group's whole panel from
** L2 (Zen 4, q4_0 and q8_0 at 128 tokens: 6-10% slower). Each output gets
** the same sums in the same order any way. whole: the buffers (scratch
** after the memo) have room for every token block, each in its own, so
** every block is quantized first and the token blocks run inside each row
** group, its panel split once for all of them (Zen 5, one thread, 512 rows
** x 2048 x 2048 q4_0: 62-63% of the VNNI peak -> 65%); kept: they hold x's
** rows already.
*/
static void blocked_r32(void *scratch, const void *xbuf, float *restrict out, const float *restrict x,
                        const void *restrict w, sm_dtype dt, const float *restrict bias, size_t T, size_t N,
                        size_t K, size_t n0, size_t n1, bool whole, bool kept) {
    const int mode = mode_of(dt);
    const size_t ns = (K + SM_QGEMM_KC - 1) / SM_QGEMM_KC, nb = K / SM_QK;
    uint8_t *const panel = r32_bufs(scratch, xbuf, ns, 0).panel; /* the same whatever the token block */
    /* token rows quantized at a time: every block (whole), else one, in the buffers' first */
    const size_t tb = whole ? T : SM_QGEMM_MC;
    for (size_t b0 = 0; b0 < T; b0 += tb) {
        const size_t b1 = T - b0 < tb ? T : b0 + tb;
        for (size_t t0 = b0; !kept && t0 < b1; t0 += SM_QGEMM_MC) {
            const qbufs qb = r32_bufs(scratch, xbuf, ns, whole ? t0 / SM_QGEMM_MC : 0);
            r32_quant(mode, zp_of(dt), x, K, t0, block_end(T, t0), &qb);
        }
        const bool split = block_end(T, b0) - b0 > split_above(dt); /* by the first token block */
        const size_t calls = (b1 - b0 + SM_QGEMM_MC - 1) / SM_QGEMM_MC * ns; /* tiles_of's per row group */
        for (size_t n = n0; n < n1; n += GNR) {
            size_t nr = n1 - n < GNR ? n1 - n : GNR;
            for (size_t j = 0, k0 = 0; split && j < ns; j++, k0 += SM_QGEMM_KC)
                unpack_r4(panel + j * KB * GBS, r32_src(dt, w, n, nb, k0 / SM_QK, GNV), slice_blocks(K, k0));
            /* the next row group (split: unpacked in one go, after these tiles) asked into L2 while
               they run, a share per tile, else unpack waits on memory line by line */
            const bool ask = split && n + GNR < n1;
            const wsrc nx = ask ? r32_src(dt, w, n + GNR, nb, 0, GNV) : (wsrc){.lay = R4};
            const size_t lines = ask ? r_off(nx.lay, nb) / 64 : 0;
            size_t call = 0;
            for (size_t t0 = b0; t0 < b1; t0 += SM_QGEMM_MC) {
                const size_t t1 = block_end(T, t0);
                const qbufs qb = r32_bufs(scratch, xbuf, ns, whole ? t0 / SM_QGEMM_MC : 0);
                for (size_t j = 0, k0 = 0; j < ns; j++, k0 += SM_QGEMM_KC) {
                    qbufs qj = r32_rows(&qb, j, t1 - t0, 0);
                    wsrc src = split ? (wsrc){.lay = PANEL, .panel = panel + j * KB * GBS}
                                     : r32_src(dt, w, n, nb, k0 / SM_QK, GNV);
                    const size_t l0 = call * lines / calls, l1 = ++call * lines / calls;
                    const char *pf = ask ? (const char *)nx.base + 64 * l0 : NULL;
                    size_t pfl = l1 - l0;
                    if (!split) /* read in place: the slice after this one (the first token block's) */
                        pfl = next_slice(src, slice_blocks(K, k0), t1 - t0,
                                         t0 == b0 && (j + 1 < ns || n + GNR < n1), &pf);
                    tiles_of(mode, &qj, src, out, N, t0, t1, n, slice_blocks(K, k0), bias ? bias + n : NULL,
                             k0 == 0, nr, pf, pfl);
                }
            }
        }
    }
}

void QGEMM(float *restrict out, const float *restrict x, const void *restrict w, sm_dtype dt,
           const float *restrict bias, size_t T, size_t N, size_t K, size_t n0, size_t n1,
           void *restrict scratch) {
    const qbufs q = bufs_of(scratch);
    blocked(&q, out, x, w, dt, bias, T, N, K, n0, n1);
}

/*
** The same product on a repacked matrix (sm_kernels_repack; dt its file
** type, q4_0, q8_0 or a k type; n0 a multiple of SM_R32, n1 one or N): no
** packing, the micro-kernels read the row groups in place, and every output is QGEMM's bit for bit: per
** column slice the same sums, added to out slice after slice. Few rows (all
** slices' activations fit the token block: decoding) take each row group
** whole, slice after slice, one stream; more take blocked_r32's loop. One
** row takes all the slices of a call's rows (512-bit: the row group; 256-bit:
** one of its two 16-row passes) in one micro-kernel call, their sums added in
** registers (micro): a call, its tiles and stores per slice cost about a
** tenth of the time (bench_gemv, one row, Zen 5, share of the read probe
** against the build before, medians of 5: AVX512-VNNI q4_0 62-68% ->
** 69-73%, q8_0 69-70% -> 73-74%, q4_k 75-87% -> 80-88%; the AVX2 table's
** q4_k 46-72% -> 54-80%, q8_0 53-74% -> 56-74%, q4_0 50-74% as before).
*/
void QGEMM_R32(float *restrict out, const float *restrict x, const void *restrict w, sm_dtype dt,
               const float *restrict bias, size_t T, size_t N, size_t K, size_t n0, size_t n1,
               void *restrict scratch) {
    /* the memo at the scratch's head (sm_qmemo): are x's rows quantized in the buffers already? */
    sm_qmemo *mm = scratch;
    scratch = (uint8_t *)scratch + SM_QMEMO_BYTES;
    const int mode = mode_of(dt);
    const int32_t zp = zp_of(dt);
    const bool armed = mm->armed == SM_QMEMO_ARMED;
    const bool kept = armed && mm->x == x && mm->T == T && mm->K == K && mm->mode == mode && mm->zp == zp;
    const void *xbuf = kept ? mm->xbuf : NULL; /* the threads' shared rows (XQUANT_R32) */
    /* room for every token block's activations at once (else each block's in turn in the first's) */
    const bool whole = xbuf || SM_QGEMM_XBLOCKS(T) <= (armed ? SM_QGEMM_XBLOCKS(mm->rows) : 1);
    if (armed && !mm->xbuf) /* what the buffers hold after this call: x's rows, if they have room for them all
                               (a shared buffer's memo stays for the window: another type's call quantizes
                               into the thread's own buffers and keeps nothing) */
        *mm = (sm_qmemo){.armed = SM_QMEMO_ARMED, .x = whole ? x : NULL, .T = T, .K = K, .rows = mm->rows,
                         .mode = mode, .zp = zp};
    const size_t ns = (K + SM_QGEMM_KC - 1) / SM_QGEMM_KC;
    if (T * ns > SM_QGEMM_MC) {
        blocked_r32(scratch, xbuf, out, x, w, dt, bias, T, N, K, n0, n1, whole, kept);
        return;
    }
    const qbufs q = r32_bufs(scratch, xbuf, ns, 0);
    if (!kept) r32_quant(mode, zp, x, K, 0, T, &q);
    /* a lone row takes ONE_NV vectors of rows a call (the 256-bit flavours' 8-row panels leave
       registers idle), more rows the panel's GNV */
    const int nv = T == 1 ? ONE_NV : GNV;
    const size_t step = GV * (size_t)nv;
    if (T == 1 && ns > 1) { /* one row: every slice of a call's rows in one call */
        for (size_t n = n0; n < n1; n += step) {
            wsrc src = r32_src(dt, w, n, K / SM_QK, 0, nv);
            src.next = n + SM_R32 < n1; /* (AHEAD_256) a row group of this thread's follows */
            tiles_of(mode, &q, src, out, N, 0, 1, n, K / SM_QK, bias ? bias + n : NULL, 1,
                     n1 - n < step ? n1 - n : step, NULL, 0);
        }
        return;
    }
    for (size_t g = n0; g < n1; g += SM_R32) /* a row group, slice after slice, each slice's rows in turn */
        for (size_t j = 0, k0 = 0; j < ns; j++, k0 += SM_QGEMM_KC) {
            qbufs qj = r32_rows(&q, j, T, 0);
            for (size_t n = g; n < n1 && n < g + SM_R32; n += step) {
                size_t nr = n1 - n < step ? n1 - n : step;
                const wsrc src = r32_src(dt, w, n, K / SM_QK, k0 / SM_QK, nv);
                const char *pf;
                const size_t nbk = slice_blocks(K, k0);
                const size_t pfl = next_slice(src, nbk, T, j + 1 < ns || g + SM_R32 < n1, &pf);
                tiles_of(mode, &qj, src, out, N, 0, T, n, nbk, bias ? bias + n : NULL, k0 == 0, nr, pf, pfl);
            }
        }
}

void XQUANT_R32(void *buf, sm_qmemo *memo, const float *x, sm_dtype dt, size_t T, size_t K, size_t t0, size_t t1) {
    const int mode = mode_of(dt);
    const int32_t zp = zp_of(dt);
    const size_t ns = (K + SM_QGEMM_KC - 1) / SM_QGEMM_KC;
    for (size_t b0 = 0; b0 < T; b0 += SM_QGEMM_MC) { /* each token block's rows among t0..t1-1 */
        const size_t b1 = block_end(T, b0), a = t0 > b0 ? t0 : b0, b = t1 < b1 ? t1 : b1;
        if (a >= b) continue;
        const qbufs q = r32_bufs(buf, buf, ns, b0 / SM_QGEMM_MC);
        r32_quant_rows(mode, zp, x, K, b0, b1, a, b, &q);
    }
    *memo = (sm_qmemo){.armed = SM_QMEMO_ARMED, .x = x, .T = T, .K = K, .rows = memo->rows, .mode = mode,
                       .zp = zp, .xbuf = buf};
}

#endif
