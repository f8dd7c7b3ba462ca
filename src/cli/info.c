/*
** info.c -- `smallmind info`: a model's architecture, size, tokenizer, weight
** types and the memory plan of a run (nothing is carved).
*/
#include "cli.h"
#include "sm_gguf.h"
#include "sm_source.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>

static void print_bytes(const char *label, size_t b) {
    printf("  %-12s %12zu bytes (%.2f MiB)\n", label, b, (double)b / (1 << 20));
}

int cli_info(const cli_opts *o) {
    sm_sampler_params spar = {.top_p = 1};
    cli_runner r;
    cli_run_spec spec = {.max_batch = 512, .n_seq = 1, .sampling = &spar, .n_samplers = 1};
    int rc = cli_runner_init(&r, o, &spec);
    if (rc) return rc;
    const sm_config *c = sm_model_config(r.lm->model);
    sm_arena meas;
    sm_arena_measure(&meas);
    sm_error err;
    cli_runner_carve(&r, &meas, &err);
    printf("model:        %s\n", o->model);
    printf("architecture: %s\n", sm_arch_name(c->arch));
    printf("layers %d, heads %d, embedding %d, head size %d, context %d, vocabulary %d\n",
           c->n_layer, c->n_head, c->n_embd, c->head_dim, c->n_ctx, c->n_vocab);
    printf("activation %s, norm_eps %g, output layer %s, biases %s\n",
           sm_activation_name(c->activation), (double)c->norm_eps,
           c->tied_output ? "tied to the token embedding" : "separate", c->bias ? "yes" : "no");
    if (c->arch == SM_ARCH_LLAMA)
        printf("feed-forward %d, key/value heads %d, rope base %g\n", c->n_ff, c->n_kv_head,
               (double)c->rope_theta);
    printf("tokenizer:    %s (%d ids), bos %d, eos %d%s\n", sm_tokenizer_type_name(c->tokenizer),
           r.lm->tok.n_vocab, (int)c->tok_bos, (int)c->tok_eos, r.lm->tok.add_bos ? ", adds BOS" : "");
    const sm_source *src = sm_model_source(r.lm->model);
    const sm_gguf *g = src->kind == SM_SOURCE_GGUF ? &src->gguf : NULL;
    if (g) { /* the metadata that matters beside what the lines above show */
        printf("GGUF:         version %u, %zu tensors, %zu metadata entries, alignment %zu\n",
               g->version, g->n_tensors, g->n_kv, g->alignment);
        static const char *const keys[] = {"general.name", "general.file_type", "tokenizer.ggml.pre",
                                           "general.quantization_version", "tokenizer.chat_template"};
        for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
            const sm_gguf_kv *kv = sm_gguf_find(g, keys[k]);
            int64_t v;
            const char *str;
            size_t len;
            if (!kv) continue;
            if (sm_gguf_string(g, keys[k], &str, &len, NULL, o->model, &err) == SM_OK) {
                if (k == 4)
                    printf("  %-28s %zu bytes (for chat)\n", keys[k], len);
                else
                    printf("  %-28s %.*s\n", keys[k], (int)(len < 80 ? len : 80), str);
            } else if (sm_gguf_int(g, keys[k], INT64_MIN, INT64_MAX, &v, NULL, o->model, &err) == SM_OK) {
                printf("  %-28s %lld\n", keys[k], (long long)v);
            }
        }
    }
    printf("parameters:   %zu\n", sm_model_params(r.lm->model));
    char types[64] = "";
    size_t tl = 0;
    for (int d = 0; d < SM_DTYPE_COUNT; d++) { /* the dtypes present, by bytes */
        size_t bytes = 0;
        for (size_t i = 0; i < c->n_tensors; i++)
            if (c->tensors[i].dtype == (sm_dtype)d) bytes += c->tensors[i].nbytes;
        if (bytes)
            tl += (size_t)snprintf(types + tl, sizeof types - tl, "%s%s %.1f%%", tl ? ", " : "",
                                   sm_dtype_name((sm_dtype)d),
                                   100.0 * (double)bytes / (double)sm_model_weight_bytes(r.lm->model));
    }
    printf("weights:      %zu bytes (%.2f MiB: %s) in %d file%s, %s\n",
           sm_model_weight_bytes(r.lm->model), (double)sm_model_weight_bytes(r.lm->model) / (1 << 20),
           types, c->n_files, c->n_files == 1 ? "" : "s",
           o->no_mmap ? "read into memory" : "memory-mapped");
    size_t made = src->made_bytes;
    if (g && src->made_tensors)
        printf("copied:       %zu tensors, %zu bytes (%.2f MiB): the file's general.alignment (%zu) "
               "leaves them where the kernels cannot read them; the rest used in place\n",
               src->made_tensors, made, (double)made / (1 << 20), g->alignment);
    if (src->kind == SM_SOURCE_HF || src->kind == SM_SOURCE_LLAMA2C)
        printf("made at load: %zu bytes (%.2f MiB) of tensors transposed, fused or widened from the "
               "source; the rest used in place\n", made, (double)made / (1 << 20));
    printf("bits/weight:  %.2f\n", 8.0 * (double)sm_model_weight_bytes(r.lm->model) /
                                       (double)sm_model_params(r.lm->model));
    char ops[256], cpu[64];
    sm_kernels_describe(r.ls->sp.kernels, ops, sizeof ops);
    sm_kernels_cpu_name(cpu, sizeof cpu);
    printf("kernels:      %s (CPU: %s)\n", r.ls->sp.kernels->name, cpu);
    printf("operations:   %s\n", ops);
    unsigned rt = sm_kernels_repack_types(r.ls->sp.kernels), have = 0;
    for (size_t i = 0; i < c->n_tensors; i++)
        if (c->tensors[i].ndim == 2) have |= 1u << c->tensors[i].dtype; /* the matrices' types */
    if (rt & have) { /* those these kernels lay out at load */
        char lay[96];
        size_t ll = 0;
        for (unsigned t = 0; t < SM_DTYPE_COUNT && ll < sizeof lay; t++)
            if (rt & have & 1u << t)
                ll += (size_t)snprintf(lay + ll, sizeof lay - ll, "%s%s", ll ? ", " : "", sm_dtype_name((sm_dtype)t));
        if (o->no_repack) printf("repack:       off (--no-repack): %s matrices multiplied as stored\n", lay);
        else
            printf("repack:       %s matrices (rows in groups of 32) laid out once at load for these kernels "
                   "(--no-repack: as stored)\n", lay);
    }
    printf("memory plan (context %zu, batch %zu, %d thread%s), one arena:\n", r.ls->sp.n_ctx,
           r.ls->sp.max_batch, r.ls->sp.n_threads, r.ls->sp.n_threads == 1 ? "" : "s");
    print_bytes("arena", meas.used);
    print_bytes("kv-cache", r.ls->plan.kv_cache);
    print_bytes("activations", r.ls->plan.activations);
    print_bytes("logits", r.ls->plan.logits);
    print_bytes("scratch", r.ls->plan.scratch);
    print_bytes("sampler+prompt", meas.used - r.ls->plan.total);
    cli_runner_free(&r);
    cli_out os = {0};
    if (ferror(stdout)) os.write_errno = errno ? errno : EIO;
    return cli_finish_stdout(&os, 0);
}
