/*
** smallmind.c -- the library face (include/smallmind.h) over the loading
** layer, the model, the tokenizer, the chat template, generation and the
** scheduler. Every call returns a status; nothing here prints or exits.
*/
#include "smallmind_internal.h"

#include "sm_kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* st with err's message (sm_error) copied into the caller's smallmind_error. */
static smallmind_status fail(smallmind_error *out, sm_status st, const sm_error *e) {
    if (out) {
        out->status = (smallmind_status)st;
        snprintf(out->message, sizeof out->message, "%s", st ? e->msg : "");
    }
    return (smallmind_status)st;
}

static smallmind_status ok(smallmind_error *out) {
    if (out) out->status = SMALLMIND_OK, out->message[0] = '\0';
    return SMALLMIND_OK;
}

/* ------------------------------------------------------------- models */

smallmind_status smallmind_model_open(smallmind_model **out, const char *path,
                                      const smallmind_model_params *params, smallmind_error *err) {
    static const smallmind_model_params none = {0};
    const smallmind_model_params *p = params ? params : &none;
    sm_error e = {{0}};
    *out = NULL;
    smallmind_model *m = calloc(1, sizeof *m);
    if (!m) return fail(err, sm_error_set(&e, SM_ERR_NOMEM, "out of memory"), &e);
    sm_source *src;
    sm_status st = sm_source_open(&src, path, &(sm_source_opts){.read = p->no_mmap, .tokenizer = p->tokenizer},
                                  &e);
    if (!st) st = sm_model_open(&m->model, src, &e);
    if (!st && p->check_weights) st = sm_model_check_weights(m->model, &e);
    if (!st) st = sm_source_tokenizer(src, &m->tok, &e);
    if (st) {
        smallmind_model_free(m);
        return fail(err, st, &e);
    }
    *out = m;
    return ok(err);
}

void smallmind_model_free(smallmind_model *m) {
    if (!m) return;
    sm_chat_free(&m->chat);
    sm_tokenizer_free(&m->tok);
    sm_model_free(m->model);
    free(m);
}

const char *smallmind_model_arch(const smallmind_model *m) {
    return sm_arch_name(sm_model_config(m->model)->arch);
}

size_t smallmind_model_n_ctx(const smallmind_model *m) {
    return (size_t)sm_model_config(m->model)->n_ctx;
}

size_t smallmind_model_n_vocab(const smallmind_model *m) {
    return (size_t)m->tok.n_vocab;
}

size_t smallmind_model_n_params(const smallmind_model *m) {
    return sm_model_params(m->model);
}

/* ------------------------------------------------------------- tokens */

smallmind_status smallmind_tokenize(const smallmind_model *m, const char *text, size_t len, bool add_special,
                                    bool parse_special, int32_t *ids, size_t cap, size_t *n,
                                    smallmind_error *err) {
    sm_tokenizer *t = (sm_tokenizer *)&m->tok; /* encoding uses its work buffers, not its tables */
    unsigned how = (parse_special ? SM_ENCODE_SPECIAL : 0) |
                   (add_special && t->add_bos ? SM_ENCODE_BOS : 0) |
                   (add_special && t->add_eos ? SM_ENCODE_EOS : 0);
    *n = sm_tokenizer_encode_as(t, text, len, ids, cap, how);
    return ok(err);
}

smallmind_status smallmind_detokenize(const smallmind_model *m, const int32_t *ids, size_t n, char *text,
                                      size_t cap, size_t *len, smallmind_error *err) {
    sm_error e = {{0}};
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= m->tok.n_vocab)
            return fail(err, sm_error_set(&e, SM_ERR_INPUT, "id %lld at %zu is not a token (0 to %d)",
                                          (long long)ids[i], i, m->tok.n_vocab - 1), &e);
        size_t pl;
        const char *p = sm_tokenizer_piece_after(&m->tok, i ? ids[i - 1] : m->tok.bos, ids[i], &pl);
        if (at < cap) memcpy(text + at, p, pl < cap - at ? pl : cap - at);
        at += pl;
    }
    *len = at;
    return ok(err);
}

/* --------------------------------------------------------------- chat */

sm_status sm_face_chat(smallmind_model *m, const char *text, size_t len, const char *name,
                       const char *model_name, sm_error *err) {
    if (m->chat_ready && !text) return SM_OK;
    sm_chat_free(&m->chat);
    m->chat_ready = false;
    sm_status st = sm_chat_init(&m->chat, sm_model_config(m->model), &m->tok, text, len, name,
                                model_name ? model_name : sm_model_source(m->model)->path, err);
    if (st) sm_chat_free(&m->chat);
    else m->chat_ready = true;
    return st;
}

