/*
** sm_oai.h -- OpenAI API request bodies (/v1/chat/completions and
** /v1/completions) as generation requests, for the OpenAI Batch API lines of
** `generate --batch` and for the server.
**
** Fields read, as the OpenAI reference defines them: "messages" (chat) or
** "prompt" (completions: a string, a list of strings, a list of token ids
** or a list of such lists: rec->prompts when it is not one string),
** "model", "max_tokens" / "max_completion_tokens" (the latter wins),
** "temperature", "top_p" (0 = the most likely token), "n" (completions of
** each prompt, 1 to 128: rec->n_choices), "stream",
** "stream_options" ({"include_usage"}), "stop" (a string or a list),
** "seed" (any whole number), "presence_penalty", "frequency_penalty",
** "logit_bias" ({"token id": -100..100}, or llama.cpp's [[id, bias], ...]),
** "logprobs" / "top_logprobs" (chat: a boolean and 0..20; completions: a
** number 0..5), "response_format" ({"type": "text"}, {"type":
** "json_object"} or {"type": "json_schema", "json_schema": {"name",
** "schema", "strict", "description"}}: rec->gkind/gtext), and llama.cpp's extensions "top_k", "min_p", "repeat_penalty",
** "repeat_last_n", and completions' "echo" (rec->echo: the prompt's text
** before each choice's, and with "logprobs" its tokens before the text's,
** the first with null, as OpenAI's legacy completions give them; max_tokens
** may be 0). Accepted and ignored (they do not change the text):
** "user", "metadata", "store", "service_tier"; "best_of": 1,
** "suffix": null and "parallel_tool_calls" with no tools.
** Any other field is refused as OpenAI refuses it ("Unrecognized request
** argument supplied: X"), and a field we cannot honour ("tools",
** "best_of" > 1) is refused naming it: the text is
** never silently different from what was asked.
*/
#ifndef SM_OAI_H
#define SM_OAI_H

#include "sm_batch.h"

struct cJSON;

#define SM_OAI_N_MAX 128         /* "n" at most (OpenAI's limit) */
#define SM_OAI_CHOICES_MAX 2048  /* prompts times n at most, in one request */

/* One completion a request asks for: prompt p's choice j is its (p n + j)th, its index in the response. */
typedef struct {
    const char *prompt;  /* its prompt as text (rec's), or as tokens: ids (n_ids); neither for a chat */
    size_t prompt_len;
    const int32_t *ids;
    size_t n_ids;
    uint64_t seed;       /* the request's seed + j: choice 0 of each prompt is that prompt with n 1 */
} sm_oai_choice;

/*
** The completions rec asks for (any record: ours and a chat's are one per
** "n"): *out (*n_out of them, malloc'd), n per prompt in *n; the token
** prompts' ids in *ids (malloc'd; NULL if none), each checked to be below
** n_vocab. They point into rec, which must outlive them. SM_ERR_INPUT with
** rec->param "prompt", or SM_ERR_NOMEM.
*/
sm_status sm_oai_choices(sm_batch_record *rec, int n_vocab, sm_oai_choice **out, size_t *n_out, size_t *n,
                         int32_t **ids, sm_error *err);

/*
** Parses body (a JSON object) as a request of kind (SM_REC_OAI_CHAT or
** SM_REC_OAI_COMPLETION) into rec, whose sampling holds the defaults. A
** "prompt" is decoded into buf, which holds cap bytes. SM_ERR_INPUT with a
** message and rec->param naming the field on a bad body.
*/
sm_status sm_oai_parse_body(const struct cJSON *body, sm_rec_kind kind, char *buf, size_t cap,
                            sm_batch_record *rec, sm_error *err);

/* OpenAI's word for a finish: "stop" (a stop string or the end of text) or "length". */
const char *sm_oai_finish(sm_finish f);

#endif
