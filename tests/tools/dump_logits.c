/*
** dump_logits.c -- test tool: writes the logits of every position of a token
** sequence as raw little-endian float32 (T, n_vocab) to stdout.
**
**   dump_logits MODEL_DIR KERNELS THREADS MODE TOKENS
**     KERNELS  scalar | avx2 | avx512 | auto
**     MODE     batch (one forward of all T tokens, the prefill path)
**              step  (one token per call against the KV-cache, the decode path)
**              chunk (forward calls of 5 tokens, so prefill continues a cache)
**     TOKENS   comma-separated ids
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sm_model.h"

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: dump_logits MODEL_DIR KERNELS THREADS batch|step|chunk TOKENS\n");
        return 2;
    }
    int32_t toks[4096];
    size_t T = 0;
    for (char *p = argv[5]; *p && T < 4096;) {
        toks[T++] = (int32_t)strtol(p, &p, 10);
        if (*p == ',') p++;
    }
    const sm_kernels *k = sm_kernels_select(argv[2]);
    if (!k) {
        fprintf(stderr, "kernels %s not available\n", argv[2]);
        return 3;
    }
    sm_error err = {{0}};
    sm_model *m;
    if (sm_model_load(&m, argv[1], true, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    const sm_config *c = sm_model_config(m);
    int nth = atoi(argv[3]);
    size_t chunk = strcmp(argv[4], "batch") == 0 ? T : strcmp(argv[4], "chunk") == 0 ? 5 : 1;
    const char *kv = getenv("SM_KV_TYPE"); /* "f16": an f16 KV-cache */
    sm_state_params sp = {.n_ctx = (size_t)c->n_ctx, .max_batch = chunk, .all_logits = true,
                          .n_threads = nth, .kernels = k,
                          .kv_type = kv && strcmp(kv, "f16") == 0 ? SM_DTYPE_F16 : SM_DTYPE_F32};
    sm_state_plan plan;
    sm_pool *pool;
    sm_arena arena;
    sm_state *s;
    if (sm_state_plan_bytes(m, &sp, &plan, &err) || sm_pool_create(&pool, nth) ||
        sm_arena_init(&arena, plan.total) || sm_state_init(&s, m, &sp, pool, &arena, &err)) {
        fprintf(stderr, "setup failed: %s\n", err.msg);
        return 1;
    }
    for (size_t done = 0; done < T; done += chunk) {
        size_t n = T - done < chunk ? T - done : chunk;
        const float *logits;
        if (sm_state_forward(s, toks + done, n, done, &logits, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
        fwrite(logits, sizeof(float), n * (size_t)c->n_vocab, stdout);
    }
    sm_arena_free(&arena);
    sm_pool_free(pool);
    sm_model_free(m);
    return 0;
}
