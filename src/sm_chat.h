/*
** sm_chat.h -- conversations through a model's chat template.
**
** sm_chat holds a parsed template and what it is rendered with (the
** bos_token and eos_token texts, from tokenizer_config.json or the
** tokenizer's ids) and the stop string the template implies (the text it
** writes after an assistant's message, when that is not one special
** token). A rendered conversation is encoded as transformers'
** apply_chat_template encodes it: special tokens parsed, no BOS added
** unless the tokenizer adds one and the text does not start with it.
**
** sm_chat_session keeps a conversation on one sequence of a state: each
** turn renders the whole conversation, keeps the cached tokens it shares
** with the last turn's (so a turn prefills only its new tokens), drops the
** oldest turns (never the system message) when the context would not hold
** the conversation and a reply, and generates the reply. Memory: the
** session's token buffers are allocated at init; a turn allocates its
** rendering, its encoding's messages and the reply text, never per token.
*/
#ifndef SM_CHAT_H
#define SM_CHAT_H

#include <cJSON.h>

#include "sm_config.h"
#include "sm_generate.h"
#include "sm_template.h"
#include "sm_tokenizer.h"

typedef struct sm_chat {
    sm_template *tpl;
    char *bos, *eos;                   /* texts the template sees as bos_token, eos_token (owned) */
    char stop[SM_STOP_MAX_BYTES + 1];  /* the end of an assistant's turn as text ("" if a token) */
} sm_chat;

/*
** Parses the template: text (len bytes, named name in errors) if not NULL,
** else cfg->chat_template (SM_ERR_UNSUPPORTED naming model when there is
** none). tok gives bos/eos texts where cfg has none. On failure *c is
** free-safe.
*/
sm_status sm_chat_init(sm_chat *c, const sm_config *cfg, sm_tokenizer *tok,
                       const char *text, size_t len, const char *name, const char *model,
                       sm_error *err);
void sm_chat_free(sm_chat *c);

/* A message {"role": role, "content": content[0..len)}, or NULL when out of memory. */
cJSON *sm_chat_message(const char *role, const char *content, size_t len);

#define SM_CHAT_MAX_MESSAGES 100000 /* what a conversation (a /load file, a record) may hold */

/*
** Checks a messages array (OpenAI style): at most SM_CHAT_MAX_MESSAGES
** objects with a "role" string (any: system, user, assistant, tool,
** ipython, ... the template decides) and a "content" that is a string, a
** list of parts ({"type": "text", "text": ...}, images ...), null or
** absent; "tool_calls" a list of objects whose function.arguments is an
** object or a string. Other fields (reasoning_content, thinking, name)
** pass through to the template as they are. Errors start with where and
** name the message's index and field.
*/
sm_status sm_chat_check_messages(const cJSON *messages, const char *where, sm_error *err);

/*
** Renders messages with add_generation_prompt; vars (a JSON object, may be
** NULL) adds variables (tools, date_string, enable_thinking, ...) and may
** override bos_token, eos_token and add_generation_prompt. *out is
** malloc'd and NUL-terminated.
*/
sm_status sm_chat_render(const sm_chat *c, const cJSON *messages, bool add_generation_prompt,
                         const cJSON *vars, char **out, size_t *len, sm_error *err);

/*
** Appends the template's end-of-turn stop string (if it has one and n <
** SM_STOP_MAX) to stops[0..n), which has room for SM_STOP_MAX; returns the
** new count.
*/
size_t sm_chat_add_stop(const sm_chat *c, const char **stops, size_t n);

/* Encodes rendered text into out (cap ids); returns the ids the text needs (see above). */
size_t sm_chat_encode(sm_tokenizer *tok, const char *text, size_t len, int32_t *out, size_t cap);

/*
** Render, then encode: messages with the generation prompt into out (cap
** ids); *n gets the ids they need, which may be more than cap (then only cap
** were written: the caller says it does not fit). *text, when not NULL, gets
** the rendering (malloc'd, the caller frees it; *text_len its length).
*/
sm_status sm_chat_tokens(const sm_chat *c, sm_tokenizer *tok, const cJSON *messages, int32_t *out,
                         size_t cap, size_t *n, char **text, size_t *text_len, sm_error *err);

typedef struct sm_chat_session sm_chat_session;

typedef struct sm_chat_turn {
    size_t n_tokens;     /* of the rendered conversation */
    size_t n_dropped;    /* messages dropped to fit the context this turn */
    sm_gen_stats gen;    /* gen.n_reused: tokens kept in the cache; the rest were prefilled */
    const char *reply;   /* the assistant's text (valid until the next turn) */
    size_t reply_len;
} sm_chat_turn;

/*
** A conversation on sequence 0 of state s (whose cache it owns from now
** on), with sampler smp. system may be NULL.
*/
sm_status sm_chat_session_new(sm_chat_session **out, const sm_chat *c, sm_state *s,
                              sm_tokenizer *tok, sm_sampler *smp, const char *system,
                              sm_error *err);
void sm_chat_session_free(sm_chat_session *cs);

/*
** One turn: the user's text as a message, the reply generated (streamed
** through emit) and added to the conversation, also when *gp->cancel
** stopped it (what was said is kept). SM_ERR_INPUT if the message alone
** does not fit the context, or the template fails (the message is not
** added then).
*/
sm_status sm_chat_session_turn(sm_chat_session *cs, const char *text, size_t len,
                               const sm_gen_params *gp, sm_emit_fn emit, void *user,
                               sm_chat_turn *turn, sm_error *err);

/*
** The ids sequence 0 holds at positions 0..*n-1 (after a turn: its prompt,
** then the reply); seed says that it holds tokens[0..n) (loaded by the
** caller, as from a prompt cache) so that the next turn reuses what agrees.
*/
const int32_t *sm_chat_session_cached(const sm_chat_session *cs, size_t *n);
void sm_chat_session_seed(sm_chat_session *cs, const int32_t *tokens, size_t n);

/* The conversation so far (a JSON array of messages, owned by the session). */
const cJSON *sm_chat_session_messages(const sm_chat_session *cs);

/*
** Replaces the conversation: messages (checked, errors starting with where,
** else "conversation"; copied), or none with only the system message
** (system NULL: keep the current one; "" drops it). The cache is reused
** where the new conversation's tokens agree.
*/
sm_status sm_chat_session_set(sm_chat_session *cs, const cJSON *messages, const char *where,
                              const char *system, sm_error *err);

#endif
