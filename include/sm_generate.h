/*
** sm_generate.h -- the autoregressive loop.
**
** prompt -> one batched prefill (in max_batch chunks) -> sample -> one token
** per step against the KV-cache -> stop. Text leaves through a callback, in
** whole UTF-8 characters (bytes of a character split across tokens are held
** until it is complete). Never prints, never allocates.
*/
#ifndef SM_GENERATE_H
#define SM_GENERATE_H

#include "sm_model.h"
#include "sm_sampler.h"
#include "sm_tokenizer.h"

typedef enum {
    SM_FINISH_LENGTH = 0,  /* max_tokens generated or the context is full */
    SM_FINISH_EOS,         /* the model produced its end-of-sequence token */
    SM_FINISH_STOP,        /* the text reached a stop string (not emitted) */
    SM_FINISH_ABORTED,     /* the emit callback asked to stop */
    SM_FINISH_INTERRUPTED  /* *cancel became non-zero */
} sm_finish;

#define SM_STOP_MAX 8        /* stop strings at most */
#define SM_STOP_MAX_BYTES 64 /* bytes of one stop string at most */

const char *sm_finish_str(sm_finish f);

/* Receives generated text; return non-zero to stop generating. */
typedef int (*sm_emit_fn)(void *user, const char *text, size_t len);

typedef struct sm_gen_params {
    size_t max_tokens;          /* tokens to generate at most */
    const volatile int *cancel; /* polled once per token; may be NULL */
    /* Stop strings (1..SM_STOP_MAX_BYTES bytes each): generation ends where
       the text first contains one; text up to it is emitted, it is not. Text
       that could still become a stop string is held back until it cannot. */
    const char *const *stop;
    size_t n_stop; /* 0..SM_STOP_MAX */
} sm_gen_params;

typedef struct sm_gen_stats {
    size_t n_prompt, n_generated;
    double t_prefill, t_decode; /* seconds */
    sm_finish finish;
    bool context_full; /* with SM_FINISH_LENGTH: the context, not max_tokens, ended it */
} sm_gen_stats;

/*
** Runs the loop on state s, whose cache is empty. n_prompt must be >= 1 and
** fit the context (the caller reports an over-long prompt with both counts).
** SM_ERR_RUNTIME with a message if the logits go NaN; SM_ERR_INPUT for bad
** stop strings.
*/
sm_status sm_generate(sm_state *s, const sm_tokenizer *tok,
                      sm_sampler *smp, const int32_t *prompt, size_t n_prompt,
                      const sm_gen_params *gp, sm_emit_fn emit, void *user, sm_gen_stats *stats,
                      sm_error *err);

#endif
