/*
** oai_out.c -- results in the OpenAI API's shapes: the body of a
** chat.completion or text_completion response, and the error object. The
** OpenAI Batch API lines of `generate --batch` wrap them.
*/
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sm_oai.h"

/* A JSON string: "s" with every byte escaped as cli_json_string does. */
static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    cli_json_string(f, (const unsigned char *)s, strlen(s));
    fputc('"', f);
}

/* A token's piece as a JSON string. */
static void piece_str(FILE *f, const sm_tokenizer *tok, int32_t id, const char **p, size_t *n) {
    *p = sm_tokenizer_piece(tok, id, n);
    fputc('"', f);
    cli_json_string(f, (const unsigned char *)*p, *n);
    fputc('"', f);
}

bool cli_toks_reserve(sm_token_info **a, size_t *cap, size_t max_tokens) {
    if (!max_tokens || *cap >= max_tokens) return true;
    sm_token_info *g = realloc(*a, max_tokens * sizeof *g);
    if (!g) return false;
    *a = g, *cap = max_tokens;
    return true;
}

size_t cli_toks_room(const sm_oai_choice *in, bool echo, size_t max_tokens, size_t n_ctx) {
    /* a prompt is at most a token per byte, plus the specials and the space encode may add */
    size_t np = !echo ? 0 : in->ids ? in->n_ids : in->prompt_len + 3, n = max_tokens + np;
    return n < n_ctx && n >= max_tokens ? n : n_ctx;
}

bool cli_toks_push(sm_token_info **a, size_t *n, size_t *cap, const sm_token_info *t) {
    if (*n == *cap && !cli_toks_reserve(a, cap, *cap ? *cap * 2 : 64)) return false;
    (*a)[(*n)++] = *t;
    return true;
}

/* A log-probability: null where there is none (an echoed prompt's first token), and OpenAI's -9999 for
   a token the model rules out (a logit of -inf). */
static void logprob_num(FILE *f, float x) {
    if (isnan(x)) fputs("null", f);
    else fprintf(f, "%.6g", isinf(x) ? -9999.0 : (double)x);
}

/* chat's {"token", "logprob", "bytes"} of one id (without the closing brace). */
static void chat_entry(FILE *f, const sm_tokenizer *tok, int32_t id, float logprob) {
    const char *p;
    size_t n;
    fputs("{\"token\": ", f);
    piece_str(f, tok, id, &p, &n);
    fputs(", \"logprob\": ", f);
    logprob_num(f, logprob);
    fputs(", \"bytes\": [", f);
    for (size_t b = 0; b < n; b++) fprintf(f, "%s%u", b ? ", " : "", (unsigned char)p[b]);
    fputc(']', f);
}

void cli_oai_logprobs(FILE *f, const sm_tokenizer *tok, bool chat, const sm_token_info *t, size_t from, size_t to) {
    const char *p;
    size_t n;
    if (chat) {
        fputs("{\"content\": [", f);
        for (size_t i = from; i < to; i++) {
            if (i > from) fputs(", ", f);
            chat_entry(f, tok, t[i].id, t[i].logprob);
            fputs(", \"top_logprobs\": [", f);
            for (size_t k = 0; k < t[i].n_top; k++) {
                if (k) fputs(", ", f);
                chat_entry(f, tok, t[i].top_id[k], t[i].top_logprob[k]);
                fputc('}', f);
            }
            fputs("]}", f);
        }
        fputs("]}", f);
        return;
    }
    fputs("{\"tokens\": [", f);
    for (size_t i = from; i < to; i++) {
        if (i > from) fputs(", ", f);
        piece_str(f, tok, t[i].id, &p, &n);
    }
    fputs("], \"token_logprobs\": [", f);
    for (size_t i = from; i < to; i++) {
        if (i > from) fputs(", ", f);
        logprob_num(f, t[i].logprob);
    }
    fputs("], \"top_logprobs\": [", f);
    for (size_t i = from; i < to; i++) {
        if (i > from) fputs(", ", f);
        if (isnan(t[i].logprob)) { /* an echoed prompt's first token: nothing before it */
            fputs("null", f);
            continue;
        }
        fputc('{', f);
        for (size_t k = 0; k < t[i].n_top; k++) {
            if (k) fputs(", ", f);
            piece_str(f, tok, t[i].top_id[k], &p, &n);
            fputs(": ", f);
            logprob_num(f, t[i].top_logprob[k]);
        }
        fputc('}', f);
    }
    fputs("]}", f);
}

