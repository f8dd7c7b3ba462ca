/*
** The prefix cache (sm_prefix.h) on the random test models: a prompt
** prefilled after a reused prefix gives bit for bit the logits, and the
** decode after it, of the whole prompt prefilled alone, for prefixes and
** prompts of many lengths (ends inside a block, prompts that are a prefix
** of the stored one, tails of 1 to 3 tokens) and batch sizes whose calls
** split the prompt; the rules never reuse all of a prompt; eviction keeps
** the budget; after SM_PREFIX_SPECULATE prompts in a row whose blocks no
** prompt reused, a prompt stores its kept blocks and one more, until a
** stored block is reused.
*/
#include <stdlib.h>
#include <string.h>
#include "sm_prefix.h"
#include "test.h"

typedef struct {
    sm_arena a;
    sm_prefix *pc;
} cache;

static bool cache_open(cache *c, const test_rig *r, size_t bytes) {
    sm_arena meas;
    sm_error err = {{0}};
    sm_arena_measure(&meas);
    sm_prefix_init(&c->pc, r->m, &r->sp, bytes, &meas, &err);
    if (sm_arena_init(&c->a, meas.used + 64) ||
        sm_prefix_init(&c->pc, r->m, &r->sp, bytes, &c->a, &err)) {
        test_fail(__FILE__, __LINE__, "prefix cache: %s", err.msg);
        return false;
    }
    return true;
}

/* Last-row logits of toks[0..n) prefilled into seq from pos, then `steps` greedy decodes:
   (steps + 1) rows into out. */
static bool run_from(test_rig *r, size_t seq, const int32_t *toks, size_t n, size_t pos,
                     size_t steps, float *out) {
    sm_error err = {{0}};
    const float *lg;
    if (sm_state_prefill_seq(r->s, seq, toks + pos, n - pos, pos, &lg, &err)) return false;
    for (size_t k = 0;; k++) {
        memcpy(out + k * r->V, lg, r->V * sizeof *out);
        if (k == steps) return true;
        int32_t best = 0;
        for (size_t v = 1; v < r->V; v++)
            if (lg[v] > lg[best]) best = (int32_t)v;
        if (sm_state_forward_seq(r->s, seq, &best, 1, n + k, &lg, &err)) return false;
    }
}

void test_prefix_reuse_is_exact(void) {
    /* seed16: bf16 weights, prefilled on vdpbf16ps where the CPU has AVX512-BF16 */
    static const char *models[] = {"seed", "odd", "nobias", "seed16", "seedq4"};
    static const char *kerns[] = {"scalar", "auto"};
    static const size_t batches[] = {16, 32, 0}; /* 0: the whole context */
    enum { STEPS = 3 };
    size_t checked = 0, reused = 0;
    /* make asan: every third length (each offset in a block still met across the shares) */
    size_t stride = getenv("SM_SANITIZED") && *getenv("SM_SANITIZED") ? 3 : 1;
    for (int mi = 0; mi < 5; mi++)
        for (int ki = 0; ki < 2; ki++)
            for (int bi = 0; bi < 3; bi++) {
                if ((mi == 0 || mi == 3) && ki == 0) continue; /* the scalar table is slow on the widest */
                test_rig r;
                if (!test_rig_open(&r, models[mi], 2, kerns[ki], false, 1, 2)) return;
                size_t ctx = r.sp.n_ctx, mb = batches[bi] ? batches[bi] : ctx;
                test_rig_close(&r);
                if (!test_rig_open(&r, models[mi], 2, kerns[ki], false, mb, 2)) return;
                cache c;
                if (!cache_open(&c, &r, 64u << 20)) return;
                CHECKF(c.pc != NULL, "%s: no cache for batch %zu", models[mi], mb);
                if (!c.pc) return;
                size_t L = ctx - STEPS - 1 < 70 ? ctx - STEPS - 1 : 70;
                int32_t *a = malloc(L * sizeof *a), *b = malloc(L * sizeof *b);
                int32_t *junk = malloc(L * sizeof *junk);
                float *want = malloc((STEPS + 1) * r.V * sizeof *want);
                float *got = malloc((STEPS + 1) * r.V * sizeof *got);
                for (size_t i = 0; i < L; i++) a[i] = (int32_t)((i * 37 + 11) % r.V);
                float *scratch = malloc((STEPS + 1) * r.V * sizeof *scratch);
                CHECK(run_from(&r, 0, a, L, 0, 0, scratch)); /* a, prefilled alone in seq 0 */
                sm_prefix_insert(c.pc, r.s, 0, a, L, 0);
                /* b: a's first `shared` tokens, then others, n long */
                static const size_t shares[] = {0, 5, 16, 20, 33, 48, 200};
                for (size_t si = 0; si < sizeof shares / sizeof *shares; si++)
                    for (size_t n = 1 + si % stride, shared = shares[si] < L ? shares[si] : L; n <= L; n += stride) {
                        for (size_t i = 0; i < n; i++)
                            b[i] = i < shared ? a[i] : (int32_t)((i * 53 + 5) % r.V);
                        CHECK(run_from(&r, 1, b, n, 0, STEPS, want));
                        sm_prefix_hit h = sm_prefix_match(c.pc, b, n);
                        CHECKF(h.n_reused < n && h.n_reused % SM_PREFIX_BLOCK == 0 &&
                                   h.n_reused <= (shared < n ? shared : n),
                               "%s: reuses %zu of %zu tokens sharing %zu", models[mi], h.n_reused,
                               n, shared);
                        /* seq 1 holds another prompt's keys first, so only the load can help */
                        for (size_t i = 0; i < n; i++) junk[i] = (int32_t)((i * 91 + 17) % r.V);
                        CHECK(run_from(&r, 1, junk, n, 0, 0, got));
                        sm_prefix_load(c.pc, r.s, 1, h, 0);
                        CHECK(run_from(&r, 1, b, n, h.n_reused, STEPS, got));
                        CHECKF(memcmp(want, got, (STEPS + 1) * r.V * sizeof *got) == 0,
                               "%s/%s batch %zu: prompt of %zu sharing %zu, %zu reused: logits "
                               "differ from the prompt alone",
                               models[mi], kerns[ki], mb, n, shared, h.n_reused);
                        checked++;
                        reused += h.n_reused > 0;
                    }
                sm_prefix_stats st = sm_prefix_stats_of(c.pc);
                CHECKF(st.blocks == L / SM_PREFIX_BLOCK && st.evicted == 0,
                       "%s: %zu blocks cached, %zu evicted (want %zu, 0)", models[mi], st.blocks,
                       st.evicted, L / SM_PREFIX_BLOCK);
                free(a), free(b), free(junk), free(want), free(got), free(scratch);
                sm_arena_free(&c.a);
                test_rig_close(&r);
            }
    CHECKF(checked > 2000 / stride && reused > checked / 3, "%zu prompts checked, %zu reused a prefix",
           checked, reused);
}

