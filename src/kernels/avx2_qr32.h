/*
** avx2_qr32.h -- the repacked row groups as the packed product's micro-
** kernels read them in place: the layouts (q4_0, q8_0, q4_k, q5_k, q6_k
** row groups of SM_R32 rows), where a block starts, its scales and levels
** as vectors, and a block's integer sums. Part of avx2_qgemm.c, included
** once after its vector types and panel sizes, as avx2_qpack.h is; split
** out along that seam to keep the file short.
*/
#ifndef SM_AVX2_QR32_H
#define SM_AVX2_QR32_H

/*
** Where a micro-kernel call's weights are: a packed panel (PANEL), or the
** GNV row groups of a repacked matrix (sm_kernels_repack) at the slice's
** first block, q4_0 (R4), q8_0 (R8), q4_k (R4K: q4_0's levels, then the
** rows' scales and mins as bytes, d and dmin after each super-block) or
** q5_k (R5K: the same with the levels' fifth bits after the nibbles) or
** q6_k (R6K: the levels' low nibbles as q4_0's, their top two bits in two
** planes, the halves' int8 scales, d after each super-block): lv[v] their
** levels, hb[v] (R5K, R6K) their high bits, sc[v] their f16 scales (R4K,
** R5K: their 6-bit scales, the mins SM_R32 bytes on; R6K: the first half's
** scales, the second's SM_R32 bytes on), dd[v] (R4K, R5K, R6K) the first
** super-block's d (R4K, R5K: dmin 64 bytes on). iq4_nl (RI4) is q4_0's layout
** with its levels through the table; iq4_xs (RXS) a super-block of 8 blocks'
** levels as q4_0's (512 bytes each), then the rows' int8 block scales
** (ls - 32, 32 bytes a block: sc[v] the first block's), then d (dd[v]).
*/
enum { PANEL, R4, R8, R4K, R5K, R6K, RI4, RXS };
enum { /* bytes of 32 rows' block (R4K, R5K, R6K, RXS: and super-block) */
    R4_BLOCK = 32 * 18, R8_BLOCK = 32 * 34, R5K_BLOCK = 32 * 22, R6K_BLOCK = 32 * 26, RXS_BLOCK = 32 * 16,
    R4K_SUPER = 32 * 148, R5K_SUPER = 32 * 180, R6K_SUPER = 32 * 210, RXS_SUPER = 32 * 138,
};
typedef struct {
    int lay;
    const uint8_t *panel;
    const uint8_t *lv[NVMAX], *hb[NVMAX], *sc[NVMAX], *dd[NVMAX];
    int nv;              /* vectors of rows: GNV, or (read in place) ONE_NV for a lone token row */
    bool ahead; /* read in place (r32_src), and the slice's first tile: ask for what follows */
    bool next; /* (a lone row's whole call) a row group of the thread's follows this one (AHEAD_256) */
    const uint8_t *base; /* (read in place) the row group's slice: its first block */
    size_t part;         /* which nv GV rows of the row group's SM_R32 these are */
} wsrc;

/* Where block b of a repacked layout starts, from the slice's first (R4K, R5K, R6K: a
   super-block's). */
static AI size_t r_off(int lay, size_t b) {
    return lay == R4K   ? b / 8 * R4K_SUPER + b % 8 * R4_BLOCK
           : lay == R5K ? b / 8 * R5K_SUPER + b % 8 * R5K_BLOCK
           : lay == R6K ? b / 8 * R6K_SUPER + b % 8 * R6K_BLOCK
           : lay == RXS ? b / 8 * RXS_SUPER + b % 8 * RXS_BLOCK
                        : b * (lay == R8 ? R8_BLOCK : R4_BLOCK);
}

