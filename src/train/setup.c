/*
** setup.c -- the trainer's shape checks, hyperparameters and learning-rate
** schedule, its parameter layout (the manifest a checkpoint is written by),
** the carving of its one arena, weight initialisation, create and free.
** The arithmetic of a step is train.c.
*/
#include "train_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sm_train_hparams_default(sm_train_hparams *hp) {
    hp->batch = 16;
    hp->steps = 1000;
    hp->warmup = 100;
    hp->lr = 1e-3f;
    hp->lr_min = 1e-4f;
    hp->weight_decay = 0.1f;
    hp->grad_clip = 1.0f;
    hp->beta1 = 0.9f;
    hp->beta2 = 0.95f;
    hp->adam_eps = 1e-8f;
    hp->seed = 1337;
}

double sm_train_lr(const sm_train_hparams *hp, int s) {
    if (s < hp->warmup) return (double)hp->lr * (s + 1) / hp->warmup;
    int span = hp->steps - hp->warmup;
    double progress = span > 0 ? (double)(s - hp->warmup) / span : 1.0;
    if (progress > 1) progress = 1;
    return hp->lr_min + 0.5 * (1 + cos(M_PI * progress)) * ((double)hp->lr - hp->lr_min);
}



sm_status sm_train_check(const sm_config *c, const sm_train_hparams *hp, sm_error *err) {
    if (c->arch != SM_ARCH_GPT2 || c->n_vocab != 256 || c->tokenizer != SM_TOKENIZER_BYTE)
        return sm_error_set(err, SM_ERR_UNSUPPORTED, "train makes gpt2 models with the byte vocabulary");
    if (c->n_ff && c->n_ff != 4 * c->n_embd)
        return sm_error_set(err, SM_ERR_UNSUPPORTED, "train makes MLPs 4 times the width (n_ff)");
    if (c->activation != SM_ACT_GELU_TANH)
        return sm_error_set(err, SM_ERR_UNSUPPORTED, "train supports the gelu_tanh activation only");
    if (c->n_layer < 1 || c->n_layer > 64)
        return sm_error_set(err, SM_ERR_INPUT, "--layers %d is outside 1..64", c->n_layer);
    if (c->n_head < 1 || c->n_embd < 1 || c->n_embd > 4096 || c->n_embd % c->n_head)
        return sm_error_set(err, SM_ERR_INPUT,
                            "--embd %d must be 1..4096 and a multiple of --heads %d", c->n_embd,
                            c->n_head);
    if (c->n_ctx < 2 || c->n_ctx > 4096)
        return sm_error_set(err, SM_ERR_INPUT, "--ctx %d is outside 2..4096", c->n_ctx);
    if (!(c->norm_eps > 0 && c->norm_eps < 1))
        return sm_error_set(err, SM_ERR_INPUT, "norm_eps must be in (0, 1)");
    if (hp->batch < 1 || hp->batch > 4096)
        return sm_error_set(err, SM_ERR_INPUT, "--batch %d is outside 1..4096", hp->batch);
    if (hp->steps < 0)
        return sm_error_set(err, SM_ERR_INPUT, "--steps %d is negative", hp->steps);
    if (hp->warmup < 0)
        return sm_error_set(err, SM_ERR_INPUT, "--warmup %d is negative", hp->warmup);
    if (!(hp->lr > 0 && hp->lr <= 10))
        return sm_error_set(err, SM_ERR_INPUT, "--lr %g must be in (0, 10]", (double)hp->lr);
    if (!(hp->lr_min >= 0 && hp->lr_min <= hp->lr))
        return sm_error_set(err, SM_ERR_INPUT, "--lr-min %g must be in [0, --lr]",
                            (double)hp->lr_min);
    if (!(hp->weight_decay >= 0 && hp->weight_decay < 100))
        return sm_error_set(err, SM_ERR_INPUT, "--weight-decay %g must be in [0, 100)",
                            (double)hp->weight_decay);
    if (!(hp->grad_clip >= 0 && hp->grad_clip < 1e30f))
        return sm_error_set(err, SM_ERR_INPUT, "--grad-clip %g must be >= 0 (0 = off)",
                            (double)hp->grad_clip);
    if (!(hp->beta1 >= 0 && hp->beta1 < 1 && hp->beta2 >= 0 && hp->beta2 < 1 &&
          hp->adam_eps > 0 && hp->adam_eps < 1))
        return sm_error_set(err, SM_ERR_INPUT, "Adam betas must be in [0, 1) and eps in (0, 1)");
    return SM_OK;
}


