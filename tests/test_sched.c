/*
** The scheduler (sm_sched.h) driven directly, with no CLI: requests of every
** kind (grouped and alone prefills, prompts longer than a forward call,
** stop strings, per-request sampling, truncation, errors, max_tokens 0)
** submitted to a few slots give, each, exactly what sm_generate gives the
** same prompt alone; every request is reported once; cancelling stops the
** reports.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sm_sched.h"
#include "sm_source.h"
#include "test.h"

enum { NREQ = 12, NPFX = 40, TEXT_MAX = 8192 }; /* NPFX: the prefix cache test's requests */

typedef struct {
    const char *prompt;
    size_t max_tokens;
    float temp;
    int top_k;
    uint64_t seed;
    const char *stop; /* NULL: none */
    bool truncate;
} req_spec;

typedef struct {
    int reports;
    char error[512];
    char text[TEXT_MAX];
    size_t len, n_truncated;
    sm_gen_stats stats;
} outcome;

/* The token callback's record of a request (the echo test). */
typedef struct {
    sm_token_info t[320];
    size_t n;
} tok_log;

typedef struct {
    outcome out[NPFX];
    tok_log *toks; /* (4) the first requests' tokens, or NULL */
    int total;
    volatile int cancel;
    int cancel_after; /* set cancel once this many reports came (0: never) */
} book;

static sm_status on_done(void *user, const sm_sched_result *r, sm_error *err) {
    (void)err;
    book *b = user;
    outcome *o = r->tag;
    o->reports++;
    b->total++;
    if (r->error) snprintf(o->error, sizeof o->error, "%s", r->error);
    o->len = r->len < TEXT_MAX ? r->len : TEXT_MAX;
    memcpy(o->text, r->text, o->len);
    o->stats = r->stats;
    o->n_truncated = r->n_truncated;
    if (b->cancel_after && b->total == b->cancel_after) b->cancel = 1;
    return SM_OK;
}

static void on_token(void *user, void *tag, const sm_token_info *t) {
    book *b = user;
    size_t i = (size_t)((outcome *)tag - b->out);
    if (b->toks && i < 4 && b->toks[i].n < 320) b->toks[i].t[b->toks[i].n++] = *t;
}

static int collect(void *user, const char *text, size_t len) {
    outcome *o = user;
    size_t take = len < TEXT_MAX - o->len ? len : TEXT_MAX - o->len;
    memcpy(o->text + o->len, text, take);
    o->len += take;
    return 0;
}

/* A test rig (test.h) with the model's own tokenizer. */
typedef struct {
    test_rig base;
    sm_tokenizer tok;
} rig;

static bool rig_open_batch(rig *r, const char *name, int nth, const char *kern, size_t nseq,
                           size_t max_batch) {
    memset(&r->tok, 0, sizeof r->tok);
    if (!test_rig_open(&r->base, name, nth, kern, false, max_batch, nseq)) return false;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", test_models_dir(), name);
    sm_error err = {{0}};
    if (sm_source_tokenizer(sm_model_source(r->base.m), &r->tok, &err)) {
        test_fail(__FILE__, __LINE__, "tokenizer %s: %s", path, err.msg);
        return false;
    }
    return true;
}

static bool rig_open(rig *r, const char *name, int nth, const char *kern, size_t nseq) {
    return rig_open_batch(r, name, nth, kern, nseq, 16);
}

static void rig_close(rig *r) {
    sm_tokenizer_free(&r->tok);
    test_rig_close(&r->base);
}

/* What sm_generate gives spec alone on a one-sequence state (the CLI's single path). */
static bool alone(rig *r, const req_spec *q, outcome *o) {
    memset(o, 0, sizeof *o);
    sm_sampler_params spar = {.temperature = q->temp, .top_k = q->top_k, .top_p = 1, .seed = q->seed};
    sm_arena a;
    sm_arena meas;
    sm_arena_measure(&meas);
    sm_sampler smp;
    sm_sampler_init(&smp, &spar, (size_t)r->tok.n_vocab, &meas);
    int32_t *toks = malloc(r->base.sp.n_ctx * sizeof *toks);
    if (!toks || sm_arena_init(&a, meas.used)) return false;
    sm_sampler_init(&smp, &spar, (size_t)r->tok.n_vocab, &a);
    sm_error err = {{0}};
    size_t n = 0;
    if (sm_prompt_encode(&r->tok, q->prompt, strlen(q->prompt), r->base.sp.n_ctx, q->max_tokens,
                         q->truncate, toks, &n, &o->n_truncated, &err)) {
        snprintf(o->error, sizeof o->error, "%s", err.msg);
    } else {
        const char *stops[1] = {q->stop};
        sm_gen_params gp = {.max_tokens = q->max_tokens, .stop = stops, .n_stop = q->stop ? 1 : 0};
        if (sm_generate(r->base.s, &r->tok, &smp, toks, n, &gp, collect, o, &o->stats, &err))
            snprintf(o->error, sizeof o->error, "%s", err.msg);
    }
    free(toks);
    sm_arena_free(&a);
    return true;
}