/* messages as the JSON array the template renders. */
static sm_status messages_json(const smallmind_message *msgs, size_t n, cJSON **out, sm_error *err) {
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < n; i++) {
        if (!msgs[i].role || !msgs[i].content) {
            cJSON_Delete(a);
            return sm_error_set(err, SM_ERR_INPUT, "messages[%zu]: role and content must not be NULL", i);
        }
        cJSON *one = sm_chat_message(msgs[i].role, msgs[i].content, strlen(msgs[i].content));
        if (!one || !cJSON_AddItemToArray(a, one)) {
            cJSON_Delete(one);
            cJSON_Delete(a);
            a = NULL;
        }
    }
    if (!a) return sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    *out = a;
    return sm_chat_check_messages(a, "messages", err);
}

smallmind_status smallmind_chat_apply(smallmind_model *m, const smallmind_message *messages, size_t n,
                                      bool add_generation_prompt, char **out, size_t *len,
                                      smallmind_error *err) {
    sm_error e = {{0}};
    cJSON *a = NULL;
    size_t l = 0;
    *out = NULL;
    sm_status st = sm_face_chat(m, NULL, 0, NULL, NULL, &e);
    if (!st) st = messages_json(messages, n, &a, &e);
    if (!st) st = sm_chat_render(&m->chat, a, add_generation_prompt, NULL, out, &l, &e);
    cJSON_Delete(a);
    if (len) *len = l;
    return st ? fail(err, st, &e) : ok(err);
}

void smallmind_free(void *p) {
    free(p);
}

/* ----------------------------------------------------------- sessions */

static sm_status on_done(void *user, const sm_sched_result *r, sm_error *err);
static sm_sampler_params sampling(const smallmind_sampling *x);

sm_status sm_face_carve(smallmind_session *s, const sm_face_layout *layout, sm_arena *a, sm_error *err) {
    smallmind_request dr = smallmind_request_default();
    sm_sampler_params dflt = sampling(&dr.sampling);
    const sm_sampler_params *spar = layout->sampling ? layout->sampling : &dflt;
    size_t n_vocab = (size_t)s->m->tok.n_vocab;
    s->tokens = sm_arena_alloc(a, s->sp.n_ctx, sizeof *s->tokens);
    s->samplers = s->n_samplers ? sm_arena_alloc(a, s->n_samplers, sizeof *s->samplers) : NULL;
    for (size_t i = 0; i < s->n_samplers; i++) {
        sm_sampler scratch, *smp = s->samplers ? &s->samplers[i] : &scratch;
        if (sm_sampler_init(smp, spar, n_vocab, a)) return sm_error_set(err, SM_ERR_NOMEM, "arena too small for the sampler");
    }
    sm_status st = sm_state_init(&s->state, s->m->model, &s->sp, s->pool, a, err);
    if (!st && !layout->no_sched && s->prefix_bytes)
        st = sm_prefix_init(&s->prefix, s->m->model, &s->sp, s->prefix_bytes, a, err);
    s->sched_params.prefix = s->prefix;
    if (!st && !layout->no_sched) st = sm_sched_init(&s->sched, s->state, &s->sp, &s->sched_params, a, err);
    return st;
}

