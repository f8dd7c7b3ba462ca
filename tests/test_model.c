/*
** Model-level tests on the random test models (SM_TEST_MODELS, written by
** scripts/sm_random_model.py): the KV-cache path against recomputation,
** thread-count independence, input checks, and the generation loop.
** The forward pass against NumPy is tests/test_reference.py.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <unistd.h>

#include "sm_generate.h"
#include "smallmind_internal.h"
#include "test.h"

typedef test_rig rig;

static bool rig_open_seq(rig *r, const char *name, int nth, const char *kern, bool all,
                         size_t batch, size_t nseq) {
    return test_rig_open(r, name, nth, kern, all, batch, nseq);
}

static bool rig_open(rig *r, const char *name, int nth, const char *kern, bool all, size_t batch) {
    return test_rig_open(r, name, nth, kern, all, batch, 1);
}

static void rig_close(rig *r) {
    test_rig_close(r);
}

/* Logits (T, V) of toks, fed in calls of `chunk` tokens. Caller frees. */
static float *run(rig *r, const int32_t *toks, size_t T, size_t chunk) {
    float *out = malloc(T * r->V * sizeof *out);
    sm_error err;
    for (size_t done = 0; done < T; done += chunk) {
        size_t n = T - done < chunk ? T - done : chunk;
        const float *lg;
        if (sm_state_forward(r->s, toks + done, n, done, &lg, &err)) {
            free(out);
            return NULL;
        }
        memcpy(out + done * r->V, lg, n * r->V * sizeof *out);
    }
    return out;
}

static void make_tokens(int32_t *t, size_t n, size_t V) {
    for (size_t i = 0; i < n; i++) t[i] = (int32_t)((i * 131 + 7) % (V < 256 ? V : 256));
}

void test_model_kv_cache_matches_recompute(void) {
    const char *models[] = {"seed", "odd", "nobias"};
    const char *kerns[] = {"scalar", "auto"};
    for (int mi = 0; mi < 3; mi++)
        for (int ki = 0; ki < 2; ki++) {
            rig full, step;
            if (!rig_open(&full, models[mi], 1, kerns[ki], true, 40)) return;
            if (!rig_open(&step, models[mi], 1, kerns[ki], true, 40)) return;
            int32_t toks[40];
            make_tokens(toks, 40, full.V);
            float *a = run(&full, toks, 40, 40), *b = run(&step, toks, 40, 1);
            CHECK(a && b);
            double worst = 0;
            for (size_t i = 0; i < 40 * full.V; i++) worst = fmax(worst, fabs(a[i] - b[i]));
            CHECKF(worst <= 1e-4, "%s/%s: cached decode differs from recompute by %g", models[mi],
                   kerns[ki], worst);
            free(a), free(b);
            rig_close(&full), rig_close(&step);
        }
}

/*
** Logits are bit for bit the same on 1, 2 and 3 threads, in a 33-token
** prefill and in cached decode; each model is loaded, and its matrices
** repacked (f32 panels, q4_0, q8_0, q4_k, a q6_k output layer), on as many threads.
*/
void test_model_threads_identical(void) {
    const char *models[] = {"seed", "odd", "seedq4", "seedq8", "seedk4"};
    for (int mi = 0; mi < 5; mi++) {
        float *res[3][2];
        size_t V = 0;
        for (int nth = 1; nth <= 3; nth++) {
            rig r;
            if (!rig_open(&r, models[mi], nth, "auto", true, 33)) return;
            int32_t toks[33];
            make_tokens(toks, 33, r.V);
            res[nth - 1][0] = run(&r, toks, 33, 33);
            rig_close(&r);
            if (!rig_open(&r, models[mi], nth, "auto", true, 33)) return;
            res[nth - 1][1] = run(&r, toks, 33, 1);
            V = r.V;
            rig_close(&r);
        }
        for (int nth = 2; nth <= 3; nth++)
            for (int mode = 0; mode < 2; mode++)
                CHECKF(memcmp(res[0][mode], res[nth - 1][mode], 33 * V * sizeof(float)) == 0,
                       "%s: %d threads differ from 1 (mode %d)", models[mi], nth, mode);
        for (int i = 0; i < 3; i++) free(res[i][0]), free(res[i][1]);
    }
}

