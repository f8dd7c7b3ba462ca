/*
** pack.c -- weight-panel packing and the blocked loop of the packed
** products, shared by the SIMD tables (plain C; the tables supply the
** micro-kernels), and the f16 KV-cache's widening for their attention.
*/
#include "kernels_internal.h"

#include <string.h>

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

/* Token rows per block: their kc-column slice of x fills half the L2. */
static size_t block_rows(size_t l2_bytes, size_t kc, size_t mr) {
    size_t mc = l2_bytes / 2 / (kc * sizeof(float)) / mr * mr;
    return mc < 4 * mr ? 4 * mr : mc;
}

/* Token rows [t0, t1) of out's columns [n, n + nr) get x's columns [k0, k0 + kc) . panel p; the
   first tile asks for the slice read next (next, NULL: none) into L2 as it reads p. */
static void tiles(const sm_gemm_kernel *g, float *restrict out, const float *restrict x, const float *p,
                  const float *b, size_t N, size_t K, size_t n, size_t nr, size_t k0, size_t kc, size_t t0,
                  size_t t1, const float *next) {
    size_t t = t0, r;
    const int tall = g->full_pf && t1 - t0 >= SM_GEMM_TALL * g->mr;
    for (; t + g->mr <= t1; t += g->mr, next = NULL)
        (tall && t + 2 * g->mr <= t1 ? g->full_pf : g->full)(out + t * N + n, N, x + t * K + k0, K, p, kc, b,
                                                            k0 == 0, nr, next);
    for (; t < t1; t += r, next = NULL) { /* the rest: all at once if the table can, else one by one */
        r = t1 - t < SM_MICRO_FEW && g->few[t1 - t] ? t1 - t : 1;
        g->few[r](out + t * N + n, N, x + t * K + k0, K, p, kc, b, k0 == 0, nr, next);
    }
}

/*
** Token rows [t0, t1) against panels laid out at load (no pack), all of the rows' x in half
** the L2: each panel's slices in turn, one stream through its weights; a lone row through
** one_row, SM_ROW_GROUPS panels at a time, each call told how many panels the next one takes
** (none where the table leaves them to the hardware prefetchers: row_prefetch 2);
** several rows through tiles, whose first tile asks for the next slice (the same panel's next
** columns, or the next panel's first: the memory right after) into L2 as it goes.
*/
static void gemm_in_place(const sm_gemm_kernel *g, bool ask, float *restrict out, const float *restrict x,
                          const float *restrict w, const float *restrict bias, size_t N, size_t K,
                          size_t n0, size_t n1, size_t t0, size_t t1) {
    const size_t step = t1 - t0 == 1 && g->one_row ? g->nr * SM_ROW_GROUPS : g->nr;
    for (size_t n = n0; n < n1; n += step) {
        const size_t nr = n1 - n < step ? n1 - n : step, rest = n1 - n - nr;
        const size_t next = ask ? ((rest < step ? rest : step) + g->nr - 1) / g->nr : 0;
        for (size_t k0 = 0; k0 < K; k0 += g->kc) {
            const size_t kc = K - k0 < g->kc ? K - k0 : g->kc;
            const float *p = sm_kernels_panel_at(g, w, n * K + k0 * g->nr), *b = bias ? bias + n : NULL;
            if (step > g->nr)
                g->one_row(out + t0 * N + n, x + t0 * K + k0, p, K * g->nr, kc, b, k0 == 0, nr, next);
            else
                tiles(g, out, x, p, b, N, K, n, nr, k0, kc, t0, t1,
                      n + nr < n1 || k0 + kc < K ? sm_kernels_panel_at(g, p, kc * g->nr) : NULL);
        }
    }
}

/*
** The panel of weight rows [n, n + nr) and columns [k0, k0 + kc) from weights held transposed
** (SM_DTYPE_F32_T: weight (r, k) at k N + r): a row of the panel is nr neighbouring floats of
** one column, so it is a copy (the rows past nr zeros): the same panel the pack of the
** untransposed weights makes, so the same products, bit for bit.
*/
static void pack_t(float *restrict dst, const void *restrict w, size_t N, size_t n, size_t nr,
                   size_t width, size_t k0, size_t kc) {
    const float *src = (const float *)w + k0 * N + n;
    for (size_t kk = 0; kk < kc; kk++) {
        memcpy(dst + kk * width, src + kk * N, nr * sizeof *dst);
        if (nr < width) memset(dst + kk * width + nr, 0, (width - nr) * sizeof *dst);
    }
}

