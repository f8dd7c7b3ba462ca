/*
** generate.c -- `smallmind generate` with one prompt: its continuation
** streamed to stdout (or one JSON object with --json), through sm_generate.
** `--batch` is batch.c.
*/
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sm_grammar.h"

/* Where generated text goes: streamed to stdout, or collected for the JSON object. */
typedef struct {
    cli_out *os;
    char *buf; /* collected text (NULL: stream) */
    size_t len, cap;
} sink;

static int emit_sink(void *user, const char *text, size_t len) {
    sink *k = user;
    if (!k->buf) return cli_out_write(k->os, text, len) || cli_interrupted;
    size_t take = len < k->cap - k->len ? len : k->cap - k->len;
    memcpy(k->buf + k->len, text, take);
    k->len += take;
    return cli_interrupted;
}

int cli_generate(const cli_opts *o) {
    char *text;
    size_t len;
    bool owned;
    int rc = cli_get_text(o, &text, &len, &owned);
    if (rc) return rc;
    uint64_t seed = cli_seed(o->seed);
    sm_sampler_params spar = cli_sampling(o, seed);
    cli_runner r;
    cli_run_spec spec = {.max_batch = 512, .n_seq = 1, .sampling = &spar, .n_samplers = 1,
                         .build_state = true};
    rc = cli_runner_init(&r, o, &spec);
    size_t n = 0, dropped = 0;
    sm_error err = {{0}};
    sm_chat chat = {0};
    const char *stops[SM_STOP_MAX];
    size_t n_stop = o->n_stop;
    memcpy(stops, o->stop, o->n_stop * sizeof *stops);
    if (!rc && o->chat) { /* the prompt as a user message (after --system), templated */
        rc = cli_chat_setup(o, sm_model_config(r.lm->model), &r.lm->tok, &chat);
        cJSON *msgs = cJSON_CreateArray();
        char *rendered = NULL;
        size_t rlen = 0;
        if (!rc && o->system)
            cJSON_AddItemToArray(msgs, sm_chat_message("system", o->system, strlen(o->system)));
        if (!rc) cJSON_AddItemToArray(msgs, sm_chat_message("user", text, len));
        if (!rc && sm_chat_tokens(&chat, &r.lm->tok, msgs, r.ls->tokens, r.ls->sp.n_ctx, &n, &rendered, &rlen, &err))
            rc = cli_data_error(err.msg);
        if (!rc) {
            if (n > r.ls->sp.n_ctx) {
                char msg[200];
                snprintf(msg, sizeof msg, "the templated prompt is %s%zu tokens, longer than the context "
                         "(%zu)", n > r.ls->sp.n_ctx + 1 ? "" : "at least ", n, r.ls->sp.n_ctx);
                rc = cli_data_error(msg);
            }
            if (o->verbose) fprintf(stderr, "smallmind: the model reads:\n%s\n", rendered);
        }
        n_stop = sm_chat_add_stop(&chat, stops, n_stop);
        free(rendered);
        cJSON_Delete(msgs);
    } else if (!rc && sm_prompt_encode(&r.lm->tok, text, len, r.ls->sp.n_ctx, (size_t)o->max_tokens,
                                       o->truncate, r.ls->tokens, &n, &dropped, &err)) {
        if (n > r.ls->sp.n_ctx) /* too long: the flag that keeps its end (the library names no flag) */
            snprintf(err.msg + strlen(err.msg), sizeof err.msg - strlen(err.msg), " (--truncate keeps its end)");
        rc = cli_data_error(err.msg);
    }
    if (owned) free(text);
    sm_grammar *gr = NULL;
    sm_gbind *gb = NULL;
    sm_gmatch *gm = NULL;
    if (!rc && (rc = cli_grammar_flag(o, &r.lm->tok, &gr, &gb)) == 0 && gb && sm_gmatch_new(&gm, gb, &err))
        rc = cli_data_error(err.msg);
    if (rc) {
        sm_gbind_free(gb), sm_grammar_free(gr);
        sm_chat_free(&chat);
        cli_runner_free(&r);
        return rc;
    }
    if (dropped && !o->quiet && !o->json)
        fprintf(stderr, "smallmind: prompt truncated: kept its last %zu tokens, dropped %zu\n", n,
                dropped);
    cli_out os = {.last_was_newline = true};
    sink k = {.os = &os};
    if (o->json) { /* room for a whole context of pieces (a piece is at most 64 bytes) */
        k.cap = (r.ls->sp.n_ctx + 8) * 64;
        if (!(k.buf = malloc(k.cap))) {
            cli_runner_free(&r);
            return cli_data_error("out of memory for the output");
        }
    }
    sm_gen_params gp = {.max_tokens = (size_t)o->max_tokens, .cancel = (const volatile int *)&cli_interrupted,
                        .stop = stops, .n_stop = n_stop, .grammar = gm};
    sm_gen_stats gs;
    size_t cached = 0;
    bool save = false;
    if (o->prompt_cache && (rc = cli_prompt_cache_load(o, &r, n, &cached, &save))) {
        free(k.buf);
        sm_gmatch_free(gm), sm_gbind_free(gb), sm_grammar_free(gr);
        sm_chat_free(&chat);
        cli_runner_free(&r);
        return rc;
    }
    sm_status st = sm_generate_from(r.ls->state, &r.lm->tok, r.ls->samplers, r.ls->tokens, n, cached, &gp,
                                    emit_sink, &k, &gs, &err);
    if (!st && save && gs.n_generated > 0) /* the prompt is in the KV-cache */
        rc = cli_prompt_cache_save(o, &r, r.ls->tokens, n, n + gs.n_generated);
    if (cli_interrupted && gs.finish == SM_FINISH_ABORTED) gs.finish = SM_FINISH_INTERRUPTED;
    if (st) rc = cli_run_error(o, st, err.msg);
    if (o->json && !st) {
        char *out = NULL;
        size_t out_len = 0;
        FILE *f = open_memstream(&out, &out_len);
        if (f) {
            fputc('{', f);
            cli_json_result(f, k.buf, k.len, &gs, dropped, -1);
            if (gm) fprintf(f, ", \"valid\": %s", gs.valid ? "true" : "false");
            fprintf(f, ", \"load_ms\": %.3f}\n", r.t_load * 1e3);
            fclose(f);
            cli_out_write(&os, out, out_len);
            free(out);
        } else {
            rc = cli_data_error("out of memory for the output");
        }
    } else if (!os.pipe_closed && !os.write_errno && !os.last_was_newline &&
               (gs.finish == SM_FINISH_INTERRUPTED || isatty(STDOUT_FILENO))) {
        cli_out_write(&os, "\n", 1);
    }
    free(k.buf);
    if (gm && !st && !gs.valid && !o->quiet && !o->json && gs.finish != SM_FINISH_INTERRUPTED)
        fprintf(stderr, "smallmind: the output is not a whole sentence of the grammar (%s)\n",
                gs.finish == SM_FINISH_LENGTH ? "-n ran out first" : "a stop string cut it");
    if (gs.context_full && (o->stats || !o->quiet) && !o->json)
        fprintf(stderr, "smallmind: stopped: the context of %zu tokens is full\n", r.ls->sp.n_ctx);
    if (o->stats) {
        double dec = gs.n_generated > 1 ? (double)(gs.n_generated - 1) / gs.t_decode : 0;
        fprintf(stderr,
                "load: %.1f ms (%s kernels, %d thread%s, seed %llu)\n"
                "prompt: %zu tokens (%zu from the prompt cache) in %.2f ms (%.1f tokens/s)\n"
                "generated: %zu tokens in %.2f ms (%.1f tokens/s, %.3f ms/token)\n"
                "finish: %s\n",
                r.t_load * 1e3, r.ls->sp.kernels->name, (int)o->threads, o->threads == 1 ? "" : "s",
                (unsigned long long)seed,
                gs.n_prompt, gs.n_reused, gs.t_prefill * 1e3,
                gs.t_prefill > 0 ? (double)(gs.n_prompt - gs.n_reused) / gs.t_prefill : 0,
                gs.n_generated, gs.t_decode * 1e3, dec, dec > 0 ? 1e3 / dec : 0,
                sm_finish_str(gs.finish));
        cli_runner_print_threads(&r, stderr);
    }
    if (o->stats && gm) {
        sm_gmatch_stats gt = sm_gmatch_timing(gm);
        fprintf(stderr, "grammar: %zu masks (%zu from the cache): median %.4f ms, p99 %.4f ms, max %.3f ms, "
                        "%.1f ms in all; %zu tokens forced (fed with the token before them, not sampled)\n",
                gt.n, gt.hits, gt.median * 1e3, gt.p99 * 1e3, gt.max * 1e3, gt.total * 1e3, gs.n_forced);
    }
    sm_gmatch_free(gm), sm_gbind_free(gb), sm_grammar_free(gr);
    sm_chat_free(&chat);
    cli_runner_free(&r);
    if (!rc && gs.finish == SM_FINISH_INTERRUPTED) rc = cli_interrupt_code();
    return cli_finish_stdout(&os, rc);
}