/*
** A prefill of many rows on 2 and 3 threads, where the products on repacked
** weights take activations the threads quantize once between them
** (sm_kernels_share_open; seedq8's MLP down product, 1,024 columns, at 200
** rows): logits bit for bit those of one thread, which quantizes every row
** itself, on every kernel table.
*/
void test_model_shared_rows_identical(void) {
    enum { T = 200 };
    const char *ks[9];
    size_t nk = test_kernel_specs(ks, 9), shared = 0;
    for (size_t ki = 0; ki < nk; ki++) {
        float *res[3] = {0};
        size_t V = 0;
        for (int nth = 1; nth <= 3; nth++) {
            rig r;
            if (!rig_open(&r, "seedq8", nth, ks[ki], true, T)) return;
            int32_t toks[T];
            make_tokens(toks, T, r.V);
            res[nth - 1] = run(&r, toks, T, T);
            V = r.V;
            const sm_kernels *k = sm_kernels_select(ks[ki]);
            if (nth == 2 && k && sm_kernels_share_takes(k, SM_DTYPE_Q8_0_R32, T, 1024)) shared++;
            rig_close(&r);
        }
        CHECK(res[0] && res[1] && res[2]);
        for (int nth = 2; nth <= 3; nth++)
            CHECKF(memcmp(res[0], res[nth - 1], T * V * sizeof(float)) == 0, "seedq8/%s: %d threads differ from 1",
                   ks[ki], nth);
        for (int i = 0; i < 3; i++) free(res[i]);
    }
    if (!shared) test_skip("no kernel table here takes shared activations (repacked q8_0 products)");
}

/*
** The pool runs each call on as many of its threads as pay (sm_pool.h), so
** the width changes from one call to the next: logits stay bit for bit
** those of one thread when it does, in the prefill and in cached decode.
*/
void test_model_width_changes_identical(void) {
    const char *models[] = {"seed", "odd"};
    for (int mi = 0; mi < 2; mi++) {
        rig one, many;
        if (!rig_open(&one, models[mi], 1, "auto", true, 33)) return;
        if (!rig_open(&many, models[mi], 4, "auto", true, 33)) return;
        int32_t toks[33];
        make_tokens(toks, 33, one.V);
        float *want = run(&one, toks, 33, 1), *got = malloc(33 * one.V * sizeof *got);
        CHECK(want && got);
        static const int widths[] = {4, 1, 3, 2, 1, 4, 2, 3};
        sm_error err;
        for (size_t t = 0; t < 33; t++) {
            const float *lg;
            sm_pool_set_width(many.pool, widths[t % 8]);
            CHECK(sm_state_forward(many.s, toks + t, 1, t, &lg, &err) == SM_OK);
            memcpy(got + t * one.V, lg, one.V * sizeof *got);
        }
        sm_pool_stats ps;
        sm_pool_get_stats(many.pool, &ps);
        CHECKF(ps.runs_at_width[0] && ps.runs_at_width[1] && ps.runs_at_width[2] && ps.runs_at_width[3],
               "%s: the calls did not run at widths 1-4", models[mi]);
        CHECKF(memcmp(want, got, 33 * one.V * sizeof(float)) == 0,
               "%s: logits at changing widths differ from one thread's", models[mi]);
        free(want), free(got);
        rig_close(&one), rig_close(&many);
    }
}

