/*
** template.c -- `smallmind template`: a conversation rendered by the chat
** template (the model's, or --chat-template FILE), as the model will read
** it; --ids prints the token ids instead. Only the config and the tokenizer
** are loaded. The conversation (-f FILE, -p TEXT or stdin) is a JSON list
** of {role, content}, or an object of template variables holding
** "messages" (tools, date_string, enable_thinking, ... go beside it).
*/
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_internal.h"

int cli_template(const cli_opts *o) {
    sm_source *src = NULL;
    sm_tokenizer tok;
    int rc = cli_load_tokenizer(o, &src, &tok);
    if (rc) return rc;
    sm_chat chat = {0};
    char *text = NULL, *out = NULL;
    size_t len = 0, out_len = 0;
    bool owned = false;
    cJSON *root = NULL, *vars = NULL;
    int32_t *ids = NULL;
    sm_error err = {{0}};
    const char *where = o->file ? o->file : o->prompt ? "-p" : "stdin";
    if ((rc = cli_chat_setup(o, &src->cfg, &tok, &chat)) || (rc = cli_get_text(o, &text, &len, &owned)))
        goto done;
    if (sm_json_parse_strict(text, len, where, &root, &err)) {
        rc = cli_data_error(err.msg);
        goto done;
    }
    const cJSON *msgs = root;
    if (cJSON_IsObject(root)) {
        vars = root;
        msgs = cJSON_GetObjectItemCaseSensitive(root, "messages");
        if (!msgs) {
            fprintf(stderr, "smallmind: %s: the object has no \"messages\"\n", where);
            rc = EXIT_DATA;
            goto done;
        }
    }
    if (sm_chat_check_messages(msgs, where, &err)) {
        rc = cli_data_error(err.msg);
        goto done;
    }
    if (o->system) { /* --system: first, in place of the conversation's own */
        cJSON *sys = sm_chat_message("system", o->system, strlen(o->system));
        cJSON *m = (cJSON *)msgs;
        if (m->child && !strcmp(cJSON_GetObjectItemCaseSensitive(m->child, "role")->valuestring, "system"))
            cJSON_DeleteItemFromArray(m, 0);
        cJSON_InsertItemInArray(m, 0, sys);
    }
    if (sm_chat_render(&chat, msgs, !o->no_gen_prompt, vars, &out, &out_len, &err)) {
        rc = cli_data_error(err.msg);
        goto done;
    }
    cli_exit_now = 0;
    cli_out os = {.last_was_newline = true};
    if (!o->ids) {
        cli_out_write(&os, out, out_len);
    } else {
        /* apply_chat_template(tokenize=True)'s ids: the text's, special tokens parsed, nothing
           added (generate adds the tokenizer's BOS when the template writes none, as llama.cpp) */
        size_t n = sm_tokenizer_encode_as(&tok, out, out_len, NULL, 0, SM_ENCODE_SPECIAL);
        if (!(ids = malloc((n + 1) * sizeof *ids))) {
            rc = cli_data_error("out of memory");
            goto done;
        }
        sm_tokenizer_encode_as(&tok, out, out_len, ids, n + 1, SM_ENCODE_SPECIAL);
        char num[16];
        for (size_t i = 0; i < n; i++) {
            int k = snprintf(num, sizeof num, "%s%d", i ? " " : "", (int)ids[i]);
            cli_out_write(&os, num, (size_t)k);
        }
        cli_out_write(&os, "\n", 1);
    }
    rc = cli_finish_stdout(&os, 0);
done:
    free(ids);
    free(out);
    cJSON_Delete(root);
    if (owned) free(text);
    sm_chat_free(&chat);
    sm_tokenizer_free(&tok);
    sm_source_close(src);
    return rc;
}
