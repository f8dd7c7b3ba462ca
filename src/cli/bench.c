/*
** bench.c -- `smallmind bench`: prefill and decode speed, heap allocations per
** token, a per-step profile, and the bounds memory bandwidth sets
** (measured by sm_bench); `bench --compare A B` puts two reports side by side.
*/
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include "json_internal.h"
#include "sm_bench.h"


/*
** One run: P prompt tokens prefilled, a token sampled, then N decoded one at
** a time. *t_pf and *t_dec get the seconds of each part, *allocs the heap
** allocations made while decoding. With pre and dec (else NULL) the forward
** steps are profiled into them, sampling included. Returns an exit code.
*/
static int bench_run(cli_runner *r, size_t P, size_t N, sm_profile *pre, sm_profile *dec,
                     double *t_pf, double *t_dec, size_t *allocs) {
    sm_error err = {{0}};
    const float *logits;
    int32_t next;
    if (pre) memset(pre, 0, sizeof *pre), memset(dec, 0, sizeof *dec);
    sm_state_set_profile(r->ls->state, pre);
    double t0 = sm_time_now();
    sm_status st = sm_state_prefill(r->ls->state, r->ls->tokens, P, 0, &logits, &err);
    sm_state_set_profile(r->ls->state, dec);
    double t1 = sm_time_now();
    size_t a0 = cli_allocs();
    for (size_t i = 0; i <= N && !st; i++) {
        double ts = dec ? sm_time_now() : 0;
        if (sm_sampler_sample(r->ls->samplers, logits, &next)) st = SM_ERR_RUNTIME;
        if (dec) dec->s[SM_OP_SAMPLE] += sm_time_now() - ts;
        if (i == 0) t1 = sm_time_now(); /* prefill includes sampling its token */
        if (!st && i < N) st = sm_state_forward(r->ls->state, &next, 1, P + i, &logits, &err);
    }
    *allocs = cli_allocs() - a0;
    *t_dec = sm_time_now() - t1;
    *t_pf = t1 - t0;
    sm_state_set_profile(r->ls->state, NULL);
    if (st && cli_interrupted) return cli_interrupt_code();
    return st ? cli_data_error(err.msg[0] ? err.msg : "NaN logits") : 0;
}

static void print_profile(const char *title, const sm_profile *p, size_t tokens, bool json) {
    double total = 0;
    for (int k = 0; k < SM_OP_COUNT; k++) total += p->s[k];
    if (!json) printf("%s\n  %-11s %7s %11s %9s %9s\n", title, "step", "share", "ms/token", "GFLOPS", "GB/s");
    for (int k = 0; k < SM_OP_COUNT; k++) {
        double s = p->s[k], gf = s > 0 ? p->flops[k] / s / 1e9 : 0, gb = s > 0 ? p->bytes[k] / s / 1e9 : 0;
        double share = total > 0 ? 100 * s / total : 0, ms = tokens ? s * 1e3 / (double)tokens : 0;
        if (json)
            printf("%s\"%s\":{\"share\":%.2f,\"ms_per_token\":%.4f,\"gflops\":%.2f,\"gb_per_s\":%.2f}",
                   k ? "," : "", sm_op_name((sm_op)k), share, ms, gf, gb);
        else if (p->flops[k] > 0 || p->bytes[k] > 0)
            printf("  %-11s %6.1f%% %11.4f %9.1f %9.1f\n", sm_op_name((sm_op)k), share, ms, gf, gb);
        else
            printf("  %-11s %6.1f%% %11.4f %9s %9s\n", sm_op_name((sm_op)k), share, ms, "", "");
    }
}

/* A flat list of the numbers in a bench --json report: "a.b.c" -> value. */
static void flatten(const cJSON *o, const char *prefix, char (*keys)[96], double *vals, size_t *n,
                    size_t cap) {
    for (const cJSON *e = o->child; e && *n < cap; e = e->next) {
        char key[96];
        snprintf(key, sizeof key, "%s%s%s", prefix, *prefix ? "." : "", e->string ? e->string : "");
        if (cJSON_IsObject(e)) {
            flatten(e, key, keys, vals, n, cap);
        } else if (cJSON_IsNumber(e)) {
            snprintf(keys[*n], sizeof keys[*n], "%s", key);
            vals[(*n)++] = e->valuedouble;
        }
    }
}

