/*
** tokenize.c -- `smallmind tokenize` (text -> ids) and `detokenize` (ids -> text):
** only the config and the tokenizer are loaded, not the weights. With --batch
** FILE, one JSON line in, one JSON line out (flushed: a coprocess gets each
** answer at once), the tokenizer loaded once for all of them.
*/
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sm_config.h"
#include "sm_gguf.h"
#include "sm_convert.h"
#include "json_internal.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

static int batch(const cli_opts *o, sm_tokenizer *tok, bool encode);

int cli_tokenize(const cli_opts *o) {
    sm_source *src = NULL;
    sm_tokenizer tok;
    cli_exit_now = 1; /* nothing is printed until the text is encoded: a signal exits at once */
    int rc = cli_load_tokenizer(o, &src, &tok);
    if (rc) return rc;
    if (o->batch_file) {
        rc = batch(o, &tok, true);
        sm_tokenizer_free(&tok);
        sm_source_close(src);
        return rc;
    }
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
    if (o->n_args == 0 && !o->batch_file && (rc = cli_get_text(o, &text, &len, &owned))) return rc;
    sm_source *src = NULL;
    sm_tokenizer tok;
    if ((rc = cli_load_tokenizer(o, &src, &tok))) {
        if (owned) free(text);
        return rc;
    }
    if (o->batch_file) {
        rc = batch(o, &tok, false);
        sm_tokenizer_free(&tok);
        sm_source_close(src);
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
    /* the ids are a whole text: its first piece drops the prefixed space, with BOS or without
       (as llama.cpp's detokenize and Hugging Face's Strip decoder do) */
    char *out = NULL;
    size_t ocap = 0, tl = 0;
    if (!rc && !cli_decode(&tok, tok.bos, ids, n, &out, &ocap, &tl)) rc = cli_data_error("out of memory");
    cli_out os = {.last_was_newline = true};
    cli_exit_now = 0;
    if (!rc) fwrite(out, 1, tl, stdout);
    char last = tl ? out[tl - 1] : '\n';
    free(out);
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

bool cli_json_ids(const struct cJSON *a, const char *field, int32_t n_vocab, int32_t **ids, size_t *cap,
                  size_t *n, char *err, size_t errcap) {
    *n = 0;
    if (!cJSON_IsArray(a)) {
        snprintf(err, errcap, "\"%s\" must be an array of token ids", field);
        return false;
    }
    if (!sm_grow((void **)ids, cap, (size_t)cJSON_GetArraySize(a) + 1, sizeof **ids)) {
        snprintf(err, errcap, "out of memory");
        return false;
    }
    for (const cJSON *v = a->child; v; v = v->next) {
        double d = cJSON_IsNumber(v) ? v->valuedouble : -1;
        if (!(d >= 0 && d < n_vocab && d == (double)(int32_t)d)) {
            snprintf(err, errcap, "\"%s\": item %zu is not a token id (a whole number from 0 to %d)", field, *n,
                     (int)n_vocab - 1);
            return false;
        }
        (*ids)[(*n)++] = (int32_t)d;
    }
    return true;
}

bool cli_decode(const sm_tokenizer *t, int32_t prev, const int32_t *ids, size_t n, char **buf, size_t *cap,
                size_t *len) {
    *len = sm_tokenizer_decode(t, prev, ids, n, *buf, *cap);
    if (*len <= *cap) return true;
    if (!sm_grow((void **)buf, cap, *len, 1)) return false;
    sm_tokenizer_decode(t, prev, ids, n, *buf, *cap);
    return true;
}

/*
** --batch: each line of the file (or stdin) is a record; blank lines are
** skipped. tokenize reads a JSON string or {"text": ..., "id": ...} and
** writes {"id": ..., "ids": [...]}; detokenize reads [ids] or {"ids": [...],
** "id": ...} and writes {"id": ..., "text": ...} (bytes that are not UTF-8
** as U+FFFD). A bad line gets {"line": N, "error": ...} and the run goes on;
** the exit status is then 1. The buffers are kept from line to line.
*/
typedef struct {
    int32_t *ids;
    size_t cap, n;
    char *text;
    size_t text_cap;
} bbuf;

/* The ids of JSON string v into b (encoded once when they fit what b holds). */
static bool encode(sm_tokenizer *tok, const cJSON *v, bbuf *b, char *msg, size_t cap) {
    if (!cJSON_IsString(v)) {
        snprintf(msg, cap, "expected a JSON string or an object with a string \"text\"");
        return false;
    }
    size_t sl = strlen(v->valuestring);
    if (!sm_grow((void **)&b->text, &b->text_cap, sl + 1, 1)) {
        snprintf(msg, cap, "out of memory");
        return false;
    }
    size_t tl = sm_json_unnul(v->valuestring, sl, b->text);
    b->n = sm_tokenizer_encode(tok, b->text, tl, b->ids, b->cap);
    if (b->n <= b->cap) return true;
    if (!sm_grow((void **)&b->ids, &b->cap, b->n, sizeof *b->ids)) {
        snprintf(msg, cap, "out of memory");
        return false;
    }
    sm_tokenizer_encode(tok, b->text, tl, b->ids, b->cap);
    return true;
}

/* One record; its answer (or the reason it has none, in msg) on stdout. */
static bool one(sm_tokenizer *tok, bool enc, const char *line, size_t len, bbuf *b, char *msg, size_t cap) {
    cJSON *j = NULL;
    sm_error err = {{0}};
    if (sm_json_parse_nul(line, len, NULL, &j, &err)) {
        snprintf(msg, cap, "not JSON: %s", err.msg);
        return false;
    }
    const cJSON *id = cJSON_IsObject(j) ? cJSON_GetObjectItemCaseSensitive(j, "id") : NULL;
    const cJSON *v = cJSON_IsObject(j) ? cJSON_GetObjectItemCaseSensitive(j, enc ? "text" : "ids") : j;
    bool ok;
    size_t tl = 0;
    if (enc) {
        ok = encode(tok, v, b, msg, cap);
    } else if (!(ok = cJSON_IsArray(v))) {
        snprintf(msg, cap, "expected a JSON array of token ids or an object with an array \"ids\"");
    } else if ((ok = cli_json_ids(v, "ids", tok->n_vocab, &b->ids, &b->cap, &b->n, msg, cap)) &&
               !(ok = cli_decode(tok, tok->bos, b->ids, b->n, &b->text, &b->text_cap, &tl))) {
        snprintf(msg, cap, "out of memory");
    }
    char *t = ok && id ? cJSON_PrintUnformatted(id) : NULL;
    if (ok) printf("{%s%s%s", t ? "\"id\": " : "", t ? t : "", t ? ", " : "");
    if (ok && enc) {
        printf("\"ids\": [");
        for (size_t i = 0; i < b->n; i++) printf("%s%d", i ? ", " : "", (int)b->ids[i]);
        printf("]}\n");
    } else if (ok) {
        printf("\"text\": \"");
        cli_json_string(stdout, (const unsigned char *)b->text, tl);
        printf("\"}\n");
    }
    free(t);
    cJSON_Delete(j);
    return ok;
}

static int batch(const cli_opts *o, sm_tokenizer *tok, bool encode) {
    bool std_in = strcmp(o->batch_file, "-") == 0;
    FILE *in = std_in ? stdin : fopen(o->batch_file, "r");
    char m[600];
    if (!in) {
        snprintf(m, sizeof m, "%s: %s", o->batch_file, strerror(errno));
        return cli_data_error(m);
    }
    cli_exit_now = 0;
    bbuf b = {0};
    char *line = NULL;
    size_t lcap = 0, line_no = 0, n_bad = 0;
    ssize_t len;
    int rc = 0;
    while (!cli_interrupted && (len = getline(&line, &lcap, in)) >= 0) {
        line_no++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) len--;
        size_t k = 0;
        while (k < (size_t)len && strchr(" \t", line[k])) k++;
        if (k == (size_t)len) continue;
        if (!one(tok, encode, line, (size_t)len, &b, m, sizeof m)) {
            n_bad++;
            printf("{\"line\": %zu, \"error\": \"", line_no);
            cli_json_string(stdout, (const unsigned char *)m, strlen(m));
            printf("\"}\n");
        }
        if (fflush(stdout)) break;
    }
    if (ferror(in)) {
        snprintf(m, sizeof m, "%s: %s", o->batch_file, strerror(errno));
        rc = cli_data_error(m);
    }
    if (!std_in) fclose(in);
    free(line), free(b.ids), free(b.text);
    cli_out os = {.last_was_newline = true};
    rc = cli_finish_stdout(&os, rc ? rc : cli_interrupted ? cli_interrupt_code() : 0);
    if (!rc && n_bad) {
        fprintf(stderr, "smallmind: %s: %zu of %zu lines were not %s records\n", std_in ? "stdin" : o->batch_file,
                n_bad, line_no, encode ? "tokenize" : "detokenize");
        rc = 1;
    }
    return rc;
}
