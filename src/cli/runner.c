/*
** runner.c -- what every command that runs a model sets up, through the
** library face (smallmind_internal.h): the model and its tokenizer
** (smallmind_model), the kernels, the thread pool and one arena planned
** once and carved for the state, the samplers, the prompt buffer and (for
** batches) the scheduler (a session laid out as the command asks).
*/
#include "cli.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

void cli_runner_free(cli_runner *r) {
    smallmind_session_free(r->ls);
    smallmind_model_free(r->lm);
    memset(r, 0, sizeof *r);
}

sm_status cli_runner_carve(cli_runner *r, sm_arena *a, sm_error *err) {
    return sm_face_carve(r->ls, &r->layout, a, err);
}

int cli_runner_init(cli_runner *r, const cli_opts *o, const cli_run_spec *spec) {
    memset(r, 0, sizeof *r);
    double t0 = sm_time_now();
    const sm_kernels *k;
    sm_error ke = {{0}};
    if (sm_kernels_choose(o->kernels, &k, &ke)) return cli_usage_error(o, "--%s", ke.msg);
    cli_exit_now = 1; /* nothing to flush while loading: a signal exits at once */
    char what[4200];
    snprintf(what, sizeof what, "a weight file of '%s'", o->model);
    if (!o->no_mmap) cli_set_mapped(what);
    smallmind_error e;
    smallmind_model_params mp = {.no_mmap = o->no_mmap, .check_weights = o->check_weights,
                                 .tokenizer = o->tokenizer};
    if (smallmind_model_open(&r->lm, o->model, &mp, &e)) return cli_data_error(e.message);
    const sm_config *c = sm_model_config(r->lm->model);
    r->lm->tok.parse_special = o->special;
    for (int i = 0; i < o->bias.n; i++)
        if (o->bias.e[i].id >= r->lm->tok.n_vocab) {
            int n_vocab = r->lm->tok.n_vocab;
            cli_runner_free(r);
            return cli_usage_error(o, "--logit-bias: token %d is not in the model's vocabulary (0 to %d)",
                                   (int)o->bias.e[i].id, n_vocab - 1);
        }
    if (o->ctx > c->n_ctx) {
        int n_ctx = c->n_ctx; /* (c is the model's: freed with it) */
        cli_runner_free(r);
        return cli_usage_error(o, "-c %ld exceeds the model's context of %d", o->ctx, n_ctx);
    }
    r->layout = (sm_face_layout){.max_batch = spec->max_batch, .n_samplers = spec->n_samplers,
                                 .all_logits = spec->all_logits, .sampling = spec->sampling,
                                 .no_state = !spec->build_state, .sched = spec->sched,
                                 .no_sched = !spec->sched, .seq_max = spec->n_seq_max};
    smallmind_session_params sp = {.n_threads = (int)o->threads, .n_ctx = (size_t)o->ctx,
                                   .kv_type = o->kv_type == SM_DTYPE_F16 ? "f16" : "f32",
                                   .n_parallel = (int)spec->n_seq, .kernels = o->kernels,
                                   .prefix_cache = spec->sched ? spec->cache_bytes : 0,
                                   .no_repack = o->no_repack};
    if (sm_face_session_new(&r->ls, r->lm, &sp, &r->layout, &e)) {
        char msg[600];
        const char *tail = strstr(e.message, "; a smaller context");
        if (e.status == SMALLMIND_ERR_NOMEM && tail) /* name the flags that reduce it */
            snprintf(msg, sizeof msg, "%.*s; a smaller -c%s%s%s reduces it", (int)(tail - e.message), e.message,
                     spec->n_seq > 1 && spec->cache_bytes ? ", " : spec->n_seq > 1 ? " or " : "",
                     spec->n_seq > 1 ? "--parallel" : "", spec->cache_bytes ? " or --cache-ram" : "");
        else
            snprintf(msg, sizeof msg, "%s", e.message);
        cli_runner_free(r);
        return cli_data_error(msg);
    }
    if (r->ls->state) sm_state_set_cancel(r->ls->state, (const volatile int *)&cli_interrupted);
    cli_exit_now = 0;
    r->t_load = sm_time_now() - t0;
    char seqs[40] = ""; /* "; sequences N" when more than one */
    if (r->ls->sp.n_seq > 1) snprintf(seqs, sizeof seqs, "; sequences %zu", r->ls->sp.n_seq);
    if (o->verbose && spec->build_state)
        fprintf(stderr,
                "smallmind: %s: %s, %zu parameters, %zu bytes of weights (%s); %s kernels, "
                "%d threads; context %zu%s; arena %zu bytes (KV-cache %zu); ready in %.1f ms\n",
                o->model, sm_arch_name(c->arch), sm_model_params(r->lm->model),
                sm_model_weight_bytes(r->lm->model), o->no_mmap ? "read" : "mapped", r->ls->sp.kernels->name,
                r->ls->sp.n_threads, r->ls->sp.n_ctx, seqs,
                r->ls->arena.size, r->ls->plan.kv_cache, r->t_load * 1e3);
    return 0;
}

void cli_runner_print_threads(const cli_runner *r, FILE *f) {
    if (!r->ls || !r->ls->pool) return;
    sm_pool_stats ps;
    sm_pool_get_stats(r->ls->pool, &ps);
    int n = sm_pool_threads(r->ls->pool);
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
                               .frequency_penalty = (float)o->frequency_penalty, .bias = o->bias};
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