/* bench --compare A.json B.json: every number of A beside B's, and B / A. */
static int bench_compare(const cli_opts *o) {
    if (o->n_args != 2)
        return cli_usage_error(o, "--compare takes two bench --json reports (got %zu files)", o->n_args);
    enum { CAP = 256 };
    static char keys[2][CAP][96];
    static double vals[2][CAP];
    size_t n[2] = {0, 0};
    for (int f = 0; f < 2; f++) {
        char *text;
        size_t len;
        int rc = cli_read_all(o->args[f], &text, &len);
        if (rc) return rc;
        cJSON *root;
        sm_error err = {{0}};
        sm_status st = sm_json_parse_strict(text, len, o->args[f], &root, &err);
        free(text);
        if (st) return cli_data_error(err.msg);
        if (!cJSON_IsObject(root) || !cJSON_GetObjectItemCaseSensitive(root, "decode_tokens_per_s")) {
            cJSON_Delete(root);
            fprintf(stderr, "smallmind: %s: not a bench --json report (no decode_tokens_per_s)\n",
                    o->args[f]);
            return EXIT_DATA;
        }
        flatten(root, "", keys[f], vals[f], &n[f], CAP);
        cJSON_Delete(root);
    }
    printf("%-36s %14s %14s %8s\n", "", "A", "B", "B/A");
    printf("%-36s %14.14s %14.14s\n", "", o->args[0], o->args[1]);
    for (size_t i = 0; i < n[0]; i++) {
        size_t k = 0;
        while (k < n[1] && strcmp(keys[1][k], keys[0][i]) != 0) k++;
        if (k == n[1]) {
            printf("%-36s %14.4g %14s\n", keys[0][i], vals[0][i], "-");
            continue;
        }
        double a = vals[0][i], b = vals[1][k];
        char ratio[24] = "-";
        if (a != 0) snprintf(ratio, sizeof ratio, "%.3f", b / a);
        printf("%-36s %14.4g %14.4g %8s\n", keys[0][i], a, b, ratio);
    }
    cli_out os = {0};
    return cli_finish_stdout(&os, 0);
}

