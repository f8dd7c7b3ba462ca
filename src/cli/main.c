/*
** main.c -- the process entry: picks the command, fills the defaults from
** the environment, parses the flags, installs the Ctrl-C handler and runs
** the command's file.
*/
#include "cli.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/*
** SIGINT, SIGTERM and SIGHUP: the first asks the run to stop (it flushes
** what it has and exits 128 + the signal); a second, or the first while
** nothing needs flushing (cli_exit_now), leaves at once.
*/
/* SIGBUS: a mapped file shrank under the run (cli_set_mapped wrote the message). */
static void on_sigbus(int sig) {
    (void)sig;
    if (cli_bus_len) {
        ssize_t w = write(STDERR_FILENO, cli_bus_msg, cli_bus_len);
        (void)w;
        _exit(EXIT_DATA);
    }
    signal(SIGBUS, SIG_DFL);
    raise(SIGBUS);
}

/* After --help or --version: stdout closed and checked like any command's output. */
static int help_done(void) {
    cli_out os = {.last_was_newline = true};
    return cli_finish_stdout(&os, 0);
}

static void on_signal(int sig) {
    if (cli_interrupted || cli_exit_now) _exit(128 + sig);
    cli_interrupted = sig;
}

/*
** The default model: ./models/default (a source checkout), else the one
** `make install` puts beside the binary: <bin>/../share/smallmind/models/default.
*/
static const char *default_model(char *buf, size_t cap) {
    struct stat sb;
    if (stat("models/default", &sb) == 0) return "models/default";
    ssize_t n = readlink("/proc/self/exe", buf, cap - 1);
    if (n > 0) {
        buf[n] = '\0';
        char *slash = strrchr(buf, '/');
        const char *rel = "/../share/smallmind/models/default";
        if (slash && (size_t)(slash - buf) + strlen(rel) < cap) {
            strcpy(slash, rel);
            if (stat(buf, &sb) == 0) return buf;
        }
    }
    return "models/default";
}

int main(int argc, char **argv) {
    cli_opts o = {.max_tokens = 256, .temp = 0.8, .top_k = 40, .top_p = 0.95, .seed = 42,
                  .kernels = "auto", .prompt_tokens = 128, .reps = 3, .layers = 4, .heads = 8,
                  .embd = 256, .tctx = 256, .val_fraction = 0.1, .eval_every = 100,
                  .eval_seqs = 64, .ckpt_every = 500, .log_every = 10, .repeat_penalty = 1.0,
                  .repeat_last_n = 64, .cache_mib = 256, .port = 8080};
    signal(SIGPIPE, SIG_IGN);
    if (argc < 2) {
        fprintf(stderr, "usage: smallmind COMMAND [flags] (try 'smallmind --help')\n");
        return EXIT_USAGE;
    }
    static const struct {
        const char *name;
        unsigned cmd;
    } cmds[] = {{"generate", CMD_GENERATE}, {"score", CMD_SCORE},     {"info", CMD_INFO},
                {"bench", CMD_BENCH},       {"train", CMD_TRAIN},     {"convert", CMD_CONVERT},
                {"tokenize", CMD_TOKENIZE}, {"detokenize", CMD_DETOKENIZE},
                {"chat", CMD_CHAT},         {"template", CMD_TEMPLATE},
                {"serve", CMD_SERVE}};
    const char *c = argv[1];
    if (strcmp(c, "-h") == 0 || strcmp(c, "--help") == 0 || strcmp(c, "help") == 0) {
        cli_print_help(&o);
        return help_done();
    }
    if (strcmp(c, "--version") == 0) {
        printf("smallmind %s\n", SM_VERSION);
        return help_done();
    }
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (strcmp(c, cmds[i].name) == 0) {
            o.cmd = cmds[i].cmd;
            o.cmd_name = cmds[i].name;
        }
    if (!o.cmd) return cli_usage_error(NULL, "unknown command '%s'", c);
    if (o.cmd == CMD_BENCH) o.max_tokens = 128;

    const char *env = getenv("SMALLMIND_MODEL");
    static char installed[4096];
    o.model = env && *env ? env : default_model(installed, sizeof installed);
    /* threads: SMALLMIND_THREADS, else OMP_NUM_THREADS (its first level, as Slurm
       scripts set it), else the cores this process may use (sm_pool_default_threads) */
    const char *tvar = "SMALLMIND_THREADS";
    env = getenv(tvar);
    if (!env || !*env) env = getenv(tvar = "OMP_NUM_THREADS");
    if (env && *env) {
        char first[32];
        snprintf(first, sizeof first, "%.*s", (int)strcspn(env, ","), env);
        if (!cli_parse_long(first, 1, MAX_THREADS, &o.threads))
            return cli_usage_error(&o, "%s must be a whole number from 1 to %d, got '%s'", tvar,
                                   MAX_THREADS, env);
    } else {
        o.threads = sm_pool_default_threads();
        if (o.threads > MAX_THREADS) o.threads = MAX_THREADS;
    }
    int rc = cli_parse_args(&o, argc, argv, 2);
    if (rc) return rc;
    if (o.help) {
        cli_print_help(&o);
        return help_done();
    }
    if (o.version) {
        printf("smallmind %s\n", SM_VERSION);
        return help_done();
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sa.sa_handler = on_sigbus;
    sigaction(SIGBUS, &sa, NULL);
    cli_exit_now = 1; /* until a command has something to flush (it clears this) */
    switch (o.cmd) {
    case CMD_GENERATE: return o.batch_file ? cli_batch(&o) : cli_generate(&o);
    case CMD_SCORE: return cli_score(&o);
    case CMD_INFO: return cli_info(&o);
    case CMD_TRAIN: return cli_train(&o);
    case CMD_CONVERT: return cli_convert(&o);
    case CMD_TOKENIZE: return cli_tokenize(&o);
    case CMD_DETOKENIZE: return cli_detokenize(&o);
    case CMD_CHAT: return cli_chat(&o);
    case CMD_TEMPLATE: return cli_template(&o);
    case CMD_SERVE: return cli_serve(&o);
    default: return cli_bench(&o);
    }
}
