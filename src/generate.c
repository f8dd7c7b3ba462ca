/*
** generate.c -- prefill, sample, decode, stop; UTF-8-whole emission.
*/
#include "sm_generate.h"

#include <string.h>

const char *sm_finish_str(sm_finish f) {
    switch (f) {
    case SM_FINISH_LENGTH: return "length";
    case SM_FINISH_EOS: return "eos";
    case SM_FINISH_STOP: return "stop";
    case SM_FINISH_INTERRUPTED: return "interrupted";
    }
    return "?";
}

/* Bytes waiting for the rest of their UTF-8 character. */
typedef struct {
    unsigned char buf[64];
    size_t n;
} pending;

/* Appends a piece and emits every complete character; returns emit's verdict. */
static int push(pending *pd, const char *piece, size_t len, sm_emit_fn emit, void *user) {
    while (len > 0) {
        size_t room = sizeof pd->buf - pd->n, take = len < room ? len : room;
        memcpy(pd->buf + pd->n, piece, take);
        pd->n += take;
        piece += take;
        len -= take;
        size_t ready = sm_utf8_complete(pd->buf, pd->n);
        if (pd->n == sizeof pd->buf && ready == 0) ready = pd->n; /* cannot happen for UTF-8 */
        if (ready) {
            int stop = emit(user, (const char *)pd->buf, ready);
            memmove(pd->buf, pd->buf + ready, pd->n - ready);
            pd->n -= ready;
            if (stop) return stop;
        }
    }
    return 0;
}

sm_status sm_generate(sm_state *s, const sm_tokenizer *tok, sm_sampler *smp,
                      const int32_t *prompt, size_t n_prompt, const sm_gen_params *gp,
                      sm_emit_fn emit, void *user, sm_gen_stats *stats, sm_error *err) {
    const size_t n_ctx = sm_state_params_of(s)->n_ctx;
    memset(stats, 0, sizeof *stats);
    stats->n_prompt = n_prompt;
    if (n_prompt < 1 || n_prompt > n_ctx)
        return sm_error_set(err, SM_ERR_INPUT, "prompt is %zu tokens, context is %zu", n_prompt,
                            n_ctx);
    if (gp->max_tokens == 0) return SM_OK;

    const float *logits = NULL;
    double t0 = sm_time_now();
    sm_status st = sm_state_prefill(s, prompt, n_prompt, 0, &logits, err);
    if (st) return st;
    double t1 = sm_time_now();
    stats->t_prefill = t1 - t0;

    pending pd = {.n = 0};
    size_t pos = n_prompt;
    for (;;) {
        if (gp->cancel && *gp->cancel) {
            stats->finish = SM_FINISH_INTERRUPTED;
            break;
        }
        int32_t next;
        if (sm_sampler_sample(smp, logits, &next) != SM_OK) {
            st = sm_error_set(err, SM_ERR_RUNTIME,
                              "the model produced NaN or infinite logits at position %zu; "
                              "stopping (check the weights)",
                              pos);
            goto out;
        }
        if (next == tok->eos) {
            stats->finish = SM_FINISH_EOS;
            break;
        }
        stats->n_generated++;
        size_t len;
        const char *piece = sm_tokenizer_piece(tok, next, &len);
        if (push(&pd, piece, len, emit, user)) {
            stats->finish = SM_FINISH_STOP;
            break;
        }
        if (stats->n_generated == gp->max_tokens) {
            stats->finish = SM_FINISH_LENGTH;
            break;
        }
        if (pos == n_ctx) {
            stats->finish = SM_FINISH_LENGTH;
            stats->context_full = true;
            break;
        }
        if ((st = sm_state_forward(s, &next, 1, pos, &logits, err))) goto out;
        pos++;
    }
    st = SM_OK;
    /* whatever is left is an incomplete character at the very end: emit it as is */
    if (pd.n && stats->finish != SM_FINISH_STOP) emit(user, (const char *)pd.buf, pd.n);
out:
    stats->t_decode = sm_time_now() - t1;
    return st;
}
