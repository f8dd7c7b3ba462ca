/*
** batch.c -- parsing one `generate --batch` input line: plain text, one of
** our JSON records, or an OpenAI Batch API request (sm_batch.h; the
** request's body is read by oai.c).
*/
#include "sm_batch.h"

#include "batch_internal.h"
#include "json_internal.h"
#include "sm_chat.h"
#include "sm_oai.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

sm_status sm_rec_bad(sm_error *err, const char *key, const char *what) {
    return sm_error_set(err, SM_ERR_INPUT, "\"%s\" %s", key, what);
}

sm_status sm_rec_number(const cJSON *v, const char *key, double lo, double hi, bool open, float *out,
                        sm_error *err) {
    double x = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if (!(open ? x > lo : x >= lo) || !(x <= hi)) {
        char msg[96];
        if (open) snprintf(msg, sizeof msg, "must be a number in (%g, %g]", lo, hi);
        else snprintf(msg, sizeof msg, "must be a number from %g to %g", lo, hi);
        return sm_rec_bad(err, key, msg);
    }
    *out = (float)x;
    return SM_OK;
}

sm_status sm_rec_whole(const cJSON *v, const char *key, double lo, double hi, long long *out,
                       sm_error *err) {
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble != floor(v->valuedouble) ||
        v->valuedouble < lo || v->valuedouble > hi) {
        char msg[96];
        snprintf(msg, sizeof msg, "must be a whole number from %.0f to %.0f", lo, hi);
        return sm_rec_bad(err, key, msg);
    }
    *out = (long long)v->valuedouble;
    return SM_OK;
}

static sm_status add_stop(sm_batch_record *rec, const cJSON *s, sm_error *err) {
    if (!cJSON_IsString(s) || !s->valuestring)
        return sm_rec_bad(err, "stop", "must be a string or an array of strings");
    size_t n = strlen(s->valuestring);
    if (n < 1 || n > SM_STOP_MAX_BYTES) {
        char msg[80];
        snprintf(msg, sizeof msg, "strings must have 1 to %d bytes", SM_STOP_MAX_BYTES);
        return sm_rec_bad(err, "stop", msg);
    }
    if (rec->n_stop == SM_STOP_MAX) {
        char msg[48];
        snprintf(msg, sizeof msg, "has more than %d strings", SM_STOP_MAX);
        return sm_rec_bad(err, "stop", msg);
    }
    memcpy(rec->stop[rec->n_stop++], s->valuestring, n + 1);
    return SM_OK;
}

/* One logit_bias entry: token id (a whole number, or its decimal text as an object's key) and bias. */
static sm_status add_bias(sm_sampler_params *sp, const char *key, double id, const cJSON *b, sm_error *err) {
    if (!(id >= 0 && id <= 2147483647.0 && id == floor(id)))
        return sm_rec_bad(err, "logit_bias", "maps token ids (whole numbers from 0) to biases");
    if (!cJSON_IsNumber(b) || !(b->valuedouble >= -100 && b->valuedouble <= 100))
        return sm_error_set(err, SM_ERR_INPUT, "\"%s\": the bias of token %.0f must be a number from -100 to 100",
                            key, id);
    if (!sm_sampler_add_bias(&sp->bias, (int32_t)id, (float)b->valuedouble))
        return sm_rec_bad(err, "logit_bias", "has more than 1024 tokens");
    return SM_OK;
}

/* logit_bias: OpenAI's {"token id": bias, ...}, or llama.cpp's [[token id, bias], ...]. */
static sm_status rec_logit_bias(sm_sampler_params *sp, const cJSON *v, sm_error *err) {
    sp->bias.n = 0;
    sm_status st = SM_OK;
    if (cJSON_IsObject(v)) {
        for (const cJSON *e = v->child; e && !st; e = e->next) {
            size_t n = strlen(e->string);
            double id = n && n <= 10 && strspn(e->string, "0123456789") == n ? strtod(e->string, NULL) : -1;
            st = add_bias(sp, "logit_bias", id, e, err);
        }
    } else if (cJSON_IsArray(v)) {
        for (const cJSON *e = v->child; e && !st; e = e->next) {
            const cJSON *id = cJSON_IsArray(e) && cJSON_GetArraySize(e) == 2 ? e->child : NULL;
            if (!id || !cJSON_IsNumber(id))
                return sm_rec_bad(err, "logit_bias", "as a list holds [token id, bias] pairs");
            st = add_bias(sp, "logit_bias", id->valuedouble, id->next, err);
        }
    } else {
        return sm_rec_bad(err, "logit_bias", "must be an object of token ids to biases (or a list of pairs)");
    }
    return st;
}

