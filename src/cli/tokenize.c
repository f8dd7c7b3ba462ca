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
#include <unistd.h>

int cli_tokenize(const cli_opts *o) {
    sm_source *src = NULL;
    sm_tokenizer tok;
    cli_exit_now = 1; /* nothing is printed until the text is encoded: a signal exits at once */
    int rc = cli_load_tokenizer(o, &src, &tok);
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
    sm_source_close(src);
    return rc;
}

/* One token id of the list (ids separated by white space or commas, in [ ] or not). */
static int parse_id(const cli_opts *o, const char *s, size_t n, int32_t n_vocab, int32_t *id) {
    char b[32];
    long v;
    snprintf(b, sizeof b, "%.*s", (int)(n < 31 ? n : 31), s);
    if (n > 31 || !cli_parse_long(b, 0, INT32_MAX, &v) || v >= n_vocab)
        return cli_usage_error(o, "token id '%.*s' is not a whole number from 0 to %d", (int)(n < 40 ? n : 40), s,
                               (int)n_vocab - 1);
    *id = (int32_t)v;
    return 0;
}

/*
** detokenize IDS... or, with none, the ids in -f FILE or on standard input
** (what tokenize prints: white space or commas between them, [ ] around
** them or not). The text is written as it is, so tokenize and detokenize
** round-trip byte for byte; a terminal gets a newline after it.
*/
int cli_detokenize(const cli_opts *o) {
    char *text = NULL;
    size_t len = 0;
    bool owned = false;
    int rc = 0;
    if (o->n_args == 0 && (rc = cli_get_text(o, &text, &len, &owned))) return rc;
    sm_source *src = NULL;
    sm_tokenizer tok;
    if ((rc = cli_load_tokenizer(o, &src, &tok))) {
        if (owned) free(text);
        return rc;
    }
    /* every id checked before any text is written: a bad one leaves the output empty */
    size_t cap = o->n_args ? o->n_args : len / 2 + 1, n = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    if (!ids) rc = cli_data_error("out of memory");
    for (size_t i = 0, k = 0; !rc;) {
        const char *s;
        size_t l;
        if (o->n_args) {
            if (k >= o->n_args) break;
            s = o->args[k++], l = strlen(s);
        } else {
            while (i < len && text[i] && strchr(" \t\r\n,[]", text[i])) i++;
            if (i >= len) break;
            s = text + i;
            while (i < len && !strchr(" \t\r\n,[]", text[i])) i++;
            l = (size_t)(text + i - s);
        }
        if (!(rc = parse_id(o, s, l, tok.n_vocab, &ids[n]))) n++;
    }
    cli_out os = {.last_was_newline = true};
    char last = '\n';
    cli_exit_now = 0;
    for (size_t i = 0; !rc && i < n && !cli_interrupted; i++) {
        size_t pl;
        /* the ids are a whole text: its first piece drops the prefixed space, with BOS or without
           (as llama.cpp's detokenize and Hugging Face's Strip decoder do) */
        const char *p = sm_tokenizer_piece_after(&tok, i ? ids[i - 1] : tok.bos, ids[i], &pl);
        fwrite(p, 1, pl, stdout);
        if (pl) last = p[pl - 1];
    }
    if (!rc) {
        if (last != '\n' && isatty(STDOUT_FILENO)) putchar('\n');
        rc = cli_finish_stdout(&os, cli_interrupted ? cli_interrupt_code() : 0);
    }
    free(ids);
    if (owned) free(text);
    sm_tokenizer_free(&tok);
    sm_source_close(src);
    return rc;
}