/*
** Batched decoding: five sequences with different prompt lengths, decoded in
** rounds of changing subsets and orders through sm_state_decode (one round
** with a prompt prefilled ahead of its rows, sm_state_forward_many), give
** bit for bit the logits each gives alone in a one-sequence state, on every
** kernel table, with 1 and 2 threads.
*/
void test_model_decode_matches_alone(void) {
    enum { NS = 5, STEPS = 6, MAXL = 12 + STEPS };
    static const size_t plen[NS] = {3, 7, 1, 12, 5};
    const char *ks[9];
    size_t nk = test_kernel_specs(ks, 9);
    /* seedq4, seedq8: q4_0 and q8_0 matrices, repacked where the table takes them; seedk4: q4_k_m,
       its q4_k matrices and q6_k output layer repacked */
    const char *models[] = {"seed", "odd", "seedq4", "seedq8", "seedk4"};
    for (int mi = 0; mi < 5; mi++)
        for (size_t ki = 0; ki < nk; ki++)
            for (int nth = 1; nth <= 2; nth++) {
                rig r;
                if (!rig_open_seq(&r, models[mi], nth, ks[ki], false, 32, NS)) return;
                size_t V = r.V;
                int32_t toks[NS][MAXL];
                float *ref = malloc((size_t)NS * STEPS * V * sizeof(float));
                float *pre = malloc((size_t)NS * V * sizeof(float)); /* alone prefill logits */
                for (size_t q = 0; q < NS; q++) {
                    for (size_t i = 0; i < MAXL; i++)
                        toks[q][i] = (int32_t)((q * 37 + i * 11 + 5) % (V < 256 ? V : 256));
                    rig one;
                    if (!rig_open(&one, models[mi], nth, ks[ki], false, 16)) return;
                    const float *lg;
                    sm_error err = {{0}};
                    CHECK(sm_state_forward(one.s, toks[q], plen[q], 0, &lg, &err) == SM_OK);
                    memcpy(pre + q * V, lg, V * sizeof(float));
                    for (size_t k = 0; k < STEPS; k++) {
                        CHECK(sm_state_forward(one.s, &toks[q][plen[q] + k], 1, plen[q] + k, &lg,
                                               &err) == SM_OK);
                        memcpy(ref + (q * STEPS + k) * V, lg, V * sizeof(float));
                    }
                    rig_close(&one);
                }
                const float *lg;
                sm_error err = {{0}};
                /* prompts of 4 or more tokens prefilled together in one call (in a
                   shuffled sequence order), the others alone */
                int32_t gt[64];
                size_t gs[64], gp[64], rows = 0, runs[NS], nr = 0;
                static const size_t order[NS] = {3, 0, 4, 2, 1};
                const size_t late = 3; /* prefilled in a decode step's call, ahead of its rows */
                for (size_t oi = 0; oi < NS; oi++) {
                    size_t q = order[oi];
                    if (q == late) continue;
                    if (plen[q] < 4) {
                        CHECK(sm_state_forward_seq(r.s, q, toks[q], plen[q], 0, &lg, &err) == SM_OK);
                        CHECKF(memcmp(lg, pre + q * V, V * sizeof(float)) == 0,
                               "%s/%s/%dt: sequence %zu prefilled in its own slot differs",
                               models[mi], ks[ki], nth, q);
                        continue;
                    }
                    for (size_t i = 0; i < plen[q]; i++)
                        gt[rows] = toks[q][i], gs[rows] = q, gp[rows] = i, rows++;
                    runs[nr++] = q;
                }
                CHECK(sm_state_forward_many(r.s, gt, gs, gp, rows, &lg, &err) == SM_OK);
                for (size_t g = 0; g < nr; g++)
                    CHECKF(memcmp(lg + g * V, pre + runs[g] * V, V * sizeof(float)) == 0,
                           "%s/%s/%dt: sequence %zu prefilled with others differs from alone",
                           models[mi], ks[ki], nth, runs[g]);
                /* a run of 2 or 3 tokens beside longer ones is refused */
                size_t bs[6] = {0, 0, 1, 1, 1, 1}, bp[6] = {0, 1, 0, 1, 2, 3};
                int32_t bt[6] = {1, 2, 3, 4, 5, 6};
                CHECK(sm_state_forward_many(r.s, bt, bs, bp, 6, &lg, &err) == SM_ERR_INPUT);
                /* so is a one-token run ahead of a longer one */
                size_t cs[5] = {0, 1, 1, 1, 1}, cp[5] = {20, 0, 1, 2, 3};
                CHECK(sm_state_forward_many(r.s, bt, cs, cp, 5, &lg, &err) == SM_ERR_INPUT);
                /* and a longer run after one-token runs */
                int32_t xt[10] = {1, 2, 3, 4, 5, 6, 1, 2, 3, 4};
                size_t xs[10] = {1, 1, 1, 1, 0, 2, 4, 4, 4, 4}, xp[10] = {0, 1, 2, 3, 20, 20, 0, 1, 2, 3};
                CHECK(sm_state_forward_many(r.s, xt, xs, xp, 10, &lg, &err) == SM_ERR_INPUT);
                size_t done[NS] = {0};
                bool late_in = false;
                for (size_t round = 0; round < 3 * STEPS; round++) {
                    size_t seqs[MAXL + NS], poss[MAXL + NS], n = 0, pk = 0;
                    int32_t in[MAXL + NS];
                    if (round == 1) /* the late prompt first: one call with the decode rows */
                        for (; pk < plen[late]; pk++) in[n] = toks[late][pk], seqs[n] = late, poss[n++] = pk;
                    for (size_t j = 0; j < NS; j++) {
                        size_t q = (j + round) % NS; /* a rotating order ... */
                        if ((q + round) % 3 == 0 || done[q] == STEPS) continue; /* ... and subset */
                        if (q == late && !late_in) continue;
                        seqs[n] = q, poss[n] = plen[q] + done[q], in[n] = toks[q][poss[n]];
                        n++;
                    }
                    if (n == pk) continue;
                    if (pk)
                        CHECK(sm_state_forward_many(r.s, in, seqs, poss, n, &lg, &err) == SM_OK);
                    else
                        CHECK(sm_state_decode(r.s, in, seqs, poss, n, &lg, &err) == SM_OK);
                    if (pk) {
                        CHECKF(memcmp(lg, pre + late * V, V * sizeof(float)) == 0,
                               "%s/%s/%dt: a prompt prefilled in a decode step's call differs from alone",
                               models[mi], ks[ki], nth);
                        lg += V, late_in = true;
                    }
                    for (size_t i = pk; i < n; i++) {
                        size_t q = seqs[i];
                        CHECKF(memcmp(lg + (i - pk) * V, ref + (q * STEPS + done[q]) * V,
                                      V * sizeof(float)) == 0,
                               "%s/%s/%dt: sequence %zu step %zu decoded with %zu others differs "
                               "from alone",
                               models[mi], ks[ki], nth, q, done[q], n - pk - 1);
                        done[q]++;
                    }
                }
                for (size_t q = 0; q < NS; q++) CHECK(done[q] == STEPS);
                /* bad calls are refused */
                size_t dup[2] = {1, 1}, pos2[2] = {20, 20}, far[1] = {NS};
                int32_t t2[2] = {1, 2};
                CHECK(sm_state_decode(r.s, t2, dup, pos2, 2, &lg, &err) == SM_ERR_INPUT);
                CHECK(sm_state_decode(r.s, t2, far, pos2, 1, &lg, &err) == SM_ERR_INPUT);
                CHECK(sm_state_forward_seq(r.s, NS, t2, 1, 0, &lg, &err) == SM_ERR_INPUT);
                free(ref), free(pre);
                rig_close(&r);
            }
}

