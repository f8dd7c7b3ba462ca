/*
** batch.c -- parsing one `generate --batch` input line (plain or JSON).
*/
#include "sm_batch.h"

#include "json_internal.h"
#include "sm_chat.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

static sm_status bad(sm_error *err, const char *key, const char *what) {
    return sm_error_set(err, SM_ERR_INPUT, "\"%s\" %s", key, what);
}

/* A number in [lo, hi], or (lo, hi] if open, into *out. */
static sm_status number(const cJSON *v, const char *key, double lo, double hi, bool open, float *out,
                        sm_error *err) {
    double x = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if (!(open ? x > lo : x >= lo) || !(x <= hi)) {
        char msg[96];
        if (open) snprintf(msg, sizeof msg, "must be a number in (%g, %g]", lo, hi);
        else snprintf(msg, sizeof msg, "must be a number from %g to %g", lo, hi);
        return bad(err, key, msg);
    }
    *out = (float)x;
    return SM_OK;
}

/* A whole number in [lo, hi]. */
static sm_status whole(const cJSON *v, const char *key, double lo, double hi, long long *out,
                       sm_error *err) {
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble != floor(v->valuedouble) ||
        v->valuedouble < lo || v->valuedouble > hi) {
        char msg[96];
        snprintf(msg, sizeof msg, "must be a whole number from %.0f to %.0f", lo, hi);
        return bad(err, key, msg);
    }
    *out = (long long)v->valuedouble;
    return SM_OK;
}

static sm_status add_stop(sm_batch_record *rec, const cJSON *s, sm_error *err) {
    if (!cJSON_IsString(s) || !s->valuestring)
        return bad(err, "stop", "must be a string or an array of strings");
    size_t n = strlen(s->valuestring);
    if (n < 1 || n > SM_STOP_MAX_BYTES) {
        char msg[80];
        snprintf(msg, sizeof msg, "strings must have 1 to %d bytes", SM_STOP_MAX_BYTES);
        return bad(err, "stop", msg);
    }
    if (rec->n_stop == SM_STOP_MAX) {
        char msg[48];
        snprintf(msg, sizeof msg, "has more than %d strings", SM_STOP_MAX);
        return bad(err, "stop", msg);
    }
    memcpy(rec->stop[rec->n_stop++], s->valuestring, n + 1);
    return SM_OK;
}

/* Whether s is valid UTF-8 (RFC 3629: no overlong forms, surrogates or code points past U+10FFFF). */
static bool utf8_valid(const char *str) {
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

static sm_status parse_object(const cJSON *root, char *buf, sm_batch_record *rec, sm_error *err) {
    if (!cJSON_IsObject(root)) return sm_error_set(err, SM_ERR_INPUT, "expected a JSON object");
    sm_sampler_params *sp = &rec->sampling;
    sm_status st = SM_OK;
    bool have_prompt = false;
    for (const cJSON *v = root->child; v && !st; v = v->next) {
        const char *k = v->string ? v->string : "";
        long long x;
        if (strcmp(k, "id") == 0) {
            if (!cJSON_IsString(v) && !cJSON_IsNumber(v))
                return bad(err, k, "must be a string or a number");
            if (cJSON_IsString(v) && !utf8_valid(v->valuestring)) /* it is echoed as JSON */
                return bad(err, k, "must be valid UTF-8");
            if (!cJSON_PrintPreallocated((cJSON *)v, rec->id, SM_REC_ID_MAX - 8, false))
                return bad(err, k, "is too long");
        } else if (strcmp(k, "prompt") == 0) {
            if (!cJSON_IsString(v) || !v->valuestring) return bad(err, k, "must be a string");
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
            if (!(st = whole(v, k, 0, 1 << 30, &x, err))) rec->max_tokens = (long)x;
            rec->set |= SM_REC_MAX_TOKENS;
        } else if (strcmp(k, "top_k") == 0) {
            if (!(st = whole(v, k, 0, 1 << 30, &x, err))) sp->top_k = (int)x;
        } else if (strcmp(k, "seed") == 0) {
            if (!(st = whole(v, k, 0, 2147483647.0, &x, err))) sp->seed = (uint64_t)x;
        } else if (strcmp(k, "repeat_last_n") == 0) {
            if (!(st = whole(v, k, 0, SM_SAMPLER_MAX_LAST_N, &x, err))) sp->repeat_last_n = (int)x;
        } else if (strcmp(k, "temperature") == 0) {
            st = number(v, k, 0, 1000, false, &sp->temperature, err);
        } else if (strcmp(k, "top_p") == 0) {
            st = number(v, k, 0, 1, true, &sp->top_p, err);
        } else if (strcmp(k, "min_p") == 0) {
            st = number(v, k, 0, 1, false, &sp->min_p, err);
        } else if (strcmp(k, "repeat_penalty") == 0) {
            st = number(v, k, 0, 100, true, &sp->repeat_penalty, err);
        } else if (strcmp(k, "presence_penalty") == 0) {
            st = number(v, k, -100, 100, false, &sp->presence_penalty, err);
        } else if (strcmp(k, "frequency_penalty") == 0) {
            st = number(v, k, -100, 100, false, &sp->frequency_penalty, err);
        } else if (strcmp(k, "stop") == 0) {
            rec->set |= SM_REC_STOP;
            if (cJSON_IsArray(v)) {
                for (const cJSON *s = v->child; s && !st; s = s->next) st = add_stop(rec, s, err);
            } else {
                st = add_stop(rec, v, err);
            }
        } else {
            return sm_error_set(err, SM_ERR_INPUT,
                                "unknown key \"%.64s\" (known: id, prompt, messages, max_tokens, "
                                "temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n, "
                                "presence_penalty, frequency_penalty, seed, stop)", k);
        }
    }
    if (!st && have_prompt && rec->messages)
        st = sm_error_set(err, SM_ERR_INPUT, "give \"prompt\" or \"messages\", not both");
    if (!st && !have_prompt && !rec->messages)
        st = sm_error_set(err, SM_ERR_INPUT, "missing key \"prompt\" (or \"messages\")");
    return st;
}

sm_status sm_batch_parse(const char *line, size_t len, char *buf, const sm_sampler_params *defaults,
                         sm_batch_record *rec, sm_error *err) {
    memset(rec, 0, sizeof *rec);
    rec->sampling = *defaults;
    size_t i = 0;
    while (i < len && (line[i] == ' ' || line[i] == '\t')) i++;
    if (i == len || line[i] != '{') {
        memcpy(buf, line, len);
        rec->prompt = buf;
        rec->prompt_len = len;
        return SM_OK;
    }
    cJSON *root;
    sm_status st = sm_json_parse_strict(line, len, NULL, &root, err);
    if (st) return st;
    st = parse_object(root, buf, rec, err);
    cJSON_Delete(root);
    if (st) {
        cJSON_Delete(rec->messages);
        rec->messages = NULL;
    }
    return st;
}
