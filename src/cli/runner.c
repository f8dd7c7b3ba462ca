/*
** runner.c -- what every command that runs a model sets up: the kernels,
** the model (mapped or read), its tokenizer, the thread pool, and one arena
** planned once and carved for the state, the samplers, the prompt buffer
** and (for batches) the scheduler.
*/
#include "cli.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "sm_source.h"

void cli_runner_free(cli_runner *r) {
    sm_tokenizer_free(&r->tok);
    sm_arena_free(&r->arena);
    sm_pool_free(r->pool);
    sm_model_free(r->model);
    memset(r, 0, sizeof *r);
}

/* Carves prompt buffer, samplers, state and scheduler from `a`: once measuring, once for real. */
sm_status cli_runner_carve(cli_runner *r, const sm_sampler_params *spar, sm_arena *a,
                           sm_error *err) {
    r->tokens = sm_arena_alloc(a, r->sp.n_ctx, sizeof *r->tokens);
    r->samplers = r->n_samplers ? sm_arena_alloc(a, r->n_samplers, sizeof *r->samplers) : NULL;
    for (size_t i = 0; i < r->n_samplers; i++) {
        sm_sampler scratch, *smp = r->samplers ? &r->samplers[i] : &scratch;
        sm_status st = sm_sampler_init(smp, spar, (size_t)r->tok.n_vocab, a);
        if (st) return sm_error_set(err, st, "arena too small for the sampler");
    }
    sm_status st = sm_state_init(&r->state, r->model, &r->sp, r->pool, a, err);
    if (!st && r->sched_params)
        st = sm_sched_init(&r->sched, r->state, &r->sp, r->sched_params, a, err);
    return st;
}

int cli_runner_init(cli_runner *r, const cli_opts *o, const cli_run_spec *spec) {
    memset(r, 0, sizeof *r);
    size_t max_batch = spec->max_batch, n_seq = spec->n_seq;
    const sm_sampler_params *spar = spec->sampling;
    r->n_samplers = spec->n_samplers;
    r->sched_params = spec->sched;
    sm_error err = {{0}};
    int rc = EXIT_DATA;
    double t0 = sm_time_now();
    r->kernels = sm_kernels_select(o->kernels);
    if (!r->kernels)
        return cli_usage_error(o, "--kernels %s is unknown or not supported by this CPU (have: %s)",
                           o->kernels, sm_kernels_select(NULL)->name);
    cli_exit_now = 1; /* nothing to flush while loading: a signal exits at once */
    char what[4200];
    snprintf(what, sizeof what, "a weight file of '%s'", o->model);
    if (!o->no_mmap) cli_set_mapped(what);
    sm_source *src;
    if (sm_source_open(&src, o->model, &(sm_source_opts){.read = o->no_mmap, .tokenizer = o->tokenizer},
                       &err) ||
        sm_model_open(&r->model, src, &err))
        goto fail_msg;
    if (o->check_weights && sm_model_check_weights(r->model, &err)) goto fail_msg;
    const sm_config *c = sm_model_config(r->model);
    if (sm_source_tokenizer(src, &r->tok, &err)) goto fail_msg;
    r->tok.parse_special = o->special;
    if (o->ctx > c->n_ctx) {
        rc = cli_usage_error(o, "-c %ld exceeds the model's context of %d", o->ctx, c->n_ctx);
        goto fail;
    }
    r->sp.n_ctx = o->ctx ? (size_t)o->ctx : (size_t)c->n_ctx;
    r->sp.max_batch = max_batch < r->sp.n_ctx ? max_batch : r->sp.n_ctx;
    r->sp.all_logits = spec->all_logits;
    r->sp.n_threads = (int)o->threads;
    r->sp.kernels = r->kernels;
    r->sp.n_seq = n_seq;
    r->sp.kv_type = o->kv_type;
    if (sm_state_plan_bytes(r->model, &r->sp, &r->plan, &err)) goto fail_msg;
    if (spec->build_state) {
        if (sm_pool_create(&r->pool, (int)o->threads) != SM_OK) {
            fprintf(stderr, "smallmind: cannot start %ld threads\n", o->threads);
            goto fail;
        }
        sm_arena meas;
        sm_arena_measure(&meas);
        if (cli_runner_carve(r, spar, &meas, &err) || sm_arena_init(&r->arena, meas.used) != SM_OK) {
            fprintf(stderr,
                    "smallmind: cannot allocate %zu bytes for the run (KV-cache %zu bytes); "
                    "a smaller -c%s reduces it\n",
                    meas.used, r->plan.kv_cache, n_seq > 1 ? " or --parallel" : "");
            goto fail;
        }
        if (cli_runner_carve(r, spar, &r->arena, &err)) goto fail_msg;
        sm_state_set_cancel(r->state, (const volatile int *)&cli_interrupted);
    }
    cli_exit_now = 0;
    r->t_load = sm_time_now() - t0;
    if (o->verbose && spec->build_state)
        fprintf(stderr,
                "smallmind: %s: %s, %zu parameters, %zu bytes of weights (%s); %s kernels, "
                "%d threads; context %zu; arena %zu bytes (KV-cache %zu); ready in %.1f ms\n",
                o->model, sm_arch_name(c->arch), sm_model_params(r->model),
                sm_model_weight_bytes(r->model), o->no_mmap ? "read" : "mapped", r->kernels->name,
                r->sp.n_threads, r->sp.n_ctx, r->arena.size, r->plan.kv_cache, r->t_load * 1e3);
    return 0;
fail_msg:
    rc = cli_data_error(err.msg);
fail:
    cli_runner_free(r);
    return rc;
}