bool sm_rec_sampling(sm_batch_record *rec, const char *k, const cJSON *v, sm_status *st, sm_error *err) {
    sm_sampler_params *sp = &rec->sampling;
    long long x;
    if (strcmp(k, "temperature") == 0) {
        *st = sm_rec_number(v, k, 0, 1000, false, &sp->temperature, err);
    } else if (strcmp(k, "top_k") == 0) {
        if (!(*st = sm_rec_whole(v, k, 0, 1 << 30, &x, err))) sp->top_k = (int)x;
    } else if (strcmp(k, "min_p") == 0) {
        *st = sm_rec_number(v, k, 0, 1, false, &sp->min_p, err);
    } else if (strcmp(k, "repeat_penalty") == 0) {
        *st = sm_rec_number(v, k, 0, 100, true, &sp->repeat_penalty, err);
    } else if (strcmp(k, "repeat_last_n") == 0) {
        if (!(*st = sm_rec_whole(v, k, 0, SM_SAMPLER_MAX_LAST_N, &x, err))) sp->repeat_last_n = (int)x;
    } else if (strcmp(k, "presence_penalty") == 0) {
        *st = sm_rec_number(v, k, -100, 100, false, &sp->presence_penalty, err);
    } else if (strcmp(k, "frequency_penalty") == 0) {
        *st = sm_rec_number(v, k, -100, 100, false, &sp->frequency_penalty, err);
    } else if (strcmp(k, "stop") == 0) {
        *st = sm_rec_stops(rec, v, err);
    } else if (strcmp(k, "logit_bias") == 0) {
        *st = rec_logit_bias(sp, v, err);
    } else {
        return false;
    }
    return true;
}

sm_status sm_rec_stops(sm_batch_record *rec, const cJSON *v, sm_error *err) {
    sm_status st = SM_OK;
    rec->set |= SM_REC_STOP;
    rec->n_stop = 0;
    if (cJSON_IsNull(v)) return SM_OK;
    if (!cJSON_IsArray(v)) return add_stop(rec, v, err);
    for (const cJSON *s = v->child; s && !st; s = s->next) st = add_stop(rec, s, err);
    return st;
}

bool sm_utf8_valid(const char *str) {
    const unsigned char *s = (const unsigned char *)str;
    while (*s) {
        unsigned char c = *s;
        size_t need = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : (c & 0xF0) == 0xE0 ? 3
                    : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        if (!need) return false;
        for (size_t k = 1; k < need; k++)
            if ((s[k] & 0xC0) != 0x80) return false;
        if ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] > 0x9F) || (c == 0xF0 && s[1] < 0x90) ||
            (c == 0xF4 && s[1] > 0x8F))
            return false;
        s += need;
    }
    return true;
}

/* An id (ours) or custom_id (OpenAI's) as JSON text into rec->id. */
static sm_status read_id(const cJSON *v, const char *k, bool numbers, sm_batch_record *rec,
                         sm_error *err) {
    if (!cJSON_IsString(v) && !(numbers && cJSON_IsNumber(v)))
        return sm_rec_bad(err, k, numbers ? "must be a string or a number" : "must be a string");
    if (cJSON_IsString(v) && !sm_utf8_valid(v->valuestring)) /* it is echoed as JSON */
        return sm_rec_bad(err, k, "must be valid UTF-8");
    if (cJSON_IsString(v) && !numbers && !v->valuestring[0]) return sm_rec_bad(err, k, "must not be empty");
    if (!cJSON_PrintPreallocated((cJSON *)v, rec->id, SM_REC_ID_MAX - 8, false))
        return sm_rec_bad(err, k, "is too long");
    return SM_OK;
}