size_t sm_trainer_arena_bytes(const sm_trainer *t) {
    return t->arena.size;
}
size_t sm_trainer_params(const sm_trainer *t) {
    return t->n_params;
}
int sm_trainer_step_index(const sm_trainer *t) {
    return t->step;
}
const sm_config *sm_trainer_shape(const sm_trainer *t) {
    return &t->cfg;
}

/* ---- layout and creation ----------------------------------------------- */

/* Appends a tensor to the manifest; returns its offset in floats. */
static size_t add_tensor(sm_trainer *t, size_t *at, const char *name, int64_t d0, int64_t d1,
                         bool decay) {
    size_t i = t->cfg.n_tensors++;
    sm_tensor_desc *d = &t->cfg.tensors[i];
    snprintf(d->name, sizeof d->name, "%s", name);
    d->dtype = SM_DTYPE_F32;
    d->ndim = d1 ? 2 : 1;
    d->shape[0] = d0;
    d->shape[1] = d1;
    size_t n = (size_t)d0 * (size_t)(d1 ? d1 : 1);
    d->nelem = n;
    d->nbytes = n * sizeof(float);
    d->file = 0;
    *at = (*at + 15) & ~(size_t)15; /* 64-byte aligned in the file as in memory */
    d->offset = 64 + *at * sizeof(float);
    t->offset[i] = *at;
    t->decay[i] = decay;
    t->n_params += n;
    size_t off = *at;
    *at += n;
    return off;
}

static void layout(sm_trainer *t) {
    const sm_config *c = &t->cfg;
    int64_t C = c->n_embd, V = c->n_vocab;
    size_t at = 0;
    char nm[SM_NAME_MAX];
    t->cfg.n_tensors = 0;
    t->n_params = 0;
    t->wte = add_tensor(t, &at, "tok_embd", V, C, true);
    t->wpe = add_tensor(t, &at, "pos_embd", c->n_ctx, C, true);
    for (int l = 0; l < c->n_layer; l++) {
        train_layer *L = &t->layers[l];
#define T_(field, suffix, d0, d1, decay, is_bias)                                        \
    do {                                                                               \
        snprintf(nm, sizeof nm, "blk.%d.%s", l, suffix);                              \
        L->field = (is_bias && !c->bias) ? SM_NO_TENSOR : add_tensor(t, &at, nm, d0, d1, decay); \
    } while (0)
        T_(ln1_g, "ln1.weight", C, 0, false, false);
        T_(ln1_b, "ln1.bias", C, 0, false, true);
        T_(qkv_w, "attn_qkv.weight", 3 * C, C, true, false);
        T_(qkv_b, "attn_qkv.bias", 3 * C, 0, false, true);
        T_(proj_w, "attn_out.weight", C, C, true, false);
        T_(proj_b, "attn_out.bias", C, 0, false, true);
        T_(ln2_g, "ln2.weight", C, 0, false, false);
        T_(ln2_b, "ln2.bias", C, 0, false, true);
        T_(up_w, "mlp_up.weight", 4 * C, C, true, false);
        T_(up_b, "mlp_up.bias", 4 * C, 0, false, true);
        T_(down_w, "mlp_down.weight", C, 4 * C, true, false);
        T_(down_b, "mlp_down.bias", C, 0, false, true);
#undef T_
    }
    t->lnf_g = add_tensor(t, &at, "ln_f.weight", C, 0, false);
    t->lnf_b = c->bias ? add_tensor(t, &at, "ln_f.bias", C, 0, false) : SM_NO_TENSOR;
    t->out_w = c->tied_output ? t->wte : add_tensor(t, &at, "output.weight", V, C, true);
    t->n_floats = at;
}