smallmind_status sm_face_session_new(smallmind_session **out, smallmind_model *m,
                                     const smallmind_session_params *params, const sm_face_layout *layout,
                                     smallmind_error *err) {
    static const smallmind_session_params none = {0};
    static const sm_face_layout own = {.n_samplers = 1};
    const smallmind_session_params *p = params ? params : &none;
    const sm_face_layout *l = layout ? layout : &own;
    sm_error e = {{0}};
    *out = NULL;
    const sm_config *c = sm_model_config(m->model);
    const sm_kernels *k;
    sm_status kst = sm_kernels_choose(p->kernels, &k, &e);
    if (kst) return fail(err, kst, &e);
    if (p->kv_type && strcmp(p->kv_type, "f32") != 0 && strcmp(p->kv_type, "f16") != 0)
        return fail(err, sm_error_set(&e, SM_ERR_INPUT, "kv_type \"%.40s\" is not f32 or f16", p->kv_type), &e);
    if (p->n_ctx > (size_t)c->n_ctx)
        return fail(err, sm_error_set(&e, SM_ERR_INPUT, "n_ctx %zu exceeds the model's context of %d",
                                      p->n_ctx, c->n_ctx), &e);
    if (p->n_threads < 0 || p->n_parallel < 0 || p->n_parallel > SM_MAX_SEQ)
        return fail(err, sm_error_set(&e, SM_ERR_INPUT, "n_threads must be 0 or more, n_parallel 0 to %d",
                                      SM_MAX_SEQ), &e);
    smallmind_session *s = calloc(1, sizeof *s);
    if (!s) return fail(err, sm_error_set(&e, SM_ERR_NOMEM, "out of memory"), &e);
    s->m = m;
    size_t max_batch = l->max_batch ? l->max_batch : 512;
    s->sp.n_ctx = p->n_ctx ? p->n_ctx : (size_t)c->n_ctx;
    s->sp.max_batch = max_batch < s->sp.n_ctx ? max_batch : s->sp.n_ctx;
    s->sp.all_logits = l->all_logits;
    s->sp.row_logits = l->no_sched ? 0 : SM_SCHED_ROW_LOGITS; /* an echo prompt's calls */
    s->sp.n_threads = p->n_threads ? p->n_threads : sm_pool_default_threads();
    s->sp.kernels = k;
    s->sp.n_seq = p->n_parallel ? (size_t)p->n_parallel : 1;
    s->sp.kv_type = p->kv_type && strcmp(p->kv_type, "f16") == 0 ? SM_DTYPE_F16 : SM_DTYPE_F32;
    unsigned rtypes = sm_kernels_repack_types(k);
    if (!p->no_repack && !l->no_state && rtypes) {
        sm_status rst = sm_model_repack(m->model, rtypes, s->sp.n_threads, &e);
        if (rst) {
            free(s);
            return fail(err, rst, &e);
        }
        s->sp.repack = sm_model_repacked_bytes(m->model) > 0;
    }
    s->n_samplers = l->n_samplers;
    s->prefix_bytes = p->prefix_cache;
    s->sched_params = l->sched ? *l->sched
                               : (sm_sched_params){.cancel = &s->cancel, .done = on_done, .user = s};
    if (!s->sched_params.tok) s->sched_params.tok = &m->tok;
    if (l->seq_max > s->sp.n_seq) s->sp.n_seq = sm_face_auto_seq(m->model, &s->sp, l->seq_max, sm_mem_limit() / 4);
    sm_status st = sm_state_plan_bytes(m->model, &s->sp, &s->plan, &e);
    if (!st && !l->no_state) {
        sm_arena meas;
        sm_arena_measure(&meas);
        if (sm_pool_create(&s->pool, s->sp.n_threads) != SM_OK)
            st = sm_error_set(&e, SM_ERR_RUNTIME, "cannot start %d threads", s->sp.n_threads);
        else if (sm_face_carve(s, l, &meas, &e) || sm_arena_init(&s->arena, meas.used) != SM_OK)
            st = sm_error_set(&e, SM_ERR_NOMEM,
                              "cannot allocate %zu bytes for the run (KV-cache %zu bytes); a smaller "
                              "context%s reduces it", meas.used, s->plan.kv_cache,
                              s->sp.n_seq > 1 ? " or fewer parallel sequences" : "");
        else if (!(st = sm_face_carve(s, l, &s->arena, &e)))
            sm_state_set_cancel(s->state, &s->cancel);
    }
    if (st) {
        smallmind_session_free(s);
        return fail(err, st, &e);
    }
    *out = s;
    return ok(err);
}

size_t sm_face_auto_seq(const sm_model *model, const sm_state_params *sp, size_t seq_max, size_t budget) {
    for (size_t n = seq_max; n > sp->n_seq; n /= 2) {
        sm_state_params q = *sp;
        sm_state_plan plan;
        sm_error e;
        q.n_seq = n;
        if (sm_state_plan_bytes(model, &q, &plan, &e) == SM_OK && plan.kv_cache <= budget) return n;
    }
    return sp->n_seq;
}

smallmind_status smallmind_session_new(smallmind_session **out, smallmind_model *m,
                                       const smallmind_session_params *params, smallmind_error *err) {
    return sm_face_session_new(out, m, params, NULL, err);
}

void smallmind_session_free(smallmind_session *s) {
    if (!s) return;
    sm_sched_release(s->sched);
    sm_arena_free(&s->arena);
    sm_pool_free(s->pool);
    free(s);
}

void smallmind_cancel(smallmind_session *s) {
    s->cancel = 1;
}

