/*
** Attention of every table against the scalar reference: contexts of one to
** several key blocks, sliding windows, rings, f16 caches, shared prefixes,
** and query heads that share a key/value head.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sm_half.h"
#include "sm_kernels.h"
#include "test.h"

/*
** Attention: every table against the scalar reference; and with an f16 KV
** cache, every table (the reference too) bit for bit its own result on the
** f32 widening of that cache (the caches here hold f16-exact values).
*/
void test_kernels_attention(void) {
    const sm_kernels *ks[8], *ref = sm_kernels_reference();
    size_t nk = sm_kernels_available(ks, 8);
    /* head sizes around the vector widths; query counts around the query
       group; contexts of one to several key blocks (SM_ATTN_KBLOCK) */
    static const size_t hss[] = {1, 3, 16, 17, 32, 64, 80};
    static const size_t Ts[] = {1, 3, 4, 17, 33, 70};
    static const size_t poss[] = {0, 1, 5, 40, 130};
    /* sliding windows: none, one key, inside a block, a block, across blocks */
    static const size_t wins[] = {0, 1, 5, 64, 100};
    unsigned long long s = 2;
    for (size_t a = 0; a < sizeof hss / sizeof *hss; a++)
        for (size_t b = 0; b < sizeof Ts / sizeof *Ts; b++)
            for (size_t c = 0; c < sizeof poss / sizeof *poss * 5; c++) {
                size_t hs = hss[a], T = Ts[b], pos = poss[c / 5], ctx = pos + T + 3, win = wins[c % 5];
                if (win && (hs % 16 == 1 || b % 2)) continue; /* windows: a subset keeps the time */
                size_t qs = 3 * hs + 1, os = hs + 2, nsc = SM_ATTN_SCRATCH(hs, ctx);
                float *q = test_rnd(T * qs, &s, 2), *keys = test_rnd(ctx * hs, &s, 2), *v = test_rnd(ctx * hs, &s, 1);
                size_t kn = hs * sm_attn_ctx_padded(ctx);
                float *kt = test_rnd(kn, &s, 0); /* blocked key cache */
                uint16_t *kt16 = calloc(kn, 2), *v16 = calloc(ctx * hs, 2);
                for (size_t j = 0; j < ctx * hs; j++) {
                    v16[j] = sm_f32_to_f16(v[j]);
                    v[j] = sm_f16_to_f32(v16[j]);
                }
                for (size_t j = 0; j < ctx; j++)
                    for (size_t d = 0; d < hs; d++) {
                        size_t k = sm_attn_key_index(j, d, hs);
                        kt16[k] = sm_f32_to_f16(keys[j * hs + d]);
                        kt[k] = sm_f16_to_f32(kt16[k]);
                    }
                float *sc = test_rnd(nsc + 16, &s, 0); /* 16 guard floats after the scratch */
                for (size_t j = 0; j < 16; j++) sc[nsc + j] = 4321.0f;
                float *want = test_rnd(T * os, &s, 0), *got = test_rnd(T * os, &s, 0);
                float scale = 1.0f / sqrtf((float)hs);
                sm_kv_head kv32 = {.kt = kt, .v = v, .type = SM_DTYPE_F32};
                sm_kv_head kv16 = {.kt = kt16, .v = v16, .type = SM_DTYPE_F16};
                ref->attention(want, q, &kv32, sc, T, pos, hs, 1, qs, os, scale, win);
                /* the same caches split: key blocks below sh in a second (shared) copy, the
                   own copy's there garbage; a table reads each slot where it is */
                size_t sh = ctx / SM_ATTN_KBLOCK * SM_ATTN_KBLOCK;
                float *okt = test_rnd(kn, &s, 3), *ov = test_rnd(ctx * hs, &s, 3);
                uint16_t *okt16 = calloc(kn, 2), *ov16 = calloc(ctx * hs, 2);
                memcpy(okt + sh * hs, kt + sh * hs, (kn - sh * hs) * sizeof *kt);
                memcpy(ov + sh * hs, v + sh * hs, (ctx - sh) * hs * sizeof *v);
                memcpy(okt16 + sh * hs, kt16 + sh * hs, (kn - sh * hs) * 2);
                memcpy(ov16 + sh * hs, v16 + sh * hs, (ctx - sh) * hs * 2);
                for (size_t j = 0; j < sh * hs; j++) okt16[j] = ov16[j] = 0x7bff; /* 65504 */
                sm_kv_head sp32 = {.kt = okt, .v = ov, .kt0 = kt, .v0 = v, .shared = sh, .type = SM_DTYPE_F32};
                sm_kv_head sp16 = {.kt = okt16, .v = ov16, .kt0 = kt16, .v0 = v16, .shared = sh,
                                   .type = SM_DTYPE_F16};
                /* every table (the reference last): the whole caches, f32 and f16, and the same
                   split; the f16 result the f32 widening's; the SIMD tables near the reference */
                for (size_t i = 0; i <= nk; i++) {
                    const sm_kernels *kk = i < nk ? ks[i] : ref;
                    float *w32 = test_rnd(T * os, &s, 0), *w = test_rnd(T * os, &s, 0);
                    for (size_t j = 0; j < T * os; j++) got[j] = w[j] = w32[j] = -777.0f; /* past hs: unwritten */
                    kk->attention(w32, q, &kv32, sc, T, pos, hs, 1, qs, os, scale, win);
                    kk->attention(w, q, &sp32, sc, T, pos, hs, 1, qs, os, scale, win);
                    CHECKF(memcmp(w, w32, T * os * sizeof *w) == 0,
                           "%s attention hs=%zu T=%zu pos=%zu: a shared prefix of %zu changes the result",
                           kk->name, hs, T, pos, sh);
                    kk->attention(got, q, &kv16, sc, T, pos, hs, 1, qs, os, scale, win);
                    kk->attention(w, q, &sp16, sc, T, pos, hs, 1, qs, os, scale, win);
                    CHECKF(memcmp(w, got, T * os * sizeof *w) == 0,
                           "%s attention hs=%zu T=%zu pos=%zu: a shared f16 prefix of %zu changes the result",
                           kk->name, hs, T, pos, sh);
                    free(w);
                    if (i == nk) {
                        free(w32);
                        break;
                    }
                    CHECKF(memcmp(got, w32, T * os * sizeof *got) == 0,
                           "%s attention hs=%zu T=%zu pos=%zu: the f16 cache is not its f32 widening",
                           ks[i]->name, hs, T, pos);
                    free(w32);
                    for (size_t j = 0; j < 16; j++)
                        CHECKF(sc[nsc + j] == 4321.0f, "%s attention wrote past its scratch",
                               ks[i]->name);
                    for (size_t t = 0; t < T; t++)
                        for (size_t d = 0; d < os; d++) {
                            float g = got[t * os + d];
                            if (d >= hs) {
                                CHECKF(g == -777.0f, "%s attention wrote past hs", ks[i]->name);
                                continue;
                            }
                            CHECKF(fabsf(g - want[t * os + d]) <= 2e-5f,
                                   "%s attention hs=%zu T=%zu pos=%zu window=%zu [%zu,%zu]: %g vs %g",
                                   ks[i]->name, hs, T, pos, win, t, d, g, want[t * os + d]);
                        }
                }
                free(okt), free(ov), free(okt16), free(ov16);
                free(q), free(keys), free(kt), free(v), free(sc), free(want), free(got), free(kt16),
                    free(v16);
            }
}