/* A scheduler on r's state; with a prefix cache of cache_bytes (0: none). */
static sm_sched *sched_open_cached(rig *r, book *b, sm_arena *a, size_t cache_bytes, sm_prefix **pc) {
    sm_sched_params p = {.tok = &r->tok, .cancel = &b->cancel, .done = on_done, .token = on_token, .user = b};
    sm_arena meas;
    sm_arena_measure(&meas);
    sm_sched *s = NULL;
    sm_error err = {{0}};
    *pc = NULL;
    if (cache_bytes && sm_prefix_init(pc, r->base.m, &r->base.sp, cache_bytes, &meas, &err)) {
        test_fail(__FILE__, __LINE__, "prefix cache: %s", err.msg);
        return NULL;
    }
    if (sm_sched_init(&s, NULL, &r->base.sp, &p, &meas, &err) || s != NULL || sm_arena_init(a, meas.used) ||
        (cache_bytes && sm_prefix_init(pc, r->base.m, &r->base.sp, cache_bytes, a, &err)) ||
        (p.prefix = *pc, sm_sched_init(&s, r->base.s, &r->base.sp, &p, a, &err))) {
        test_fail(__FILE__, __LINE__, "scheduler: %s", err.msg);
        return NULL;
    }
    return s;
}

static sm_sched *sched_open(rig *r, book *b, sm_arena *a) {
    sm_prefix *pc;
    return sched_open_cached(r, b, a, 0, &pc);
}

static sm_sched_request request(const req_spec *q, const char *const *stop, outcome *o) {
    return (sm_sched_request){.prompt = q->prompt, .prompt_len = strlen(q->prompt),
                              .max_tokens = q->max_tokens,
                              .sampling = {.temperature = q->temp, .top_k = q->top_k, .top_p = 1, .seed = q->seed},
                              .stop = stop, .n_stop = q->stop ? 1 : 0,
                              .truncate = q->truncate, .tag = o};
}

/* Submits q[0..n) as the queue has room and steps until every one is reported; false (the
   test failed) on an error. */
static bool run_all(sm_sched *s, const req_spec *q, size_t n, book *b) {
    const char *stops[NPFX][1];
    size_t next = 0, steps = 0;
    sm_error err = {{0}};
    while (next < n || sm_sched_busy(s)) {
        while (next < n && sm_sched_room(s)) {
            stops[next][0] = q[next].stop; /* copied at submit */
            sm_sched_request rq = request(&q[next], stops[next], &b->out[next]);
            if (sm_sched_submit(s, &rq, &err)) {
                test_fail(__FILE__, __LINE__, "submit: %s", err.msg);
                return false;
            }
            next++;
        }
        if (sm_sched_step(s, &err) || ++steps >= 10000) {
            test_fail(__FILE__, __LINE__, "step %zu: %s", steps, err.msg);
            return false;
        }
    }
    return true;
}

static const char long_prompt[] =
    "A prompt longer than one forward call of sixteen tokens, so it is prefilled alone in chunks.";

