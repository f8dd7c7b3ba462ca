/*
** chat.c -- `smallmind chat`: a conversation with an instruct model through
** its chat template (sm_chat_session keeps it on the KV-cache, so each turn
** prefills only its new tokens).
**
** On a terminal: libedit's line editing and history, a line ending in '\'
** continues on the next, the reply streamed as it comes; Ctrl-C stops the
** reply (what was said stays in the conversation), Ctrl-C at the prompt
** clears the line, Ctrl-D or /exit ends; /reset, /system TEXT, /save FILE,
** /load FILE, /help. With stdin not a terminal, each line is a user turn
** and each reply is printed after it (--json: one JSON record per turn);
** a command that fails there (/load of a bad file, say) is reported and the
** turns go on, and the exit status is 1 at the end, as --batch does.
*/
#include "cli.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include <editline/readline.h>

#include "json_internal.h"
#include "sm_grammar.h"

typedef struct chat_run {
    const cli_opts *o;
    cli_runner r;
    sm_chat chat;
    sm_chat_session *cs;
    cli_out os;
    int turn;
    bool failed; /* a command failed: piped chat exits 1 at the end */
    bool save_cache; /* --prompt-cache: write the first reply's prompt */
    sm_grammar *gr;  /* --grammar, --json-schema, --format: each reply keeps to it */
    sm_gbind *gb;
    sm_gmatch *gm;
} chat_run;

static int emit_reply(void *user, const char *text, size_t len) {
    chat_run *c = user;
    if (c->o->json) return cli_interrupted != 0;
    return cli_out_write(&c->os, text, len) || cli_interrupted;
}

/* One user turn. Returns an exit code (0 also when Ctrl-C stopped the reply). */
static int turn(chat_run *c, const char *text, size_t len) {
    const cli_opts *o = c->o;
    sm_gen_params gp = {.max_tokens = (size_t)o->max_tokens, .cancel = (const volatile int *)&cli_interrupted,
                        .stop = o->stop, .n_stop = o->n_stop, .grammar = c->gm};
    sm_chat_turn t;
    sm_error err = {{0}};
    if (c->gm) sm_gmatch_reset(c->gm);
    c->turn++;
    sm_status st = sm_chat_session_turn(c->cs, text, len, &gp, emit_reply, c, &t, &err);
    if (st) { /* a message too long, a template that fails on it: the chat goes on */
        cli_run_error(o, st, err.msg);
        c->failed = true;
        return st == SM_ERR_INPUT || st == SM_ERR_FORMAT ? 0 : EXIT_DATA;
    }
    if (cli_interrupted && t.gen.finish == SM_FINISH_ABORTED) t.gen.finish = SM_FINISH_INTERRUPTED;
    if (c->save_cache && t.gen.n_generated > 0) { /* the first reply's prompt, once */
        size_t end;
        const int32_t *ids = sm_chat_session_cached(c->cs, &end);
        c->save_cache = false;
        int rc = cli_prompt_cache_save(o, &c->r, ids, t.n_tokens, end);
        if (rc) return rc;
    }
    if (t.n_dropped && !o->quiet)
        fprintf(stderr, "smallmind: the context is full: dropped the %zu oldest messages "
                "(the system message stays) and rebuilt the cache\n", t.n_dropped);
    if (o->json) {
        char *buf = NULL;
        size_t n = 0;
        FILE *f = open_memstream(&buf, &n);
        if (!f) return cli_data_error("out of memory");
        fprintf(f, "{\"turn\": %d, ", c->turn);
        cli_json_result(f, t.reply, t.reply_len, &t.gen, 0, -1);
        if (c->gm) fprintf(f, ", \"valid\": %s", t.gen.valid ? "true" : "false");
        fprintf(f, ", \"tokens_reused\": %zu, \"messages_dropped\": %zu}\n", t.gen.n_reused,
                t.n_dropped);
        fclose(f);
        cli_out_write(&c->os, buf, n);
        free(buf);
    } else {
        if (t.gen.finish == SM_FINISH_INTERRUPTED) cli_out_write(&c->os, " [stopped]", 10);
        cli_out_write(&c->os, "\n", 1);
    }
    if (t.gen.context_full && !o->quiet)
        fprintf(stderr, "smallmind: the reply filled the context; the next turn drops old turns\n");
    if (o->stats || o->verbose) {
        size_t fresh = t.gen.n_prompt - t.gen.n_reused;
        double dec = t.gen.n_generated > 1 && t.gen.t_decode > 0
                         ? (double)(t.gen.n_generated - 1) / t.gen.t_decode : 0;
        fprintf(stderr,
                "[turn %d: conversation %zu tokens, %zu reused, %zu prefilled in %.2f ms; "
                "%zu generated, %.1f tokens/s; %s]\n",
                c->turn, t.gen.n_prompt, t.gen.n_reused, fresh, t.gen.t_prefill * 1e3,
                t.gen.n_generated, dec, sm_finish_str(t.gen.finish));
    }
    return c->os.pipe_closed || c->os.write_errno ? 1 : 0;
}