/*
** A sliding-window cache kept as a ring (position j in slot j % ring) gives
** what the whole cache gives, for every table: the ring holds the window plus
** the call's rows, padded to key blocks, and slots of older positions hold
** other (finite) keys that the window masks.
*/
void test_kernels_attention_ring(void) {
    const sm_kernels *ks[8], *ref = sm_kernels_reference();
    size_t nk = sm_kernels_available(ks, 8);
    ks[nk++] = ref;
    unsigned long long s = 12;
    static const size_t cases[][4] = {/* hs, T, pos, window */
                                      {16, 1, 300, 64}, {17, 5, 200, 40}, {32, 33, 130, 100},
                                      {64, 70, 500, 128}, {8, 1, 1000, 1}, {16, 4, 63, 64}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        size_t hs = cases[c][0], T = cases[c][1], pos = cases[c][2], win = cases[c][3];
        size_t ctx = pos + T, ring = sm_attn_ctx_padded(win + T - 1), qs = hs, os = hs;
        float *q = test_rnd(T * qs, &s, 2), *keys = test_rnd(ctx * hs, &s, 2), *v = test_rnd(ctx * hs, &s, 1);
        float *kt = test_rnd(hs * sm_attn_ctx_padded(ctx), &s, 0), *rk = test_rnd(hs * ring, &s, 0);
        float *rv = test_rnd(ring * hs, &s, 0);
        for (size_t j = 0; j < ctx; j++) /* later positions overwrite earlier ones in the ring */
            for (size_t d = 0; d < hs; d++) {
                kt[sm_attn_key_index(j, d, hs)] = keys[j * hs + d];
                rk[sm_attn_key_index(j % ring, d, hs)] = keys[j * hs + d];
                rv[(j % ring) * hs + d] = v[j * hs + d];
            }
        float *sc = test_rnd(SM_ATTN_SCRATCH(hs, ctx), &s, 0), *want = test_rnd(T * os, &s, 0), *got = test_rnd(T * os, &s, 0);
        float scale = 1.0f / sqrtf((float)hs);
        sm_kv_head whole = {.kt = kt, .v = v, .type = SM_DTYPE_F32};
        sm_kv_head rkv = {.kt = rk, .v = rv, .ring = ring, .type = SM_DTYPE_F32};
        ref->attention(want, q, &whole, sc, T, pos, hs, 1, qs, os, scale, win);
        for (size_t i = 0; i < nk; i++) {
            ks[i]->attention(got, q, &rkv, sc, T, pos, hs, 1, qs, os, scale, win);
            float worst = 0;
            for (size_t j = 0; j < T * os; j++) worst = fmaxf(worst, fabsf(got[j] - want[j]));
            CHECKF(worst <= 2e-5f, "%s attention ring %zu (hs %zu, T %zu, pos %zu, window %zu): off by %g",
                   ks[i]->name, ring, hs, T, pos, win, worst);
        }
        free(q), free(keys), free(v), free(kt), free(rk), free(rv), free(sc), free(want), free(got);
    }
}

