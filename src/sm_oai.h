/*
** sm_oai.h -- OpenAI API request bodies (/v1/chat/completions and
** /v1/completions) as generation requests, for the OpenAI Batch API lines of
** `generate --batch` and for the server.
**
** Fields read, as the OpenAI reference defines them: "messages" (chat) or
** "prompt" (completions: a string, or a list of one string), "model",
** "max_tokens" / "max_completion_tokens" (the latter wins), "temperature",
** "top_p" (0 = the most likely token), "n" (1 only), "stream",
** "stream_options" ({"include_usage"}), "stop" (a string or a list),
** "seed" (any whole number), "presence_penalty", "frequency_penalty",
** "logit_bias" ({"token id": -100..100}, or llama.cpp's [[id, bias], ...]),
** "logprobs" / "top_logprobs" (chat: a boolean and 0..20; completions: a
** number 0..5), "response_format" ({"type": "text"}, {"type":
** "json_object"} or {"type": "json_schema", "json_schema": {"name",
** "schema", "strict", "description"}}: rec->gkind/gtext), and llama.cpp's extensions "top_k", "min_p", "repeat_penalty",
** "repeat_last_n". Accepted and ignored (they do not change the text):
** "user", "metadata", "store", "service_tier"; "echo": false, "best_of": 1,
** "suffix": null and "parallel_tool_calls" with no tools.
** Any other field is refused as OpenAI refuses it ("Unrecognized request
** argument supplied: X"), and a field we cannot honour ("tools",
** n > 1) is refused naming it: the text is
** never silently different from what was asked.
*/
#ifndef SM_OAI_H
#define SM_OAI_H

#include "sm_batch.h"

struct cJSON;

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