/* Carves every buffer; on a measuring arena only adds up sizes. */
static void carve(sm_trainer *t, sm_arena *a) {
    const sm_config *c = &t->cfg;
    size_t C = (size_t)c->n_embd, BT = t->B * t->T, L = (size_t)c->n_layer;
    size_t H = (size_t)c->n_head, V = (size_t)c->n_vocab, hs = C / H;
    t->params = sm_arena_alloc(a, t->n_floats, 4);
    t->grads = sm_arena_alloc(a, t->n_floats, 4);
    t->m = sm_arena_alloc(a, t->n_floats, 4);
    t->v = sm_arena_alloc(a, t->n_floats, 4);
    t->n_chunks = (t->n_floats + SM_TRAIN_NORM_CHUNK - 1) / SM_TRAIN_NORM_CHUNK;
    t->norm_part = sm_arena_alloc(a, t->n_chunks, sizeof(double));
    t->tokens = sm_arena_alloc(a, BT, sizeof(int32_t));
    t->targets = sm_arena_alloc(a, BT, sizeof(int32_t));
    t->res = sm_arena_alloc(a, (L + 1) * BT * C, 4);
    for (size_t l = 0; l < L; l++) {
        train_acts *A = &t->acts[l];
        A->ln1 = sm_arena_alloc(a, BT * C, 4);
        A->ln1_mu = sm_arena_alloc(a, BT, 4);
        A->ln1_rs = sm_arena_alloc(a, BT, 4);
        A->qkv = sm_arena_alloc(a, BT * 3 * C, 4);
        A->probs = sm_arena_alloc(a, t->B * H * sm_train_causal_floats(t->T), 4);
        A->atty = sm_arena_alloc(a, BT * C, 4);
        A->resm = sm_arena_alloc(a, BT * C, 4);
        A->ln2 = sm_arena_alloc(a, BT * C, 4);
        A->ln2_mu = sm_arena_alloc(a, BT, 4);
        A->ln2_rs = sm_arena_alloc(a, BT, 4);
        A->fch = sm_arena_alloc(a, BT * 4 * C, 4);
        A->fchg = sm_arena_alloc(a, BT * 4 * C, 4);
    }
    t->lnf = sm_arena_alloc(a, BT * C, 4);
    t->lnf_mu = sm_arena_alloc(a, BT, 4);
    t->lnf_rs = sm_arena_alloc(a, BT, 4);
    t->logits = sm_arena_alloc(a, BT * V, 4);
    t->losses = sm_arena_alloc(a, BT, 4);
    t->dres = sm_arena_alloc(a, BT * C, 4);
    t->dln = sm_arena_alloc(a, BT * C, 4);
    t->datty = sm_arena_alloc(a, BT * C, 4);
    t->dqkv = sm_arena_alloc(a, BT * 3 * C, 4);
    t->dfch = sm_arena_alloc(a, BT * 4 * C, 4);
    size_t wide = 4 * C > V ? 4 * C : V;
    t->ta = sm_arena_alloc(a, wide * BT, 4);
    t->tw = sm_arena_alloc(a, wide * (C + 1), 4);
    size_t per = sm_train_att_floats(t->T, hs, t->k->matmul_scratch);
    if (V > per) per = V;
    t->scratch_floats = (per + 15) & ~(size_t)15;
    t->scratch = sm_arena_alloc(a, (size_t)sm_pool_threads(t->pool) * t->scratch_floats, 4);
}

static double gauss(uint64_t seed, uint64_t i) {
    double u1 = ((double)(sm_train_splitmix(seed, 2 * i) >> 11) + 1) / 9007199254740993.0;
    double u2 = (double)(sm_train_splitmix(seed, 2 * i + 1) >> 11) / 9007199254740992.0;
    return sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
}