void sm_kernels_gemm(const sm_gemm_kernel *g, const sm_kernels *k, float *restrict out, const float *restrict x,
                     const void *restrict w, sm_dtype dt, const float *restrict bias, size_t T,
                     size_t N, size_t K, size_t n0, size_t n1, float *restrict panel) {
    const size_t mc = block_rows(k->l2_bytes, g->kc, g->mr);
    for (size_t t0 = 0; t0 < T; t0 += mc) {
        size_t t1 = T - t0 <= mc + mc / 4 ? T : t0 + mc; /* no sliver of a last block */
        /* rows that fit half the L2 read panels laid out at load in place: the same sums as below */
        if (!g->pack && dt != SM_DTYPE_F32_T && (t1 - t0) * K * sizeof(float) <= k->l2_bytes / 2) {
            gemm_in_place(g, k->row_prefetch != 2, out, x, w, bias, N, K, n0, n1, t0, t1);
            continue;
        }
        for (size_t k0 = 0; k0 < K; k0 += g->kc) {
            size_t kc = K - k0 < g->kc ? K - k0 : g->kc;
            for (size_t n = n0; n < n1; n += g->nr) {
                size_t nr = n1 - n < g->nr ? n1 - n : g->nr;
                const float *p = panel, *next = NULL; /* packed now, or laid out at load */
                if (dt == SM_DTYPE_F32_T)
                    pack_t(panel, w, N, n, nr, g->nr, k0, kc);
                else if (g->pack)
                    g->pack(panel, w, dt, K, n, nr, g->nr, k0, kc);
                else { /* n a multiple of nr; the next panel's slice asked for as this one is read */
                    p = sm_kernels_panel_at(g, w, n * K + k0 * g->nr);
                    if (n + nr < n1) next = sm_kernels_panel_at(g, p, nr * K);
                }
                tiles(g, out, x, p, bias ? bias + n : NULL, N, K, n, nr, k0, kc, t0, t1, next);
            }
        }
    }
}

void sm_kernels_kv_block(const float **kb, const float **vb, float *restrict kw,
                         float *restrict vw, const sm_kv_head *kv, size_t j0, size_t nk, size_t hs,
                         void (*widen)(float *restrict, const void *restrict, sm_dtype, size_t)) {
    const void *kt = sm_kv_keys(kv, j0), *v = sm_kv_values(kv, j0);
    const size_t b = sm_kv_key_at(sm_kv_stride(kv, hs), j0, 0); /* the block's first element */
    if (kv->type != SM_DTYPE_F16) {
        *kb = (const float *)kt + b, *vb = (const float *)v + b;
        return;
    }
    const uint16_t *k16 = (const uint16_t *)kt + b; /* each key row's nk valid entries */
    for (size_t d = 0; d < hs; d++) widen(kw + d * SM_ATTN_KBLOCK, k16 + d * SM_ATTN_KBLOCK, kv->type, nk);
    widen(vw, (const uint16_t *)v + b, kv->type, nk * hs);
    *kb = kw, *vb = vw;
}

void sm_kernels_rope_halves(float *restrict x, const float *restrict cs, const float *restrict sn,
                            size_t hs) {
    const size_t h = hs / 2;
    float *restrict lo = x, *restrict hi = x + h;
    for (size_t i = 0; i < h; i++) {
        float a = lo[i], b = hi[i];
        lo[i] = a * cs[i] - b * sn[i];
        hi[i] = a * sn[i] + b * cs[i];
    }
}

/* ---- repacked quantized weights (sm_kernels.h: sm_kernels_repack) ---- */

bool sm_kernels_repackable(sm_dtype dt, size_t N, size_t K) {
    if (dt == SM_DTYPE_F32 || dt == SM_DTYPE_F16 || dt == SM_DTYPE_BF16)
        return N > 0 && K > 0; /* the last panel's missing rows are zeros */
    return (dt == SM_DTYPE_Q4_0 || dt == SM_DTYPE_Q8_0 || dt == SM_DTYPE_Q4_K || dt == SM_DTYPE_Q5_K ||
            dt == SM_DTYPE_Q6_K || dt == SM_DTYPE_IQ4_NL || dt == SM_DTYPE_IQ4_XS) && N > 0 && K > 0 && K % sm_dtype_block(dt) == 0;
}

