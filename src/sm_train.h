/*
** sm_train.h -- training a GPT-2-shaped byte-level model on one text.
**
** A trainer owns every buffer of a run in one arena planned at creation:
** parameters, gradients, AdamW moments, the activations of one batch kept
** for the backward pass, and per-thread scratch. A step never allocates.
**
** The batch of step s is a pure function of (seed, s): sequence b starts at
** byte splitmix64(seed, s * batch + b) mod (n_train - n_ctx) of the training
** part. With the parameters and moments saved in a checkpoint, a resumed run
** therefore continues bit for bit. Every reduction runs in a fixed order, so
** results are also the same for any thread count.
**
** Usage:
**   sm_trainer_create(&t, &shape, &hp, text, n_train, n_val, kernels, pool, &err);
**   while (sm_trainer_step_index(t) < hp.steps) sm_trainer_step(t, &stats, &err);
**   sm_trainer_save(t, "out", csv, csv_len, &err);
*/
#ifndef SM_TRAIN_H
#define SM_TRAIN_H

#include "sm_config.h"
#include "sm_kernels.h"
#include "sm_pool.h"

typedef struct sm_train_hparams {
    int batch;          /* sequences of n_ctx tokens per step */
    int steps;          /* total optimizer steps of the run */
    int warmup;         /* steps of linear warm-up to lr */
    float lr, lr_min;   /* peak rate, then cosine decay to lr_min at `steps` */
    float weight_decay; /* AdamW decay of matrices and embeddings (not biases, norms) */
    float grad_clip;    /* clip the global gradient L2 norm to this; 0 = off */
    float beta1, beta2, adam_eps;
    uint64_t seed;      /* weight initialisation and batch order */
} sm_train_hparams;

/* Defaults: batch 16, 1000 steps, warmup 100, lr 1e-3 -> 1e-4, decay 0.1,
** clip 1.0, betas 0.9/0.95, eps 1e-8, seed 1337. */
void sm_train_hparams_default(sm_train_hparams *hp);

/* Checks shape (gpt2, byte vocabulary, gelu_tanh) and hp; names the bad one. */
sm_status sm_train_check(const sm_config *shape, const sm_train_hparams *hp, sm_error *err);

typedef struct sm_trainer sm_trainer;

typedef struct sm_train_stats {
    int step;         /* the step just taken (1-based) */
    double loss;      /* mean cross-entropy of its batch, nats per byte */
    double grad_norm; /* global L2 norm before clipping */
    double lr;        /* learning rate it used */
} sm_train_stats;

/*
** A trainer over `text`: bytes [0, n_train) train, [n_train, n_train + n_val)
** are held out (n_val may be 0). text must outlive the trainer. Weights are
** initialised from hp->seed (GPT-2 style: N(0, 0.02), residual projections
** scaled by 1/sqrt(2 n_layer), norms 1, biases 0). pool's thread count is
** used for every step.
*/
sm_status sm_trainer_create(sm_trainer **out, const sm_config *shape, const sm_train_hparams *hp,
                            const uint8_t *text, size_t n_train, size_t n_val,
                            const sm_kernels *k, sm_pool *pool, sm_error *err);
void sm_trainer_free(sm_trainer *t);

/* Bytes of the trainer's arena. */
size_t sm_trainer_arena_bytes(const sm_trainer *t);
/* Number of parameters. */
size_t sm_trainer_params(const sm_trainer *t);
/* Steps taken so far (0 for a new run). */
int sm_trainer_step_index(const sm_trainer *t);
/* The shape, with hp as created or resumed. */
const sm_config *sm_trainer_shape(const sm_trainer *t);
/* Learning rate of step s (0-based) under the schedule. */
double sm_train_lr(const sm_train_hparams *hp, int s);

/* One optimizer step on the batch of step sm_trainer_step_index(t). */
sm_status sm_trainer_step(sm_trainer *t, sm_train_stats *stats, sm_error *err);

/*
** Mean held-out loss (nats per byte) over n_seq sequences at evenly spaced
** offsets of the held-out part (the same ones every call). Returns a
** negative value when there is no held-out part.
*/
double sm_trainer_eval(sm_trainer *t, int n_seq);

/*
** Forward and backward on explicit tokens/targets (batch * n_ctx each),
** leaving gradients in place, no update; *loss is the mean cross-entropy.
** For gradient checks.
*/
sm_status sm_trainer_grad(sm_trainer *t, const int32_t *tokens, const int32_t *targets,
                          double *loss, sm_error *err);

/* Parameter and gradient of tensor `name` (model-format names); NULL if none. */
float *sm_trainer_tensor(sm_trainer *t, const char *name, bool grad, size_t *n);

/*
** Writes a complete model directory plus optimizer state (optimizer.bin,
** train.json) and, if csv is non-NULL, loss.csv, into a temporary sibling of
** dir and then swaps it in with a rename, so dir is never half-written. An
** existing dir is replaced only if it is a previous checkpoint (it has
** optimizer.bin) or empty; anything else is refused.
*/
sm_status sm_trainer_save(const sm_trainer *t, const char *dir, const char *csv, size_t csv_len,
                          sm_error *err);

/* SM_OK if dir is missing, empty or a checkpoint: what sm_trainer_save may replace. */
sm_status sm_checkpoint_writable(const char *dir, sm_error *err);

/*
** Reads the shape, hyperparameters and step of a checkpoint directory
** without loading it; data_bytes/data_hash identify the text it trained on.
*/
typedef struct sm_checkpoint_info {
    sm_config shape; /* hyperparameters only; tensors NULL */
    sm_train_hparams hp;
    int step;
    uint64_t n_train, n_val, data_hash;
} sm_checkpoint_info;
sm_status sm_checkpoint_peek(const char *dir, sm_checkpoint_info *info, sm_error *err);

/* Restores parameters, moments and step from a checkpoint of the same shape. */
sm_status sm_trainer_load(sm_trainer *t, const char *dir, sm_error *err);

#endif
