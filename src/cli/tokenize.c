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

/* A model directory's config, or a GGUF file's (read, then closed: the tokenizer copies its tables). */
static int load_tokenizer(const cli_opts *o, sm_config *cfg, sm_tokenizer *tok) {
    sm_error err = {{0}};
    struct stat sb;
    sm_gguf g = {0};
    memset(cfg, 0, sizeof *cfg);
    sm_hf_dir *hf = NULL;
    bool file = stat(o->model, &sb) == 0 && S_ISREG(sb.st_mode);
    bool hfdir = !file && sm_convert_is_hf_dir(o->model);
    if (file ? sm_gguf_open(&g, o->model, true, &err) || sm_gguf_vocab_config(cfg, &g, o->model, &err)
             : hfdir ? sm_convert_open_hf(o->model, false, &hf, cfg, NULL, NULL, &err)
                     : sm_config_load(cfg, o->model, &err)) {
        if (file) sm_config_free(cfg);
        sm_gguf_close(&g);
        return cli_data_error(err.msg);
    }
    sm_status st = sm_tokenizer_init(tok, cfg, o->model, &err);
    cfg->gguf = NULL, cfg->tok_dir = NULL;
    sm_gguf_close(&g);
    sm_convert_close_hf(hf);
    if (st) {
        sm_config_free(cfg);
        return cli_data_error(err.msg);
    }
    tok->parse_special = o->special;
    if (o->no_bos) tok->add_bos = false;
    return 0;
}

int cli_tokenize(const cli_opts *o) {
    sm_config cfg;
    sm_tokenizer tok;
    cli_exit_now = 1; /* nothing is printed until the text is encoded: a signal exits at once */
    int rc = load_tokenizer(o, &cfg, &tok);
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
    int rc = load_tokenizer(o, &cfg, &tok);
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