static void save(chat_run *c, const char *path) {
    char *s = cJSON_Print(sm_chat_session_messages(c->cs));
    sm_error err = {{0}};
    if (!s) {
        fprintf(stderr, "smallmind: out of memory\n");
        c->failed = true;
        return;
    }
    sm_piece pc[2] = {{s, strlen(s)}, {"\n", 1}};
    if (sm_write_file(path, pc, 2, &err)) fprintf(stderr, "smallmind: %s\n", err.msg), c->failed = true;
    else if (!c->o->quiet) fprintf(stderr, "smallmind: saved the conversation to %s\n", path);
    free(s);
}

static void load(chat_run *c, const char *path) {
    cJSON *m;
    sm_error err = {{0}};
    if (!sm_json_read_file(path, 64u << 20, &m, &err) && !sm_chat_session_set(c->cs, m, path, NULL, &err))
        err.msg[0] = 0;
    cJSON_Delete(m);
    if (err.msg[0]) fprintf(stderr, "smallmind: %s\n", err.msg), c->failed = true;
    else if (!c->o->quiet)
        fprintf(stderr, "smallmind: loaded %d messages from %s\n",
                cJSON_GetArraySize(sm_chat_session_messages(c->cs)), path);
}

/* A line starting with '/' (what else it says goes to /help); true: end the chat. */
static bool command(chat_run *c, const char *line) {
    sm_error err = {{0}};
    const char *arg = strchr(line, ' ');
    arg = arg ? arg + 1 : "";
    if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) return true;
    if (!strcmp(line, "/reset")) {
        sm_chat_session_set(c->cs, NULL, NULL, NULL, &err);
        if (!c->o->quiet) fprintf(stderr, "smallmind: the conversation starts again\n");
    } else if (!strncmp(line, "/system", 7) && (line[7] == ' ' || !line[7])) {
        if (sm_chat_session_set(c->cs, NULL, NULL, arg, &err))
            fprintf(stderr, "smallmind: %s\n", err.msg), c->failed = true;
        else if (!c->o->quiet) fprintf(stderr, "smallmind: system message %s\n", *arg ? "set" : "removed");
    } else if (!strncmp(line, "/save ", 6) && *arg) {
        save(c, arg);
    } else if (!strncmp(line, "/load ", 6) && *arg) {
        load(c, arg);
    } else if (!strcmp(line, "/help") || !strcmp(line, "/?")) {
        fprintf(stderr, "commands: /exit (or Ctrl-D), /reset, /system TEXT, /save FILE, /load FILE;\n"
                        "end a line with \\ to continue it; Ctrl-C stops a reply\n");
    } else { /* one line naming it; piped, the chat then exits 1 at the end */
        size_t w = strcspn(line, " ");
        if ((w == 5 && !strncmp(line, "/save", 5)) || (w == 5 && !strncmp(line, "/load", 5)))
            fprintf(stderr, "smallmind: %.5s needs a file name\n", line);
        else
            fprintf(stderr, "smallmind: unknown command '%.*s' (/help lists them)\n", (int)(w > 40 ? 40 : w), line);
        c->failed = true;
    }
    return false;
}