/* --------------------------------------------------------- generation */

smallmind_request smallmind_request_default(void) {
    return (smallmind_request){.max_tokens = 256,
                               .sampling = {.temperature = 0.8f, .top_k = 40, .top_p = 0.95f,
                                            .repeat_penalty = 1.0f, .repeat_last_n = 64, .seed = 42}};
}

/* The request's sampling as the sampler's (a logit_bias beyond SM_SAMPLER_MAX_BIAS, or out of
   range, is left to sampling_check). */
static sm_sampler_params sampling(const smallmind_sampling *x) {
    sm_sampler_params p = {.temperature = x->temperature, .top_k = x->top_k, .top_p = x->top_p,
                           .min_p = x->min_p, .repeat_penalty = x->repeat_penalty,
                           .repeat_last_n = x->repeat_last_n, .presence_penalty = x->presence_penalty,
                           .frequency_penalty = x->frequency_penalty, .seed = x->seed};
    for (size_t i = 0; x->logit_bias && i < x->n_logit_bias; i++)
        if (!sm_sampler_add_bias(&p.bias, x->logit_bias[i].token, x->logit_bias[i].bias)) break;
    return p;
}

/* SM_ERR_INPUT naming logit_bias when it has too many entries, a bias outside -100..100, or a
   token outside the vocabulary. */
static sm_status sampling_check(const smallmind_sampling *x, const sm_sampler_params *p, size_t n_vocab,
                                sm_error *e) {
    if (x->n_logit_bias && !x->logit_bias) return sm_error_set(e, SM_ERR_INPUT, "logit_bias: NULL with a count");
    if (x->n_logit_bias > SM_SAMPLER_MAX_BIAS)
        return sm_error_set(e, SM_ERR_INPUT, "logit_bias: %zu tokens, at most %d", x->n_logit_bias,
                            SM_SAMPLER_MAX_BIAS);
    for (size_t i = 0; i < x->n_logit_bias; i++)
        if (!(x->logit_bias[i].bias >= -100 && x->logit_bias[i].bias <= 100))
            return sm_error_set(e, SM_ERR_INPUT, "logit_bias: the bias of token %d must be from -100 to 100",
                                (int)x->logit_bias[i].token);
    return sm_sampler_check(p, n_vocab, e);
}

static smallmind_result result_of(const sm_gen_stats *g) {
    smallmind_finish f = g->finish == SM_FINISH_INTERRUPTED ? SMALLMIND_FINISH_CANCELLED
                                                            : (smallmind_finish)g->finish;
    return (smallmind_result){f, g->n_prompt, g->n_generated, g->t_prefill, g->t_decode, g->n_reused};
}

/* r's stop strings into stops (*n_stop of them). */
static sm_status request_stops(const smallmind_request *r, const char **stops, size_t *n_stop,
                               sm_error *err) {
    if (r->n_stop > SMALLMIND_MAX_STOP)
        return sm_error_set(err, SM_ERR_INPUT, "%zu stop strings; at most %d", r->n_stop, SMALLMIND_MAX_STOP);
    for (size_t i = 0; i < r->n_stop; i++) stops[i] = r->stop[i];
    *n_stop = r->n_stop;
    return SM_OK;
}

/* r's prompt (or conversation) into s->tokens: *n ids; stops gets the template's end of turn too. */
static sm_status request_tokens(smallmind_session *s, const smallmind_request *r, size_t *n,
                                const char **stops, size_t *n_stop, sm_error *err) {
    sm_status st = request_stops(r, stops, n_stop, err);
    if (st) return st;
    if (!r->messages) {
        if (!r->prompt) return sm_error_set(err, SM_ERR_INPUT, "the request has no prompt and no messages");
        size_t dropped;
        return sm_prompt_encode(&s->m->tok, r->prompt, r->prompt_len ? r->prompt_len : strlen(r->prompt),
                                s->sp.n_ctx, r->max_tokens, false, s->tokens, n, &dropped, err);
    }
    cJSON *a = NULL;
    st = sm_face_chat(s->m, NULL, 0, NULL, NULL, err);
    if (!st) st = messages_json(r->messages, r->n_messages, &a, err);
    if (!st) st = sm_chat_tokens(&s->m->chat, &s->m->tok, a, s->tokens, s->sp.n_ctx, n, NULL, NULL, err);
    cJSON_Delete(a);
    if (!st && *n > s->sp.n_ctx)
        st = sm_error_set(err, SM_ERR_INPUT, "the templated prompt is %s%zu tokens, longer than the context (%zu)",
                          *n > s->sp.n_ctx + 1 ? "" : "at least ", *n, s->sp.n_ctx);
    if (!st) *n_stop = sm_chat_add_stop(&s->m->chat, stops, *n_stop);
    return st;
}

