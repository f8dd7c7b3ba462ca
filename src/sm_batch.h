/*
** sm_batch.h -- one input record of `generate --batch`.
**
** A line is either plain text (the whole line is the prompt) or, when its
** first non-blank byte is '{', a JSON object:
**   {"id": ..., "prompt": "...", "max_tokens": N, "temperature": T,
**    "top_k": K, "top_p": P, "min_p": P, "repeat_penalty": X, "repeat_last_n": N,
**    "presence_penalty": X, "frequency_penalty": X, "seed": S,
**    "stop": "..." or ["...", ...]}
** where only "prompt" is required, or "messages": [{"role": ..., "content":
** ...}, ...] (OpenAI style, checked) instead, for the chat template. Unknown keys and out-of-range values are
** refused with a message naming the key.
*/
#ifndef SM_BATCH_H
#define SM_BATCH_H

#include "sm_base.h"
#include "sm_generate.h"
#include "sm_sampler.h"

enum { SM_REC_MAX_TOKENS = 1, SM_REC_STOP = 2 };

#define SM_REC_ID_MAX 256

typedef struct sm_batch_record {
    char id[SM_REC_ID_MAX]; /* the id as JSON text ("" when the record has none) */
    char *prompt;           /* decoded prompt, in the caller's buffer */
    struct cJSON *messages; /* or a conversation (owned: cJSON_Delete it), else NULL */
    size_t prompt_len;
    unsigned set;           /* SM_REC_* bits: max_tokens and stop given */
    long max_tokens;
    sm_sampler_params sampling; /* the caller's defaults, with the record's fields over them */
    size_t n_stop;
    char stop[SM_STOP_MAX][SM_STOP_MAX_BYTES + 1];
} sm_batch_record;

/*
** Parses line[0..len) (no newline). The decoded prompt goes to buf, which
** must hold len bytes; rec->sampling starts as *defaults. SM_ERR_INPUT with
** a message on a bad record.
*/
sm_status sm_batch_parse(const char *line, size_t len, char *buf, const sm_sampler_params *defaults,
                         sm_batch_record *rec, sm_error *err);

#endif