static void make_specs(req_spec *q, size_t n_ctx) {
    static char over[1200];
    memset(over, 'z', sizeof over - 1); /* longer than either test model's context */
    (void)n_ctx;
    req_spec s[NREQ] = {
        {"Hello, world", 20, 0, 0, 1, NULL, false},     /* grouped, greedy */
        {"ab", 15, 0.9f, 0, 2, NULL, false},            /* alone: under 4 tokens */
        {long_prompt, 12, 1.0f, 5, 3, NULL, false},     /* alone: over max_batch */
        {"The quick brown fox", 40, 1.2f, 0, 4, NULL, false}, /* stop string (chosen later) */
        {"", 10, 0, 0, 5, NULL, false},                 /* error: no tokens, no BOS */
        {"zero tokens wanted", 0, 0, 0, 6, NULL, false}, /* ends at once */
        {over, 5, 0, 0, 7, NULL, false},                /* error: longer than the context */
        {over, 6, 0.7f, 3, 8, NULL, true},              /* truncated */
        {"x", 30, 1.5f, 0, 9, NULL, false},
        {"0123456789", 25, 0.8f, 40, 10, "5", false},
        {"Grouped with others", 33, 0, 0, 11, NULL, false},
        {"Last one", 18, 1.1f, 7, 12, "zz", false},
    };
    memcpy(q, s, sizeof s);
}

static bool same(const outcome *a, const outcome *b) {
    return strcmp(a->error, b->error) == 0 && a->len == b->len &&
           memcmp(a->text, b->text, a->len) == 0 && a->n_truncated == b->n_truncated &&
           (a->error[0] || (a->stats.n_prompt == b->stats.n_prompt &&
                            a->stats.n_generated == b->stats.n_generated &&
                            a->stats.finish == b->stats.finish));
}

void test_sched_matches_alone(void) {
    const char *ks[9];
    size_t nk = test_kernel_specs(ks, 9);
    /* seed16: bf16 weights, whose prefill runs on vdpbf16ps where the CPU has AVX512-BF16 */
    const char *models[] = {"seed", "odd", "seed16", "seedq4", "seedq8", "seedk4"};
    static const size_t slots[] = {1, 3, 5};
    for (int mi = 0; mi < (int)(sizeof models / sizeof models[0]); mi++)
        for (size_t ki = 0; ki < nk; ki++)
            for (size_t si = 0; si < 3; si++) {
                int nth = 1 + (int)(si % 2);
                req_spec q[NREQ];
                outcome *ref = calloc(NREQ, sizeof *ref);
                book *b = calloc(1, sizeof *b);
                CHECK(ref && b);
                rig one, many;
                if (!rig_open(&one, models[mi], nth, ks[ki], 1)) {
                    free(ref), free(b);
                    return;
                }
                make_specs(q, one.base.sp.n_ctx);
                /* request 3's stop string: two bytes from the middle of its text without one */
                static char stop3[3];
                CHECK(alone(&one, &q[3], &ref[3]) && ref[3].len > 12);
                stop3[0] = ref[3].text[8] ? ref[3].text[8] : 'a';
                stop3[1] = ref[3].text[9] ? ref[3].text[9] : 'b';
                q[3].stop = stop3;
                for (size_t i = 0; i < NREQ; i++) CHECK(alone(&one, &q[i], &ref[i]));
                rig_close(&one);
                CHECKF(ref[4].error[0] && ref[6].error[0] && ref[7].n_truncated > 0 &&
                           ref[5].stats.n_generated == 0 && ref[3].stats.finish == SM_FINISH_STOP,
                       "the requests do not cover what they should: %d %d %zu %zu %d",
                       ref[4].error[0], ref[6].error[0], ref[7].n_truncated,
                       ref[5].stats.n_generated, (int)ref[3].stats.finish);
                if (!rig_open(&many, models[mi], nth, ks[ki], slots[si])) return;
                sm_arena a;
                sm_sched *s = sched_open(&many, b, &a);
                if (!s) return;
                if (!run_all(s, q, NREQ, b)) return;
                const char *stops[1][1];
                sm_error err = {{0}};
                for (size_t i = 0; i < NREQ; i++) {
                    CHECKF(b->out[i].reports == 1, "request %zu reported %d times", i,
                           b->out[i].reports);
                    CHECKF(same(&b->out[i], &ref[i]),
                           "%s/%s/%zu slots: request %zu differs from alone: '%.*s' (%s) vs '%.*s' (%s)",
                           models[mi], ks[ki], slots[si], i, (int)b->out[i].len,
                           b->out[i].text, b->out[i].error, (int)ref[i].len, ref[i].text,
                           ref[i].error);
                }
                /* a full queue refuses another request */
                if (slots[si] == 1) {
                    stops[0][0] = NULL;
                    sm_sched_request rq = request(&q[0], stops[0], &b->out[0]);
                    rq.max_tokens = 50;
                    CHECK(sm_sched_submit(s, &rq, &err) == SM_OK && sm_sched_busy(s) == 1);
                    size_t queued = 1;
                    while (sm_sched_room(s) && queued < 100) queued += sm_sched_submit(s, &rq, &err) == SM_OK;
                    CHECKF(queued == 2 && sm_sched_busy(s) == 2, "%zu queued for one slot", queued);
                    CHECK(sm_sched_submit(s, &rq, &err) == SM_ERR_INPUT);
                }
                sm_arena_free(&a);
                rig_close(&many);
                free(ref);
                free(b);
            }
}

