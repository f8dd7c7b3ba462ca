/*
** score.c -- `smallmind score`: the log-probability of every token of a text given
** the ones before it, in windows of the context length; perplexity and
** bits per byte.
*/
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int cli_score(const cli_opts *o) {
    char *text;
    size_t len;
    bool owned;
    int rc = cli_get_text(o, &text, &len, &owned);
    if (rc) return rc;
    sm_sampler_params spar = {.top_p = 1};
    cli_runner r;
    /* all logits: (batch, vocab) floats; keep that under ~64 MB for big vocabularies */
    cli_run_spec spec = {.all_logits = true, .max_batch = o->ubatch ? (size_t)o->ubatch : 128, .n_seq = 1,
                         .sampling = &spar,
                         .n_samplers = 1, .build_state = true};
    rc = cli_runner_init(&r, o, &spec);
    if (rc) {
        if (owned) free(text);
        return rc;
    }
    /* Token ids of the whole text, once (a start-up allocation, not per token). */
    cli_exit_now = 1; /* nothing printed yet: a signal while encoding exits at once */
    size_t total = sm_tokenizer_encode(&r.lm->tok, text, len, NULL, 0);
    int32_t *ids = total >= 2 ? malloc(total * sizeof *ids) : NULL;
    if (!ids) {
        if (owned) free(text);
        cli_runner_free(&r);
        return cli_data_error(total < 2 ? "text too short to score: it needs at least 2 tokens (the first has no context)"
                                    : "out of memory");
    }
    sm_tokenizer_encode(&r.lm->tok, text, len, ids, total);
    cli_exit_now = 0;
    size_t V = (size_t)sm_model_config(r.lm->model)->n_vocab, W = r.ls->sp.n_ctx;
    double sum = 0;
    size_t scored = 0, scored_bytes = 0;
    cli_out os = {.last_was_newline = true};
    sm_error err = {{0}};
    double t0 = sm_time_now();
    if (o->json) {
        size_t pl;
        const char *p = sm_tokenizer_piece(&r.lm->tok, ids[0], &pl);
        printf("{\"tokens\":[{\"pos\":0,\"id\":%d,\"text\":\"", (int)ids[0]);
        cli_json_string(stdout, (const unsigned char *)p, pl);
        printf("\",\"logprob\":null}");
    }
    /* Windows of the context length, each from a fresh cache: the logits at
       position i of a window predict token i + 1 of the text. */
    for (size_t w0 = 0; w0 < total && !rc && !cli_interrupted; w0 += W) {
        size_t wn = total - w0 < W ? total - w0 : W;
        for (size_t b0 = 0; b0 < wn && !rc && !cli_interrupted; b0 += r.ls->sp.max_batch) {
            size_t bn = wn - b0 < r.ls->sp.max_batch ? wn - b0 : r.ls->sp.max_batch;
            const float *logits;
            sm_status st = sm_state_forward(r.ls->state, ids + w0 + b0, bn, b0, &logits, &err);
            if (st == SM_ERR_CANCELLED) break; /* a signal: the summary of what was scored */
            if (st) {
                rc = cli_data_error(err.msg);
                break;
            }
            for (size_t i = 0; i < bn; i++) {
                size_t gpos = w0 + b0 + i;
                if (gpos + 1 >= total) break;
                const float *lg = logits + i * V;
                double mx = lg[0];
                for (size_t k = 1; k < V; k++) mx = lg[k] > mx ? lg[k] : mx;
                double z = 0;
                for (size_t k = 0; k < V; k++) z += exp((double)lg[k] - mx);
                if (!isfinite(z) || !isfinite(mx)) {
                    char msg[160];
                    snprintf(msg, sizeof msg, "the model produced NaN or infinite logits at position "
                             "%zu; check the weights", gpos);
                    rc = cli_run_error(o, SM_ERR_RUNTIME, msg);
                    break;
                }
                int32_t target = ids[gpos + 1];
                double lp = (double)lg[target] - mx - log(z);
                size_t pl;
                const char *p = sm_tokenizer_piece(&r.lm->tok, target, &pl);
                sum += lp;
                scored++;
                scored_bytes += pl;
                if (o->json) {
                    printf(",{\"pos\":%zu,\"id\":%d,\"text\":\"", gpos + 1, (int)target);
                    cli_json_string(stdout, (const unsigned char *)p, pl);
                    printf("\",\"logprob\":%.9g}", lp);
                } else {
                    printf("%zu\t%d\t%.6f\t", gpos + 1, (int)target, lp);
                    cli_json_string(stdout, (const unsigned char *)p, pl);
                    putchar('\n');
                }
            }
        }
    }
    double dt = sm_time_now() - t0;
    if (!rc) { /* also after a signal: the summary of the tokens scored so far */
        bool intr = cli_interrupted != 0;
        double mean = scored ? sum / (double)scored : 0, ppl = exp(-mean);
        double bpb = scored_bytes ? -sum / log(2.0) / (double)scored_bytes : 0;
        if (o->json) {
            printf("],\"n_tokens\":%zu,\"n_scored\":%zu,\"total_logprob\":%.9g,"
                   "\"mean_logprob\":%.9g,\"perplexity\":%.9g,\"bits_per_byte\":%.9g%s}\n",
                   total, scored, sum, mean, ppl, bpb, intr ? ",\"interrupted\":true" : "");
        } else {
            printf("# tokens %zu, scored %zu, total logprob %.6f nats, mean %.6f nats/token, "
                   "perplexity %.6f, %.6f bits/byte%s\n",
                   total, scored, sum, mean, ppl, bpb, intr ? " (interrupted)" : "");
        }
        if (intr) rc = cli_interrupt_code();
        if (o->stats)
            fprintf(stderr, "scored %zu tokens in %.1f ms (%.1f tokens/s), load %.1f ms\n", scored,
                    dt * 1e3, (double)scored / dt, r.t_load * 1e3);
        if (o->stats) cli_runner_print_threads(&r, stderr);
    }
    free(ids);
    if (owned) free(text);
    cli_runner_free(&r);
    if (ferror(stdout)) os.write_errno = errno ? errno : EIO;
    return cli_finish_stdout(&os, rc);
}