void test_model_forward_rejects_bad_input(void) {
    rig r;
    if (!rig_open(&r, "odd", 2, "auto", false, 8)) return;
    const float *lg;
    sm_error err = {{0}};
    int32_t bad[2] = {5, 300}; /* vocabulary is 300: ids 0..299 */
    CHECK(sm_state_forward(r.s, bad, 2, 0, &lg, &err) == SM_ERR_INPUT && strstr(err.msg, "300"));
    int32_t neg = -1;
    CHECK(sm_state_forward(r.s, &neg, 1, 0, &lg, &err) == SM_ERR_INPUT);
    int32_t ok[9] = {0};
    CHECK(sm_state_forward(r.s, ok, 9, 0, &lg, &err) == SM_ERR_INPUT);  /* > max_batch */
    CHECK(sm_state_forward(r.s, ok, 2, 79, &lg, &err) == SM_ERR_INPUT); /* past n_ctx 80 */
    CHECK(sm_state_forward(r.s, ok, 1, 79, &lg, &err) == SM_OK);
    rig_close(&r);
}

typedef struct {
    char text[4096];
    size_t len;
    bool boundary[4097]; /* a write ended at this offset */
} capture;

static int capture_emit(void *user, const char *text, size_t len) {
    capture *c = user;
    memcpy(c->text + c->len, text, len);
    c->len += len;
    c->boundary[c->len] = true;
    return 0;
}

/* Valid multi-byte characters in c->text, and how many a write boundary split. */
static void scan_utf8(const capture *c, int *valid, int *split) {
    *valid = *split = 0;
    const unsigned char *s = (const unsigned char *)c->text;
    for (size_t i = 0; i < c->len; i++) {
        size_t need = (s[i] & 0xE0) == 0xC0 ? 2 : (s[i] & 0xF0) == 0xE0 ? 3 : (s[i] & 0xF8) == 0xF0 ? 4 : 1;
        if (need == 1 || i + need > c->len) continue;
        bool ok = true;
        for (size_t k = 1; k < need; k++) ok = ok && (s[i + k] & 0xC0) == 0x80;
        if (!ok) continue;
        ++*valid;
        for (size_t k = 1; k < need; k++)
            if (c->boundary[i + k]) ++*split;
        i += need - 1;
    }
}

static sm_status gen(rig *r, const char *prompt, size_t max, float temp, capture *cap,
                     sm_gen_stats *gs) {
    sm_config dummy = {.tokenizer = SM_TOKENIZER_BYTE, .n_vocab = (int)r->V};
    sm_tokenizer tok;
    sm_tokenizer_init(&tok, &dummy, NULL, NULL, NULL);
    sm_arena a;
    sm_sampler smp;
    sm_sampler_params sp = {.temperature = temp, .top_p = 1, .seed = 77};
    sm_arena meas;
    sm_arena_measure(&meas);
    sm_sampler_init(&smp, &sp, 256, &meas);
    sm_arena_init(&a, meas.used);
    sm_sampler_init(&smp, &sp, 256, &a);
    int32_t toks[256];
    size_t n = sm_tokenizer_encode(&tok, prompt, strlen(prompt), toks, 256);
    sm_gen_params gp = {.max_tokens = max};
    sm_error err;
    memset(cap, 0, sizeof *cap);
    sm_status st = sm_generate(r->s, &tok, &smp, toks, n, &gp, capture_emit, cap, gs, &err);
    sm_arena_free(&a);
    return st;
}