void test_sched_cancel_stops_reports(void) {
    rig r;
    if (!rig_open(&r, "seed", 2, "auto", 4)) return;
    book *b = calloc(1, sizeof *b);
    CHECK(b);
    b->cancel_after = 2;
    sm_arena a;
    sm_sched *s = sched_open(&r, b, &a);
    if (!s) return;
    req_spec q[NREQ];
    make_specs(q, r.base.sp.n_ctx);
    const char *stops[NREQ][1];
    size_t next = 0, steps = 0;
    sm_error err = {{0}};
    while (!b->cancel && (next < NREQ || sm_sched_busy(s)) && steps++ < 10000) {
        while (!b->cancel && next < NREQ && sm_sched_room(s)) {
            stops[next][0] = q[next].stop;
            sm_sched_request rq = request(&q[next], stops[next], &b->out[next]);
            CHECK(sm_sched_submit(s, &rq, &err) == SM_OK);
            next++;
        }
        CHECK(sm_sched_step(s, &err) == SM_OK);
    }
    int at_cancel = b->total;
    CHECKF(at_cancel == 2, "cancelled after %d reports", at_cancel);
    for (int i = 0; i < 5; i++) CHECK(sm_sched_step(s, &err) == SM_OK);
    CHECKF(b->total == at_cancel, "%d reports after the cancel", b->total - at_cancel);
    sm_arena_free(&a);
    rig_close(&r);
    free(b);
}

/*
** Prompts that share prefixes of many lengths (ending anywhere in a cache
** block, inside a multi-byte character, prompts that are exactly a prefix
** of another, duplicates) through a scheduler with a prefix cache (large,
** and a few blocks that evict all the time) at 1, 3 and 5 slots, forward
** calls of 16, 48 and 32 tokens (prompts cross call boundaries, and blocks
** end inside calls): each request gives exactly what it gives alone, and
** the cache serves tokens.
*/
/* Prompts sharing prefixes are cut from this (multi-byte characters: cuts inside them too). */
static const char base[] =
    "Once upon a time, a caf\xc3\xa9 in Z\xc3\xbcrich sold \xe6\x97\xa5\xe6\x9c\xac tea to "
    "every traveller who came by, and the owner wrote each name in a long book.";

