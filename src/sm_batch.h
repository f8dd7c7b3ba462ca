/*
** sm_batch.h -- one input line of `generate --batch`, in any of its forms.
**
** A line is one of:
**  - plain text: the whole line is the prompt;
**  - one of our JSON records (its first non-blank byte is '{'):
**      {"id": ..., "prompt": "...", "max_tokens": N, "temperature": T,
**       "top_k": K, "top_p": P, "min_p": P, "repeat_penalty": X, "repeat_last_n": N,
**       "presence_penalty": X, "frequency_penalty": X, "seed": S,
**       "logit_bias": {"token id": bias, ...} (or [[id, bias], ...]; -100 to 100),
**       "stop": "..." or ["...", ...]}
**    where only "prompt" is required, or "messages": [{"role": ..., "content":
**    ...}, ...] (OpenAI style, checked) instead, for the chat template; and
**    "grammar": "GBNF text" or "json_schema": {...} for structured output;
**  - an OpenAI Batch API request (a JSON object with "custom_id", "method",
**    "url" and "body"), whose body is a /v1/chat/completions or
**    /v1/completions request (sm_oai.h).
** With SM_BATCH_AUTO a JSON object is an OpenAI request when it has any of
** "custom_id", "method", "url" or "body", else ours; SM_BATCH_TEXT takes every
** line as plain text, SM_BATCH_JSONL and SM_BATCH_OPENAI require their form.
** Unknown keys and out-of-range values are refused with a message naming
** the key. Never prints.
*/
#ifndef SM_BATCH_H
#define SM_BATCH_H

#include "sm_base.h"
#include "sm_generate.h"
#include "sm_sampler.h"

enum { SM_REC_MAX_TOKENS = 1, SM_REC_STOP = 2 };

/* What a record's output keeps to (sm_grammar.h): nothing, a GBNF grammar, a JSON Schema, any
   JSON value, or any JSON object (OpenAI's json_object). */
typedef enum { SM_GK_NONE = 0, SM_GK_GBNF, SM_GK_SCHEMA, SM_GK_JSON, SM_GK_JSON_OBJECT } sm_grammar_kind;

#define SM_REC_ID_MAX 256
#define SM_REC_MODEL_MAX 128

typedef enum { SM_BATCH_AUTO, SM_BATCH_TEXT, SM_BATCH_JSONL, SM_BATCH_OPENAI } sm_batch_format;

/* What a line is (also when it is bad: as far as it could be read). */
typedef enum {
    SM_REC_TEXT,           /* a plain line */
    SM_REC_JSON,           /* one of our records */
    SM_REC_OAI_CHAT,       /* an OpenAI request to /v1/chat/completions */
    SM_REC_OAI_COMPLETION, /* an OpenAI request to /v1/completions */
    SM_REC_OAI_BAD         /* an OpenAI request whose line is bad (JSON, custom_id, method, url) */
} sm_rec_kind;

typedef struct sm_batch_record {
    sm_rec_kind kind;
    char id[SM_REC_ID_MAX]; /* JSON text of "id" (ours) or "custom_id" (OpenAI); "" if none */
    char *prompt;           /* decoded prompt, in the caller's buffer */
    struct cJSON *messages; /* or a conversation (owned: cJSON_Delete it), else NULL */
    sm_grammar_kind gkind;  /* "grammar", "json_schema" or OpenAI's response_format */
    char *gtext;            /* the grammar's or schema's text (owned), NULL for the JSON kinds */
    size_t prompt_len;
    unsigned set;           /* SM_REC_* bits: max_tokens and stop given */
    long max_tokens;
    sm_sampler_params sampling; /* the caller's defaults, with the record's fields over them */
    size_t n_stop;
    char stop[SM_STOP_MAX][SM_STOP_MAX_BYTES + 1];
    /* OpenAI requests */
    char model[SM_REC_MODEL_MAX]; /* the body's "model" ("" if none) */
    bool stream, include_usage;   /* "stream", "stream_options": {"include_usage"} */
    int top_logprobs;             /* -1: no log-probabilities asked; else how many alternatives */
    bool echo;                    /* completions' "echo": the prompt before the text (and its tokens'
                                     log-probabilities before the text's) */
    unsigned n_choices;           /* "n": completions of each prompt (0 or 1: one) */
    struct cJSON *prompts;        /* /v1/completions' "prompt" when it is not one string (owned): a list of
                                     strings, a list of token ids (one prompt) or a list of such lists;
                                     checked (each non-empty, ids from 0 below 2^31); prompt is then NULL */
    /* why a record is bad (OpenAI's error shape) */
    char param[64];   /* the body's field at fault ("" if none) */
    const char *code; /* a static error code ("invalid_url", ...) or NULL */
} sm_batch_record;

/*
** Parses line[0..len) (no newline) as fmt says. The decoded prompt goes to
** buf, which must hold len bytes; rec->sampling starts as *defaults.
** SM_ERR_INPUT with a message on a bad record; rec->kind, id, param and code
** then say as much as could be read.
*/
sm_status sm_batch_parse(const char *line, size_t len, sm_batch_format fmt, char *buf,
                         const sm_sampler_params *defaults, sm_batch_record *rec, sm_error *err);

/* Frees what a parsed record owns (messages, grammar text); safe on a zeroed or failed record. */
void sm_batch_record_free(sm_batch_record *rec);

/* Whether s (NUL-terminated) is valid UTF-8 (RFC 3629). */
bool sm_utf8_valid(const char *s);

#endif