/*
** A row group's blocks are one contiguous stream, read block after block;
** the first tile of token rows over a slice asks for the stream R32_AHEAD
** bytes on, the tiles after it read the slice from L1. On a 2-vCPU Emerald
** Rapids (bench_gemv, 2 threads, share of the read probe), one token row:
** q4_0 57-61% -> 79-86%, q8_0 73-80% -> 87-90%; 2 rows q4_0 56% -> 77%.
** 1 KB ahead gave 68-71% (q4_0), 2 KB 74-77%, 8 and 16 KB as 4 KB; every
** tile asking, as the first alone.
*/
enum { R32_AHEAD = 4096 };

/*
** A lone token row (decoding) on the 512-bit flavour asks for a block's
** lines a share before each group of its products, not all 9 (q4_0) or 17
** (q8_0) at once before the block. Zen 5, 2 threads, the TinyLlama shape
** (bench -t 2 --prompt-tokens 16 -n 64, 3 rounds, the builds in the order
** old, new, new, old), decode medians: q8_0 27.2 -> 29.4 tokens/s, new
** ahead in every pair; q4_0 64.0 -> 65.8 (within the noise).
*/
typedef struct {
    const char *p; /* the first line asked for (a block's R32_AHEAD bytes on, or a slice on) */
    size_t lines;  /* how many from p (0: none) */
} ahead;
/* Share s of n of a's lines, into L2 (every asking of the repacked products: n = 1 all of them). */
static AI void ask_share(ahead a, size_t s, size_t n) {
    for (size_t l = s * a.lines / n; l < (s + 1) * a.lines / n; l++) _mm_prefetch(a.p + 64 * l, _MM_HINT_T1);
}

/*
** AHEAD_256: on the 256-bit flavours a row group's 32 rows are passes of 8
** rows over each slice (a lone token row: of 16, ONE_NV), the first reading
** the slice from memory, the others from L1; asking R32_AHEAD bytes on in
** the first pass alone left memory idle through the others: one q6_k row on
** a Zen 3 (bench_gemv, one thread) read 9.5 GB/s against 12-13 as stored.
** So each pass asks for its share of every block's lines one slice on, the
** requests spread over the whole slice's time. A lone row's passes run each
** over the whole row group (micro's whole calls): the first asks for all of
** a block's lines one slice on, the second reads them from L2 and asks for
** the next row group's block (wsrc.next). Without that second asking memory
** idled through every second pass: on a 2-vCPU Zen 1 (AVX2 only; bench_gemv
** --kernels avx2 2, K 768-3072, interleaved) q4_0 read 10.7-12.1 -> 13.7-15.3
** GB/s, q6_k 8-12 -> 12.5-13.8, q4_k 11-12 -> 12-13; TinyLlama q4_0 decode
** 19.7 -> 24.3 tokens/s (llama.cpp 14.4), q4_k_m 18.3 -> 19.4. Leaving the
** first pass's asking to the thread's first row group (the second passes'
** serving the rest) was no faster than the build before. (A Zen 5's AVX2
** table, 2026-11: q4_0, q8_0 +1-11 points of the read probe, q4_k -1-3.)
*/

/* GV rows' f16 at p, the one of block b's super-block (q4_k_r32's, q5_k_r32's or q6_k_r32's d,
   or dmin), as f32. */
static AI gvf r4k_f16(int lay, const uint8_t *p, size_t b) {
    const size_t sup = lay == R5K ? R5K_SUPER : lay == R6K ? R6K_SUPER : lay == RXS ? RXS_SUPER : R4K_SUPER;
    return g_f16(p + b / 8 * sup);
}
/* Block b's D and M for half v, as pack makes them: q4_0 d and 8 d (q8_0, iq4_nl: 128 d); q4_k
   and q5_k d sc and dmin m; q6_k d sc of the block's two halves; iq4_xs d (ls - 32) and 128
   times it (exact products). */