void test_sched_prefix_cache_matches_alone(void) {
    static const char *tails[] = {"", "a", "ab", "abc", "abcd", " and then?", "\xc3\xa8!", " Z\xc3\xbc"};
    const char *models[] = {"seed", "odd", "seed16", "seedq4"}; /* seed16: bf16 weights; seedq4: q4_0, repacked */
    static const size_t slots[] = {1, 3, 5};
    size_t checked = 0, served = 0;
    for (int mi = 0; mi < (int)(sizeof models / sizeof models[0]); mi++) {
        rig one;
        if (!rig_open(&one, models[mi], 1, "auto", 1)) return;
        size_t room = one.base.sp.n_ctx - 24; /* prompt bytes that leave room for the output */
        static char text[NPFX][256];
        req_spec q[NPFX];
        for (size_t i = 0; i < NPFX; i++) {
            /* cut points at, before and after block ends, and elsewhere */
            static const size_t cuts[] = {32, 16, 17, 33, 0, 5, 15, 31, 47, 48, 49, 63, 64, 65, 70, 100, 131};
            size_t k = cuts[i % 17];
            const char *t = tails[(i + i / 17 * 3) % 8];
            if (k + strlen(t) > room) k = room - strlen(t);
            if (k == 0 && !*t) t = "x";
            snprintf(text[i], sizeof text[i], "%.*s%s", (int)k, base, t);
            q[i] = (req_spec){text[i], 6 + i % 5, i % 3 ? 0.9f : 0, (int)(i % 4) * 5, 100 + i, NULL, false};
        }
        outcome *ref = calloc(NPFX, sizeof *ref);
        book *b = calloc(1, sizeof *b);
        CHECK(ref && b);
        size_t per = SM_PREFIX_BLOCK * sm_model_kv_bytes(one.base.m, SM_DTYPE_F32) + 256;
        rig_close(&one);
        for (size_t si = 0; si < 3; si++)
            for (int ci = 0; ci < 2; ci++) {
                rig many;
                static const size_t mbs[] = {16, 48, 32};
                if (ci == 0) { /* alone, with the same forward calls as the scheduler's state */
                    if (!rig_open_batch(&one, models[mi], 1, "auto", 1, mbs[si])) return;
                    for (size_t i = 0; i < NPFX; i++) CHECK(alone(&one, &q[i], &ref[i]) && !ref[i].error[0]);
                    rig_close(&one);
                }
                if (!rig_open_batch(&many, models[mi], 1 + (int)si % 2, "auto", slots[si], mbs[si])) return;
                memset(b, 0, sizeof *b);
                sm_arena a;
                sm_prefix *pc;
                sm_sched *s = sched_open_cached(&many, b, &a, ci ? 3 * per : 64u << 20, &pc);
                if (!s) return;
                CHECK(pc != NULL);
                if (!run_all(s, q, NPFX, b)) return;
                for (size_t i = 0; i < NPFX; i++) {
                    CHECKF(b->out[i].reports == 1, "request %zu reported %d times", i, b->out[i].reports);
                    CHECKF(same(&b->out[i], &ref[i]),
                           "%s, %zu slots, cache %s: request %zu ('%s') differs from alone: '%.*s' vs '%.*s'",
                           models[mi], slots[si], ci ? "small" : "large", i, q[i].prompt,
                           (int)b->out[i].len, b->out[i].text, (int)ref[i].len, ref[i].text);
                    served += b->out[i].stats.n_reused;
                    checked++;
                }
                sm_prefix_stats st = sm_prefix_stats_of(pc);
                CHECKF(st.hits > 0 && (ci == 0 || st.evicted > 0),
                       "%s, cache %s: %zu hits, %zu evictions", models[mi], ci ? "small" : "large",
                       st.hits, st.evicted);
                /* prefixes of 64 tokens and more (the seed model's prompts) were read in place (a slot's last prompt, or
                   another slot's cache: sm_state_kv_share), not copied */
                CHECKF(ci || mi || st.in_place >= SM_ATTN_KBLOCK, "%s, %zu slots: %zu tokens read in place",
                       models[mi], slots[si], st.in_place);
                sm_arena_free(&a);
                rig_close(&many);
            }
        free(ref);
        free(b);
    }
    CHECKF(checked == sizeof models / sizeof models[0] * 3 * 2 * NPFX && served > checked * 8, "%zu requests, %zu tokens served",
           checked, served);
}

/*
** Slots keep their last prompt's rows and share them; another caller of the
** same state (sm_generate on sequence 0, as a library session's generate
** between two batches) writes over them. The scheduler then trusts only what
** is still in place (sm_state_kv_low): the second batch still equals each
** prompt alone, and the first one read prefixes in place.
*/
void test_sched_shared_rows_survive_other_writers(void) {
    static const char *tails[] = {" A", " B then", "", " C, D", " E", " F?"};
    enum { N = 6 };
    static char text[N][256];
    req_spec q[N];
    for (size_t i = 0; i < N; i++) {
        snprintf(text[i], sizeof text[i], "%.*s%s", 130, base, tails[i]);
        q[i] = (req_spec){text[i], 5 + i % 3, i % 2 ? 0.9f : 0, 0, 7 + i, NULL, false};
    }
    req_spec other = {"Zzzz, a different story starts here and runs on for a while, long enough to "
                      "cover two key blocks of sixty-four tokens in the cache of sequence zero.",
                      4, 0, 0, 1, NULL, false};
    rig one, many;
    outcome ref[N], scratch;
    if (!rig_open_batch(&one, "seed", 1, "auto", 1, 16)) return;
    for (size_t i = 0; i < N; i++) CHECK(alone(&one, &q[i], &ref[i]) && !ref[i].error[0]);
    rig_close(&one);
    if (!rig_open_batch(&many, "seed", 1, "auto", 3, 16)) return;
    book *b = calloc(1, sizeof *b);
    sm_arena a;
    sm_prefix *pc;
    sm_sched *s = b ? sched_open_cached(&many, b, &a, 64u << 20, &pc) : NULL;
    if (!s) return;
    for (int round = 0; round < 3; round++) {
        memset(b, 0, sizeof *b);
        if (!run_all(s, q, N, b)) return;
        for (size_t i = 0; i < N; i++)
            CHECKF(same(&b->out[i], &ref[i]), "round %d: request %zu differs from alone: '%.*s' vs '%.*s'",
                   round, i, (int)b->out[i].len, b->out[i].text, (int)ref[i].len, ref[i].text);
        CHECK(alone(&many, &other, &scratch) && !scratch.error[0]); /* sequence 0 written over */
    }
    CHECKF(sm_prefix_stats_of(pc).in_place >= SM_ATTN_KBLOCK, "%zu tokens read in place",
           sm_prefix_stats_of(pc).in_place);
    sm_arena_free(&a);
    rig_close(&many);
    free(b);
}