sm_dtype sm_kernels_repacked(sm_dtype dt) {
    return dt == SM_DTYPE_Q4_0   ? SM_DTYPE_Q4_0_R32
           : dt == SM_DTYPE_Q8_0 ? SM_DTYPE_Q8_0_R32
           : dt == SM_DTYPE_Q4_K ? SM_DTYPE_Q4_K_R32
           : dt == SM_DTYPE_Q5_K ? SM_DTYPE_Q5_K_R32
           : dt == SM_DTYPE_Q6_K ? SM_DTYPE_Q6_K_R32
           : dt == SM_DTYPE_IQ4_NL ? SM_DTYPE_IQ4_NL_R32
           : dt == SM_DTYPE_IQ4_XS ? SM_DTYPE_IQ4_XS_R32
           : dt == SM_DTYPE_F32  ? SM_DTYPE_F32_P32
           : dt == SM_DTYPE_F16  ? SM_DTYPE_F16_P32
           : dt == SM_DTYPE_BF16 ? SM_DTYPE_BF16_P32
                                 : dt;
}

size_t sm_kernels_repacked_bytes(sm_dtype dt, size_t N, size_t K) {
    return sm_dtype_row_bytes(sm_kernels_repacked(dt), K) * sm_kernels_row_groups(N) * SM_R32;
}

/*
** Row l of a q4_k or q5_k row group (o: the group's first byte; row: the
** row's file bytes, K weights) as q4_k_r32 / q5_k_r32 (sm_kernels.h): each
** block's 32 nibbles, held in the file as the low or the high nibbles of 32
** bytes, rearranged as q4_0 holds them (byte i: levels i and i + 16), four
** bytes of a row at a time in q4_0_r32's places; q5_k's fifth bits then in a
** plane of a byte per row and four levels (bit q: level 4q + k, bit 4 + q:
** level 16 + 4q + k, for the row's k-th byte); then the rows' 6-bit scales
** and mins unpacked to bytes, and after the eight blocks the rows' d and
** dmin.
*/
static void repack_k_row(uint8_t *restrict o, const uint8_t *restrict row, sm_dtype dt, size_t K, size_t l) {
    const bool q5 = dt == SM_DTYPE_Q5_K;
    const size_t ns = K / SM_QK_K, half = 16 * 16, rb = sm_dtype_row_bytes(dt, SM_QK_K);
    const size_t lvb = q5 ? 2 * half + 2 * 64 : 2 * half, blk = lvb + 2 * SM_R32, sup = 8 * blk + 4 * SM_R32;
    for (size_t s = 0; s < ns; s++, o += sup) {
        const sm_block_q4_k *x = (const sm_block_q4_k *)(const void *)(row + s * rb); /* d, dmin,
                                                                   scales: q5_k's offsets too */
        const sm_block_q5_k *x5 = (const sm_block_q5_k *)(const void *)(row + s * rb);
        const uint8_t *qs0 = q5 ? x5->qs : x->qs;
        uint8_t sc[8], m[8];
        sm_quant_k4_scales(x->scales, sc, m);
        for (size_t j = 0; j < 8; j++) {
            uint8_t *ob = o + j * blk, *lv = ob + l / 16 * half;
            const uint8_t *qs = qs0 + 32 * (j / 2);
            for (size_t w = 0; w < 4; w++) { /* bytes 4w..4w+3: levels 4w.. and 16 + 4w.. */
                uint32_t a, b, v;
                memcpy(&a, qs + 4 * w, 4);
                memcpy(&b, qs + 16 + 4 * w, 4);
                v = j % 2 ? (a >> 4 & 0x0F0F0F0Fu) | (b & 0xF0F0F0F0u) : (a & 0x0F0F0F0Fu) | (b & 0x0F0F0F0Fu) << 4;
                memcpy(lv + w * 64 + 4 * (l % 16), &v, 4);
            }
            for (size_t k = 0; q5 && k < 4; k++) {
                unsigned bits = 0;
                for (unsigned q = 0; q < 4; q++)
                    bits |= (x5->qh[4 * q + k] >> j & 1u) << q | (x5->qh[16 + 4 * q + k] >> j & 1u) << (4 + q);
                ob[2 * half + l / 16 * 64 + 4 * (l % 16) + k] = (uint8_t)bits;
            }
            ob[lvb + l] = sc[j], ob[lvb + SM_R32 + l] = m[j];
        }
        memcpy(o + 8 * blk + 2 * l, &x->d, 2);
        memcpy(o + 8 * blk + 2 * SM_R32 + 2 * l, &x->dmin, 2);
    }
}