static AI void r32_dm(wsrc src, int v, size_t b, gvf *D, gvf *M) {
    const size_t ob = r_off(src.lay, b);
    if (src.lay == RXS) {
        *D = g_mul(r4k_f16(RXS, src.dd[v], b), g_i8f(src.sc[v] + b / 8 * RXS_SUPER + b % 8 * SM_R32));
        *M = g_mul(*D, g_set1f(128.0f));
        return;
    }
    if (src.lay == R6K) {
        gvf d = r4k_f16(R6K, src.dd[v], b);
        *D = g_mul(d, g_i8f(src.sc[v] + ob)), *M = g_mul(d, g_i8f(src.sc[v] + ob + SM_R32));
        return;
    }
    if (src.lay == R4K || src.lay == R5K) {
        *D = g_mul(r4k_f16(src.lay, src.dd[v], b), g_u8f(src.sc[v] + ob));
        *M = g_mul(r4k_f16(src.lay, src.dd[v] + 2 * SM_R32, b), g_u8f(src.sc[v] + ob + SM_R32));
        return;
    }
    *D = g_f16(src.sc[v] + ob);
    *M = g_mul(*D, g_set1f(src.lay == R4 ? 8.0f : 128.0f)); /* R8, RI4: 128 */
}

/*
** Group q of a q4_0 / q4_k / q5_k / q6_k block b's levels, rows v (GV of
** them, within a 16-row half's 64-byte group): each row's weights 4q..4q+3
** (lo: the low nibbles) and 16 + 4q.. (hi: the high ones) as unsigned bytes. q5_k adds each level's fifth bit
** (16) from its bit plane: the byte of row r's weight k (of four) holds, in
** bit q, the bit of weight 4q + k and in bit 4 + q that of 16 + 4q + k.
** q6_k adds the top two bits (16, 32) from its two planes: bits 2q, 2q + 1
** of the byte of row r's weight k, weight 4q + k in the first, 16 + 4q + k
** in the second; one shift puts them at bits 4, 5 of the byte. iq4_nl and
** iq4_xs take their levels from the table, made unsigned (+ 128).
*/
static AI void r4_levels(wsrc src, int v, size_t b, int q, gvi *lo, gvi *hi) {
    const gvi m4 = g_set1b(15);
    const size_t ob = r_off(src.lay, b);
    gvi raw = g_load(src.lv[v] + ob + (size_t)q * 64);
    *lo = g_and(raw, m4), *hi = g_and(g_srli32(raw, 4), m4);
    if (src.lay == RI4 || src.lay == RXS) {
        const gvi t = g_iq4u();
        *lo = g_shuffle(t, *lo), *hi = g_shuffle(t, *hi);
    }
    if (src.lay == R5K) {
        const gvi m16 = g_set1b(16);
        gvi hb = g_load(src.hb[v] + ob);
        *lo = g_or(*lo, g_and(g_slli32(hb, (unsigned)(4 - q)), m16));
        *hi = g_or(*hi, g_and(g_srli32(hb, (unsigned)q), m16));
    }
    if (src.lay == R6K) {
        const gvi m48 = g_set1b(48);
        gvi pa = g_load(src.hb[v] + ob), pb = g_load(src.hb[v] + ob + 64);
        if (q < 2) pa = g_slli32(pa, (unsigned)(4 - 2 * q)), pb = g_slli32(pb, (unsigned)(4 - 2 * q));
        if (q == 3) pa = g_srli32(pa, 2), pb = g_srli32(pb, 2);
        *lo = g_or(*lo, g_and(pa, m48));
        *hi = g_or(*hi, g_and(pb, m48));
    }
}

