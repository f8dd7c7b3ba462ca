/*
** tokenize.c -- `smallmind tokenize` (text -> ids) and `detokenize` (ids -> text):
** only the config and the tokenizer are loaded, not the weights.
*/
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sm_config.h"
#include "sm_gguf.h"
#include "sm_convert.h"

#include <sys/stat.h>

int cli_tokenize(const cli_opts *o) {
    sm_config cfg;
    sm_tokenizer tok;
    cli_exit_now = 1; /* nothing is printed until the text is encoded: a signal exits at once */
    int rc = cli_load_tokenizer(o, &cfg, &tok);
    if (rc) return rc;
    char *text = NULL;
    size_t len = 0, n = 0;
    bool owned = false;
    int32_t *ids = NULL;
    if ((rc = cli_get_text(o, &text, &len, &owned))) goto done;
    n = sm_tokenizer_encode(&tok, text, len, NULL, 0);
    ids = malloc((n ? n : 1) * sizeof *ids);
    if (!ids) {
        rc = cli_data_error("out of memory");
        goto done;
    }
    sm_tokenizer_encode(&tok, text, len, ids, n);
    cli_exit_now = 0;
    cli_out os = {.last_was_newline = true};
    if (o->json) printf("[");
    for (size_t i = 0; i < n && !cli_interrupted; i++) { /* a signal ends the list early */
        if (!o->json) {
            printf("%s%d", i ? " " : "", (int)ids[i]);
            continue;
        }
        size_t pl;
        const char *p = sm_tokenizer_piece(&tok, ids[i], &pl);
        printf("%s{\"id\": %d, \"piece\": \"", i ? ", " : "", (int)ids[i]);
        cli_json_string(stdout, (const unsigned char *)p, pl);
        printf("\"}");
    }
    printf(o->json ? "]\n" : "\n");
    rc = cli_finish_stdout(&os, cli_interrupted ? cli_interrupt_code() : 0);
done:
    free(ids);
    if (owned) free(text);
    sm_tokenizer_free(&tok);
    sm_config_free(&cfg);
    return rc;
}

int cli_detokenize(const cli_opts *o) {
    if (o->n_args == 0) return cli_usage_error(o, "detokenize takes token ids");
    sm_config cfg;
    sm_tokenizer tok;
    int rc = cli_load_tokenizer(o, &cfg, &tok);
    if (rc) return rc;
    int32_t prev = -1;
    cli_out os = {.last_was_newline = true};
    cli_exit_now = 0;
    for (size_t i = 0; i < o->n_args && !rc && !cli_interrupted; i++) {
        long id;
        if (!cli_parse_long(o->args[i], 0, INT32_MAX, &id) || id >= tok.n_vocab) {
            rc = cli_usage_error(o, "token id '%s' is not a whole number from 0 to %d", o->args[i],
                             tok.n_vocab - 1);
            break;
        }
        size_t pl;
        const char *p = sm_tokenizer_piece_after(&tok, prev, (int32_t)id, &pl);
        fwrite(p, 1, pl, stdout);
        prev = (int32_t)id;
    }
    if (!rc) {
        putchar('\n');
        rc = cli_finish_stdout(&os, cli_interrupted ? cli_interrupt_code() : 0);
    }
    sm_tokenizer_free(&tok);
    sm_config_free(&cfg);
    return rc;
}
