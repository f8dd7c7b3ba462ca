/*
** oai.c -- OpenAI request bodies (/v1/chat/completions, /v1/completions) as
** generation requests (sm_oai.h). Every field is checked; a field that would
** change the text in a way we cannot honour is refused by name.
*/
#include "sm_oai.h"

#include "batch_internal.h"
#include "sm_chat.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sets rec->param and the message "KEY what". */
static sm_status field_error(sm_batch_record *rec, sm_error *err, const char *key, const char *what) {
    snprintf(rec->param, sizeof rec->param, "%s", key);
    return sm_rec_bad(err, key, what);
}

/* Whether v is JSON null (an absent field, for OpenAI's optional ones). */
static bool is_null(const cJSON *v) {
    return cJSON_IsNull(v);
}

/* A request body field that our records read the same way (ranges as OpenAI's or wider). */
static sm_status common_field(const char *k, const cJSON *v, sm_batch_record *rec, bool *known,
                              sm_error *err) {
    sm_sampler_params *sp = &rec->sampling;
    long long x;
    sm_status st = SM_OK;
    static const char *const nullable[] = {"temperature", "top_p", "seed", "presence_penalty", "frequency_penalty",
                                           "stop", "max_tokens", "max_completion_tokens", "n", "stream",
                                           "stream_options", "response_format", "top_k", "min_p", "repeat_penalty",
                                           "repeat_last_n", "user", "metadata", "store", "service_tier", "logit_bias"};
    *known = true;
    for (size_t i = 0; i < sizeof nullable / sizeof nullable[0]; i++)
        if (is_null(v) && strcmp(k, nullable[i]) == 0) return SM_OK; /* an optional field as null: not given */
    if (strcmp(k, "model") == 0) {
        if (!cJSON_IsString(v) || !sm_utf8_valid(v->valuestring) || strlen(v->valuestring) >= SM_REC_MODEL_MAX)
            return sm_rec_bad(err, k, "must be a string of at most 127 bytes");
        snprintf(rec->model, sizeof rec->model, "%s", v->valuestring);
    } else if (sm_rec_sampling(rec, k, v, &st, err)) {
        /* as our records read it */
    } else if (strcmp(k, "top_p") == 0) {
        float p;
        st = sm_rec_number(v, k, 0, 1, false, &p, err);
        if (!st && p == 0) sp->top_k = 1, sp->top_p = 1; /* the smallest set with any mass: the top token */
        else if (!st) sp->top_p = p;
    } else if (strcmp(k, "seed") == 0) {
        if (!(st = sm_rec_whole(v, k, -9007199254740992.0, 9007199254740992.0, &x, err))) sp->seed = (uint64_t)x;
    } else if (strcmp(k, "max_tokens") == 0 || strcmp(k, "max_completion_tokens") == 0) {
        if ((st = sm_rec_whole(v, k, 0, 1 << 30, &x, err))) return st;
        /* max_completion_tokens replaces the deprecated max_tokens: it wins when both are given */
        if (!(rec->set & SM_REC_MAX_TOKENS) || strcmp(k, "max_completion_tokens") == 0) rec->max_tokens = (long)x;
        rec->set |= SM_REC_MAX_TOKENS;
    } else if (strcmp(k, "n") == 0) {
        if (sm_rec_whole(v, k, 1, SM_OAI_N_MAX, &x, err)) return sm_rec_bad(err, k, "must be a whole number from 1 to 128");
        rec->n_choices = (unsigned)x;
    } else if (strcmp(k, "stream") == 0) {
        if (!cJSON_IsBool(v)) return sm_rec_bad(err, k, "must be true or false");
        rec->stream = cJSON_IsTrue(v);
    } else if (strcmp(k, "stream_options") == 0) {
        if (!cJSON_IsObject(v)) return sm_rec_bad(err, k, "must be an object");
        for (const cJSON *o = v->child; o; o = o->next) {
            if (strcmp(o->string, "include_usage") != 0 || !cJSON_IsBool(o))
                return sm_rec_bad(err, k, "takes only \"include_usage\": true or false");
            rec->include_usage = cJSON_IsTrue(o);
        }
    } else if (strcmp(k, "response_format") == 0) {
        const cJSON *t = cJSON_IsObject(v) ? cJSON_GetObjectItemCaseSensitive(v, "type") : NULL;
        if (!cJSON_IsString(t)) return sm_rec_bad(err, k, "must be an object with a \"type\"");
        if (strcmp(t->valuestring, "json_object") == 0) {
            rec->gkind = SM_GK_JSON_OBJECT;
        } else if (strcmp(t->valuestring, "json_schema") == 0) {
            const cJSON *js = cJSON_GetObjectItemCaseSensitive(v, "json_schema");
            const cJSON *sch = cJSON_IsObject(js) ? cJSON_GetObjectItemCaseSensitive(js, "schema") : NULL;
            if (!sch) return sm_rec_bad(err, k, "of type json_schema needs \"json_schema\": {\"name\", \"schema\"}");
            for (const cJSON *f = js->child; f; f = f->next)
                if (strcmp(f->string, "name") && strcmp(f->string, "schema") && strcmp(f->string, "strict") &&
                    strcmp(f->string, "description"))
                    return sm_rec_bad(err, k, "json_schema takes name, description, schema and strict");
            st = sm_rec_grammar(rec, SM_GK_SCHEMA, sch, "response_format.json_schema.schema", err);
        } else if (strcmp(t->valuestring, "text") != 0) {
            return sm_rec_bad(err, k, "type must be text, json_object or json_schema");
        }
    } else if (strcmp(k, "user") == 0) {
        if (!cJSON_IsString(v)) return sm_rec_bad(err, k, "must be a string");
    } else if (strcmp(k, "metadata") == 0) {
        if (!cJSON_IsObject(v)) return sm_rec_bad(err, k, "must be an object");
    } else if (strcmp(k, "store") == 0) {
        if (!cJSON_IsBool(v)) return sm_rec_bad(err, k, "must be true or false");
    } else if (strcmp(k, "service_tier") == 0) {
        if (!cJSON_IsString(v)) return sm_rec_bad(err, k, "must be a string");
    } else {
        *known = false;
    }
    return st;
}