/*
** Row l of a q6_k row group as q6_k_r32 (sm_kernels.h): each block's 32
** levels (0..63) as q4_0_r32's nibbles (byte i: the low four bits of levels i
** and i + 16), then their top two bits in two planes of a byte per row and
** four levels (bits 2q, 2q + 1 of the row's k-th byte: level 4q + k in the
** first, 16 + 4q + k in the second), then the 32 rows' int8 scales of the
** block's two halves; after the eight blocks the rows' d.
*/
static void repack_q6_row(uint8_t *restrict o, const uint8_t *restrict row, size_t K, size_t l) {
    const size_t ns = K / SM_QK_K, half = 16 * 16, lvb = 2 * half + 2 * 128, blk = lvb + 2 * SM_R32;
    const size_t sup = 8 * blk + 2 * SM_R32;
    for (size_t s = 0; s < ns; s++, o += sup) {
        const sm_block_q6_k *x = (const sm_block_q6_k *)(const void *)row + s;
        for (size_t j = 0; j < 8; j++) {
            /* the block's low bits: the low (high) nibbles of 32 ql bytes; its top bits: bits
               2k, 2k + 1 of 32 qh bytes (k its quarter of the 128-weight half h) */
            const unsigned h = (unsigned)j / 4, k = (unsigned)j % 4, sh = k < 2 ? 0 : 4;
            const uint8_t *ql = x->ql + 64 * h + 32 * (k & 1), *qh = x->qh + 32 * h;
            uint8_t *ob = o + j * blk, *lv = ob + l / 16 * half;
            uint32_t pa = 0, pb = 0; /* the planes' four bytes of the row */
            for (unsigned q = 0; q < 4; q++) { /* four bytes at a time: levels 4q.., 16 + 4q.. */
                uint32_t a, b, ha, hb;
                memcpy(&a, ql + 4 * q, 4), memcpy(&b, ql + 16 + 4 * q, 4);
                memcpy(&ha, qh + 4 * q, 4), memcpy(&hb, qh + 16 + 4 * q, 4);
                uint32_t v = (a >> sh & 0x0F0F0F0Fu) | (b >> sh & 0x0F0F0F0Fu) << 4;
                memcpy(lv + q * 64 + 4 * (l % 16), &v, 4);
                pa |= (ha >> 2 * k & 0x03030303u) << 2 * q, pb |= (hb >> 2 * k & 0x03030303u) << 2 * q;
            }
            memcpy(ob + 2 * half + l / 16 * 128 + 4 * (l % 16), &pa, 4);
            memcpy(ob + 2 * half + l / 16 * 128 + 64 + 4 * (l % 16), &pb, 4);
            ob[lvb + l] = (uint8_t)x->scales[2 * j], ob[lvb + SM_R32 + l] = (uint8_t)x->scales[2 * j + 1];
        }
        memcpy(o + 8 * blk + 2 * l, &x->d, 2);
    }
}

/*
** Row l of an iq4_xs row group as iq4_xs_r32 (sm_kernels.h): per super-block
** its eight blocks' nibbles as q4_0_r32's (the file holds them as q4_0 and
** iq4_nl do), then the rows' block scales ls - 32 as int8 bytes, block after
** block, then the rows' f16 d.
*/
static void repack_xs_row(uint8_t *restrict o, const uint8_t *restrict row, size_t K, size_t l) {
    const size_t ns = K / SM_QK_K, half = 16 * 16, blk = 2 * half, sup = 8 * blk + 8 * SM_R32 + 2 * SM_R32;
    for (size_t s = 0; s < ns; s++, o += sup) {
        const sm_block_iq4_xs *x = (const sm_block_iq4_xs *)(const void *)row + s;
        for (size_t j = 0; j < 8; j++) {
            uint8_t *lv = o + j * blk + l / 16 * half;
            for (size_t w = 0; w < 4; w++) memcpy(lv + w * 64 + 4 * (l % 16), x->qs + 16 * j + 4 * w, 4);
            o[8 * blk + j * SM_R32 + l] = (uint8_t)(int8_t)(sm_quant_iq4xs_scale(x, (int)j) - 32);
        }
        memcpy(o + 8 * blk + 8 * SM_R32 + 2 * l, &x->d, 2);
    }
}

