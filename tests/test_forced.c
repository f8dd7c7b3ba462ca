/*
** Tokens a grammar forces (sm_gmatch_forced) go through one forward call
** with the token sampled before them: the sequence's positions follow on
** without a gap, the logits after each such call agree with those of a
** second state fed the same tokens one at a time, the forced tokens spell
** the grammar's literal text, and the text is a sentence of the grammar.
** On the seed model's byte vocabulary (one token per byte: long runs);
** test_structured.py runs the same through the CLI on the GPT-2, Llama 2,
** Llama 3, Qwen 2.5 and Gemma 3 vocabularies.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sm_generate.h"
#include "sm_grammar.h"
#include "sm_source.h"
#include "test.h"

static const char GRAMMAR[] =
    "root ::= \"The answer, as everyone agrees, is: \" [a-z]{2,8} "
    "\". And therefore, without the shadow of a doubt: \" [a-z ]{3,12} \"!\"\n";

typedef struct {
    char text[4096];
    size_t len;
} sink;

static int collect(void *user, const char *t, size_t n) {
    sink *k = user;
    if (n > sizeof k->text - k->len) n = sizeof k->text - k->len;
    memcpy(k->text + k->len, t, n);
    k->len += n;
    return 0;
}

/* The largest |a - b| over n logits, against the largest |b|. */
static float max_diff(const float *a, const float *b, size_t n, float *scale) {
    float d = 0, s = 1;
    for (size_t i = 0; i < n; i++) {
        if (fabsf(a[i] - b[i]) > d) d = fabsf(a[i] - b[i]);
        if (fabsf(b[i]) > s) s = fabsf(b[i]);
    }
    *scale = s;
    return d;
}

static void one_model(const char *name) {
    test_rig ra, rb;
    if (!test_rig_open(&ra, name, 2, "auto", false, 16, 1)) return;
    if (!test_rig_open(&rb, name, 1, "auto", false, 16, 1)) {
        test_rig_close(&ra);
        return;
    }
    sm_tokenizer tok;
    memset(&tok, 0, sizeof tok);
    sm_error err = {{0}};
    sm_grammar *g = NULL;
    sm_gbind *gb = NULL;
    sm_gmatch *gm = NULL;
    CHECKF(!sm_source_tokenizer(sm_model_source(ra.m), &tok, &err), "%s: %s", name, err.msg);
    CHECKF(!sm_grammar_parse(&g, GRAMMAR, strlen(GRAMMAR), &err), "%s", err.msg);
    CHECKF(!sm_gbind_new(&gb, g, &tok, NULL, &err), "%s", err.msg);
    CHECKF(!sm_gmatch_new(&gm, gb, &err), "%s", err.msg);
    sm_sampler_params spar = {.top_p = 1}; /* greedy */
    sm_arena meas, a;
    sm_arena_measure(&meas);
    sm_sampler smp;
    sm_sampler_init(&smp, &spar, (size_t)tok.n_vocab, &meas);
    CHECK(!sm_arena_init(&a, meas.used));
    sm_sampler_init(&smp, &spar, (size_t)tok.n_vocab, &a);
    int32_t prompt[64];
    size_t np = 0, dropped = 0;
    CHECK(!sm_prompt_encode(&tok, "Q: what is it?", 14, ra.sp.n_ctx, 200, false, prompt, &np, &dropped, &err));
    sink out = {0};
    sm_gen_params gp = {.max_tokens = 200, .grammar = gm};
    sm_seq q;
    CHECK(!sm_seq_init(&q, ra.sp.n_ctx, &tok, &smp, prompt, np, &gp, collect, &out, &err));
    const float *la, *lb;
    CHECK(!sm_state_prefill(ra.s, prompt, np, 0, &la, &err));
    CHECK(!sm_state_prefill(rb.s, prompt, np, 0, &lb, &err));
    CHECK(!sm_seq_begin(&q, la, 0, &err));
    size_t expect = np, runs = 0, long_runs = 0, steps = 0;
    char forced_text[1024];
    size_t nft = 0;
    while (!q.done && steps++ < 400) {
        size_t pos = sm_seq_pos(&q), n = q.n_next;
        CHECKF(pos == expect, "%s: the call starts at %zu, the sequence is at %zu", name, pos, expect);
        if (n > 1) {
            runs++;
            long_runs += n >= 5; /* prefill's batched products, not matrix-vector */
            for (size_t k = 1; k < n && nft < sizeof forced_text - 64; k++) {
                size_t len;
                const char *p = sm_tokenizer_piece_after(&tok, q.next[k - 1], q.next[k], &len);
                memcpy(forced_text + nft, p, len);
                nft += len;
            }
            CHECK(!sm_state_prefill(ra.s, q.next, n, pos, &la, &err));
        } else {
            CHECK(!sm_state_forward(ra.s, q.next, 1, pos, &la, &err));
        }
        for (size_t k = 0; k < n; k++) CHECK(!sm_state_forward(rb.s, &q.next[k], 1, pos + k, &lb, &err));
        float scale, d = max_diff(la, lb, ra.V, &scale);
        CHECKF(d <= 2e-3f * scale, "%s: logits after %zu tokens at %zu differ by %g (scale %g)", name, n,
               pos, (double)d, (double)scale);
        expect = pos + n;
        CHECK(!sm_seq_accept(&q, la, &err));
    }
    CHECKF(q.done && q.stats.valid && sm_grammar_accepts(g, out.text, out.len),
           "%s: not a sentence of the grammar: '%.*s'", name, (int)out.len, out.text);
    CHECKF(runs >= 2 && long_runs >= 2 && q.stats.n_forced >= 40,
           "%s: %zu forced runs (%zu of 5 tokens or more), %zu tokens forced", name, runs, long_runs,
           q.stats.n_forced);
    forced_text[nft] = 0;
    /* what was forced is the literals' text (each but its last piece, which was sampled) */
    CHECKF(strstr(forced_text, "answer, as everyone agrees") && strstr(forced_text, "therefore, without the"),
           "%s: forced text '%s'", name, forced_text);
    sm_gmatch_free(gm), sm_gbind_free(gb), sm_grammar_free(g);
    sm_arena_free(&a);
    sm_tokenizer_free(&tok);
    test_rig_close(&ra);
    test_rig_close(&rb);
}

void test_generate_forced_runs(void) {
    one_model("seed");
}
