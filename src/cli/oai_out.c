/*
** oai_out.c -- results in the OpenAI API's shapes: the body of a
** chat.completion or text_completion response, and the error object. The
** OpenAI Batch API lines of `generate --batch` wrap them.
*/
#include "cli.h"

#include <stdio.h>
#include <string.h>

#include "sm_oai.h"

/* A JSON string: "s" with every byte escaped as cli_json_string does. */
static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    cli_json_string(f, (const unsigned char *)s, strlen(s));
    fputc('"', f);
}

void cli_oai_body(FILE *f, const cli_oai_result *r) {
    bool chat = r->kind == SM_REC_OAI_CHAT;
    const sm_gen_stats *gs = r->stats;
    fprintf(f, "{\"id\": \"%s-%s\", \"object\": \"%s\", \"created\": %lld, \"model\": ",
            chat ? "chatcmpl" : "cmpl", r->id_suffix, chat ? "chat.completion" : "text_completion",
            (long long)r->created);
    json_str(f, r->model);
    fputs(", \"choices\": [{\"index\": 0, ", f);
    if (chat) fputs("\"message\": {\"role\": \"assistant\", \"content\": \"", f);
    else fputs("\"text\": \"", f);
    cli_json_string(f, (const unsigned char *)r->text, r->len);
    fprintf(f, "\"%s, \"logprobs\": null, \"finish_reason\": \"%s\"}], ", chat ? ", \"refusal\": null}" : "",
            sm_oai_finish(gs->finish));
    fprintf(f, "\"usage\": {\"prompt_tokens\": %zu, \"completion_tokens\": %zu, \"total_tokens\": %zu, "
               "\"prompt_tokens_details\": {\"cached_tokens\": %zu}}, ",
            gs->n_prompt, gs->n_generated, gs->n_prompt + gs->n_generated, gs->n_reused);
    fprintf(f, "\"system_fingerprint\": \"smallmind-%s\", ", SM_VERSION);
    /* llama.cpp's server adds the same object under the same name */
    size_t np = gs->n_prompt - gs->n_reused;
    fprintf(f, "\"timings\": {\"queue_ms\": %.3f, \"cache_n\": %zu, \"prompt_n\": %zu, \"prompt_ms\": %.3f, "
               "\"predicted_n\": %zu, \"predicted_ms\": %.3f, \"predicted_per_second\": %.2f}}",
            r->t_queue * 1e3, gs->n_reused, np, gs->t_prefill * 1e3, gs->n_generated, gs->t_decode * 1e3,
            gs->n_generated > 1 && gs->t_decode > 0 ? (double)(gs->n_generated - 1) / gs->t_decode : 0.0);
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
