/*
** output.c -- stdout (written straight to the descriptor, a closed pipe
** ending the run quietly), JSON text, and reading the input text.
*/
#include "cli.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_PROMPT_BYTES ((size_t)256 << 20)

volatile sig_atomic_t cli_interrupted;
volatile sig_atomic_t cli_exit_now;

char cli_bus_msg[4600];
size_t cli_bus_len;

void cli_set_mapped(const char *what) {
    int n = snprintf(cli_bus_msg, sizeof cli_bus_msg,
                     "smallmind: %s changed or was truncated while it was memory-mapped (SIGBUS); "
                     "leave it alone while it runs, or use --no-mmap\n",
                     what);
    cli_bus_len = n > 0 && (size_t)n < sizeof cli_bus_msg ? (size_t)n : 0;
}

int cli_interrupt_code(void) {
    return 128 + (cli_interrupted ? (int)cli_interrupted : SIGINT);
}

int cli_data_error(const char *msg) {
    fprintf(stderr, "smallmind: %s\n", msg);
    return EXIT_DATA;
}

int cli_run_error(const cli_opts *o, sm_status st, const char *msg) {
    fprintf(stderr, "smallmind: %s%s%s\n", st == SM_ERR_RUNTIME ? o->model : "",
            st == SM_ERR_RUNTIME ? ": " : "", msg);
    return EXIT_DATA;
}

int cli_out_write(cli_out *os, const char *s, size_t n) {
    if (os->pipe_closed || os->write_errno) return 1;
    if (n == 0) return 0;
    bool nl = s[n - 1] == '\n';
    while (n > 0) { /* straight to the descriptor: nothing is left half-written in a buffer */
        ssize_t w = write(STDOUT_FILENO, s, n);
        if (w < 0) {
            if (errno == EINTR) continue; /* Ctrl-C: finish this piece (a second one exits) */
            if (errno == EPIPE)
                os->pipe_closed = true;
            else
                os->write_errno = errno;
            return 1;
        }
        s += w;
        n -= (size_t)w;
    }
    os->last_was_newline = nl;
    return 0;
}

/* Final flush and close of stdout; returns the exit code to use. */
int cli_finish_stdout(cli_out *os, int code) {
    if (!os->pipe_closed && !os->write_errno) {
        if (fflush(stdout) != 0 && errno != EPIPE) os->write_errno = errno;
    }
    if (fclose(stdout) != 0 && errno != EPIPE && !os->pipe_closed && !os->write_errno)
        os->write_errno = errno;
    if (os->write_errno && !os->pipe_closed) {
        fprintf(stderr, "smallmind: cannot write output: %s\n", strerror(os->write_errno));
        return code ? code : EXIT_DATA;
    }
    return code;
}

/*
** Appends s[0..n) to f as the inside of a JSON string. Every byte that does
** not start a valid UTF-8 sequence (RFC 3629: no overlong forms, no
** surrogates, nothing past U+10FFFF) becomes U+FFFD, so the output is
** always valid UTF-8 JSON; text output elsewhere stays byte-exact.
*/
void cli_json_string(FILE *f, const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t need = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        bool ok = need > 0 && i + need <= n;
        for (size_t k = 1; ok && k < need; k++) ok = (s[i + k] & 0xC0) == 0x80;
        /* overlong forms, UTF-16 surrogates (ED A0..BF) and code points past U+10FFFF */
        if (ok && need == 2 && c < 0xC2) ok = false;
        if (ok && need == 3 && ((c == 0xE0 && s[i + 1] < 0xA0) || (c == 0xED && s[i + 1] > 0x9F)))
            ok = false;
        if (ok && need == 4 && ((c == 0xF0 && s[i + 1] < 0x90) || (c == 0xF4 && s[i + 1] > 0x8F) || c > 0xF4))
            ok = false;
        if (!ok) {
            fputs("\\ufffd", f);
            i++;
            continue;
        }
        if (need == 1) {
            if (c == '"' || c == '\\')
                fprintf(f, "\\%c", c);
            else if (c == '\n')
                fputs("\\n", f);
            else if (c == '\t')
                fputs("\\t", f);
            else if (c == '\r')
                fputs("\\r", f);
            else if (c < 0x20 || c == 0x7F)
                fprintf(f, "\\u%04x", c);
            else
                fputc(c, f);
        } else {
            fwrite(s + i, 1, need, f);
        }
        i += need;
    }
}

/* {"text": ..., counts, finish, timing} without the braces' closing newline. */
void cli_json_result(FILE *f, const char *text, size_t len, const sm_gen_stats *gs,
                     size_t dropped, double t_queue) {
    double dec = gs->n_generated > 1 && gs->t_decode > 0
                     ? (double)(gs->n_generated - 1) / gs->t_decode : 0;
    fputs("\"text\": \"", f);
    cli_json_string(f, (const unsigned char *)text, len);
    fprintf(f, "\", \"tokens_prompt\": %zu, \"tokens_cached\": %zu, \"tokens_generated\": %zu, "
               "\"finish_reason\": \"%s\"",
            gs->n_prompt, gs->n_reused, gs->n_generated, sm_finish_str(gs->finish));
    if (dropped) fprintf(f, ", \"tokens_truncated\": %zu", dropped);
    fputs(", \"timing\": {", f);
    if (t_queue >= 0) fprintf(f, "\"queue_ms\": %.3f, ", t_queue * 1e3);
    fprintf(f, "\"prefill_ms\": %.3f, \"decode_ms\": %.3f, \"tokens_per_s\": %.1f}",
            gs->t_prefill * 1e3, gs->t_decode * 1e3, dec);
}

/* Reads a whole file ('-' = stdin) into a malloc'd buffer. Returns an exit code. */
int cli_read_all(const char *path, char **out, size_t *len) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "smallmind: cannot open '%s': %s\n", path, strerror(errno));
        return EXIT_DATA;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    int rc = 0;
    while (buf) {
        if (n + 1 >= cap) { /* room for the NUL after the text too */
            if (cap >= MAX_PROMPT_BYTES) {
                fprintf(stderr, "smallmind: '%s' is larger than %zu bytes\n", path, MAX_PROMPT_BYTES);
                rc = EXIT_DATA;
                break;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) break;
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) {
                fprintf(stderr, "smallmind: cannot read '%s': %s\n", path, strerror(errno));
                rc = EXIT_DATA;
            }
            break;
        }
    }
    if (f != stdin) fclose(f);
    if (!buf) {
        fprintf(stderr, "smallmind: out of memory reading '%s'\n", path);
        return EXIT_DATA;
    }
    if (rc) {
        free(buf);
        return rc;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

/* The text to work on: -p, else -f, else stdin if it is not a terminal. */
int cli_get_text(const cli_opts *o, char **text, size_t *len, bool *owned) {
    *owned = false;
    if (o->prompt) {
        *text = (char *)o->prompt;
        *len = strlen(o->prompt);
        return 0;
    }
    if (!o->file && isatty(STDIN_FILENO))
        return cli_usage_error(o, "no prompt: give -p TEXT, -f FILE, or pipe text to stdin");
    int rc = cli_read_all(o->file ? o->file : "-", text, len);
    if (!rc) *owned = true;
    return rc;
}