/* Whether v is a non-empty list of token ids (whole numbers from 0 below 2^31). */
static bool id_list(const cJSON *v) {
    if (!cJSON_IsArray(v) || !v->child) return false;
    for (const cJSON *e = v->child; e; e = e->next)
        if (!cJSON_IsNumber(e) || !(e->valuedouble >= 0 && e->valuedouble < 2147483648.0) ||
            e->valuedouble != (double)(long long)e->valuedouble)
            return false;
    return true;
}

/*
** "prompt": one string (or a list of one) stays rec->prompt, for the caller
** to decode; anything else valid becomes rec->prompts: a list of strings,
** one list of ids, or a list of lists of ids, as OpenAI's reference takes.
*/
static sm_status prompt_list(const cJSON *v, sm_batch_record *rec, sm_error *err) {
    if (cJSON_IsString(v)) return SM_OK;
    if (!cJSON_IsArray(v)) return sm_rec_bad(err, "prompt", "must be a string, a list of strings, a list of token ids "
                                                             "or a list of such lists");
    if (!v->child) return sm_rec_bad(err, "prompt", "must not be an empty list");
    if (cJSON_IsString(v->child) && !v->child->next) return SM_OK;
    size_t n = 0;
    if (cJSON_IsNumber(v->child)) {
        if (!id_list(v)) return sm_rec_bad(err, "prompt", "as a list of token ids takes whole numbers from 0 to 2147483647");
        n = 1;
    } else {
        bool strings = cJSON_IsString(v->child);
        for (const cJSON *e = v->child; e; e = e->next, n++) {
            if (strings && !cJSON_IsString(e))
                return sm_rec_bad(err, "prompt", "mixes strings with other items (a list of strings, or of token lists)");
            if (!strings && !id_list(e))
                return sm_rec_bad(err, "prompt", "as a list of token lists takes non-empty lists of whole numbers from 0 "
                                                 "to 2147483647");
        }
    }
    if (n > SM_OAI_CHOICES_MAX) return sm_rec_bad(err, "prompt", "holds more than 2048 prompts");
    if (!(rec->prompts = cJSON_Duplicate(v, 1))) return sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    return SM_OK;
}