/* A budget of three blocks keeps three: the least recently used leaf goes first. */
void test_prefix_evicts_lru_leaves(void) {
    test_rig r;
    if (!test_rig_open(&r, "seed", 1, "auto", false, 64, 1)) return;
    cache c;
    size_t per = SM_PREFIX_BLOCK * sm_model_kv_bytes(r.m, SM_DTYPE_F32) + 256;
    if (!cache_open(&c, &r, 3 * per)) return;
    CHECK(c.pc && sm_prefix_stats_of(c.pc).blocks_max == 3);
    int32_t x[64], y[64];
    for (size_t i = 0; i < 64; i++) x[i] = (int32_t)(i % 200), y[i] = (int32_t)((i * 7 + 3) % 200);
    float *out = malloc(r.V * sizeof *out);
    CHECK(run_from(&r, 0, x, 48, 0, 0, out));
    sm_prefix_insert(c.pc, r.s, 0, x, 48, 0); /* x's three blocks fill it */
    CHECK(sm_prefix_match(c.pc, x, 64).n_reused == 48);
    CHECK(run_from(&r, 0, y, 32, 0, 0, out));
    sm_prefix_insert(c.pc, r.s, 0, y, 32, 0); /* y's two evict x's last two (leaves, oldest) */
    sm_prefix_stats st = sm_prefix_stats_of(c.pc);
    CHECKF(st.blocks == 3 && st.evicted == 2, "%zu blocks, %zu evicted", st.blocks, st.evicted);
    CHECK(sm_prefix_match(c.pc, y, 64).n_reused == 32);
    CHECK(sm_prefix_match(c.pc, x, 64).n_reused == 16);
    free(out);
    sm_arena_free(&c.a);
    test_rig_close(&r);
}

/* Prompt i of 64 tokens (4 blocks), its first token its own: prefilled into seq 0 and stored. */
static bool store(test_rig *r, cache *c, int32_t *t, size_t i, size_t keep, float *out) {
    for (size_t k = 0; k < 64; k++) t[k] = (int32_t)((k == 0 ? i : k * 13 + i * 7 + 1) % 200);
    if (!run_from(r, 0, t, 64, 0, 0, out)) return false;
    sm_prefix_insert(c->pc, r->s, 0, t, 64, keep);
    return true;
}