/* Row l of a q4_0, iq4_nl or q8_0 row group as q4_0_r32 / iq4_nl_r32 / q8_0_r32 (sm_kernels.h):
   per block the rows' levels four bytes at a time (q8_0's made unsigned), then their f16 scales. */
static void repack_q_row(uint8_t *restrict o, const uint8_t *restrict row, sm_dtype dt, size_t K, size_t l) {
    const bool q8 = dt == SM_DTYPE_Q8_0;
    const size_t nb = K / SM_QK, bs = q8 ? sizeof(sm_block_q8_0) : sizeof(sm_block_q4_0);
    const size_t lw = (bs - 2) / 4;          /* four-byte words of levels a row and block */
    const size_t half = lw * 4 * SM_R32 / 2; /* level bytes of 16 rows a block */
    const uint32_t flip = q8 ? 0x80808080u : 0; /* q8_0's bytes made unsigned */
    for (size_t b = 0; b < nb; b++, o += SM_R32 * bs) {
        const uint8_t *blk = row + b * bs; /* d (f16), then the levels */
        uint8_t *lv = o + l / 16 * half;
        memcpy(o + 2 * half + 2 * l, blk, 2);
        for (size_t w = 0; w < lw; w++) {
            uint32_t v;
            memcpy(&v, blk + 2 + 4 * w, 4);
            v ^= flip;
            memcpy(lv + w * 64 + 4 * (l % 16), &v, 4);
        }
    }
}

void sm_kernels_repack(void *restrict dst, const void *restrict src, sm_dtype dt, size_t N, size_t K,
                       size_t g0, size_t g1) {
    if (dt == SM_DTYPE_F32) { /* row group g: its 32 rows' column k side by side, k = 0 .. K - 1 */
        for (size_t g = g0; g < g1; g++) {
            float *p = (float *)dst + g * SM_R32 * K;
            size_t nr = N - g * SM_R32 < SM_R32 ? N - g * SM_R32 : SM_R32;
#ifdef SM_X86_KERNELS
            sm_kernels_pack_avx2(p, src, dt, K, g * SM_R32, nr, SM_R32, 0, K);
#else
            sm_kernels_pack_panel(p, src, dt, K, g * SM_R32, nr, SM_R32, 0, K, NULL);
#endif
        }
        return;
    }
    if (dt == SM_DTYPE_F16 || dt == SM_DTYPE_BF16) { /* the same, 16-bit: the file's bytes */
        for (size_t g = g0; g < g1; g++) {
            uint16_t *p = (uint16_t *)dst + g * SM_R32 * K;
            size_t nr = N - g * SM_R32 < SM_R32 ? N - g * SM_R32 : SM_R32;
#ifdef SM_X86_KERNELS
            if (K % 2 == 0) {
                sm_kernels_repack16_avx2(p, src, K, g * SM_R32, nr);
                continue;
            }
#endif
            if (nr < SM_R32) memset(p, 0, SM_R32 * K * sizeof *p);
            for (size_t k0 = 0; k0 < K; k0 += 64) /* 64 columns of the 32 rows at a time */
                for (size_t j = 0; j < nr; j++) {
                    const uint16_t *r = (const uint16_t *)src + (g * SM_R32 + j) * K;
                    for (size_t k = k0; k < K && k < k0 + 64; k++) p[k * SM_R32 + j] = r[k];
                }
        }
        return;
    }
    const size_t gb = SM_R32 * sm_dtype_row_bytes(sm_kernels_repacked(dt), K), rb = sm_dtype_row_bytes(dt, K);
    for (size_t g = g0; g < g1; g++) {
        uint8_t *o = (uint8_t *)dst + g * gb;
        if ((g + 1) * SM_R32 > N) memset(o, 0, gb); /* the rows past N: zeros (scales 0, products 0) */
        for (size_t l = 0; l < SM_R32 && g * SM_R32 + l < N; l++) {
            const uint8_t *row = (const uint8_t *)src + (g * SM_R32 + l) * rb;
            if (dt == SM_DTYPE_Q4_K || dt == SM_DTYPE_Q5_K) repack_k_row(o, row, dt, K, l);
            else if (dt == SM_DTYPE_Q6_K) repack_q6_row(o, row, K, l);
            else if (dt == SM_DTYPE_IQ4_XS) repack_xs_row(o, row, K, l);
            else repack_q_row(o, row, dt, K, l);
        }
    }
}