/* A piece to the request's callback (user: the request). */
static int emit(void *user, const char *text, size_t len) {
    const smallmind_request *r = user;
    return r->on_piece ? r->on_piece(r->user, text, len) : 0;
}

smallmind_status smallmind_generate(smallmind_session *s, const smallmind_request *r,
                                    smallmind_result *result, smallmind_error *err) {
    sm_error e = {{0}};
    size_t n = 0, n_stop = 0;
    const char *stops[SM_STOP_MAX];
    s->cancel = 0;
    sm_status st = s->n_samplers ? request_tokens(s, r, &n, stops, &n_stop, &e)
                                 : sm_error_set(&e, SM_ERR_INPUT, "this session has no sampler");
    if (st) return fail(err, st, &e);
    sm_sampler_params sp = sampling(&r->sampling);
    if ((st = sampling_check(&r->sampling, &sp, (size_t)s->m->tok.n_vocab, &e))) return fail(err, st, &e);
    sm_sampler_reset(&s->samplers[0], &sp);
    sm_gen_params gp = {.max_tokens = r->max_tokens, .cancel = &s->cancel, .stop = stops, .n_stop = n_stop};
    sm_gen_stats gs;
    st = sm_generate(s->state, &s->m->tok, &s->samplers[0], s->tokens, n, &gp, emit, (void *)r, &gs, &e);
    if (s->cancel && gs.finish == SM_FINISH_ABORTED) gs.finish = SM_FINISH_INTERRUPTED;
    if (result) *result = result_of(&gs);
    return st ? fail(err, st, &e) : ok(err);
}

static sm_status on_done(void *user, const sm_sched_result *r, sm_error *err) {
    (void)err;
    smallmind_session *s = user;
    smallmind_result res = result_of(&r->stats);
    if (s->done && s->done(s->done_user, (size_t)(uintptr_t)r->tag, r->text ? r->text : "", r->len, &res,
                           r->error))
        s->stop = true;
    return SM_OK;
}

smallmind_status smallmind_run_batch(smallmind_session *s, const smallmind_request *reqs, size_t n,
                                     smallmind_done_fn done, void *user, smallmind_error *err) {
    sm_error e = {{0}};
    if (!s->sched || s->sched_params.done != on_done)
        return fail(err, sm_error_set(&e, SM_ERR_INPUT, "this session has no scheduler of the face's"), &e);
    s->cancel = 0;
    s->done = done, s->done_user = user, s->stop = false;
    size_t next = 0;
    sm_status st = SM_OK;
    while (!st && !s->stop && !s->cancel) {
        while (!st && next < n && sm_sched_room(s->sched)) {
            const smallmind_request *r = &reqs[next];
            size_t n_ids = 0, n_stop = 0;
            const char *stops[SM_STOP_MAX];
            sm_sched_request q = {.max_tokens = r->max_tokens, .sampling = sampling(&r->sampling),
                                  .tag = (void *)(uintptr_t)next};
            st = r->messages ? request_tokens(s, r, &n_ids, stops, &n_stop, &e)
                             : request_stops(r, stops, &n_stop, &e);
            if (!st) st = sampling_check(&r->sampling, &q.sampling, (size_t)s->m->tok.n_vocab, &e);
            if (st) { /* which request, in front of why */
                char why[sizeof e.msg];
                snprintf(why, sizeof why, "%s", e.msg);
                st = sm_error_set(&e, st, "request %zu: %s", next, why);
                break;
            }
            if (r->messages) {
                q.ids = s->tokens, q.n_ids = n_ids;
            } else {
                q.prompt = r->prompt ? r->prompt : "";
                q.prompt_len = r->prompt_len ? r->prompt_len : strlen(q.prompt);
            }
            q.stop = stops, q.n_stop = n_stop;
            st = sm_sched_submit(s->sched, &q, &e);
            next++;
        }
        if (st || (next == n && !sm_sched_busy(s->sched))) break;
        st = sm_sched_step(s->sched, &e);
    }
    s->done = NULL;
    if (!st && s->cancel) st = sm_error_set(&e, SM_ERR_CANCELLED, "cancelled");
    return st ? fail(err, st, &e) : ok(err);
}