/*
** Prompts that share nothing: the first SM_PREFIX_SPECULATE store all 4 blocks, then each
** stores its first (the probe) and holds back 3, or with keep = 2 its 2 kept blocks and the
** probe; a prompt reusing a block never reused before (a probe) makes the next store whole.
*/
void test_prefix_holds_back_unshared(void) {
    test_rig r;
    if (!test_rig_open(&r, "seed", 1, "auto", false, 64, 1)) return;
    cache c;
    if (!cache_open(&c, &r, 64u << 20)) return;
    CHECK(c.pc && sm_prefix_stats_of(c.pc).blocks_max > 4 * (SM_PREFIX_SPECULATE + 8));
    int32_t t[64];
    float *out = malloc(r.V * sizeof *out);
    size_t i = 0;
    for (; i < SM_PREFIX_SPECULATE; i++) CHECK(store(&r, &c, t, i, 0, out));
    sm_prefix_stats st = sm_prefix_stats_of(c.pc);
    CHECKF(st.inserted == 4 * SM_PREFIX_SPECULATE && st.held_back == 0, "%zu stored, %zu held back",
           st.inserted, st.held_back);
    CHECK(store(&r, &c, t, i++, 0, out)); /* the probe alone */
    st = sm_prefix_stats_of(c.pc);
    CHECKF(st.inserted == 4 * SM_PREFIX_SPECULATE + 1 && st.held_back == 3, "%zu stored, %zu held back",
           st.inserted, st.held_back);
    CHECK(sm_prefix_match(c.pc, t, 64).n_reused == 16);
    CHECK(store(&r, &c, t, i++, 2, out)); /* two kept, then the probe */
    st = sm_prefix_stats_of(c.pc);
    CHECKF(st.inserted == 4 * SM_PREFIX_SPECULATE + 4 && st.held_back == 4, "%zu stored, %zu held back",
           st.inserted, st.held_back);
    CHECK(sm_prefix_match(c.pc, t, 64).n_reused == 48);
    /* a prompt reusing the last probe (loaded once: never reused before) */
    int32_t u[64];
    for (size_t k = 0; k < 64; k++) u[k] = k < 16 ? t[k] : (int32_t)((k * 29 + 3) % 200);
    sm_prefix_hit h = sm_prefix_match(c.pc, u, 64);
    CHECK(h.n_reused == 16);
    sm_prefix_load(c.pc, r.s, 0, h, 0);
    CHECK(store(&r, &c, t, i++, 0, out)); /* whole again */
    st = sm_prefix_stats_of(c.pc);
    CHECKF(st.inserted == 4 * SM_PREFIX_SPECULATE + 8 && st.held_back == 4, "%zu stored, %zu held back",
           st.inserted, st.held_back);
    CHECK(sm_prefix_match(c.pc, t, 64).n_reused == 48);
    free(out);
    sm_arena_free(&c.a);
    test_rig_close(&r);
}

/* sm_state_kv_reserve writes nothing: a sequence's cache and its neighbour's read back the same
   after reserving it to the end of the context and past it, and the decode after it is the
   same bits. */
void test_kv_reserve_keeps_contents(void) {
    static const char *models[] = {"seed", "odd", "seedq4"};
    enum { STEPS = 3 };
    for (int mi = 0; mi < 3; mi++) {
        test_rig r;
        if (!test_rig_open(&r, models[mi], 2, "auto", false, 1, 2)) return;
        const size_t ctx = r.sp.n_ctx, L = ctx / 2, kvb = sm_state_kv_bytes(r.s);
        int32_t *a = malloc(L * sizeof *a);
        float *want = malloc((STEPS + 1) * r.V * sizeof *want), *got = malloc((STEPS + 1) * r.V * sizeof *got);
        char *k0 = malloc(2 * L * kvb), *k1 = malloc(2 * L * kvb);
        for (size_t i = 0; i < L; i++) a[i] = (int32_t)((i * 29 + 3) % r.V);
        CHECK(run_from(&r, 0, a, L, 0, STEPS, want));
        CHECK(run_from(&r, 1, a, L - 1, 0, 0, got)); /* the neighbour, one token short */
        CHECK(sm_state_kv_get(r.s, 0, 0, L, L, k0) && sm_state_kv_get(r.s, 1, 0, L - 1, L - 1, k0 + L * kvb));
        sm_state_kv_reserve(r.s, 0, ctx);
        sm_state_kv_reserve(r.s, 1, ctx + 1000);
        CHECK(sm_state_kv_get(r.s, 0, 0, L, L, k1) && sm_state_kv_get(r.s, 1, 0, L - 1, L - 1, k1 + L * kvb));
        CHECKF(memcmp(k0, k1, (2 * L - 1) * kvb) == 0, "%s: the cache changed on reserving it", models[mi]);
        /* the neighbour's last token and decode now equal seq 0's */
        CHECK(run_from(&r, 1, a, L, L - 1, STEPS, got));
        CHECKF(memcmp(want, got, (STEPS + 1) * r.V * sizeof *got) == 0, "%s: decode after a reserve differs",
               models[mi]);
        free(a), free(want), free(got), free(k0), free(k1);
        test_rig_close(&r);
    }
}