/* How many prompts rec holds (1 unless rec->prompts). */
static size_t n_prompts(const sm_batch_record *rec) {
    const cJSON *p = rec->prompts;
    if (!p) return 1;
    return cJSON_IsNumber(p->child) ? 1 : (size_t)cJSON_GetArraySize(p);
}

/* The prompt after e (NULL: the first) of rec's: text (*ids NULL) or tokens; the item walked. */
static const cJSON *prompt_next(const sm_batch_record *rec, const cJSON *e, const char **text, size_t *len,
                                const cJSON **ids) {
    const cJSON *p = rec->prompts;
    *text = NULL, *len = 0, *ids = NULL;
    if (!p || cJSON_IsNumber(p->child)) { /* one prompt: the string, or the list of ids itself */
        if (p) *ids = p;
        else *text = rec->prompt, *len = rec->prompt_len;
        return p;
    }
    e = e ? e->next : p->child;
    if (cJSON_IsString(e)) *text = e->valuestring, *len = strlen(e->valuestring);
    else *ids = e;
    return e;
}

sm_status sm_oai_choices(sm_batch_record *rec, int n_vocab, sm_oai_choice **out, size_t *n_out, size_t *n,
                         int32_t **ids, sm_error *err) {
    size_t np = n_prompts(rec), total = 0, at = 0;
    const char *text;
    size_t len;
    const cJSON *list;
    *out = NULL, *ids = NULL, *n_out = 0;
    *n = rec->n_choices ? rec->n_choices : 1;
    const cJSON *e = NULL;
    for (size_t p = 0; p < np; p++) {
        e = prompt_next(rec, e, &text, &len, &list);
        if (list) total += (size_t)cJSON_GetArraySize(list);
    }
    sm_oai_choice *c = calloc(np * *n, sizeof *c);
    int32_t *buf = total ? malloc(total * sizeof *buf) : NULL;
    if (!c || (total && !buf)) {
        free(c), free(buf);
        return sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    }
    e = NULL;
    for (size_t p = 0; p < np; p++) {
        size_t from = at;
        e = prompt_next(rec, e, &text, &len, &list);
        for (const cJSON *t = list ? list->child : NULL; t; t = t->next) {
            int32_t id = (int32_t)t->valuedouble; /* (checked when parsed: whole, 0 to 2^31 - 1) */
            if (id >= n_vocab) {
                free(c), free(buf);
                snprintf(rec->param, sizeof rec->param, "prompt");
                return sm_error_set(err, SM_ERR_INPUT, "prompt %zu: token %d is not in the model's vocabulary "
                                                       "(%d tokens)", p, (int)id, n_vocab);
            }
            buf[at++] = id;
        }
        for (size_t j = 0; j < *n; j++)
            c[p * *n + j] = (sm_oai_choice){.prompt = rec->messages ? NULL : text, .prompt_len = rec->messages ? 0 : len,
                                            .ids = list ? buf + from : NULL, .n_ids = at - from,
                                            .seed = rec->sampling.seed + j};
    }
    *out = c, *n_out = np * *n, *ids = buf;
    return SM_OK;
}

