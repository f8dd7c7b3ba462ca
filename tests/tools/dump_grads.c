/*
** dump_grads -- analytic gradients of one batch, for tests/test_train.py.
**
**   dump_grads OUT KERNELS THREADS n_layer n_head n_embd n_ctx batch tied bias seed
**
** Builds a trainer of that shape, sets every parameter to random values of
** order one (so no layer's gradient is degenerate), runs forward and backward
** on random tokens, and writes OUT as a model directory plus grads.bin (the
** gradient of every tensor, float32, manifest order) and batch.txt (tokens,
** targets, loss).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sm_train.h"

static uint64_t rng = 88172645463325252ull;
static double uni(void) { /* xorshift64 in [-1, 1) */
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 4503599627370496.0 - 1.0;
}

int main(int argc, char **argv) {
    if (argc != 12) {
        fprintf(stderr, "usage: dump_grads OUT KERNELS THREADS L H C T B tied bias seed\n");
        return 2;
    }
    const char *out = argv[1];
    const sm_kernels *k = sm_kernels_select(argv[2]);
    int nth = atoi(argv[3]);
    sm_config shape = {0};
    shape.arch = SM_ARCH_GPT2;
    shape.activation = SM_ACT_GELU_TANH;
    shape.tokenizer = SM_TOKENIZER_BYTE;
    shape.n_vocab = 256;
    shape.norm_eps = 1e-5f;
    shape.n_layer = atoi(argv[4]);
    shape.n_head = atoi(argv[5]);
    shape.n_embd = atoi(argv[6]);
    shape.n_ctx = atoi(argv[7]);
    shape.tied_output = atoi(argv[9]) != 0;
    shape.bias = atoi(argv[10]) != 0;
    sm_train_hparams hp;
    sm_train_hparams_default(&hp);
    hp.batch = atoi(argv[8]);
    rng ^= strtoull(argv[11], NULL, 10) * 0x9E3779B97F4A7C15ull;
    if (!k) {
        fprintf(stderr, "dump_grads: kernels %s unavailable\n", argv[2]);
        return 2;
    }
    static uint8_t text[4096];
    for (size_t i = 0; i < sizeof text; i++) text[i] = (uint8_t)(uni() * 128 + 128);
    sm_pool *pool;
    sm_trainer *t;
    sm_error err = {{0}};
    if (sm_pool_create(&pool, nth) ||
        sm_trainer_create(&t, &shape, &hp, text, sizeof text, 0, k, pool, &err)) {
        fprintf(stderr, "dump_grads: %s\n", err.msg);
        return 1;
    }
    const sm_config *c = sm_trainer_shape(t);
    for (size_t i = 0; i < c->n_tensors; i++) {
        size_t n;
        const char *name = c->tensors[i].name;
        float *p = sm_trainer_tensor(t, name, false, &n);
        bool gain = strstr(name, "ln") && strstr(name, ".weight");
        bool bias = strstr(name, ".bias") != NULL;
        for (size_t j = 0; j < n; j++)
            p[j] = (float)(gain ? 1 + 0.3 * uni() : bias ? 0.2 * uni() : 0.5 * uni());
    }
    size_t BT = (size_t)hp.batch * (size_t)shape.n_ctx;
    int32_t *tok = malloc(BT * sizeof *tok), *tgt = malloc(BT * sizeof *tgt);
    for (size_t i = 0; i < BT; i++) {
        tok[i] = (int32_t)((uni() + 1) * 128) & 255;
        tgt[i] = (int32_t)((uni() + 1) * 128) & 255;
    }
    double loss;
    if (sm_trainer_grad(t, tok, tgt, &loss, &err) || sm_trainer_save(t, out, NULL, 0, &err)) {
        fprintf(stderr, "dump_grads: %s\n", err.msg);
        return 1;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/grads.bin", out);
    FILE *f = fopen(path, "wb");
    for (size_t i = 0; f && i < c->n_tensors; i++) {
        size_t n;
        const float *g = sm_trainer_tensor(t, c->tensors[i].name, true, &n);
        fwrite(g, sizeof *g, n, f);
    }
    if (f) fclose(f);
    snprintf(path, sizeof path, "%s/batch.txt", out);
    f = fopen(path, "w");
    if (!f) return 1;
    for (size_t i = 0; i < BT; i++) fprintf(f, "%d%c", tok[i], i + 1 < BT ? ' ' : '\n');
    for (size_t i = 0; i < BT; i++) fprintf(f, "%d%c", tgt[i], i + 1 < BT ? ' ' : '\n');
    fprintf(f, "%.17g\n", loss);
    fclose(f);
    free(tok);
    free(tgt);
    sm_trainer_free(t);
    sm_pool_free(pool);
    return 0;
}