void test_generate_utf8_whole_writes(void) {
    rig r;
    if (!rig_open(&r, "seed", 2, "auto", false, 64)) return;
    capture cap;
    sm_gen_stats gs;
    /* temperature 2 on random weights: plenty of bytes >= 0x80 */
    CHECK(gen(&r, "Hello", 200, 2.0f, &cap, &gs) == SM_OK);
    CHECK(gs.n_generated == 200 && cap.len == 200 && gs.finish == SM_FINISH_LENGTH);
    int valid, split;
    scan_utf8(&cap, &valid, &split);
    CHECKF(valid >= 3, "only %d multi-byte characters: the test would not exercise holding", valid);
    CHECKF(split == 0, "%d of %d multi-byte characters were split across writes", split, valid);
    rig_close(&r);
}

void test_generate_context_full(void) {
    rig r;
    if (!rig_open(&r, "odd", 1, "auto", false, 80)) return;
    capture cap;
    sm_gen_stats gs;
    CHECK(gen(&r, "0123456789", 1000, 0.0f, &cap, &gs) == SM_OK);
    /* context 80, prompt 10: positions 10..79 are fed back, the 71st token is
       sampled from position 79's logits */
    CHECKF(gs.n_generated == 71 && gs.finish == SM_FINISH_LENGTH && gs.context_full,
           "generated %zu, finish %d", gs.n_generated, gs.finish);
    /* greedy is deterministic: the same prompt gives the same text */
    char first[4096];
    size_t flen = cap.len;
    memcpy(first, cap.text, flen);
    rig_close(&r);
    if (!rig_open(&r, "odd", 2, "auto", false, 3)) return; /* other threads and batch size */
    CHECK(gen(&r, "0123456789", 1000, 0.0f, &cap, &gs) == SM_OK);
    CHECK(cap.len == flen && memcmp(first, cap.text, flen) == 0);
    rig_close(&r);
}

/*
** A batch job's default number of sequences (sm_face_auto_seq): the most of
** seq_max, seq_max / 2, ... above the asked number whose KV-cache fits the
** budget, measured against the plans of those numbers.
*/
void test_face_auto_seq(void) {
    rig r;
    if (!rig_open_seq(&r, "seed", 1, "auto", false, 16, 8)) return;
    size_t kv[33] = {0};
    for (size_t n = 8; n <= 32; n *= 2) {
        sm_state_params q = r.sp;
        sm_state_plan plan;
        sm_error err;
        q.n_seq = n;
        CHECK(sm_state_plan_bytes(r.m, &q, &plan, &err) == SM_OK);
        kv[n] = plan.kv_cache;
    }
    CHECKF(kv[8] > 0 && kv[16] == 2 * kv[8] && kv[32] == 4 * kv[8], "KV-cache of 8/16/32: %zu %zu %zu", kv[8],
           kv[16], kv[32]);
    const struct {
        size_t seq_max, budget, want;
    } cases[] = {
        {32, kv[32], 32}, {32, kv[32] - 1, 16}, {32, kv[16], 16}, {32, kv[16] - 1, 8},
        {32, 0, 8},       {8, SIZE_MAX, 8},     {4, SIZE_MAX, 8}, {20, SIZE_MAX, 20},
        {12, kv[8] + kv[8] / 2, 12}, {12, kv[8] + kv[8] / 2 - 1, 8},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t got = sm_face_auto_seq(r.m, &r.sp, cases[i].seq_max, cases[i].budget);
        CHECKF(got == cases[i].want, "seq_max %zu, budget %zu: %zu sequences, want %zu", cases[i].seq_max,
               cases[i].budget, got, cases[i].want);
    }
    long pages = sysconf(_SC_PHYS_PAGES), ps = sysconf(_SC_PAGESIZE);
    size_t lim = sm_mem_limit();
    CHECKF(lim > 0 && (pages <= 0 || ps <= 0 || lim <= (size_t)pages * (size_t)ps),
           "sm_mem_limit %zu against %ld pages of %ld", lim, pages, ps);
    rig_close(&r);
}