/*
** nh query heads reading one key/value head (grouped-query attention): each
** head near the reference; each head's rows the same bits when the other
** heads' queries change; the rows of groups of 4 queries the same bits as a
** call for that head alone (only a lone last query is grouped by heads).
*/
void test_kernels_attention_heads(void) {
    const sm_kernels *ks[8], *ref = sm_kernels_reference();
    size_t nk = sm_kernels_available(ks, 8);
    static const size_t cases[][5] = {/* hs, nh, T, pos, window */
                                      {64, 8, 1, 0, 0},   {64, 8, 1, 200, 0},  {64, 8, 5, 70, 0},
                                      {16, 2, 1, 63, 0},  {17, 3, 9, 130, 0},  {32, 5, 1, 64, 0},
                                      {64, 7, 13, 40, 0}, {16, 4, 1, 150, 40}, {64, 8, 4, 100, 0},
                                      {80, 6, 2, 30, 0},  {64, 8, 1, 300, 64}, {16, 4, 17, 0, 5}};
    unsigned long long s = 21;
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        size_t hs = cases[c][0], nh = cases[c][1], T = cases[c][2], pos = cases[c][3], win = cases[c][4];
        size_t ctx = pos + T, qs = nh * hs + 3, os = nh * hs + 1, n = T * os;
        float *q = test_rnd(T * qs, &s, 2), *q2 = test_rnd(T * qs, &s, 2), *v = test_rnd(ctx * hs, &s, 1);
        float *kt = test_rnd(hs * sm_attn_ctx_padded(ctx), &s, 2);
        float *sc = test_rnd(SM_ATTN_SCRATCH(hs, ctx), &s, 0), *want = test_rnd(n, &s, 0), *got = test_rnd(n, &s, 0);
        float *other = test_rnd(n, &s, 0), *alone = test_rnd(n, &s, 0);
        for (size_t j = 0; j < T * qs; j += qs) memcpy(q2 + j, q + j, hs * sizeof *q); /* head 0 kept */
        float scale = 1.0f / sqrtf((float)hs);
        sm_kv_head kv = {.kt = kt, .v = v, .type = SM_DTYPE_F32};
        ref->attention(want, q, &kv, sc, T, pos, hs, nh, qs, os, scale, win);
        for (size_t i = 0; i <= nk; i++) {
            const sm_kernels *kk = i < nk ? ks[i] : ref;
            for (size_t j = 0; j < n; j++) got[j] = other[j] = alone[j] = NAN; /* unwritten: fails */
            kk->attention(got, q, &kv, sc, T, pos, hs, nh, qs, os, scale, win);
            kk->attention(other, q2, &kv, sc, T, pos, hs, nh, qs, os, scale, win);
            float worst = 0;
            for (size_t t = 0; t < T; t++)
                for (size_t d = 0; d < nh * hs; d++) {
                    float e = fabsf(got[t * os + d] - want[t * os + d]);
                    if (!(e <= worst)) worst = e; /* a NaN (unwritten) stays */
                }
            CHECKF(worst <= 2e-5f, "%s attention of %zu heads (hs %zu, T %zu, pos %zu, window %zu): off by %g",
                   kk->name, nh, hs, T, pos, win, worst);
            bool same = true, split = true;
            for (size_t t = 0; t < T; t++)
                same &= memcmp(got + t * os, other + t * os, hs * sizeof *got) == 0;
            CHECKF(same, "%s attention of %zu heads: head 0 changes with the others' queries", kk->name, nh);
            for (size_t h = 0; h < nh; h++) { /* each head alone: the same rows but a lone last one */
                kk->attention(alone + h * hs, q + h * hs, &kv, sc, T, pos, hs, 1, qs, os, scale, win);
                for (size_t t = 0; t < T - (T % SM_ATTN_QGROUP == 1); t++)
                    split &= memcmp(got + t * os + h * hs, alone + t * os + h * hs, hs * sizeof *got) == 0;
            }
            CHECKF(split, "%s attention of %zu heads (T %zu): a group of queries differs from its head alone",
                   kk->name, nh, T);
        }
        free(q), free(q2), free(v), free(kt), free(sc), free(want), free(got), free(other), free(alone);
    }
}