/* Requests q[0..n) with echo[i] top_logprobs (-1: a plain request), run as run_all does. */
static bool run_echo(sm_sched *s, const req_spec *q, const int *echo, size_t n, book *b) {
    const char *stops[4][1] = {{NULL}, {NULL}, {NULL}, {NULL}};
    sm_error err = {{0}};
    for (size_t i = 0; i < n; i++) {
        sm_sched_request rq = request(&q[i], stops[i], &b->out[i]);
        rq.logprobs = rq.echo = echo[i] >= 0, rq.top_logprobs = echo[i] < 0 ? 0 : echo[i];
        if (sm_sched_submit(s, &rq, &err)) return test_fail(__FILE__, __LINE__, "submit: %s", err.msg), false;
    }
    for (size_t steps = 0; sm_sched_busy(s); steps++)
        if (sm_sched_step(s, &err) || steps > 10000)
            return test_fail(__FILE__, __LINE__, "step: %s", err.msg), false;
    return true;
}

/*
** Echo (OpenAI's prompt log-probabilities): a prompt of 90 tokens through
** a scheduler whose state gives 5 rows of logits a call, beside plain
** requests sharing its prefix, with a prefix cache: its first token comes
** with NAN, each other's log-probability and best 3 match the logits after
** the tokens before it fed one at a time (sm_state_forward, the decode
** path: its own log-softmax in double) within 1e-4 (f32; 2e-2 for q4_0,
** whose prefill and decode products differ a little); the tokens it then
** generates follow; max_tokens 0
** gives the prompt's alone (the same bits); the plain requests give what
** they give alone; and the echo request alone on one slot gives the same
** bits as beside the others.
*/
void test_sched_echo_logprobs(void) {
    const char *ks[9];
    size_t nk = test_kernel_specs(ks, 9);
    const char *models[] = {"seed", "seedq4"};
    for (size_t mi = 0; mi < 2; mi++)
        for (size_t ki = 0; ki < nk; ki++) {
            rig one;
            if (!rig_open(&one, models[mi], 1, ks[ki], 1)) return;
            req_spec q[4] = {{long_prompt, 6, 0, 0, 1, NULL, false}, {"Hello, world", 10, 0.8f, 0, 2, NULL, false},
                             {long_prompt, 0, 0, 0, 3, NULL, false}, {long_prompt, 8, 0, 0, 4, NULL, false}};
            const int echo[4] = {3, -1, 2, -1};
            int32_t ids[128];
            size_t n = 0, nt = 0, V = (size_t)one.tok.n_vocab;
            sm_error err = {{0}};
            CHECK(sm_prompt_encode(&one.tok, long_prompt, strlen(long_prompt), one.base.sp.n_ctx, 0, false, ids, &n,
                                   &nt, &err) == SM_OK && n > 20 && n < 128);
            sm_token_info *ref = calloc(n, sizeof *ref);
            float *lsm = calloc(n * V, sizeof *lsm); /* row i: the log-softmax before token i */
            outcome *plain = calloc(4, sizeof *plain);
            book *b = calloc(1, sizeof *b), *b1 = calloc(1, sizeof *b1);
            tok_log *tl = calloc(4, sizeof *tl), *tl1 = calloc(4, sizeof *tl1);
            CHECK(ref && lsm && plain && b && b1 && tl && tl1);
            for (size_t i = 0; i + 1 < n; i++) {
                const float *lg;
                CHECK(sm_state_forward(one.base.s, &ids[i], 1, i, &lg, &err) == SM_OK);
                sm_token_logprob(lg, V, ids[i + 1], 3, &ref[i + 1]);
                double mx = lg[0], sum = 0;
                for (size_t v = 1; v < V; v++) mx = lg[v] > mx ? lg[v] : mx;
                for (size_t v = 0; v < V; v++) sum += exp((double)lg[v] - mx);
                for (size_t v = 0; v < V; v++) lsm[(i + 1) * V + v] = (float)((double)lg[v] - mx - log(sum));
            }
            CHECK(alone(&one, &q[1], &plain[1]) && alone(&one, &q[3], &plain[3]));
            rig_close(&one);
            rig many;
            if (!rig_open(&many, models[mi], 2, ks[ki], 3)) return;
            sm_arena a;
            sm_prefix *pc;
            b->toks = tl;
            sm_sched *s = sched_open_cached(&many, b, &a, (size_t)4 << 20, &pc);
            if (!s || !run_echo(s, q, echo, 4, b)) return;
            sm_arena_free(&a);
            rig_close(&many);
            const tok_log *e = &tl[0];
            CHECKF(e->n == n + b->out[0].stats.n_generated && b->out[0].stats.n_generated == 6 &&
                       e->t[0].id == ids[0] && isnan(e->t[0].logprob) && e->t[0].n_top == 0,
                   "%s/%s: %zu tokens reported for %zu + %zu", models[mi], ks[ki], e->n, n,
                   b->out[0].stats.n_generated);
            /* each value within tol of the reference's for its id, and the k-th best within 2 tol of the
               reference's k-th best (quantized products: the prefill's and a decode step's differ a little) */
            float tol = mi ? 2e-2f : 1e-4f, d = 0;
            size_t worst = 0;
            for (size_t i = 1; i < n && e->n >= n; i++) {
                const float *row = lsm + i * V;
                float di = e->t[i].id == ids[i] && e->t[i].n_top == 3 ? fabsf(e->t[i].logprob - row[ids[i]]) : INFINITY;
                for (size_t k = 0; k < e->t[i].n_top && di <= tol; k++) {
                    float dk = fabsf(e->t[i].top_logprob[k] - row[e->t[i].top_id[k]]);
                    if (row[e->t[i].top_id[k]] < ref[i].top_logprob[k] - 2 * tol) dk = INFINITY;
                    if (dk > di) di = dk;
                }
                if (!(di <= d)) d = di, worst = i;
            }
            CHECKF(d <= tol, "%s/%s: prompt token %zu: logprob %g vs %g one at a time (off by %g)", models[mi], ks[ki],
                   worst, (double)e->t[worst].logprob, (double)lsm[worst * V + (size_t)ids[worst]], (double)d);
            bool same_bits = tl[2].n == n && b->out[2].stats.n_generated == 0 && b->out[2].reports == 1;
            for (size_t i = 1; same_bits && i < n; i++) same_bits = tl[2].t[i].logprob == e->t[i].logprob;
            CHECKF(same_bits, "%s/%s: max_tokens 0: %zu tokens, not the same log-probabilities", models[mi], ks[ki],
                   tl[2].n);
            CHECKF(same(&b->out[1], &plain[1]) && same(&b->out[3], &plain[3]),
                   "%s/%s: a plain request beside an echo differs from alone", models[mi], ks[ki]);
            /* alone on one slot */
            rig lone;
            if (!rig_open(&lone, models[mi], 1, ks[ki], 1)) return;
            b1->toks = tl1;
            s = sched_open_cached(&lone, b1, &a, 0, &pc);
            if (!s || !run_echo(s, q, echo, 1, b1)) return;
            sm_arena_free(&a);
            rig_close(&lone);
            CHECKF(same(&b1->out[0], &b->out[0]) && tl1[0].n == e->n &&
                       memcmp(tl1[0].t, e->t, e->n * sizeof *e->t) == 0,
                   "%s/%s: the echo request alone differs from beside others", models[mi], ks[ki]);
            free(ref), free(lsm), free(plain), free(b), free(b1), free(tl), free(tl1);
        }
}