/*
** Block b of repacked rows into the integer sums ia (r token rows, levels
** xb of each row's block b at stride SM_QGEMM_KC): q8_0's eight 64-byte
** groups as stored; q4_0's (and q4_k's, q5_k's, q6_k's) four, each the low
** nibbles (weights 4q..4q+3) and the high ones (16 + 4q..): integer sums
** are exact in any order. q6_k's halves apart: weights 0..15 into ih,
** 16..31 into ia.
*/
static AI void r32_block(int nv, wsrc src, size_t b, size_t r, gvi (*ia)[NVMAX], gvi (*ih)[NVMAX],
                         const int8_t *restrict xb, ahead pf) {
    if (src.lay == R8 && r == 1) { /* one row (decoding): each half's 512 bytes in turn, in
                                       address order; read alternately, as below, a Zen 4 decoded
                                       the TinyLlama shape at 18 tokens/s against 25 as stored,
                                       in turn at 29 */
        for (int v = 0; v < nv; v++) {
            for (int g = 0; g < 8; g++) {
                ask_share(pf, (size_t)(v * 8 + g), (size_t)nv * 8);
                int32_t x4;
                memcpy(&x4, xb + 4 * g, 4);
                ia[0][v] = g_dot(ia[0][v], g_load(src.lv[v] + b * R8_BLOCK + g * 64), g_bcast(x4));
            }
            __asm__ volatile("" ::: "memory"); /* keeps the compiler from interleaving the halves' loads */
        }
        return;
    }
    if (src.lay == R8) { /* more rows: each broadcast of a row's levels meets both halves */
        for (int g = 0; g < 8; g++) {
            gvi wv[NVMAX];
            for (int v = 0; v < nv; v++) wv[v] = g_load(src.lv[v] + b * R8_BLOCK + g * 64);
            for (size_t i = 0; i < r; i++) {
                int32_t x4;
                memcpy(&x4, xb + i * SM_QGEMM_KC + 4 * g, 4);
                gvi xv = g_bcast(x4);
                for (int v = 0; v < nv; v++) ia[i][v] = g_dot(ia[i][v], wv[v], xv);
            }
        }
        return;
    }
#if SM_QFLAVOUR == 0 /* int16 runs (g_dot16), in steps: each adds two groups (q6_k: one to each half) */
    const int run = src.lay == R6K ? RUN_GROUPS(63) : src.lay == R5K ? RUN_GROUPS(31) / 2 : RUN_GROUPS(15) / 2;
    gvi a16[GMR][NVMAX] = {{g_zero()}}, h16[GMR][NVMAX] = {{g_zero()}}; /* (all set by a run's first step) */
#endif
    for (int q = 0; q < 4; q++) {
        ask_share(pf, (size_t)q, 4);
        gvi lo[NVMAX], hi[NVMAX];
        for (int v = 0; v < nv; v++) r4_levels(src, v, b, q, &lo[v], &hi[v]);
        for (size_t i = 0; i < r; i++) {
            int32_t xl, xh;
            memcpy(&xl, xb + i * SM_QGEMM_KC + 4 * q, 4);
            memcpy(&xh, xb + i * SM_QGEMM_KC + 16 + 4 * q, 4);
            gvi vl = g_bcast(xl), vh = g_bcast(xh);
#if SM_QFLAVOUR == 0
            const bool fresh = q % run == 0, last = q % run == run - 1;
            for (int v = 0; v < nv; v++) {
                if (src.lay == R6K) {
                    h16[i][v] = g_dot16(h16[i][v], lo[v], vl, fresh), a16[i][v] = g_dot16(a16[i][v], hi[v], vh, fresh);
                    if (last) ih[i][v] = g_widen(ih[i][v], h16[i][v]);
                } else
                    a16[i][v] = g_dot16(g_dot16(a16[i][v], lo[v], vl, fresh), hi[v], vh, false);
                if (last) ia[i][v] = g_widen(ia[i][v], a16[i][v]);
            }
#else
            for (int v = 0; v < nv; v++)
                if (src.lay == R6K) ih[i][v] = g_dot(ih[i][v], lo[v], vl), ia[i][v] = g_dot(ia[i][v], hi[v], vh);
                else ia[i][v] = g_dot(g_dot(ia[i][v], lo[v], vl), hi[v], vh);
#endif
        }
    }
}

#endif
