/*
** smallmind_internal.h -- what the library face's objects hold (for the
** CLI, which is built on the face and reaches through it for what the face
** does not offer: bench, score, train, the chat terminal).
*/
#ifndef SMALLMIND_INTERNAL_H
#define SMALLMIND_INTERNAL_H

#include "smallmind.h"

#include "sm_arena.h"
#include "sm_chat.h"
#include "sm_generate.h"
#include "sm_model.h"
#include "sm_pool.h"
#include "sm_prefix.h"
#include "sm_sampler.h"
#include "sm_sched.h"
#include "sm_source.h"
#include "sm_tokenizer.h"

struct smallmind_model {
    sm_model *model;   /* owns its source */
    sm_tokenizer tok;
    sm_chat chat;      /* the model's template, parsed at first use */
    bool chat_ready;
};

/*
** What sm_face_session_new carves beyond the face's own needs: the CLI's
** runs ask for more samplers, all logits, a wider batch or a scheduler
** that reports to them.
*/
typedef struct sm_face_layout {
    size_t max_batch;             /* most tokens one forward call takes (0: 512) */
    size_t n_samplers;            /* samplers carved */
    bool all_logits;              /* logits for every token of a call */
    const sm_sampler_params *sampling; /* the samplers' settings (NULL: the defaults) */
    bool no_state;                /* plan only: no threads, no arena (info) */
    const sm_sched_params *sched; /* a scheduler reporting to these, instead of the face's
                                     (copied; tok NULL: the model's tokenizer) */
    bool no_sched;                /* no scheduler at all */
    size_t seq_max;               /* more than n_parallel: as many sequences as sm_face_auto_seq
                                     gives (a batch job's default) */
} sm_face_layout;

/*
** The most sequences of seq_max, seq_max / 2, ... (more than sp->n_seq)
** whose KV-cache at sp's context fits in budget bytes; sp->n_seq when none
** does. sm_face_session_new takes it with a quarter of sm_mem_limit().
*/
size_t sm_face_auto_seq(const sm_model *model, const sm_state_params *sp, size_t seq_max, size_t budget);

struct smallmind_session {
    smallmind_model *m;
    sm_state_params sp;       /* sp.kernels: the table the session runs */
    sm_state_plan plan;
    sm_pool *pool;
    sm_arena arena;
    sm_state *state;
    sm_sampler *samplers;
    size_t n_samplers;
    int32_t *tokens;          /* n_ctx: a prompt's ids */
    sm_sched *sched;
    sm_sched_params sched_params;
    size_t prefix_bytes;      /* the prefix cache's budget (0: none) */
    sm_prefix *prefix;        /* the scheduler's prefix cache, or NULL */
    volatile int cancel;
    /* the batch smallmind_run_batch runs */
    smallmind_done_fn done;
    void *done_user;
    bool stop;
};

/* smallmind_session_new with a layout (NULL: the face's own); messages as the face's. */
smallmind_status sm_face_session_new(smallmind_session **out, smallmind_model *m,
                                     const smallmind_session_params *p, const sm_face_layout *layout,
                                     smallmind_error *err);
/* Carves the session's state, samplers, prompt buffer and scheduler from a (measuring or real). */
sm_status sm_face_carve(smallmind_session *s, const sm_face_layout *layout, sm_arena *a, sm_error *err);
/* The model's chat template, parsed once (template text may replace it: NULL keeps the model's). */
sm_status sm_face_chat(smallmind_model *m, const char *text, size_t len, const char *name,
                       const char *model_name, sm_error *err);

#endif