/*
** attention_rows: decoding rows of several sequences, some reading one of
** two shared prefixes (of 1-4 key blocks), some none, each row's own keys
** past its prefix from none to several blocks; in three orders (the
** prefixes' readers apart, together, reversed), every row bit for bit the
** table's attention of that row alone, f32 and f16 caches, nothing written
** past the scratch.
*/
void test_kernels_attention_rows(void) {
    const sm_kernels *ks[8];
    size_t nk = sm_kernels_available(ks, 8);
    static const size_t hss[] = {16, 17, 64, 80};
    /* per row: prefix (0 none, 1 or 2), shared positions, position */
    static const size_t spec[][3] = {{1, 128, 127}, {1, 128, 130}, {2, 64, 64},   {0, 0, 70},   {1, 64, 200},
                                     {2, 192, 250}, {2, 64, 63},   {1, 256, 300}, {1, 128, 191}, {1, 192, 192},
                                     {0, 0, 0},     {2, 128, 129}, {1, 64, 100}};
    enum { NR = sizeof spec / sizeof *spec, CTX = 320 };
    const sm_kernels *ref = sm_kernels_reference();
    CHECKF(ref->attention_rows == NULL, "the scalar reference has attention_rows");
    unsigned long long s = 77;
    for (size_t a = 0; a < sizeof hss / sizeof *hss; a++)
        for (int f16 = 0; f16 < 2; f16++) {
            const size_t hs = hss[a], kn = hs * sm_attn_ctx_padded(CTX), es = f16 ? 2 : 4;
            /* three caches per row's worth: the two prefixes, then each row's own; f16-exact values */
            void *kt[2 + NR], *v[2 + NR];
            for (size_t c = 0; c < 2 + NR; c++) {
                float *k32 = test_rnd(kn, &s, 2), *v32 = test_rnd(CTX * hs, &s, 1);
                kt[c] = malloc(kn * es), v[c] = malloc(CTX * hs * es);
                for (size_t j = 0; j < kn; j++)
                    if (f16) ((uint16_t *)kt[c])[j] = sm_f32_to_f16(k32[j]);
                    else ((float *)kt[c])[j] = sm_f16_to_f32(sm_f32_to_f16(k32[j]));
                for (size_t j = 0; j < CTX * hs; j++)
                    if (f16) ((uint16_t *)v[c])[j] = sm_f32_to_f16(v32[j]);
                    else ((float *)v[c])[j] = sm_f16_to_f32(sm_f32_to_f16(v32[j]));
                free(k32), free(v32);
            }
            float *q = test_rnd(NR * hs, &s, 2), *want = test_rnd(NR * hs, &s, 0), *got = test_rnd(NR * hs, &s, 0);
            size_t nsc = SM_ATTN_SCRATCH(hs, CTX);
            float *sc = test_rnd(nsc + 16, &s, 0);
            sm_attn_row rows[NR];
            const sm_attn_row *order[NR];
            for (size_t r = 0; r < NR; r++) {
                size_t src = spec[r][0];
                sm_kv_head kv = {.kt = kt[2 + r], .v = v[2 + r], .type = f16 ? SM_DTYPE_F16 : SM_DTYPE_F32};
                if (src) kv.kt0 = kt[src - 1], kv.v0 = v[src - 1], kv.shared = spec[r][1];
                rows[r] = (sm_attn_row){got + r * hs, q + r * hs, kv, spec[r][2]};
            }
            for (size_t i = 0; i < nk; i++) {
                const sm_kernels *kk = ks[i];
                if (!kk->attention_rows) continue;
                float scale = 1.0f / sqrtf((float)hs);
                for (size_t r = 0; r < NR; r++)
                    kk->attention(want + r * hs, q + r * hs, &rows[r].kv, sc, 1, rows[r].pos, hs, 1, hs, hs, scale, 0);
                for (int o = 0; o < 3; o++) {
                    size_t n = 0; /* 0: as listed; 1: each prefix's readers together; 2: reversed */
                    if (o == 1) {
                        for (size_t src = 0; src < 3; src++)
                            for (size_t r = 0; r < NR; r++)
                                if (spec[r][0] == src) order[n++] = &rows[r];
                    } else {
                        for (size_t r = 0; r < NR; r++) order[n++] = &rows[o == 2 ? NR - 1 - r : r];
                    }
                    for (size_t j = 0; j < NR * hs; j++) got[j] = NAN;
                    for (size_t j = 0; j < 16; j++) sc[SM_ATTN_SCRATCH(hs, 0) + j] = 4321.0f;
                    kk->attention_rows(order, n, sc, hs, scale);
                    for (size_t r = 0; r < NR; r++)
                        CHECKF(memcmp(got + r * hs, want + r * hs, hs * sizeof *got) == 0,
                               "%s attention_rows (hs %zu, %s, order %d): row %zu (prefix %zu of %zu, pos %zu) "
                               "differs from the row alone", kk->name, hs, f16 ? "f16" : "f32", o, r, spec[r][0],
                               spec[r][1], spec[r][2]);
                    for (size_t j = 0; j < 16; j++)
                        CHECKF(sc[SM_ATTN_SCRATCH(hs, 0) + j] == 4321.0f, "%s attention_rows wrote past its scratch",
                               kk->name);
                }
            }
            for (size_t c = 0; c < 2 + NR; c++) free(kt[c]), free(v[c]);
            free(q), free(want), free(got), free(sc);
        }
}