static void init_weights(sm_trainer *t) {
    uint64_t seed = t->hp.seed ^ 0x5eed5eed5eed5eedull, k = 0;
    float resid = 0.02f / sqrtf(2.0f * (float)t->cfg.n_layer);
    memset(t->params, 0, t->n_floats * sizeof(float));
    for (size_t i = 0; i < t->cfg.n_tensors; i++) {
        const sm_tensor_desc *d = &t->cfg.tensors[i];
        float *p = t->params + t->offset[i];
        size_t n = d->nbytes / sizeof(float);
        const char *dot = strrchr(d->name, '.');
        bool norm = strstr(d->name, "ln") && dot && strcmp(dot, ".weight") == 0;
        bool bias = dot && strcmp(dot, ".bias") == 0;
        if (norm) {
            for (size_t j = 0; j < n; j++) p[j] = 1.0f;
        } else if (!bias) {
            bool res = strstr(d->name, "attn_out") || strstr(d->name, "mlp_down");
            float sd = res ? resid : 0.02f;
            for (size_t j = 0; j < n; j++) p[j] = (float)(sd * gauss(seed, k++));
        }
    }
}

sm_status sm_trainer_create(sm_trainer **out, const sm_config *shape, const sm_train_hparams *hp,
                            const uint8_t *text, size_t n_train, size_t n_val,
                            const sm_kernels *k, sm_pool *pool, sm_error *err) {
    *out = NULL;
    sm_status st = sm_train_check(shape, hp, err);
    if (st) return st;
    if (n_train < (size_t)shape->n_ctx + 2)
        return sm_error_set(err, SM_ERR_INPUT,
                            "the training text has %zu bytes; it needs more than the context "
                            "(%d) plus 1",
                            n_train, shape->n_ctx);
    sm_trainer *t = calloc(1, sizeof *t);
    if (!t) return sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    t->cfg = *shape;
    t->cfg.n_vocab = 256;
    t->cfg.n_files = 1;
    snprintf(t->cfg.files[0], SM_FILE_NAME_MAX, "model.bin");
    size_t max_tensors = 4 + 12 * (size_t)shape->n_layer + 2;
    t->cfg.tensors = calloc(max_tensors, sizeof *t->cfg.tensors);
    t->offset = calloc(max_tensors, sizeof *t->offset);
    t->decay = calloc(max_tensors, sizeof *t->decay);
    t->layers = calloc((size_t)shape->n_layer, sizeof *t->layers);
    t->acts = calloc((size_t)shape->n_layer, sizeof *t->acts);
    if (!t->cfg.tensors || !t->offset || !t->decay || !t->layers || !t->acts) {
        sm_trainer_free(t);
        return sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    }
    t->hp = *hp;
    t->k = k;
    t->pool = pool;
    t->text = text;
    t->n_train = n_train;
    t->n_val = n_val;
    t->B = (size_t)hp->batch;
    t->T = (size_t)shape->n_ctx;
    layout(t);
    sm_arena meas;
    sm_arena_measure(&meas);
    carve(t, &meas);
    if (meas.overflow) {
        sm_trainer_free(t);
        return sm_error_set(err, SM_ERR_NOMEM, "the training state's size overflows");
    }
    if (sm_arena_init(&t->arena, meas.used)) {
        size_t mib = meas.used >> 20;
        sm_trainer_free(t);
        return sm_error_set(err, SM_ERR_NOMEM,
                            "cannot allocate %zu MiB for training; lower --batch or --ctx", mib);
    }
    carve(t, &t->arena);
    SM_ASSERT(!t->arena.overflow);
    memset(t->grads, 0, t->n_floats * sizeof(float));
    memset(t->m, 0, t->n_floats * sizeof(float));
    memset(t->v, 0, t->n_floats * sizeof(float));
    init_weights(t);
    *out = t;
    return SM_OK;
}

void sm_trainer_free(sm_trainer *t) {
    if (!t) return;
    sm_arena_free(&t->arena);
    free(t->cfg.tensors);
    free(t->offset);
    free(t->decay);
    free(t->layers);
    free(t->acts);
    free(t);
}