void cli_runner_print_threads(const cli_runner *r, FILE *f) {
    if (!r->pool) return;
    sm_pool_stats ps;
    sm_pool_get_stats(r->pool, &ps);
    int n = sm_pool_threads(r->pool);
    fprintf(f, "threads: %d (steps:", n);
    const char *sep = " ";
    for (int w = SM_POOL_MAX_STAT; w >= 1; w--) /* widest first */
        if (ps.runs_at_width[w - 1]) {
            fprintf(f, "%s%.0f%% on %d%s", sep, 100.0 * (double)ps.runs_at_width[w - 1] / (double)ps.runs,
                    w, w == SM_POOL_MAX_STAT ? " or more" : "");
            sep = ", ";
        }
    if (!ps.runs) fprintf(f, " none");
    fprintf(f, "; %llu probes, %llu moves, %llu sleeps)\n", (unsigned long long)ps.probes,
            (unsigned long long)ps.moves, (unsigned long long)ps.sleeps);
}

sm_sampler_params cli_sampling(const cli_opts *o, uint64_t seed) {
    return (sm_sampler_params){.temperature = (float)o->temp, .top_k = (int)o->top_k,
                               .top_p = (float)o->top_p, .seed = seed, .min_p = (float)o->min_p,
                               .repeat_penalty = (float)o->repeat_penalty,
                               .repeat_last_n = (int)o->repeat_last_n,
                               .presence_penalty = (float)o->presence_penalty,
                               .frequency_penalty = (float)o->frequency_penalty};
}

sm_status cli_chat_load(const cli_opts *o, const sm_config *cfg, sm_tokenizer *tok, sm_chat *c,
                        sm_error *err) {
    char *text = NULL;
    size_t len = 0;
    memset(c, 0, sizeof *c);
    sm_status st = o->chat_template ? sm_read_file(o->chat_template, 16u << 20, &text, &len, err)
                                    : SM_OK;
    if (!st) st = sm_chat_init(c, cfg, tok, text, len, o->chat_template, o->model, err);
    free(text);
    if (st) sm_chat_free(c);
    return st;
}

int cli_chat_setup(const cli_opts *o, const sm_config *cfg, sm_tokenizer *tok, sm_chat *c) {
    sm_error err = {{0}};
    if (cli_chat_load(o, cfg, tok, c, &err)) return cli_data_error(err.msg);
    const char *given[2] = {cfg->chat_bos, cfg->chat_eos}, *what[2] = {"bos_token", "eos_token"};
    for (int k = 0; k < 2 && !o->quiet; k++) { /* tokenizer_config.json's: text the templates print */
        int32_t ids[2];
        if (given[k] && *given[k] &&
            sm_tokenizer_encode_as(tok, given[k], strlen(given[k]), ids, 2, SM_ENCODE_SPECIAL) != 1)
            fprintf(stderr, "smallmind: note: tokenizer_config.json's %s \"%.60s\" is not a token of "
                    "%s's tokenizer (the template prints it as text)\n", what[k], given[k], o->model);
    }
    return 0;
}

/* A model's config and tokenizer, without its weights. */
int cli_load_tokenizer(const cli_opts *o, sm_source **src, sm_tokenizer *tok) {
    sm_error err = {{0}};
    sm_status st = sm_source_open(src, o->model, &(sm_source_opts){.no_weights = true,
                                                                  .tokenizer = o->tokenizer}, &err);
    if (!st && (st = sm_source_tokenizer(*src, tok, &err))) {
        sm_source_close(*src);
        *src = NULL;
    }
    if (st) return cli_data_error(err.msg);
    tok->parse_special = o->special;
    if (o->no_bos) tok->add_bos = false;
    return 0;
}