static sm_status parse_object(const cJSON *root, char *buf, sm_batch_record *rec, sm_error *err) {
    sm_sampler_params *sp = &rec->sampling;
    sm_status st = SM_OK;
    bool have_prompt = false;
    for (const cJSON *v = root->child; v && !st; v = v->next) {
        const char *k = v->string ? v->string : "";
        long long x;
        if (strcmp(k, "id") == 0) {
            st = read_id(v, k, true, rec, err);
        } else if (strcmp(k, "prompt") == 0) {
            if (!cJSON_IsString(v) || !v->valuestring) return sm_rec_bad(err, k, "must be a string");
            /* the decoded text is never longer than the line (escaped NULs are refused) */
            rec->prompt_len = strlen(v->valuestring);
            memcpy(buf, v->valuestring, rec->prompt_len);
            rec->prompt = buf;
            have_prompt = true;
        } else if (strcmp(k, "messages") == 0) {
            if ((st = sm_chat_check_messages(v, "record", err))) return st;
            if (!(rec->messages = cJSON_Duplicate(v, 1)))
                return sm_error_set(err, SM_ERR_NOMEM, "out of memory");
        } else if (strcmp(k, "max_tokens") == 0) {
            if (!(st = sm_rec_whole(v, k, 0, 1 << 30, &x, err))) rec->max_tokens = (long)x;
            rec->set |= SM_REC_MAX_TOKENS;
        } else if (strcmp(k, "seed") == 0) {
            if (!(st = sm_rec_whole(v, k, 0, 2147483647.0, &x, err))) sp->seed = (uint64_t)x;
        } else if (strcmp(k, "top_p") == 0) {
            st = sm_rec_number(v, k, 0, 1, true, &sp->top_p, err);
        } else if (sm_rec_sampling(rec, k, v, &st, err)) {
            /* a sampling setting read as OpenAI bodies read it */
        } else if (strcmp(k, "grammar") == 0 || strcmp(k, "json_schema") == 0) {
            if (rec->gkind) return sm_rec_bad(err, k, "goes with no other grammar or schema");
            st = sm_rec_grammar(rec, k[0] == 'g' ? SM_GK_GBNF : SM_GK_SCHEMA, v, k, err);
        } else {
            return sm_error_set(err, SM_ERR_INPUT,
                                "unknown key \"%.64s\" (known: id, prompt, messages, max_tokens, "
                                "temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n, "
                                "presence_penalty, frequency_penalty, logit_bias, seed, stop, grammar, json_schema)", k);
        }
    }
    if (!st && have_prompt && rec->messages)
        st = sm_error_set(err, SM_ERR_INPUT, "give \"prompt\" or \"messages\", not both");
    if (!st && !have_prompt && !rec->messages)
        st = sm_error_set(err, SM_ERR_INPUT, "missing key \"prompt\" (or \"messages\")");
    return st;
}

/* A line-level error of an OpenAI request: code and message. */
static sm_status oai_line_error(sm_batch_record *rec, const char *code, sm_error *err, const char *msg) {
    rec->kind = SM_REC_OAI_BAD;
    rec->code = code;
    return sm_error_set(err, SM_ERR_INPUT, "%s", msg);
}