/*
** bench: P prompt tokens prefilled in one call, then N tokens decoded one
** at a time with generate's default sampler (or --temp/--top-k/--top-p's), best of --reps after
** an untimed prefill of the P tokens (the weights faulted in, as llama-bench warms up); heap
** allocations counted over the decoding; then one profiled run (time per
** step, GFLOPS, GB/s) and the machine's memory bandwidth (triad) with the
** rate it gives for this model (an estimate: the triad also writes), and the read bandwidth over the
** working set of one decode step with the bound that gives.
*/
int cli_bench(const cli_opts *o) {
    if (o->pick || o->peaks) {
        const char *mode = o->pick ? "--pick-kernels" : "--peaks";
        if (o->pick && o->peaks) return cli_usage_error(o, "--pick-kernels and --peaks are two runs: one at a time");
        if (o->compare || o->n_args) return cli_usage_error(o, "%s takes no model, reports or arguments", mode);
        return o->pick ? cli_bench_pick(o) : cli_bench_peaks(o);
    }
    if (o->compare || o->n_args) {
        if (!o->compare) return cli_usage_error(o, "unexpected argument '%s'", o->args[0]);
        return bench_compare(o);
    }
    /* generate's sampler; --temp 0 is greedy, as a peer's benchmark that takes the argmax */
    sm_sampler_params spar = cli_sampling(o, cli_seed(o->seed));
    cli_runner r;
    size_t P = (size_t)o->prompt_tokens;
    cli_run_spec spec = {.max_batch = P, .n_seq = 1, .sampling = &spar, .n_samplers = 1,
                         .build_state = true};
    int rc = cli_runner_init(&r, o, &spec);
    if (rc) return rc;
    cli_exit_now = 1; /* nothing is printed until the end: a signal exits at once */
    size_t N = (size_t)o->max_tokens;
    if (P > r.ls->sp.n_ctx) P = r.ls->sp.n_ctx;
    if (P + N > r.ls->sp.n_ctx) N = r.ls->sp.n_ctx - P;
    size_t V = (size_t)r.lm->tok.n_vocab;
    for (size_t i = 0; i < P; i++) r.ls->tokens[i] = (int32_t)((i * 7919 + 13) % V);
    double best_pf = 1e30, best_dec = 1e30, t_pf, t_dec;
    size_t allocs = 0, a;
    /* an untimed warm-up, as llama-bench makes: the first pass faults the mapped weights in */
    rc = bench_run(&r, P, 0, NULL, NULL, &t_pf, &t_dec, &a);
    for (long rep = 0; rep < o->reps && !rc; rep++) {
        rc = bench_run(&r, P, N, NULL, NULL, &t_pf, &t_dec, &a);
        allocs += a;
        if (t_pf < best_pf) best_pf = t_pf;
        if (t_dec < best_dec) best_dec = t_dec;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru); /* before the triad's arrays */
    sm_profile pre, dec;
    if (rc || (rc = bench_run(&r, P, N, &pre, &dec, &t_pf, &t_dec, &a))) {
        cli_runner_free(&r);
        return rc;
    }
    double ttft = r.t_load + best_pf;
    const sm_config *c = sm_model_config(r.lm->model);
    double bw = sm_bench_triad(r.ls->pool), bpt = sm_bench_weight_bytes(c);
    double pf = (double)P / best_pf, dtps = N ? (double)N / best_dec : 0, bound = bw / bpt;
    /* the working set of a decode step: weights, and keys and values at the mean context */
    double ws = bpt + sm_bench_kv_bytes(c, (double)P + (double)N / 2, r.ls->sp.kv_type);
    double rbw = sm_bench_read(r.ls->pool, r.ls->sp.kernels, ws), rbound = rbw / ws;
    double apt = N ? (double)allocs / (double)(N * (size_t)o->reps) : 0;
    cli_exit_now = 0;
    char ops[256], cpu[64];
    sm_kernels_describe(r.ls->sp.kernels, ops, sizeof ops);
    sm_kernels_cpu_name(cpu, sizeof cpu);
    if (o->json) {
        fputs("{\"model\":\"", stdout);
        cli_json_string(stdout, (const unsigned char *)o->model, strlen(o->model));
        printf("\",\"kernels\":\"%s\",\"int8_products\":\"%s\",\"threads\":%d,\"kv_type\":\"%s\",\"prompt_tokens\":%zu,"
               "\"decode_tokens\":%zu,\"load_ms\":%.3f,\"prefill_tokens_per_s\":%.1f,"
               "\"decode_tokens_per_s\":%.1f,\"ms_per_token\":%.4f,\"first_token_ms\":%.3f,"
               "\"allocs_per_token\":%.3f,\"peak_rss_kb\":%ld,\"weight_bytes_per_token\":%.0f,"
               "\"bandwidth_gb_per_s\":%.2f,\"bound_tokens_per_s\":%.1f,\"of_bound\":%.3f,"
               "\"working_set_bytes\":%.0f,\"read_gb_per_s\":%.2f,\"read_bound_tokens_per_s\":%.1f,"
               "\"of_read_bound\":%.3f,\"temperature\":%g,\"top_k\":%d,\"top_p\":%g,",
               r.ls->sp.kernels->name, sm_kernels_int8_name(r.ls->sp.kernels), r.ls->sp.n_threads,
               sm_dtype_name(r.ls->sp.kv_type), P, N, r.t_load * 1e3, pf, dtps,
               dtps > 0 ? 1e3 / dtps : 0, ttft * 1e3, apt, ru.ru_maxrss, bpt, bw / 1e9, bound,
               bound > 0 ? dtps / bound : 0, ws, rbw / 1e9, rbound, rbound > 0 ? dtps / rbound : 0,
               (double)spar.temperature, spar.top_k, (double)spar.top_p);
        printf("\"kernels_per_op\":\"%s\",\"cpu\":\"%s\",", ops, cpu);
        fputs("\"profile\":{\"prefill\":{", stdout);
        print_profile("", &pre, P, true);
        fputs("},\"decode\":{", stdout);
        print_profile("", &dec, N, true);
        fputs("}}}\n", stdout);
    } else {
        char smp[96];
        if (spar.temperature <= 0.0f)
            snprintf(smp, sizeof smp, "greedy");
        else
            snprintf(smp, sizeof smp, "sampling at temperature %g, top-k %d, top-p %g", (double)spar.temperature,
                     spar.top_k, (double)spar.top_p);
        printf("model %s, %s kernels (int8 products: %s), %d threads, KV-cache %s, %s\n"
               "kernels        %s (CPU: %s)\n"
               "load           %8.2f ms\n"
               "prefill        %8.1f tokens/s (%zu tokens)\n"
               "decode         %8.1f tokens/s (%zu tokens, %.4f ms/token)\n"
               "first token    %8.2f ms (load + prefill)\n"
               "allocations    %8.3f per generated token (%zu in %ld x %zu tokens)\n"
               "peak RSS       %8ld KiB\n"
               "bandwidth      %8.2f GB/s (triad); %.1f MB of weights per token\n"
               "triad rate     %8.1f tokens/s, the weights at the triad's bandwidth (not a bound: the triad also\n"
               "                        writes, decode only reads; the read bound below is the bound)\n"
               "read bandwidth %8.2f GB/s over the %.1f MB a decode step reads (weights, KV)\n"
               "read bound     %8.1f tokens/s; decode is %.0f%% of it\n",
               o->model, r.ls->sp.kernels->name, sm_kernels_int8_name(r.ls->sp.kernels), r.ls->sp.n_threads, sm_dtype_name(r.ls->sp.kv_type), smp, ops, cpu, r.t_load * 1e3, pf, P, dtps, N,
               dtps > 0 ? 1e3 / dtps : 0, ttft * 1e3, apt, allocs, o->reps, N, ru.ru_maxrss,
               bw / 1e9, bpt / 1e6, bound, rbw / 1e9, ws / 1e6,
               rbound, rbound > 0 ? 100 * dtps / rbound : 0);
        print_profile("decode profile (one run; time per token, share of the forward + sampling):",
                      &dec, N, false);
        print_profile("prefill profile (time per prompt token):", &pre, P, false);
    }
    cli_runner_free(&r);
    cli_out os = {0};
    return cli_finish_stdout(&os, 0);
}