char *cli_oai_echo_text(const sm_tokenizer *tok, const sm_oai_choice *in, size_t *len) {
    char *t = NULL;
    size_t cap = 0;
    if (!in->ids) {
        if (!(t = malloc(in->prompt_len + 1))) return NULL;
        memcpy(t, in->prompt, in->prompt_len);
        *len = in->prompt_len;
    } else if (!cli_decode(tok, tok->bos, in->ids, in->n_ids, &t, &cap, len) || !sm_grow((void **)&t, &cap, *len + 1, 1)) {
        free(t);
        return NULL;
    }
    t[*len] = '\0';
    return t;
}

void cli_oai_usage_add(sm_gen_stats *sum, const sm_gen_stats *gs, bool first) {
    if (first) sum->n_prompt += gs->n_prompt, sum->n_reused += gs->n_reused, sum->t_prefill += gs->t_prefill;
    sum->n_generated += gs->n_generated, sum->t_decode += gs->t_decode;
}

void cli_oai_usage(FILE *f, const sm_gen_stats *sum) {
    fprintf(f, "\"usage\": {\"prompt_tokens\": %zu, \"completion_tokens\": %zu, \"total_tokens\": %zu, "
               "\"prompt_tokens_details\": {\"cached_tokens\": %zu}}",
            sum->n_prompt, sum->n_generated, sum->n_prompt + sum->n_generated, sum->n_reused);
}

void cli_oai_body(FILE *f, const cli_oai_result *r) {
    bool chat = r->kind == SM_REC_OAI_CHAT;
    sm_gen_stats sum = {0}; /* each prompt's tokens once (its first choice's), every choice's completion */
    fprintf(f, "{\"id\": \"%s-%s\", \"object\": \"%s\", \"created\": %lld, \"model\": ",
            chat ? "chatcmpl" : "cmpl", r->id_suffix, chat ? "chat.completion" : "text_completion",
            (long long)r->created);
    json_str(f, r->model);
    fputs(", \"choices\": [", f);
    for (size_t i = 0; i < r->n_ch; i++) {
        const cli_oai_choice *c = &r->ch[i];
        const sm_gen_stats *gs = &c->stats;
        cli_oai_usage_add(&sum, gs, i % r->n == 0);
        fprintf(f, "%s{\"index\": %zu, ", i ? ", " : "", i);
        if (chat) fputs("\"message\": {\"role\": \"assistant\", \"content\": \"", f);
        else fputs("\"text\": \"", f);
        if (c->pre) cli_json_string(f, (const unsigned char *)c->pre, c->pre_len); /* "echo" */
        cli_json_string(f, (const unsigned char *)c->text, c->len);
        fprintf(f, "\"%s, \"logprobs\": ", chat ? ", \"refusal\": null}" : "");
        if (r->logprobs) cli_oai_logprobs(f, r->tok, chat, c->toks, 0, c->n_tok);
        else fputs("null", f);
        fprintf(f, ", \"finish_reason\": \"%s\"}", sm_oai_finish(gs->finish));
    }
    fputs("], ", f);
    cli_oai_usage(f, &sum);
    fputs(", ", f);
    fprintf(f, "\"system_fingerprint\": \"smallmind-%s\", ", SM_VERSION);
    /* llama.cpp's server adds the same object under the same name (several choices: their sums) */
    size_t np = sum.n_prompt - sum.n_reused;
    fprintf(f, "\"timings\": {\"queue_ms\": %.3f, \"cache_n\": %zu, \"prompt_n\": %zu, \"prompt_ms\": %.3f, "
               "\"predicted_n\": %zu, \"predicted_ms\": %.3f, \"predicted_per_second\": %.2f}}",
            r->t_queue * 1e3, sum.n_reused, np, sum.t_prefill * 1e3, sum.n_generated, sum.t_decode * 1e3,
            sum.n_generated > r->n_ch && sum.t_decode > 0 ? (double)(sum.n_generated - r->n_ch) / sum.t_decode : 0.0);
}

void cli_oai_error(FILE *f, const char *msg, const char *type, const char *param, const char *code) {
    fputs("{\"error\": {\"message\": ", f);
    json_str(f, msg);
    fputs(", \"type\": ", f);
    json_str(f, type);
    fputs(", \"param\": ", f);
    if (param && *param) json_str(f, param);
    else fputs("null", f);
    fputs(", \"code\": ", f);
    if (code) json_str(f, code);
    else fputs("null", f);
    fputs("}}", f);
}