sm_status sm_oai_parse_body(const cJSON *body, sm_rec_kind kind, char *buf, size_t cap,
                            sm_batch_record *rec, sm_error *err) {
    bool chat = kind == SM_REC_OAI_CHAT, have_prompt = false;
    bool logprobs = false;
    int top_logprobs = -1;
    rec->kind = kind;
    if (!cJSON_IsObject(body)) return field_error(rec, err, "body", "must be a JSON object");
    for (const cJSON *v = body->child; v; v = v->next) {
        const char *k = v->string ? v->string : "";
        bool known;
        sm_status st = common_field(k, v, rec, &known, err);
        if (st) {
            snprintf(rec->param, sizeof rec->param, "%s", k);
            return st;
        }
        if (known) continue;
        long long x;
        if (chat && strcmp(k, "messages") == 0) {
            if (!cJSON_IsArray(v) || !v->child) return field_error(rec, err, k, "must be a non-empty array");
            if ((st = sm_chat_check_messages(v, "body", err))) {
                snprintf(rec->param, sizeof rec->param, "%s", k);
                return st;
            }
            if (!(rec->messages = cJSON_Duplicate(v, 1)))
                return sm_error_set(err, SM_ERR_NOMEM, "out of memory");
        } else if (!chat && strcmp(k, "prompt") == 0) {
            const cJSON *p = v;
            if ((st = prompt_list(v, rec, err))) {
                snprintf(rec->param, sizeof rec->param, "%s", k);
                return st;
            }
            if (rec->prompts) {
                have_prompt = true;
                continue;
            }
            if (cJSON_IsArray(v)) p = v->child;
            size_t n = strlen(p->valuestring);
            if (n > cap) return field_error(rec, err, k, "is too long");
            memcpy(buf, p->valuestring, n);
            rec->prompt = buf;
            rec->prompt_len = n;
            have_prompt = true;
        } else if (strcmp(k, "logprobs") == 0) {
            if (is_null(v)) continue;
            if (chat) {
                if (!cJSON_IsBool(v)) return field_error(rec, err, k, "must be true or false");
                logprobs = cJSON_IsTrue(v);
            } else {
                if (sm_rec_whole(v, k, 0, 5, &x, err)) return field_error(rec, err, k, "must be a whole number from 0 to 5");
                logprobs = true, top_logprobs = (int)x;
            }
        } else if (chat && strcmp(k, "top_logprobs") == 0) {
            if (is_null(v)) continue;
            if (sm_rec_whole(v, k, 0, 20, &x, err)) return field_error(rec, err, k, "must be a whole number from 0 to 20");
            top_logprobs = (int)x;
        } else if (chat && (strcmp(k, "tools") == 0 || strcmp(k, "functions") == 0)) {
            if (is_null(v) || (cJSON_IsArray(v) && !v->child)) continue;
            return field_error(rec, err, k, "is not supported (tool calls are not parsed from the output)");
        } else if (chat && (strcmp(k, "tool_choice") == 0 || strcmp(k, "function_call") == 0)) {
            if (is_null(v) || (cJSON_IsString(v) && strcmp(v->valuestring, "none") == 0)) continue;
            return field_error(rec, err, k, "is not supported (tool calls are not parsed from the output)");
        } else if (chat && strcmp(k, "parallel_tool_calls") == 0) {
            if (!cJSON_IsBool(v) && !is_null(v)) return field_error(rec, err, k, "must be true or false");
        } else if (!chat && strcmp(k, "echo") == 0) {
            if (!is_null(v) && !cJSON_IsBool(v)) return field_error(rec, err, k, "must be true or false");
            rec->echo = cJSON_IsTrue(v);
        } else if (!chat && strcmp(k, "best_of") == 0) {
            if (!is_null(v) && (sm_rec_whole(v, k, 1, 1, &x, err)))
                return field_error(rec, err, k, "must be 1");
        } else if (!chat && strcmp(k, "suffix") == 0) {
            if (!is_null(v)) return field_error(rec, err, k, "is not supported (only null)");
        } else {
            snprintf(rec->param, sizeof rec->param, "%.63s", k);
            return sm_error_set(err, SM_ERR_INPUT, "Unrecognized request argument supplied: %.64s", k);
        }
    }
    if (logprobs) rec->top_logprobs = top_logprobs < 0 ? 0 : top_logprobs;
    else if (top_logprobs > 0)
        return field_error(rec, err, "top_logprobs", "needs \"logprobs\": true");
    if (n_prompts(rec) * (rec->n_choices ? rec->n_choices : 1) > SM_OAI_CHOICES_MAX)
        return field_error(rec, err, "n", "times the prompts is more than 2048 completions");
    if (chat && !rec->messages) return field_error(rec, err, "messages", "is required");
    if (!chat && !have_prompt) return field_error(rec, err, "prompt", "is required");
    if (rec->include_usage && !rec->stream)
        return field_error(rec, err, "stream_options", "goes with \"stream\": true");
    return SM_OK;
}

const char *sm_oai_finish(sm_finish f) {
    return f == SM_FINISH_LENGTH ? "length" : "stop";
}