/* {"custom_id", "method": "POST", "url", "body"}: the line, then its body (oai.c). */
static sm_status parse_openai(const cJSON *root, char *buf, size_t cap, sm_batch_record *rec,
                              sm_error *err) {
    const cJSON *body = NULL, *custom = NULL, *method = NULL, *url = NULL;
    rec->kind = SM_REC_OAI_BAD;
    for (const cJSON *v = root->child; v; v = v->next) {
        const char *k = v->string ? v->string : "";
        if (strcmp(k, "custom_id") == 0) custom = v;
        else if (strcmp(k, "method") == 0) method = v;
        else if (strcmp(k, "url") == 0) url = v;
        else if (strcmp(k, "body") == 0) body = v;
        else {
            char msg[160];
            snprintf(msg, sizeof msg, "unknown key \"%.64s\" (a request line has custom_id, method, url, body)", k);
            return oai_line_error(rec, "invalid_request", err, msg);
        }
    }
    sm_error e2 = {{0}};
    if (!custom) return oai_line_error(rec, "missing_custom_id", err, "missing key \"custom_id\"");
    if (read_id(custom, "custom_id", false, rec, &e2)) return oai_line_error(rec, "invalid_custom_id", err, e2.msg);
    if (!method || !cJSON_IsString(method) || strcmp(method->valuestring, "POST") != 0)
        return oai_line_error(rec, "invalid_method", err, "\"method\" must be \"POST\"");
    if (!url || !cJSON_IsString(url))
        return oai_line_error(rec, "invalid_url", err, "\"url\" must be a string");
    sm_rec_kind kind;
    if (strcmp(url->valuestring, "/v1/chat/completions") == 0) kind = SM_REC_OAI_CHAT;
    else if (strcmp(url->valuestring, "/v1/completions") == 0) kind = SM_REC_OAI_COMPLETION;
    else {
        char msg[200];
        snprintf(msg, sizeof msg, "\"url\" '%.80s' is not supported (/v1/chat/completions or /v1/completions)",
                 sm_utf8_valid(url->valuestring) ? url->valuestring : "?");
        return oai_line_error(rec, "invalid_url", err, msg);
    }
    if (!body || !cJSON_IsObject(body))
        return oai_line_error(rec, "invalid_body", err, "\"body\" must be a JSON object");
    rec->kind = kind;
    return sm_oai_parse_body(body, kind, buf, cap, rec, err);
}

/* Whether a JSON object is an OpenAI request line: it has one of their keys. */
static bool openai_shaped(const cJSON *root) {
    static const char *const keys[] = {"custom_id", "method", "url", "body"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (cJSON_GetObjectItemCaseSensitive(root, keys[i])) return true;
    return false;
}

sm_status sm_batch_parse(const char *line, size_t len, sm_batch_format fmt, char *buf,
                         const sm_sampler_params *defaults, sm_batch_record *rec, sm_error *err) {
    memset(rec, 0, sizeof *rec);
    rec->sampling = *defaults;
    rec->top_logprobs = -1;
    size_t i = 0;
    while (i < len && (line[i] == ' ' || line[i] == '\t')) i++;
    if (fmt == SM_BATCH_TEXT || (fmt == SM_BATCH_AUTO && (i == len || line[i] != '{'))) {
        rec->kind = SM_REC_TEXT;
        memcpy(buf, line, len);
        rec->prompt = buf;
        rec->prompt_len = len;
        return SM_OK;
    }
    rec->kind = fmt == SM_BATCH_OPENAI ? SM_REC_OAI_BAD : SM_REC_JSON;
    cJSON *root;
    sm_status st = sm_json_parse_strict(line, len, NULL, &root, err);
    if (st) {
        if (fmt == SM_BATCH_OPENAI) rec->code = "invalid_json_line";
        return st;
    }
    if (!cJSON_IsObject(root)) {
        st = sm_error_set(err, SM_ERR_INPUT, "expected a JSON object");
        if (fmt == SM_BATCH_OPENAI) rec->code = "invalid_json_line";
    } else if (fmt == SM_BATCH_OPENAI || (fmt == SM_BATCH_AUTO && openai_shaped(root))) {
        st = parse_openai(root, buf, len, rec, err);
    } else {
        st = parse_object(root, buf, rec, err);
    }
    cJSON_Delete(root);
    if (st) sm_batch_record_free(rec);
    return st;
}

void sm_batch_record_free(sm_batch_record *rec) {
    cJSON_Delete(rec->messages);
    cJSON_Delete(rec->prompts);
    free(rec->gtext);
    rec->messages = NULL, rec->prompts = NULL, rec->gtext = NULL;
}

sm_status sm_rec_grammar(sm_batch_record *rec, sm_grammar_kind kind, const cJSON *v, const char *key, sm_error *err) {
    if (kind == SM_GK_GBNF && !cJSON_IsString(v)) return sm_rec_bad(err, key, "must be a string of GBNF rules");
    if (kind == SM_GK_SCHEMA && !cJSON_IsObject(v) && !cJSON_IsBool(v))
        return sm_rec_bad(err, key, "must be a JSON Schema (an object)");
    char *t = kind == SM_GK_GBNF ? strdup(v->valuestring) : cJSON_PrintUnformatted(v);
    if (!t) return sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    free(rec->gtext);
    rec->gtext = t, rec->gkind = kind;
    return SM_OK;
}