static int interactive(chat_run *c) {
    /* the terminal as it was: libedit leaves it without signal keys after a line, and a
       reply must stop at Ctrl-C */
    struct termios cooked;
    bool have_tty = tcgetattr(STDIN_FILENO, &cooked) == 0;
    struct sigaction ours; /* libedit swaps the SIGINT handler while it reads: put ours back */
    sigaction(SIGINT, NULL, &ours);
    using_history();
    stifle_history(1000);
    if (!c->o->quiet)
        fprintf(stderr, "smallmind chat: %s (/help for commands, Ctrl-D to end)\n", c->o->model);
    char *text = NULL;
    size_t len = 0;
    int rc = 0;
    for (;;) {
        cli_interrupted = 0;
        char *line = readline(len ? "... " : "> ");
        if (!line) {
            if (cli_interrupted) { /* Ctrl-C at the prompt: a fresh line */
                fputc('\n', stdout);
                len = 0;
                continue;
            }
            fputc('\n', stdout);
            break;
        }
        size_t n = strlen(line);
        if (n) add_history(line);
        bool more = n && line[n - 1] == '\\';
        if (!len && !more && line[0] == '/') {
            bool end = command(c, line);
            free(line);
            if (end) break;
            continue;
        }
        char *t = realloc(text, len + n + 2);
        if (!t) {
            free(line);
            rc = cli_data_error("out of memory");
            break;
        }
        text = t;
        memcpy(text + len, line, more ? n - 1 : n);
        len += more ? n - 1 : n;
        free(line);
        if (more) {
            text[len++] = '\n';
            continue;
        }
        if (!len) continue;
        fflush(stdout);
        if (have_tty) tcsetattr(STDIN_FILENO, TCSANOW, &cooked);
        sigaction(SIGINT, &ours, NULL);
        rc = turn(c, text, len);
        len = 0;
        if (rc) break;
    }
    free(text);
    return rc;
}

static int piped(chat_run *c) {
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int rc = 0;
    while (!rc && !cli_interrupted && (n = getline(&line, &cap, stdin)) >= 0) {
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) n--;
        if (!n) continue;
        line[n] = 0;
        if (line[0] == '/') {
            if (command(c, line)) break;
            continue;
        }
        rc = turn(c, line, (size_t)n);
    }
    free(line);
    if (!rc && cli_interrupted) rc = cli_interrupt_code();
    return rc ? rc : c->failed ? 1 : 0;
}

int cli_chat(const cli_opts *o) {
    static chat_run c; /* static: its cli_runner is large */
    memset(&c, 0, sizeof c);
    c.o = o;
    c.os = (cli_out){.last_was_newline = true};
    sm_sampler_params spar = cli_sampling(o, cli_seed(o->seed));
    cli_run_spec spec = {.max_batch = 512, .n_seq = 1, .sampling = &spar, .n_samplers = 1,
                         .build_state = true};
    int rc = cli_runner_init(&c.r, o, &spec);
    if (rc) return rc;
    sm_error err = {{0}};
    if ((rc = cli_chat_setup(o, sm_model_config(c.r.lm->model), &c.r.lm->tok, &c.chat))) goto done;
    if ((rc = cli_grammar_flag(o, &c.r.lm->tok, &c.gr, &c.gb))) goto done;
    if (c.gb && sm_gmatch_new(&c.gm, c.gb, &err)) {
        rc = cli_data_error(err.msg);
        goto done;
    }
    if (sm_chat_session_new(&c.cs, &c.chat, c.r.ls->state, &c.r.lm->tok, c.r.ls->samplers, o->system, &err)) {
        rc = cli_data_error(err.msg);
        goto done;
    }
    if (o->prompt_cache && (rc = cli_prompt_cache_chat_load(o, &c.r, c.cs, &c.save_cache))) goto done;
    cli_exit_now = 0; /* Ctrl-C stops a reply, not the program */
    rc = isatty(STDIN_FILENO) && !o->json ? interactive(&c) : piped(&c);
done:
    if (o->stats) cli_runner_print_threads(&c.r, stderr);
    sm_chat_session_free(c.cs);
    sm_chat_free(&c.chat);
    sm_gmatch_free(c.gm), sm_gbind_free(c.gb), sm_grammar_free(c.gr);
    cli_runner_free(&c.r);
    return cli_finish_stdout(&c.os, rc);
}
