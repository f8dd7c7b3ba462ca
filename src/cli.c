/*
** cli.c -- flags -> options; creates the model, pool, kernels and the one
** arena; runs a subcommand; turns statuses into messages and exit codes.
**
** Exit codes: 0 success (also when stdout is a closed pipe), 1 data or
** run-time error, 2 usage error, 130 interrupted. stdout carries only
** results; everything else goes to stderr.
*/
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli_internal.h"
#include "json_internal.h"
#include "sm_batch.h"
#include "sm_convert.h"
#include "sm_generate.h"

#define SM_VERSION "0.1.0"
#define MAX_PROMPT_BYTES ((size_t)256 << 20)
#define MAX_THREADS 512

#define CMD_RUN (CMD_GENERATE | CMD_SCORE | CMD_BENCH)
#define CMD_MODEL (CMD_RUN | CMD_INFO)              /* load the weights */
#define CMD_TOKENS (CMD_TOKENIZE | CMD_DETOKENIZE) /* load only the tokenizer */
#define CMD_ALL (CMD_MODEL | CMD_TOKENS | CMD_TRAIN | CMD_CONVERT)

/* Every flag, in --help order; aliases have no help line of their own. */
static const struct option_def {
    const char *name; /* long form without "--" */
    char short_name;  /* 0 if none */
    bool takes_value;
    unsigned cmds;    /* subcommands it applies to */
    opt_id id;
    const char *help; /* NULL for an alias */
} options[] = {
    {"model", 'm', true, CMD_MODEL | CMD_TOKENS, O_MODEL,
     "-m, --model DIR        model directory (default $SMALLMIND_MODEL, else models/default)"},
    {"prompt", 'p', true, CMD_GENERATE | CMD_SCORE | CMD_TOKENIZE, O_PROMPT,
     "-p, --prompt TEXT      the prompt (else -f, else stdin when it is not a terminal)"},
    {"file", 'f', true, CMD_GENERATE | CMD_SCORE | CMD_TOKENIZE, O_FILE,
     "-f, --file FILE        read the prompt from FILE ('-' = stdin)"},
    {"max-tokens", 'n', true, CMD_GENERATE | CMD_BENCH, O_MAXTOK,
     "-n, --max-tokens N     tokens to generate (default 256, bench 128; alias --n-predict)"},
    {"n-predict", 0, true, CMD_GENERATE | CMD_BENCH, O_MAXTOK, NULL},
    {"temp", 0, true, CMD_GENERATE, O_TEMP,
     "    --temp T           temperature, 0 = greedy (default 0.8; alias --temperature)"},
    {"temperature", 0, true, CMD_GENERATE, O_TEMP, NULL},
    {"top-k", 0, true, CMD_GENERATE, O_TOPK,
     "    --top-k K          keep the K most likely tokens, 0 = off (default 40)"},
    {"top-p", 0, true, CMD_GENERATE, O_TOPP,
     "    --top-p P          keep the smallest set with mass P, 1 = off (default 0.95)"},
    {"seed", 's', true, CMD_GENERATE | CMD_TRAIN, O_SEED,
     "-s, --seed N           random seed (default 42, train 1337; -1 = a random seed)"},
    {"threads", 't', true, CMD_RUN | CMD_TRAIN, O_THREADS,
     "-t, --threads N        threads (default $SMALLMIND_THREADS, else physical cores)"},
    {"ctx-size", 'c', true, CMD_MODEL, O_CTX,
     "-c, --ctx-size N       context length (default and maximum: the model's)"},
    {"kernels", 0, true, CMD_MODEL | CMD_TRAIN, O_KERNELS,
     "    --kernels NAME     auto, scalar, avx2 or avx512 (default auto)"},
    {"check-weights", 0, false, CMD_MODEL, O_CHECKW,
     "    --check-weights    scan every weight for NaN or infinity before running"},
    {"no-mmap", 0, false, CMD_MODEL, O_NOMMAP,
     "    --no-mmap          read the weights instead of mapping them"},
    {"tokenizer", 0, true, CMD_CONVERT, O_TOKFILE,
     "    --tokenizer FILE   llama2.c tokenizer.bin for a llama2.c checkpoint or a Llama directory"},
    {"dtype", 0, true, CMD_CONVERT, O_DTYPE,
     "    --dtype T          f32, f16 or bf16: type of the weight matrices written (default f32)"},
    {"special", 0, false, CMD_GENERATE | CMD_SCORE | CMD_TOKENIZE, O_SPECIAL,
     "    --special          text of special tokens (<|endoftext|>, <s>, </s>) becomes those tokens"},
    {"stop", 0, true, CMD_GENERATE, O_STOP,
     "    --stop STR         end before this text (repeatable, up to 8; 1-64 bytes each)"},
    {"truncate", 0, false, CMD_GENERATE, O_TRUNCATE,
     "    --truncate         keep the end of a prompt longer than the context"},
    {"batch", 0, true, CMD_GENERATE, O_BATCHFILE,
     "    --batch FILE       many prompts, one per line or JSONL records; JSONL out ('-' = stdin)"},
    {"parallel", 0, true, CMD_GENERATE, O_PARALLEL,
     "    --parallel N       with --batch: decode up to N records together (default 8)"},
    {"shard", 0, true, CMD_GENERATE, O_SHARD,
     "    --shard I/N        with --batch: only records I, I+N, I+2N, ... (1-based)"},
    {"output-format", 0, true, CMD_GENERATE, O_OUTFMT,
     "    --output-format F  text or json (text, token counts, finish reason, timing)"},
    {"json", 0, false, CMD_GENERATE | CMD_SCORE | CMD_BENCH | CMD_TOKENIZE, O_JSON,
     "    --json             machine-readable output (generate: --output-format json)"},
    {"stats", 0, false, CMD_GENERATE | CMD_SCORE, O_STATS,
     "    --stats            timing and token counts on stderr"},
    {"prompt-tokens", 0, true, CMD_BENCH, O_PTOK,
     "    --prompt-tokens N  prompt length (default 128)"},
    {"reps", 0, true, CMD_BENCH, O_REPS,
     "    --reps N           repetitions, best is reported (default 3)"},
    {"compare", 0, false, CMD_BENCH, O_COMPARE,
     "    --compare A B      two bench --json reports side by side, with B/A"},
    {"data", 0, true, CMD_TRAIN, O_DATA,
     "    --data FILE        the text to train on (required)"},
    {"out", 'o', true, CMD_TRAIN, O_OUT,
     "-o, --out DIR          model directory to write (default with --resume: that one)"},
    {"resume", 0, true, CMD_TRAIN, O_RESUME,
     "    --resume DIR       continue a checkpoint (its shape and hyperparameters)"},
    {"layers", 0, true, CMD_TRAIN, O_LAYERS,
     "    --layers N         transformer blocks (default 4)"},
    {"heads", 0, true, CMD_TRAIN, O_HEADS,
     "    --heads N          attention heads (default 8)"},
    {"embd", 0, true, CMD_TRAIN, O_EMBD,
     "    --embd N           embedding width (default 256)"},
    {"ctx", 0, true, CMD_TRAIN, O_TCTX,
     "    --ctx N            context length = training sequence length (default 256)"},
    {"untied", 0, false, CMD_TRAIN, O_UNTIED,
     "    --untied           a separate output layer (default: tied to the embedding)"},
    {"no-bias", 0, false, CMD_TRAIN, O_NOBIAS,
     "    --no-bias          linear layers and norms without biases"},
    {"config", 0, true, CMD_TRAIN, O_CONFIG,
     "    --config FILE      shape from JSON (n_layer, n_head, n_embd, n_ctx, ...)"},
    {"steps", 0, true, CMD_TRAIN, O_STEPS,
     "    --steps N          optimizer steps (default 1000)"},
    {"batch", 'b', true, CMD_TRAIN, O_BATCH,
     "-b, --batch N          sequences per step (default 16)"},
    {"lr", 0, true, CMD_TRAIN, O_LR,
     "    --lr X             peak learning rate (default 1e-3)"},
    {"lr-min", 0, true, CMD_TRAIN, O_LRMIN,
     "    --lr-min X         final rate of the cosine decay (default lr/10)"},
    {"warmup", 0, true, CMD_TRAIN, O_WARMUP,
     "    --warmup N         linear warm-up steps (default steps/10, at most 200)"},
    {"weight-decay", 0, true, CMD_TRAIN, O_WD,
     "    --weight-decay X   AdamW decay of matrices and embeddings (default 0.1)"},
    {"grad-clip", 0, true, CMD_TRAIN, O_CLIP,
     "    --grad-clip X      clip the gradient norm to X, 0 = off (default 1.0)"},
    {"val-fraction", 0, true, CMD_TRAIN, O_VALFRAC,
     "    --val-fraction X   share of the text (its end) held out (default 0.1)"},
    {"eval-every", 0, true, CMD_TRAIN, O_EVALEVERY,
     "    --eval-every N     held-out loss every N steps, 0 = only at the end (default 100)"},
    {"eval-seqs", 0, true, CMD_TRAIN, O_EVALSEQS,
     "    --eval-seqs N      held-out sequences per evaluation (default 64)"},
    {"checkpoint-every", 0, true, CMD_TRAIN, O_CKPT,
     "    --checkpoint-every N  write the model every N steps, 0 = at the end (default 500)"},
    {"log-every", 0, true, CMD_TRAIN, O_LOGEVERY,
     "    --log-every N      progress line every N steps when stderr is not a terminal (default 10)"},
    {"quiet", 'q', false, CMD_ALL, O_QUIET,
     "-q, --quiet            no notices on stderr (errors still appear)"},
    {"verbose", 'v', false, CMD_ALL, O_VERBOSE,
     "-v, --verbose          more detail on stderr"},
    {"help", 'h', false, CMD_ALL, O_HELP,
     "-h, --help             this help"},
    {"version", 0, false, CMD_ALL, O_VERSION,
     "    --version          version"},
};


/* ---------------------------------------------------------------- output */

volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
    (void)sig;
    if (interrupted) _exit(EXIT_INTERRUPTED); /* second Ctrl-C: leave at once */
    interrupted = 1;
}

int usage_error(const cli_opts *o, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "smallmind: %s (try 'smallmind %s%s--help')\n", msg,
            o && o->cmd_name ? o->cmd_name : "", o && o->cmd_name ? " " : "");
    return EXIT_USAGE;
}

int data_error(const char *msg) {
    fprintf(stderr, "smallmind: %s\n", msg);
    return EXIT_DATA;
}

/* State of stdout: a closed pipe ends the run quietly; other errors are reported. */
typedef struct {
    bool pipe_closed;
    int write_errno;
    bool last_was_newline;
} out_state;

static int out_write(out_state *os, const char *s, size_t n) {
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
static int finish_stdout(out_state *os, int code) {
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

/* --------------------------------------------------------------- parsing */

uint64_t cli_seed(long long seed) {
    return seed >= 0 ? (uint64_t)seed : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
}

const char *cli_flag_name(opt_id id) {
    for (size_t k = 0; k < sizeof options / sizeof options[0]; k++)
        if (options[k].id == id) return options[k].name;
    return "?";
}

static bool parse_long(const char *s, long lo, long hi, long *out) {
    if (!*s) return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return false;
    *out = (long)v;
    return true;
}

static bool parse_double(const char *s, double *out) {
    if (!*s) return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v)) return false;
    *out = v;
    return true;
}

static int physical_cores(void) {
    /* distinct (package, core) pairs among online CPUs; falls back to the CPU count */
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    int seen[1024][2], nseen = 0;
    for (long i = 0; i < n && i < 1024; i++) {
        char path[128];
        int ids[2] = {-1, -1};
        const char *files[2] = {"physical_package_id", "core_id"};
        for (int k = 0; k < 2; k++) {
            snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%ld/topology/%s", i, files[k]);
            FILE *f = fopen(path, "r");
            if (!f || fscanf(f, "%d", &ids[k]) != 1) ids[k] = -1;
            if (f) fclose(f);
        }
        if (ids[0] < 0 || ids[1] < 0) return (int)n;
        bool dup = false;
        for (int j = 0; j < nseen; j++)
            if (seen[j][0] == ids[0] && seen[j][1] == ids[1]) dup = true;
        if (!dup) {
            seen[nseen][0] = ids[0];
            seen[nseen][1] = ids[1];
            nseen++;
        }
    }
    return nseen > 0 ? nseen : (int)n;
}

#define LONG_OPT(field, lo, hi)                                                           \
    if (!parse_long(v, lo, hi, &o->field))                                                \
        return usage_error(o, "%s expects a whole number from %ld to %ld, got '%s'", flag, \
                           (long)(lo), (long)(hi), v);                                    \
    break
/* A number in (lo, hi], or [lo, hi] with closed */
#define REAL_OPT(field, lo, hi, closed)                                                      \
    if (!parse_double(v, &x) || x > (hi) || x < (lo) || (!(closed) && x == (lo)))            \
        return usage_error(o, "%s expects a number in %c%g, %g], got '%s'", flag,            \
                           (closed) ? '[' : '(', (double)(lo), (double)(hi), v);             \
    o->field = x;                                                                            \
    break

static int set_value(cli_opts *o, const struct option_def *d, const char *flag, const char *v) {
    double x;
    o->given |= 1ull << d->id;
    switch (d->id) {
    case O_MODEL: o->model = v; break;
    case O_PROMPT: o->prompt = v; break;
    case O_FILE: o->file = v; break;
    case O_KERNELS: o->kernels = v; break;
    case O_MAXTOK:
        if (!parse_long(v, 0, 1L << 30, &o->max_tokens))
            return usage_error(o, "%s expects a whole number >= 0, got '%s'", flag, v);
        break;
    case O_TEMP:
        if (!parse_double(v, &x) || x < 0 || x > 1000)
            return usage_error(o, "%s expects a number from 0 to 1000, got '%s'", flag, v);
        o->temp = x;
        break;
    case O_TOPP:
        if (!parse_double(v, &x) || !(x > 0 && x <= 1))
            return usage_error(o, "%s expects a number in (0, 1], got '%s'", flag, v);
        o->top_p = x;
        break;
    case O_TOPK:
        if (!parse_long(v, 0, 1L << 30, &o->top_k))
            return usage_error(o, "%s expects a whole number >= 0 (0 = off), got '%s'", flag, v);
        break;
    case O_SEED: {
        long s;
        if (!parse_long(v, -1, 0x7FFFFFFFL, &s))
            return usage_error(o, "%s expects a whole number from 0 to 2147483647, or -1 for a random seed, got '%s'", flag, v);
        o->seed = s;
        break;
    }
    case O_THREADS:
        if (!parse_long(v, 1, MAX_THREADS, &o->threads))
            return usage_error(o, "%s expects a whole number from 1 to %d, got '%s'", flag, MAX_THREADS, v);
        break;
    case O_CTX:
        if (!parse_long(v, 1, 1L << 20, &o->ctx))
            return usage_error(o, "%s expects a whole number from 1 to %ld, got '%s'", flag, 1L << 20, v);
        break;
    case O_PTOK:
        if (!parse_long(v, 1, 1L << 20, &o->prompt_tokens))
            return usage_error(o, "%s expects a whole number >= 1, got '%s'", flag, v);
        break;
    case O_REPS:
        if (!parse_long(v, 1, 1000, &o->reps))
            return usage_error(o, "%s expects a whole number from 1 to 1000, got '%s'", flag, v);
        break;
    case O_DATA: o->data = v; break;
    case O_OUT: o->out = v; break;
    case O_RESUME: o->resume = v; break;
    case O_CONFIG: o->config = v; break;
    case O_LAYERS: LONG_OPT(layers, 1, 64);
    case O_HEADS: LONG_OPT(heads, 1, 1024);
    case O_EMBD: LONG_OPT(embd, 1, 4096);
    case O_TCTX: LONG_OPT(tctx, 2, 4096);
    case O_STEPS: LONG_OPT(steps, 0, 100000000);
    case O_BATCH: LONG_OPT(batch, 1, 4096);
    case O_WARMUP: LONG_OPT(warmup, 0, 100000000);
    case O_EVALEVERY: LONG_OPT(eval_every, 0, 100000000);
    case O_EVALSEQS: LONG_OPT(eval_seqs, 1, 1000000);
    case O_CKPT: LONG_OPT(ckpt_every, 0, 100000000);
    case O_LOGEVERY: LONG_OPT(log_every, 1, 100000000);
    case O_LR: REAL_OPT(lr, 0, 10, false);
    case O_LRMIN: REAL_OPT(lr_min, 0, 10, true);
    case O_WD: REAL_OPT(weight_decay, 0, 100, true);
    case O_CLIP: REAL_OPT(grad_clip, 0, 1e30, true);
    case O_VALFRAC: REAL_OPT(val_fraction, 0, 0.5, true);
    case O_STOP:
        if (o->n_stop == 8) return usage_error(o, "%s: at most 8 stop strings", flag);
        if (strlen(v) < 1 || strlen(v) > 64)
            return usage_error(o, "%s expects 1 to 64 bytes, got %zu", flag, strlen(v));
        o->stop[o->n_stop++] = v;
        break;
    case O_OUTFMT:
        if (strcmp(v, "json") == 0 || strcmp(v, "jsonl") == 0)
            o->json = true;
        else if (strcmp(v, "text") == 0)
            o->json = false;
        else
            return usage_error(o, "%s expects text, json or jsonl, got '%s'", flag, v);
        break;
    case O_TRUNCATE: o->truncate = true; break;
    case O_BATCHFILE: o->batch_file = v; break;
    case O_PARALLEL: LONG_OPT(parallel, 1, SM_MAX_SEQ);
    case O_SHARD: {
        char *end;
        errno = 0;
        long i = strtol(v, &end, 10), n = 0;
        if (!errno && end != v && *end == '/') n = strtol(end + 1, &end, 10);
        if (errno || *end || n < 1 || n > 1000000 || i < 1 || i > n)
            return usage_error(o, "%s expects I/N with 1 <= I <= N, got '%s'", flag, v);
        o->shard_i = i;
        o->shard_n = n;
        break;
    }
    case O_UNTIED: o->untied = true; break;
    case O_NOBIAS: o->no_bias = true; break;
    case O_QUIET: o->quiet = true; break;
    case O_STATS: o->stats = true; break;
    case O_VERBOSE: o->verbose = true; break;
    case O_JSON: o->json = true; break;
    case O_NOMMAP: o->no_mmap = true; break;
    case O_CHECKW: o->check_weights = true; break;
    case O_TOKFILE: o->tokenizer = v; break;
    case O_DTYPE:
        o->dtype = sm_dtype_parse(v);
        if (o->dtype == SM_DTYPE_COUNT)
            return usage_error(o, "%s expects f32, f16 or bf16, got '%s'", flag, v);
        break;
    case O_SPECIAL: o->special = true; break;
    case O_COMPARE: o->compare = true; break;
    case O_HELP: o->help = true; break;
    case O_VERSION: o->version = true; break;
    }
    return 0;
}

static int parse_args(cli_opts *o, int argc, char **argv, int first) {
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        const struct option_def *d = NULL;
        const char *value = NULL;
        char flag[64];
        if (a[0] == '-' && a[1] == '-' && a[2]) {
            const char *eq = strchr(a + 2, '=');
            size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
            for (size_t k = 0; k < sizeof options / sizeof options[0]; k++)
                if (strlen(options[k].name) == len && strncmp(options[k].name, a + 2, len) == 0 &&
                    (!d || (options[k].cmds & o->cmd)))
                    d = &options[k]; /* a name may mean different things per command */
            snprintf(flag, sizeof flag, "--%.*s", (int)(len < 50 ? len : 50), a + 2);
            if (!d) return usage_error(o, "unknown flag '%s'", flag);
            if (eq) {
                if (!d->takes_value) return usage_error(o, "%s takes no value", flag);
                value = eq + 1;
            }
        } else if (a[0] == '-' && a[1] && a[1] != '-') {
            for (size_t k = 0; k < sizeof options / sizeof options[0]; k++)
                if (options[k].short_name == a[1] && (!d || (options[k].cmds & o->cmd)))
                    d = &options[k];
            snprintf(flag, sizeof flag, "-%c", a[1]);
            if (!d) return usage_error(o, "unknown flag '%s'", flag);
            if (a[2]) {
                if (!d->takes_value) return usage_error(o, "unknown flag '%s'", a);
                value = a + 2;
            }
        } else if ((o->cmd & (CMD_CONVERT | CMD_DETOKENIZE | CMD_BENCH)) && o->n_args < MAX_ARGS) {
            o->args[o->n_args++] = a;
            continue;
        } else {
            return usage_error(o, "unexpected argument '%s'", a);
        }
        if (!(d->cmds & o->cmd))
            return usage_error(o, "%s does not apply to '%s'", flag, o->cmd_name);
        if (d->takes_value && !value) {
            if (i + 1 >= argc) return usage_error(o, "%s needs a value", flag);
            value = argv[++i];
        }
        int rc = set_value(o, d, flag, value);
        if (rc) return rc;
    }
    if (o->prompt && o->file) return usage_error(o, "give -p or -f, not both");
    if (o->batch_file && (o->prompt || o->file))
        return usage_error(o, "--batch takes the prompts from its file; drop -p/-f");
    if (o->shard_n && !o->batch_file) return usage_error(o, "--shard goes with --batch");
    if (o->parallel && !o->batch_file) return usage_error(o, "--parallel goes with --batch");
    return 0;
}

static void print_help(const cli_opts *o) {
    if (!o->cmd_name) {
        printf("smallmind %s -- transformer text generation on the CPU\n\n"
               "usage: smallmind COMMAND [flags]\n\n"
               "commands:\n"
               "  generate   continue a prompt (-p TEXT, -f FILE, or stdin)\n"
               "  score      log-probability and perplexity of a text\n"
               "  info       architecture, parameters and memory plan of a model\n"
               "  bench      prefill and decode speed of a model\n"
               "  train      train a byte-level GPT model on a text file\n"
               "  convert    a llama2.c checkpoint or Hugging Face directory to a model directory\n"
               "  tokenize   token ids of a text\n"
               "  detokenize the text of token ids\n\n"
               "'smallmind COMMAND --help' lists a command's flags.\n",
               SM_VERSION);
        return;
    }
    printf("usage: smallmind %s [flags]%s\n\n", o->cmd_name,
           o->cmd == CMD_CONVERT ? " SRC OUT" : o->cmd == CMD_DETOKENIZE ? " ID..." : "");
    const char *what = o->cmd == CMD_GENERATE ? "Streams a continuation of the prompt to stdout."
                       : o->cmd == CMD_SCORE  ? "Scores each token of a text given the ones before it."
                       : o->cmd == CMD_INFO   ? "Prints a model's architecture, size and memory plan."
                       : o->cmd == CMD_CONVERT
                           ? "Converts a llama2.c checkpoint (SRC a file, with --tokenizer) or a\n"
                             "Hugging Face GPT-2 or Llama directory (config.json + safetensors)\n"
                             "into the new model directory OUT."
                       : o->cmd == CMD_TOKENIZE ? "Prints the token ids of a text (-p, -f or stdin), space-separated."
                       : o->cmd == CMD_DETOKENIZE ? "Prints the text of the token ids."
                       : o->cmd == CMD_TRAIN  ? "Trains a GPT-2-style model with the byte vocabulary on a text file\n"
                                                "and writes a model directory (a checkpoint that --resume continues)."
                                              : "Measures prefill and decode speed on synthetic tokens.";
    printf("%s\n\n", what);
    for (size_t k = 0; k < sizeof options / sizeof options[0]; k++)
        if (options[k].help && (options[k].cmds & o->cmd)) printf("  %s\n", options[k].help);
    if (o->cmd == CMD_GENERATE)
        printf("\nThe prompt is used byte for byte (a trailing newline from echo is kept).\n"
               "With -p or -f, stdin is not read. Exit: 0 ok (also when stdout is closed),\n"
               "1 data or run-time error, 2 usage error, 130 interrupted.\n");
    if (o->cmd == CMD_SCORE)
        printf("\nEvery token but the first is scored given those before it, in windows of\n"
               "the context length (each window starts a fresh context).\n");
}

/* ------------------------------------------------------------- the setup */

typedef struct {
    sm_model *model;
    const sm_kernels *kernels;
    sm_pool *pool;
    sm_tokenizer tok;
    sm_arena arena;
    sm_state *state;
    sm_state_params sp;
    sm_state_plan plan;
    sm_sampler *samplers; /* (sp.n_seq): one per sequence decoded together */
    int32_t *tokens; /* (n_ctx) prompt tokens */
    double t_load;   /* seconds to load and set up */
} runner;

static void runner_free(runner *r) {
    sm_tokenizer_free(&r->tok);
    sm_arena_free(&r->arena);
    sm_pool_free(r->pool);
    sm_model_free(r->model);
    memset(r, 0, sizeof *r);
}

/* Carves prompt buffer, sampler and state from `a`: once measuring, once for real. */
static sm_status carve_run(runner *r, const sm_sampler_params *spar, sm_arena *a, sm_error *err) {
    r->tokens = sm_arena_alloc(a, r->sp.n_ctx, sizeof *r->tokens);
    r->samplers = sm_arena_alloc(a, r->sp.n_seq, sizeof *r->samplers);
    for (size_t i = 0; i < r->sp.n_seq; i++) {
        sm_sampler scratch, *smp = r->samplers ? &r->samplers[i] : &scratch;
        sm_status st = sm_sampler_init(smp, spar, (size_t)r->tok.n_vocab, a);
        if (st) return sm_error_set(err, st, "arena too small for the sampler");
    }
    return sm_state_init(&r->state, r->model, &r->sp, r->pool, a, err);
}

/*
** Loads the model and builds everything a run needs. `all_logits` and
** `max_batch` shape the state; without build_state only the plan is made
** (for info). Returns an exit code (0 = ready); on failure r is freed.
*/
static int runner_init(runner *r, const cli_opts *o, bool all_logits, size_t max_batch,
                       size_t n_seq, const sm_sampler_params *spar, bool build_state) {
    memset(r, 0, sizeof *r);
    sm_error err = {{0}};
    int rc = EXIT_DATA;
    double t0 = sm_time_now();
    r->kernels = sm_kernels_select(o->kernels);
    if (!r->kernels)
        return usage_error(o, "--kernels %s is unknown or not supported by this CPU (have: %s)",
                           o->kernels, sm_kernels_select(NULL)->name);
    struct stat sb;
    if (stat(o->model, &sb) != 0) {
        fprintf(stderr, "smallmind: cannot open '%s': %s\n", o->model, strerror(errno));
        return EXIT_DATA;
    }
    if (!S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "smallmind: cannot open '%s': not a directory (a model is a directory with config.json)\n",
                o->model);
        return EXIT_DATA;
    }
    if (sm_model_load(&r->model, o->model, !o->no_mmap, &err)) goto fail_msg;
    if (o->check_weights && sm_model_check_weights(r->model, &err)) goto fail_msg;
    const sm_config *c = sm_model_config(r->model);
    if (sm_tokenizer_init(&r->tok, c, o->model, &err)) goto fail_msg;
    r->tok.parse_special = o->special;
    if (o->ctx > c->n_ctx) {
        rc = usage_error(o, "-c %ld exceeds the model's context of %d", o->ctx, c->n_ctx);
        goto fail;
    }
    r->sp.n_ctx = o->ctx ? (size_t)o->ctx : (size_t)c->n_ctx;
    r->sp.max_batch = max_batch < r->sp.n_ctx ? max_batch : r->sp.n_ctx;
    r->sp.all_logits = all_logits;
    r->sp.n_threads = (int)o->threads;
    r->sp.kernels = r->kernels;
    r->sp.n_seq = n_seq;
    if (sm_state_plan_bytes(r->model, &r->sp, &r->plan, &err)) goto fail_msg;
    if (build_state) {
        if (sm_pool_create(&r->pool, (int)o->threads) != SM_OK) {
            fprintf(stderr, "smallmind: cannot start %ld threads\n", o->threads);
            goto fail;
        }
        sm_arena meas;
        sm_arena_measure(&meas);
        if (carve_run(r, spar, &meas, &err) || sm_arena_init(&r->arena, meas.used) != SM_OK) {
            fprintf(stderr,
                    "smallmind: cannot allocate %zu bytes for the run (KV-cache %zu bytes); "
                    "a smaller -c%s reduces it\n",
                    meas.used, r->plan.kv_cache, n_seq > 1 ? " or --parallel" : "");
            goto fail;
        }
        if (carve_run(r, spar, &r->arena, &err)) goto fail_msg;
    }
    r->t_load = sm_time_now() - t0;
    if (o->verbose && build_state)
        fprintf(stderr,
                "smallmind: %s: %s, %zu parameters, %zu bytes of weights (%s); %s kernels, "
                "%d threads; context %zu; arena %zu bytes (KV-cache %zu); ready in %.1f ms\n",
                o->model, sm_arch_name(c->arch), sm_model_params(r->model),
                sm_model_weight_bytes(r->model), o->no_mmap ? "read" : "mapped", r->kernels->name,
                r->sp.n_threads, r->sp.n_ctx, r->arena.size, r->plan.kv_cache, r->t_load * 1e3);
    return 0;
fail_msg:
    rc = data_error(err.msg);
fail:
    runner_free(r);
    return rc;
}

/* Reads a whole file ('-' = stdin) into a malloc'd buffer. Returns an exit code. */
int read_all(const char *path, char **out, size_t *len) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "smallmind: cannot open '%s': %s\n", path, strerror(errno));
        return EXIT_DATA;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    int rc = 0;
    while (buf) {
        if (n == cap) {
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
    *out = buf;
    *len = n;
    return 0;
}

/* The text to work on: -p, else -f, else stdin if it is not a terminal. */
static int get_text(const cli_opts *o, char **text, size_t *len, bool *owned) {
    *owned = false;
    if (o->prompt) {
        *text = (char *)o->prompt;
        *len = strlen(o->prompt);
        return 0;
    }
    if (!o->file && isatty(STDIN_FILENO))
        return usage_error(o, "no prompt: give -p TEXT, -f FILE, or pipe text to stdin");
    int rc = read_all(o->file ? o->file : "-", text, len);
    if (!rc) *owned = true;
    return rc;
}

/* Encodes text into r->tokens; an error names both counts. Returns an exit code. */

/* ------------------------------------------------------------ subcommands */

/* Appends s[0..n) to f as the inside of a JSON string; invalid UTF-8 bytes become U+FFFD. */
static void json_string(FILE *f, const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t need = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        bool ok = need > 0 && i + need <= n;
        for (size_t k = 1; ok && k < need; k++) ok = (s[i + k] & 0xC0) == 0x80;
        if (ok && need == 2 && c < 0xC2) ok = false; /* overlong */
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

/* Where generated text goes: streamed to stdout, or collected for a JSON record. */
typedef struct {
    out_state *os;
    char *buf; /* collected text (NULL: stream) */
    size_t len, cap;
} sink;

/* Makes k collect text: room for a whole context of pieces (a piece is at most 64 bytes). */
static bool sink_collect(sink *k, const runner *r) {
    k->cap = (r->sp.n_ctx + 8) * 64;
    k->buf = malloc(k->cap);
    return k->buf != NULL;
}

static int emit_sink(void *user, const char *text, size_t len) {
    sink *k = user;
    if (!k->buf) return out_write(k->os, text, len) || interrupted;
    size_t take = len < k->cap - k->len ? len : k->cap - k->len;
    memcpy(k->buf + k->len, text, take);
    k->len += take;
    return interrupted;
}

/*
** Encodes a prompt into r->tokens. Longer than the context: an error with
** both counts, or with truncate its last tokens, leaving room for
** min(max_tokens, n_ctx / 2) new ones. On error msg says why.
*/
static bool prepare_prompt(runner *r, const char *text, size_t len, size_t max_tokens,
                           bool truncate, size_t *n, size_t *dropped, char *msg, size_t cap) {
    size_t ctx = r->sp.n_ctx;
    *dropped = 0;
    *n = sm_tokenizer_encode(&r->tok, text, len, r->tokens, ctx);
    if (*n == 0) {
        snprintf(msg, cap, "empty prompt: this model has no BOS token, so the prompt needs at "
                           "least one token");
        return false;
    }
    if (*n <= ctx) return true;
    if (!truncate) {
        snprintf(msg, cap, "prompt is %zu tokens, context is %zu (--truncate keeps its end)", *n,
                 ctx);
        return false;
    }
    size_t room = max_tokens < ctx / 2 ? max_tokens : ctx / 2;
    size_t keep = ctx - room > 0 ? ctx - room : 1;
    int32_t *all = malloc(*n * sizeof *all);
    if (!all) {
        snprintf(msg, cap, "out of memory for a prompt of %zu tokens", *n);
        return false;
    }
    sm_tokenizer_encode(&r->tok, text, len, all, *n);
    memcpy(r->tokens, all + *n - keep, keep * sizeof *all);
    free(all);
    *dropped = *n - keep;
    *n = keep;
    return true;
}

/* {"text": ..., counts, finish, timing} without the braces' closing newline. */
static void json_result(FILE *f, const sink *k, const sm_gen_stats *gs, size_t dropped) {
    double dec = gs->n_generated > 1 && gs->t_decode > 0
                     ? (double)(gs->n_generated - 1) / gs->t_decode : 0;
    fputs("\"text\": \"", f);
    json_string(f, (const unsigned char *)k->buf, k->len);
    fprintf(f, "\", \"tokens_prompt\": %zu, \"tokens_generated\": %zu, \"finish_reason\": \"%s\"",
            gs->n_prompt, gs->n_generated, sm_finish_str(gs->finish));
    if (dropped) fprintf(f, ", \"tokens_truncated\": %zu", dropped);
    fprintf(f, ", \"timing\": {\"prefill_ms\": %.3f, \"decode_ms\": %.3f, \"tokens_per_s\": %.1f}",
            gs->t_prefill * 1e3, gs->t_decode * 1e3, dec);
}

static int cmd_batch(const cli_opts *o);

/* Writes one JSONL record built in memory with a single write. Returns non-zero to stop. */
static int write_record(out_state *os, char *buf, size_t n) {
    int stop = out_write(os, buf, n);
    free(buf);
    return stop;
}

static int cmd_generate(const cli_opts *o) {
    if (o->batch_file) return cmd_batch(o);
    char *text;
    size_t len;
    bool owned;
    int rc = get_text(o, &text, &len, &owned);
    if (rc) return rc;
    uint64_t seed = cli_seed(o->seed);
    sm_sampler_params spar = {(float)o->temp, (int)o->top_k, (float)o->top_p, seed};
    runner r;
    rc = runner_init(&r, o, false, 512, 1, &spar, true);
    size_t n = 0, dropped = 0;
    char msg[256];
    if (!rc && !prepare_prompt(&r, text, len, (size_t)o->max_tokens, o->truncate, &n, &dropped,
                               msg, sizeof msg))
        rc = data_error(msg);
    if (owned) free(text);
    if (rc) {
        runner_free(&r);
        return rc;
    }
    if (dropped && !o->quiet && !o->json)
        fprintf(stderr, "smallmind: prompt truncated: kept its last %zu tokens, dropped %zu\n", n,
                dropped);
    out_state os = {.last_was_newline = true};
    sink k = {.os = &os};
    if (o->json && !sink_collect(&k, &r)) {
        runner_free(&r);
        return data_error("out of memory for the output");
    }
    sm_gen_params gp = {(size_t)o->max_tokens, (const volatile int *)&interrupted, o->stop,
                        o->n_stop};
    sm_gen_stats gs;
    sm_error err = {{0}};
    sm_status st = sm_generate(r.state, &r.tok, r.samplers, r.tokens, n, &gp, emit_sink, &k,
                               &gs, &err);
    if (interrupted && gs.finish == SM_FINISH_ABORTED) gs.finish = SM_FINISH_INTERRUPTED;
    if (st) rc = data_error(err.msg);
    if (o->json && !st) {
        char *out = NULL;
        size_t out_len = 0;
        FILE *f = open_memstream(&out, &out_len);
        if (f) {
            fputc('{', f);
            json_result(f, &k, &gs, dropped);
            fprintf(f, ", \"load_ms\": %.3f}\n", r.t_load * 1e3);
            fclose(f);
            write_record(&os, out, out_len);
        } else {
            rc = data_error("out of memory for the output");
        }
    } else if (!os.pipe_closed && !os.write_errno && !os.last_was_newline &&
               (gs.finish == SM_FINISH_INTERRUPTED || isatty(STDOUT_FILENO))) {
        out_write(&os, "\n", 1);
    }
    free(k.buf);
    if (gs.context_full && (o->stats || !o->quiet) && !o->json)
        fprintf(stderr, "smallmind: stopped: the context of %zu tokens is full\n", r.sp.n_ctx);
    if (o->stats) {
        double dec = gs.n_generated > 1 ? (double)(gs.n_generated - 1) / gs.t_decode : 0;
        fprintf(stderr,
                "load: %.1f ms (%s kernels, %d threads, seed %llu)\n"
                "prompt: %zu tokens in %.2f ms (%.1f tokens/s)\n"
                "generated: %zu tokens in %.2f ms (%.1f tokens/s, %.3f ms/token)\n"
                "finish: %s\n",
                r.t_load * 1e3, r.kernels->name, (int)o->threads, (unsigned long long)seed,
                gs.n_prompt, gs.t_prefill * 1e3, gs.t_prefill > 0 ? (double)gs.n_prompt / gs.t_prefill : 0,
                gs.n_generated, gs.t_decode * 1e3, dec, dec > 0 ? 1e3 / dec : 0,
                sm_finish_str(gs.finish));
    }
    runner_free(&r);
    if (!rc && gs.finish == SM_FINISH_INTERRUPTED) rc = EXIT_INTERRUPTED;
    return finish_stdout(&os, rc);
}

/* The next line of buf from *at (newline and a trailing CR removed); false at the end. */
static bool next_line(const char *buf, size_t len, size_t *at, const char **line, size_t *n) {
    if (*at >= len) return false;
    const char *nl = memchr(buf + *at, '\n', len - *at);
    size_t end = nl ? (size_t)(nl - buf) : len;
    *line = buf + *at;
    *n = end - *at;
    if (*n && (*line)[*n - 1] == '\r') --*n;
    *at = end + 1;
    return true;
}

/* Whether the record-th non-empty line (1-based) is this process's under --shard. */
static bool in_shard(const cli_opts *o, size_t record) {
    return !o->shard_n || (record - 1) % (size_t)o->shard_n == (size_t)(o->shard_i - 1);
}

/*
** Batches. Records are decoded together: up to --parallel sequences, each with
** its own KV-cache slot, sampler and stop strings, share every pass over the
** weights (sm_state_decode); a finished slot is refilled from the input at
** once. Every record's result is what it gives alone (see sm_state_decode).
** Records finish out of order; each is formatted when it finishes and written
** once all records before it are, so output keeps the input order and every
** write is a whole record.
*/
typedef struct {
    bool busy;
    size_t idx, lineno; /* ordinal among this shard's records; input line */
    char *pbuf;         /* the record's strings: prompt, id, stop strings */
    sm_batch_record rec;
    const char *stops[SM_STOP_MAX];
    sm_gen_params gp;
    sm_sampler *smp;
    sink k;
    sm_seq q;
    size_t dropped, np;
} batch_slot;

typedef struct {
    const cli_opts *o;
    runner *r;
    sm_sampler_params spar;
    out_state os;
    batch_slot *slots; /* (P) */
    /* the input: where the next line starts, lines and records seen so far */
    const char *input;
    size_t len, at, lineno, record, next_idx;
    bool more;
    /* the rows of the next model call: the group prefill, then the decode step */
    int32_t *ct;
    size_t *cs, *cp, rows, group[SM_MAX_SEQ], ng;
    char **ready;   /* (todo) formatted records not yet written */
    size_t *ready_len;
    size_t written; /* records written: the next to write is ready[written] */
    size_t failed, tokens;
    bool stop;      /* a write failed or the pipe closed */
} batch_run;

/* Formats q's record (an error if msg is set) into b->ready. false: out of memory. */
static bool batch_finish(batch_run *b, const batch_slot *q, const char *msg) {
    char idbuf[32];
    snprintf(idbuf, sizeof idbuf, "%zu", q->lineno);
    char *out = NULL;
    size_t out_len = 0;
    FILE *f = open_memstream(&out, &out_len);
    if (!f) return false;
    fprintf(f, "{\"id\": %s, ", *q->rec.id ? q->rec.id : idbuf);
    if (msg) {
        fprintf(f, "\"line\": %zu, \"error\": \"", q->lineno);
        json_string(f, (const unsigned char *)msg, strlen(msg));
        fputs("\"}\n", f);
        b->failed++;
    } else {
        json_result(f, &q->k, &q->q.stats, q->dropped);
        fputs("}\n", f);
        b->tokens += q->q.stats.n_generated;
    }
    if (fclose(f) != 0) {
        free(out);
        return false;
    }
    b->ready[q->idx] = out;
    b->ready_len[q->idx] = out_len;
    return true;
}

/*
** After q's sequence took logits (msg: why it failed): a finished record is
** formatted and its slot freed; otherwise the slot stays busy. false: out of
** memory.
*/
static bool batch_settle(batch_run *b, batch_slot *q, const char *msg) {
    q->busy = !msg && !q->q.done;
    return q->busy || batch_finish(b, q, msg);
}

/* Writes the records that are next in input order. */
static void batch_flush(batch_run *b, size_t todo, double t0, bool tty) {
    while (!b->stop && b->written < todo && b->ready[b->written]) {
        char *out = b->ready[b->written];
        b->ready[b->written] = NULL;
        if (write_record(&b->os, out, b->ready_len[b->written])) b->stop = true;
        b->written++;
        if (tty) {
            double el = sm_time_now() - t0;
            fprintf(stderr, "\r\033[Krecords %zu/%zu  %.0f tokens/s  ETA %.0fs", b->written, todo,
                    el > 0 ? (double)b->tokens / el : 0,
                    el / (double)b->written * (double)(todo - b->written));
        }
    }
}

/*
** Readies record (line, n) for slot q: parse, settings over the flags', the
** prompt's tokens in r->tokens (q->np of them). On an error msg is set.
*/
static void batch_start(batch_run *b, batch_slot *q, const char *line, size_t n, char *msg,
                        size_t cap) {
    const cli_opts *o = b->o;
    runner *r = b->r;
    sm_error err = {{0}};
    if (sm_batch_parse(line, n, q->pbuf, &q->rec, &err)) {
        snprintf(msg, cap, "%s", err.msg);
        return;
    }
    const sm_batch_record *rec = &q->rec;
    size_t max_tokens = rec->set & SM_REC_MAX_TOKENS ? (size_t)rec->max_tokens
                                                     : (size_t)o->max_tokens;
    size_t np;
    if (!prepare_prompt(r, rec->prompt, rec->prompt_len, max_tokens, o->truncate, &np,
                        &q->dropped, msg, cap))
        return;
    sm_sampler_params sp = b->spar;
    if (rec->set & SM_REC_TEMPERATURE) sp.temperature = (float)rec->temperature;
    if (rec->set & SM_REC_TOP_K) sp.top_k = (int)rec->top_k;
    if (rec->set & SM_REC_TOP_P) sp.top_p = (float)rec->top_p;
    if (rec->set & SM_REC_SEED) sp.seed = (uint64_t)rec->seed;
    sm_sampler_reset(q->smp, &sp);
    size_t n_stop = rec->set & SM_REC_STOP ? rec->n_stop : o->n_stop;
    for (size_t i = 0; i < n_stop; i++)
        q->stops[i] = rec->set & SM_REC_STOP ? rec->stop[i] : o->stop[i];
    q->gp = (sm_gen_params){max_tokens, (const volatile int *)&interrupted, q->stops, n_stop};
    q->k.len = 0;
    q->np = np;
    if (sm_seq_init(&q->q, r->sp.n_ctx, &r->tok, q->smp, r->tokens, np, &q->gp, emit_sink, &q->k,
                    &err))
        snprintf(msg, cap, "%s", err.msg);
}

/*
** Fills free slot i from the input: a record that fails or ends at once is
** written off and the next one taken. A prompt of 4 to max_batch tokens that
** fits joins the group prefilled in one call (its rows appended to b->ct/cs/
** cp); any other is prefilled alone now. false: out of memory.
*/
static bool batch_fill(batch_run *b, size_t i) {
    batch_slot *q = &b->slots[i];
    runner *r = b->r;
    const char *line;
    size_t n;
    while (!interrupted && (b->more = next_line(b->input, b->len, &b->at, &line, &n))) {
        b->lineno++;
        if (n == 0 || !in_shard(b->o, ++b->record)) continue;
        char msg[600] = "";
        q->rec.id[0] = '\0';
        q->dropped = 0;
        q->idx = b->next_idx++;
        q->lineno = b->lineno;
        batch_start(b, q, line, n, msg, sizeof msg);
        bool go = !*msg && !q->q.done;
        if (go && q->np >= 4 && q->np <= r->sp.max_batch - b->rows) {
            memcpy(b->ct + b->rows, r->tokens, q->np * sizeof *b->ct);
            for (size_t j = 0; j < q->np; j++) b->cs[b->rows + j] = i, b->cp[b->rows + j] = j;
            b->rows += q->np;
            b->group[b->ng++] = i;
            q->busy = true; /* it begins after the group's prefill */
            return true;
        }
        if (go) {
            const float *lg;
            sm_error err = {{0}};
            double tp = sm_time_now();
            if (sm_state_prefill_seq(r->state, i, r->tokens, q->np, 0, &lg, &err) ||
                sm_seq_begin(&q->q, lg, sm_time_now() - tp, &err))
                snprintf(msg, sizeof msg, "%s", err.msg);
        }
        if (interrupted) return true; /* never half a record: the one in flight is dropped */
        if (!batch_settle(b, q, *msg ? msg : NULL)) return false;
        if (q->busy) return true;
    }
    return true;
}

/* Prefills the group batch_fill gathered in one call and samples each first token. */
static int batch_group(batch_run *b, size_t V) {
    const float *lg;
    sm_error err = {{0}};
    double tp = sm_time_now();
    if (sm_state_forward_many(b->r->state, b->ct, b->cs, b->cp, b->rows, &lg, &err))
        return data_error(err.msg);
    tp = sm_time_now() - tp;
    for (size_t g = 0; g < b->ng && !interrupted; g++) {
        batch_slot *q = &b->slots[b->group[g]];
        const char *msg = sm_seq_begin(&q->q, lg + g * V, tp, &err) ? err.msg : NULL;
        if (!interrupted && !batch_settle(b, q, msg))
            return data_error("out of memory for an output record");
    }
    return 0;
}

/* One decode step for every busy slot; *m = how many there were. */
static int batch_step(batch_run *b, size_t P, size_t V, size_t *m) {
    *m = 0;
    for (size_t i = 0; i < P; i++) {
        const sm_seq *q = &b->slots[i].q;
        if (!b->slots[i].busy) continue;
        b->ct[*m] = q->next, b->cs[*m] = i, b->cp[*m] = sm_seq_pos(q);
        ++*m;
    }
    if (*m == 0) return 0;
    const float *logits;
    sm_error err = {{0}};
    if (sm_state_decode(b->r->state, b->ct, b->cs, b->cp, *m, &logits, &err))
        return data_error(err.msg);
    for (size_t j = 0; j < *m && !interrupted; j++) {
        batch_slot *q = &b->slots[b->cs[j]];
        const char *msg = sm_seq_accept(&q->q, logits + j * V, &err) ? err.msg : NULL;
        if (!interrupted && !batch_settle(b, q, msg))
            return data_error("out of memory for an output record");
    }
    return 0;
}

static int cmd_batch(const cli_opts *o) {
    char *input;
    size_t len;
    int rc = read_all(o->batch_file, &input, &len);
    if (rc) return rc;
    /* first pass: this shard's records, and the longest line (the prompt buffer) */
    const char *line;
    size_t n, at = 0, longest = 0, todo = 0, record = 0;
    while (next_line(input, len, &at, &line, &n)) {
        if (n > longest) longest = n;
        if (n) todo += in_shard(o, ++record);
    }
    size_t P = o->parallel ? (size_t)o->parallel : 8;
    if (P > todo) P = todo ? todo : 1;
    batch_run b = {.o = o, .os = {.last_was_newline = true}, .input = input, .len = len,
                   .more = true};
    b.spar = (sm_sampler_params){(float)o->temp, (int)o->top_k, (float)o->top_p, cli_seed(o->seed)};
    runner r;
    rc = runner_init(&r, o, false, 512, P, &b.spar, true);
    if (rc) {
        free(input);
        return rc;
    }
    b.r = &r;
    const size_t V = (size_t)sm_model_config(r.model)->n_vocab;
    size_t call_rows = r.sp.max_batch > P ? r.sp.max_batch : P;
    b.slots = calloc(P, sizeof *b.slots);
    b.ready = calloc(todo + 1, sizeof *b.ready);
    b.ready_len = calloc(todo + 1, sizeof *b.ready_len);
    b.ct = calloc(call_rows, sizeof *b.ct);
    b.cs = calloc(call_rows, sizeof *b.cs);
    b.cp = calloc(call_rows, sizeof *b.cp);
    bool ok = b.slots && b.ready && b.ready_len && b.ct && b.cs && b.cp;
    for (size_t i = 0; ok && i < P; i++) {
        b.slots[i].smp = &r.samplers[i];
        b.slots[i].k.os = &b.os;
        ok = (b.slots[i].pbuf = malloc(longest + 1)) && sink_collect(&b.slots[i].k, &r);
    }
    if (!ok) rc = data_error("out of memory for the batch");
    double t0 = sm_time_now();
    bool tty = isatty(STDERR_FILENO) && !o->quiet;
    while (!rc && !interrupted && !b.stop) {
        b.rows = b.ng = 0;
        for (size_t i = 0; i < P && b.more && !rc; i++)
            if (!b.slots[i].busy && !batch_fill(&b, i))
                rc = data_error("out of memory for an output record");
        if (!rc && b.ng && !interrupted) rc = batch_group(&b, V);
        batch_flush(&b, todo, t0, tty);
        size_t m = 0;
        if (!rc && !interrupted && !b.stop) rc = batch_step(&b, P, V, &m);
        if (m == 0 && !b.more) break;
    }
    batch_flush(&b, todo, t0, tty);
    if (tty) fputc('\n', stderr);
    double el = sm_time_now() - t0;
    if (o->stats || (interrupted && !o->quiet))
        fprintf(stderr, "batch: %zu of %zu records written (%zu failed), %zu tokens generated in "
                        "%.2f s (%.1f tokens/s, %zu decoded together)%s\n",
                b.written, todo, b.failed, b.tokens, el, el > 0 ? (double)b.tokens / el : 0, P,
                interrupted ? "; interrupted" : "");
    for (size_t i = 0; b.slots && i < P; i++) free(b.slots[i].pbuf), free(b.slots[i].k.buf);
    for (size_t i = 0; b.ready && i < todo; i++) free(b.ready[i]);
    free(b.slots), free(b.ready), free(b.ready_len), free(b.ct), free(b.cs), free(b.cp);
    free(input);
    runner_free(&r);
    if (!rc && interrupted) rc = EXIT_INTERRUPTED;
    if (!rc && b.failed) rc = EXIT_DATA;
    return finish_stdout(&b.os, rc);
}

static int cmd_score(const cli_opts *o) {
    char *text;
    size_t len;
    bool owned;
    int rc = get_text(o, &text, &len, &owned);
    if (rc) return rc;
    sm_sampler_params spar = {0, 0, 1, 0};
    runner r;
    /* all logits: (batch, vocab) floats; keep that under ~64 MB for big vocabularies */
    rc = runner_init(&r, o, true, 128, 1, &spar, true);
    if (rc) {
        if (owned) free(text);
        return rc;
    }
    /* Token ids of the whole text, once (a start-up allocation, not per token). */
    size_t total = sm_tokenizer_encode(&r.tok, text, len, NULL, 0);
    int32_t *ids = total >= 2 ? malloc(total * sizeof *ids) : NULL;
    if (!ids) {
        if (owned) free(text);
        runner_free(&r);
        return data_error(total < 2 ? "text too short to score: it needs at least 2 tokens (the first has no context)"
                                    : "out of memory");
    }
    sm_tokenizer_encode(&r.tok, text, len, ids, total);
    size_t V = (size_t)sm_model_config(r.model)->n_vocab, W = r.sp.n_ctx;
    double sum = 0;
    size_t scored = 0, scored_bytes = 0;
    out_state os = {.last_was_newline = true};
    sm_error err = {{0}};
    double t0 = sm_time_now();
    if (o->json) {
        size_t pl;
        const char *p = sm_tokenizer_piece(&r.tok, ids[0], &pl);
        printf("{\"tokens\":[{\"pos\":0,\"id\":%d,\"text\":\"", (int)ids[0]);
        json_string(stdout, (const unsigned char *)p, pl);
        printf("\",\"logprob\":null}");
    }
    /* Windows of the context length, each from a fresh cache: the logits at
       position i of a window predict token i + 1 of the text. */
    for (size_t w0 = 0; w0 < total && !rc; w0 += W) {
        size_t wn = total - w0 < W ? total - w0 : W;
        for (size_t b0 = 0; b0 < wn && !rc; b0 += r.sp.max_batch) {
            size_t bn = wn - b0 < r.sp.max_batch ? wn - b0 : r.sp.max_batch;
            const float *logits;
            if (sm_state_forward(r.state, ids + w0 + b0, bn, b0, &logits, &err)) {
                rc = data_error(err.msg);
                break;
            }
            for (size_t i = 0; i < bn; i++) {
                size_t gpos = w0 + b0 + i;
                if (gpos + 1 >= total) break;
                const float *lg = logits + i * V;
                double mx = lg[0];
                for (size_t k = 1; k < V; k++) mx = lg[k] > mx ? lg[k] : mx;
                double z = 0;
                for (size_t k = 0; k < V; k++) z += exp((double)lg[k] - mx);
                if (!isfinite(z) || !isfinite(mx)) {
                    rc = data_error("the model produced NaN or infinite logits; check the weights");
                    break;
                }
                int32_t target = ids[gpos + 1];
                double lp = (double)lg[target] - mx - log(z);
                size_t pl;
                const char *p = sm_tokenizer_piece(&r.tok, target, &pl);
                sum += lp;
                scored++;
                scored_bytes += pl;
                if (o->json) {
                    printf(",{\"pos\":%zu,\"id\":%d,\"text\":\"", gpos + 1, (int)target);
                    json_string(stdout, (const unsigned char *)p, pl);
                    printf("\",\"logprob\":%.9g}", lp);
                } else {
                    printf("%zu\t%d\t%.6f\t", gpos + 1, (int)target, lp);
                    json_string(stdout, (const unsigned char *)p, pl);
                    putchar('\n');
                }
            }
        }
    }
    double dt = sm_time_now() - t0;
    if (!rc) {
        double mean = sum / (double)scored, ppl = exp(-mean);
        double bpb = scored_bytes ? -sum / log(2.0) / (double)scored_bytes : 0;
        if (o->json) {
            printf("],\"n_tokens\":%zu,\"n_scored\":%zu,\"total_logprob\":%.9g,"
                   "\"mean_logprob\":%.9g,\"perplexity\":%.9g,\"bits_per_byte\":%.9g}\n",
                   total, scored, sum, mean, ppl, bpb);
        } else {
            printf("# tokens %zu, scored %zu, total logprob %.6f nats, mean %.6f nats/token, "
                   "perplexity %.6f, %.6f bits/byte\n",
                   total, scored, sum, mean, ppl, bpb);
        }
        if (o->stats)
            fprintf(stderr, "scored %zu tokens in %.1f ms (%.1f tokens/s), load %.1f ms\n", scored,
                    dt * 1e3, (double)scored / dt, r.t_load * 1e3);
    }
    free(ids);
    if (owned) free(text);
    runner_free(&r);
    if (ferror(stdout)) os.write_errno = errno ? errno : EIO;
    return finish_stdout(&os, rc);
}

static void print_bytes(const char *label, size_t b) {
    printf("  %-12s %12zu bytes (%.2f MiB)\n", label, b, (double)b / (1 << 20));
}

static int cmd_info(const cli_opts *o) {
    sm_sampler_params spar = {0, 0, 1, 0};
    runner r;
    int rc = runner_init(&r, o, false, 512, 1, &spar, false);
    if (rc) return rc;
    const sm_config *c = sm_model_config(r.model);
    sm_arena meas;
    sm_arena_measure(&meas);
    sm_error err;
    carve_run(&r, &spar, &meas, &err);
    printf("model:        %s\n", o->model);
    printf("architecture: %s\n", sm_arch_name(c->arch));
    printf("layers %d, heads %d, embedding %d, head size %d, context %d, vocabulary %d\n",
           c->n_layer, c->n_head, c->n_embd, c->head_dim, c->n_ctx, c->n_vocab);
    printf("activation %s, norm_eps %g, output layer %s, biases %s\n",
           sm_activation_name(c->activation), (double)c->norm_eps,
           c->tied_output ? "tied to the token embedding" : "separate", c->bias ? "yes" : "no");
    printf("tokenizer:    %s (%d ids)\n", sm_tokenizer_type_name(c->tokenizer), r.tok.n_vocab);
    printf("parameters:   %zu\n", sm_model_params(r.model));
    char types[64] = "";
    size_t tl = 0;
    for (int d = 0; d < SM_DTYPE_COUNT; d++) { /* the dtypes present, by bytes */
        size_t bytes = 0;
        for (size_t i = 0; i < c->n_tensors; i++)
            if (c->tensors[i].dtype == (sm_dtype)d) bytes += c->tensors[i].nbytes;
        if (bytes)
            tl += (size_t)snprintf(types + tl, sizeof types - tl, "%s%s %.1f%%", tl ? ", " : "",
                                   sm_dtype_name((sm_dtype)d),
                                   100.0 * (double)bytes / (double)sm_model_weight_bytes(r.model));
    }
    printf("weights:      %zu bytes (%.2f MiB: %s) in %d file%s, %s\n",
           sm_model_weight_bytes(r.model), (double)sm_model_weight_bytes(r.model) / (1 << 20),
           types, c->n_files, c->n_files == 1 ? "" : "s",
           o->no_mmap ? "read into memory" : "memory-mapped");
    printf("kernels:      %s\n", r.kernels->name);
    printf("memory plan (context %zu, batch %zu, %d thread%s), one arena:\n", r.sp.n_ctx,
           r.sp.max_batch, r.sp.n_threads, r.sp.n_threads == 1 ? "" : "s");
    print_bytes("arena", meas.used);
    print_bytes("kv-cache", r.plan.kv_cache);
    print_bytes("activations", r.plan.activations);
    print_bytes("logits", r.plan.logits);
    print_bytes("scratch", r.plan.scratch);
    print_bytes("sampler+prompt", meas.used - r.plan.total);
    runner_free(&r);
    out_state os = {0};
    if (ferror(stdout)) os.write_errno = errno ? errno : EIO;
    return finish_stdout(&os, 0);
}

/* ---------------------------------------------------------------- bench */

typedef struct {
    float *a, *b, *c;
    size_t n;
} triad_job;

static void triad_init(void *arg, int ith, int nth) {
    triad_job *j = arg;
    size_t i0, i1;
    sm_pool_split(j->n, 1024, ith, nth, &i0, &i1); /* first touch by the thread that streams it */
    for (size_t i = i0; i < i1; i++) j->a[i] = 0, j->b[i] = 1, j->c[i] = 2;
}

static void triad_task(void *arg, int ith, int nth) {
    triad_job *j = arg;
    size_t i0, i1;
    sm_pool_split(j->n, 1024, ith, nth, &i0, &i1);
    for (size_t i = i0; i < i1; i++) j->a[i] = j->b[i] + 3.0f * j->c[i];
}

/* Seconds of the fastest of `reps` runs of fn on the pool. */
static double best_run(sm_pool *pool, sm_task_fn fn, void *arg, int reps) {
    double best = 1e30;
    for (int rep = 0; rep < reps; rep++) {
        double t0 = sm_time_now();
        sm_pool_run(pool, fn, arg);
        double t = sm_time_now() - t0;
        if (t < best) best = t;
    }
    return best;
}

/*
** Memory bandwidth in bytes/s on the pool's threads: STREAM's triad
** a = b + s c over three 64 MiB arrays, best of 5, counting 12 bytes per
** element as STREAM does (no write-allocate traffic). 0 if out of memory.
*/
static double triad_bandwidth(sm_pool *pool) {
    triad_job j = {.n = 16u << 20};
    j.a = malloc(j.n * sizeof(float));
    j.b = malloc(j.n * sizeof(float));
    j.c = malloc(j.n * sizeof(float));
    double bw = 0;
    if (j.a && j.b && j.c) {
        sm_pool_run(pool, triad_init, &j);
        bw = 12.0 * (double)j.n / best_run(pool, triad_task, &j, 5);
    }
    free(j.a), free(j.b), free(j.c);
    return bw;
}

typedef struct {
    const sm_kernels *k;
    const float *buf;
    size_t n;   /* floats */
    float *sum; /* (nth) per-thread results, so the reads are not optimised away */
} read_job;

static void read_task(void *arg, int ith, int nth) {
    read_job *j = arg;
    size_t i0, i1;
    sm_pool_split(j->n, 1024, ith, nth, &i0, &i1); /* multiples of 1024 floats */
    j->sum[ith] = j->k->sum(j->buf + i0, i1 - i0);
}

/*
** Read bandwidth in bytes/s on the pool's threads over a working set of
** `bytes` (at most 1 GiB), each thread streaming its own share with the
** kernel table's widest loads, as a decode step streams its share of the
** weights: where the model fits in cache, this and not the triad is what
** bounds decoding. Best of 5 passes after a warm-up. 0 if out of memory.
*/
static double read_bandwidth(sm_pool *pool, const sm_kernels *k, double bytes) {
    if (bytes > (double)(1u << 30)) bytes = (double)(1u << 30);
    read_job j = {.k = k, .n = ((size_t)bytes / 4 + 1023) & ~(size_t)1023};
    float *buf = aligned_alloc(64, j.n * sizeof *buf);
    j.sum = calloc((size_t)sm_pool_threads(pool), sizeof *j.sum);
    double bw = 0;
    if (buf && j.sum) {
        for (size_t i = 0; i < j.n; i++) buf[i] = (float)(i & 255);
        j.buf = buf;
        sm_pool_run(pool, read_task, &j); /* warm-up: the working set into the caches */
        bw = 4.0 * (double)j.n / best_run(pool, read_task, &j, 5);
    }
    free(buf), free(j.sum);
    return bw;
}

/* Bytes of keys and values one decoded token reads at context length ctx. */
static double kv_bytes_per_token(const sm_config *c, double ctx) {
    return 2.0 * (double)c->n_layer * (double)c->n_kv_head * (double)c->head_dim * 4.0 * ctx;
}

/*
** Bytes one decoded token reads from the weights: every tensor except those
** only looked up by row (the position table, and the token embedding when
** a separate output layer exists).
*/
static double bytes_per_token(const sm_config *c) {
    double b = 0;
    for (size_t i = 0; i < c->n_tensors; i++) {
        const char *nm = c->tensors[i].name;
        if (strcmp(nm, "pos_embd") == 0 || (strcmp(nm, "tok_embd") == 0 && !c->tied_output))
            continue;
        b += (double)c->tensors[i].nbytes;
    }
    return b;
}

/*
** One run: P prompt tokens prefilled, a token sampled, then N decoded one at
** a time. *t_pf and *t_dec get the seconds of each part, *allocs the heap
** allocations made while decoding. With pre and dec (else NULL) the forward
** steps are profiled into them, sampling included. Returns an exit code.
*/
static int bench_run(runner *r, size_t P, size_t N, sm_profile *pre, sm_profile *dec,
                     double *t_pf, double *t_dec, size_t *allocs) {
    sm_error err = {{0}};
    const float *logits;
    int32_t next;
    if (pre) memset(pre, 0, sizeof *pre), memset(dec, 0, sizeof *dec);
    sm_state_set_profile(r->state, pre);
    double t0 = sm_time_now();
    sm_status st = sm_state_prefill(r->state, r->tokens, P, 0, &logits, &err);
    sm_state_set_profile(r->state, dec);
    double t1 = sm_time_now();
    size_t a0 = cli_allocs();
    for (size_t i = 0; i <= N && !st; i++) {
        double ts = dec ? sm_time_now() : 0;
        if (sm_sampler_sample(r->samplers, logits, &next)) st = SM_ERR_RUNTIME;
        if (dec) dec->s[SM_OP_SAMPLE] += sm_time_now() - ts;
        if (i == 0) t1 = sm_time_now(); /* prefill includes sampling its token */
        if (!st && i < N) st = sm_state_forward(r->state, &next, 1, P + i, &logits, &err);
    }
    *allocs = cli_allocs() - a0;
    *t_dec = sm_time_now() - t1;
    *t_pf = t1 - t0;
    sm_state_set_profile(r->state, NULL);
    return st ? data_error(err.msg[0] ? err.msg : "NaN logits") : 0;
}

static void print_profile(const char *title, const sm_profile *p, size_t tokens, bool json) {
    double total = 0;
    for (int k = 0; k < SM_OP_COUNT; k++) total += p->s[k];
    if (!json) printf("%s\n  %-11s %7s %11s %9s %9s\n", title, "step", "share", "ms/token", "GFLOPS", "GB/s");
    for (int k = 0; k < SM_OP_COUNT; k++) {
        double s = p->s[k], gf = s > 0 ? p->flops[k] / s / 1e9 : 0, gb = s > 0 ? p->bytes[k] / s / 1e9 : 0;
        double share = total > 0 ? 100 * s / total : 0, ms = tokens ? s * 1e3 / (double)tokens : 0;
        if (json)
            printf("%s\"%s\":{\"share\":%.2f,\"ms_per_token\":%.4f,\"gflops\":%.2f,\"gb_per_s\":%.2f}",
                   k ? "," : "", sm_op_name((sm_op)k), share, ms, gf, gb);
        else if (p->flops[k] > 0 || p->bytes[k] > 0)
            printf("  %-11s %6.1f%% %11.4f %9.1f %9.1f\n", sm_op_name((sm_op)k), share, ms, gf, gb);
        else
            printf("  %-11s %6.1f%% %11.4f %9s %9s\n", sm_op_name((sm_op)k), share, ms, "", "");
    }
}

/* A flat list of the numbers in a bench --json report: "a.b.c" -> value. */
static void flatten(const cJSON *o, const char *prefix, char (*keys)[96], double *vals, size_t *n,
                    size_t cap) {
    for (const cJSON *e = o->child; e && *n < cap; e = e->next) {
        char key[96];
        snprintf(key, sizeof key, "%s%s%s", prefix, *prefix ? "." : "", e->string ? e->string : "");
        if (cJSON_IsObject(e)) {
            flatten(e, key, keys, vals, n, cap);
        } else if (cJSON_IsNumber(e)) {
            snprintf(keys[*n], sizeof keys[*n], "%s", key);
            vals[(*n)++] = e->valuedouble;
        }
    }
}

/* bench --compare A.json B.json: every number of A beside B's, and B / A. */
static int bench_compare(const cli_opts *o) {
    if (o->n_args != 2)
        return usage_error(o, "--compare takes two bench --json reports (got %zu files)", o->n_args);
    enum { CAP = 256 };
    static char keys[2][CAP][96];
    static double vals[2][CAP];
    size_t n[2] = {0, 0};
    for (int f = 0; f < 2; f++) {
        char *text;
        size_t len;
        int rc = read_all(o->args[f], &text, &len);
        if (rc) return rc;
        cJSON *root;
        sm_error err = {{0}};
        sm_status st = sm_json_parse_strict(text, len, o->args[f], &root, &err);
        free(text);
        if (st) return data_error(err.msg);
        if (!cJSON_IsObject(root) || !cJSON_GetObjectItemCaseSensitive(root, "decode_tokens_per_s")) {
            cJSON_Delete(root);
            fprintf(stderr, "smallmind: %s: not a bench --json report (no decode_tokens_per_s)\n",
                    o->args[f]);
            return EXIT_DATA;
        }
        flatten(root, "", keys[f], vals[f], &n[f], CAP);
        cJSON_Delete(root);
    }
    printf("%-36s %14s %14s %8s\n", "", "A", "B", "B/A");
    printf("%-36s %14.14s %14.14s\n", "", o->args[0], o->args[1]);
    for (size_t i = 0; i < n[0]; i++) {
        size_t k = 0;
        while (k < n[1] && strcmp(keys[1][k], keys[0][i]) != 0) k++;
        if (k == n[1]) {
            printf("%-36s %14.4g %14s\n", keys[0][i], vals[0][i], "-");
            continue;
        }
        double a = vals[0][i], b = vals[1][k];
        char ratio[24] = "-";
        if (a != 0) snprintf(ratio, sizeof ratio, "%.3f", b / a);
        printf("%-36s %14.4g %14.4g %8s\n", keys[0][i], a, b, ratio);
    }
    out_state os = {0};
    return finish_stdout(&os, 0);
}

/*
** bench: P prompt tokens prefilled in one call, then N tokens decoded one
** at a time with generate's default sampler, best of --reps; heap
** allocations counted over the decoding; then one profiled run (time per
** step, GFLOPS, GB/s) and the machine's memory bandwidth (triad) with the
** decode bound it gives for this model, and the read bandwidth over the
** working set of one decode step with the bound that gives.
*/
static int cmd_bench(const cli_opts *o) {
    if (o->compare || o->n_args) {
        if (!o->compare) return usage_error(o, "unexpected argument '%s'", o->args[0]);
        return bench_compare(o);
    }
    sm_sampler_params spar = {0.8f, 40, 0.95f, 42};
    runner r;
    size_t P = (size_t)o->prompt_tokens;
    int rc = runner_init(&r, o, false, P, 1, &spar, true);
    if (rc) return rc;
    size_t N = (size_t)o->max_tokens;
    if (P > r.sp.n_ctx) P = r.sp.n_ctx;
    if (P + N > r.sp.n_ctx) N = r.sp.n_ctx - P;
    size_t V = (size_t)r.tok.n_vocab;
    for (size_t i = 0; i < P; i++) r.tokens[i] = (int32_t)((i * 7919 + 13) % V);
    double best_pf = 1e30, best_dec = 1e30, t_pf, t_dec;
    size_t allocs = 0, a;
    for (long rep = 0; rep < o->reps && !rc; rep++) {
        rc = bench_run(&r, P, N, NULL, NULL, &t_pf, &t_dec, &a);
        allocs += a;
        if (t_pf < best_pf) best_pf = t_pf;
        if (t_dec < best_dec) best_dec = t_dec;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru); /* before the triad's arrays */
    sm_profile pre, dec;
    if (rc || (rc = bench_run(&r, P, N, &pre, &dec, &t_pf, &t_dec, &a))) {
        runner_free(&r);
        return rc;
    }
    double ttft = r.t_load + best_pf;
    const sm_config *c = sm_model_config(r.model);
    double bw = triad_bandwidth(r.pool), bpt = bytes_per_token(c);
    double pf = (double)P / best_pf, dtps = N ? (double)N / best_dec : 0, bound = bw / bpt;
    /* the working set of a decode step: weights, and keys and values at the mean context */
    double ws = bpt + kv_bytes_per_token(c, (double)P + (double)N / 2);
    double rbw = read_bandwidth(r.pool, r.kernels, ws), rbound = rbw / ws;
    double apt = N ? (double)allocs / (double)(N * (size_t)o->reps) : 0;
    if (o->json) {
        fputs("{\"model\":\"", stdout);
        json_string(stdout, (const unsigned char *)o->model, strlen(o->model));
        printf("\",\"kernels\":\"%s\",\"threads\":%d,\"prompt_tokens\":%zu,"
               "\"decode_tokens\":%zu,\"load_ms\":%.3f,\"prefill_tokens_per_s\":%.1f,"
               "\"decode_tokens_per_s\":%.1f,\"ms_per_token\":%.4f,\"first_token_ms\":%.3f,"
               "\"allocs_per_token\":%.3f,\"peak_rss_kb\":%ld,\"weight_bytes_per_token\":%.0f,"
               "\"bandwidth_gb_per_s\":%.2f,\"bound_tokens_per_s\":%.1f,\"of_bound\":%.3f,"
               "\"working_set_bytes\":%.0f,\"read_gb_per_s\":%.2f,\"read_bound_tokens_per_s\":%.1f,"
               "\"of_read_bound\":%.3f,",
               r.kernels->name, r.sp.n_threads, P, N, r.t_load * 1e3, pf, dtps,
               dtps > 0 ? 1e3 / dtps : 0, ttft * 1e3, apt, ru.ru_maxrss, bpt, bw / 1e9, bound,
               bound > 0 ? dtps / bound : 0, ws, rbw / 1e9, rbound, rbound > 0 ? dtps / rbound : 0);
        fputs("\"profile\":{\"prefill\":{", stdout);
        print_profile("", &pre, P, true);
        fputs("},\"decode\":{", stdout);
        print_profile("", &dec, N, true);
        fputs("}}}\n", stdout);
    } else {
        printf("model %s, %s kernels, %d threads\n"
               "load           %8.2f ms\n"
               "prefill        %8.1f tokens/s (%zu tokens)\n"
               "decode         %8.1f tokens/s (%zu tokens, %.4f ms/token)\n"
               "first token    %8.2f ms (load + prefill)\n"
               "allocations    %8.3f per generated token (%zu in %ld x %zu tokens)\n"
               "peak RSS       %8ld KiB\n"
               "bandwidth      %8.2f GB/s (triad); %.1f MB of weights per token\n"
               "decode bound   %8.1f tokens/s; decode is %.0f%% of it\n"
               "read bandwidth %8.2f GB/s over the %.1f MB a decode step reads (weights, KV)\n"
               "read bound     %8.1f tokens/s; decode is %.0f%% of it\n",
               o->model, r.kernels->name, r.sp.n_threads, r.t_load * 1e3, pf, P, dtps, N,
               dtps > 0 ? 1e3 / dtps : 0, ttft * 1e3, apt, allocs, o->reps, N, ru.ru_maxrss,
               bw / 1e9, bpt / 1e6, bound, bound > 0 ? 100 * dtps / bound : 0, rbw / 1e9, ws / 1e6,
               rbound, rbound > 0 ? 100 * dtps / rbound : 0);
        print_profile("decode profile (one run; time per token, share of the forward + sampling):",
                      &dec, N, false);
        print_profile("prefill profile (time per prompt token):", &pre, P, false);
    }
    runner_free(&r);
    out_state os = {0};
    return finish_stdout(&os, 0);
}

/* --------------------------------------------------------------- main */


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

/* ------------------------------------------- convert, tokenize, detokenize */

static int cmd_convert(const cli_opts *o) {
    if (o->n_args != 2) return usage_error(o, "convert takes SRC and OUT (got %zu arguments)", o->n_args);
    sm_convert_opts co = {.tokenizer = o->tokenizer, .dtype = o->dtype};
    sm_convert_info info;
    sm_error err = {{0}};
    double t0 = sm_time_now();
    if (sm_convert(o->args[0], o->args[1], &co, &info, &err)) return data_error(err.msg);
    if (!o->quiet)
        fprintf(stderr, "smallmind: converted %s %s -> %s: %zu tensors, %zu parameters, %zu bytes (%.1f s)\n",
                info.source, o->args[0], o->args[1], info.n_tensors, info.params, info.bytes,
                sm_time_now() - t0);
    return 0;
}

/* Loads only the config and tokenizer of o->model (no weights). Returns an exit code. */
static int load_tokenizer(const cli_opts *o, sm_config *cfg, sm_tokenizer *tok) {
    sm_error err = {{0}};
    if (sm_config_load(cfg, o->model, &err)) return data_error(err.msg);
    if (sm_tokenizer_init(tok, cfg, o->model, &err)) {
        sm_config_free(cfg);
        return data_error(err.msg);
    }
    tok->parse_special = o->special;
    return 0;
}

static int cmd_tokenize(const cli_opts *o) {
    sm_config cfg;
    sm_tokenizer tok;
    int rc = load_tokenizer(o, &cfg, &tok);
    if (rc) return rc;
    char *text = NULL;
    size_t len = 0, n = 0;
    bool owned = false;
    int32_t *ids = NULL;
    if ((rc = get_text(o, &text, &len, &owned))) goto done;
    n = sm_tokenizer_encode(&tok, text, len, NULL, 0);
    ids = malloc((n ? n : 1) * sizeof *ids);
    if (!ids) {
        rc = data_error("out of memory");
        goto done;
    }
    sm_tokenizer_encode(&tok, text, len, ids, n);
    out_state os = {.last_was_newline = true};
    if (o->json) printf("[");
    for (size_t i = 0; i < n; i++) {
        if (!o->json) {
            printf("%s%d", i ? " " : "", (int)ids[i]);
            continue;
        }
        size_t pl;
        const char *p = sm_tokenizer_piece(&tok, ids[i], &pl);
        printf("%s{\"id\": %d, \"piece\": \"", i ? ", " : "", (int)ids[i]);
        json_string(stdout, (const unsigned char *)p, pl);
        printf("\"}");
    }
    printf(o->json ? "]\n" : "\n");
    rc = finish_stdout(&os, 0);
done:
    free(ids);
    if (owned) free(text);
    sm_tokenizer_free(&tok);
    sm_config_free(&cfg);
    return rc;
}

static int cmd_detokenize(const cli_opts *o) {
    if (o->n_args == 0) return usage_error(o, "detokenize takes token ids");
    sm_config cfg;
    sm_tokenizer tok;
    int rc = load_tokenizer(o, &cfg, &tok);
    if (rc) return rc;
    int32_t prev = -1;
    out_state os = {.last_was_newline = true};
    for (size_t i = 0; i < o->n_args && !rc; i++) {
        long id;
        if (!parse_long(o->args[i], 0, INT32_MAX, &id) || id >= tok.n_vocab) {
            rc = usage_error(o, "token id '%s' is not a whole number from 0 to %d", o->args[i],
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
        rc = finish_stdout(&os, 0);
    }
    sm_tokenizer_free(&tok);
    sm_config_free(&cfg);
    return rc;
}

int sm_cli_main(int argc, char **argv) {
    cli_opts o = {.max_tokens = 256, .temp = 0.8, .top_k = 40, .top_p = 0.95, .seed = 42,
                  .kernels = "auto", .prompt_tokens = 128, .reps = 3, .layers = 4, .heads = 8,
                  .embd = 256, .tctx = 256, .val_fraction = 0.1, .eval_every = 100,
                  .eval_seqs = 64, .ckpt_every = 500, .log_every = 10};
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
                {"tokenize", CMD_TOKENIZE}, {"detokenize", CMD_DETOKENIZE}};
    const char *c = argv[1];
    if (strcmp(c, "-h") == 0 || strcmp(c, "--help") == 0 || strcmp(c, "help") == 0) {
        print_help(&o);
        return 0;
    }
    if (strcmp(c, "--version") == 0) {
        printf("smallmind %s\n", SM_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (strcmp(c, cmds[i].name) == 0) {
            o.cmd = cmds[i].cmd;
            o.cmd_name = cmds[i].name;
        }
    if (!o.cmd) return usage_error(NULL, "unknown command '%s'", c);
    if (o.cmd == CMD_BENCH) o.max_tokens = 128;

    const char *env = getenv("SMALLMIND_MODEL");
    static char installed[4096];
    o.model = env && *env ? env : default_model(installed, sizeof installed);
    env = getenv("SMALLMIND_THREADS");
    if (env && *env) {
        if (!parse_long(env, 1, MAX_THREADS, &o.threads))
            return usage_error(&o, "SMALLMIND_THREADS must be a whole number from 1 to %d, got '%s'",
                               MAX_THREADS, env);
    } else {
        o.threads = physical_cores();
        if (o.threads > MAX_THREADS) o.threads = MAX_THREADS;
    }
    int rc = parse_args(&o, argc, argv, 2);
    if (rc) return rc;
    if (o.help) {
        print_help(&o);
        return 0;
    }
    if (o.version) {
        printf("smallmind %s\n", SM_VERSION);
        return 0;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);
    switch (o.cmd) {
    case CMD_GENERATE: return cmd_generate(&o);
    case CMD_SCORE: return cmd_score(&o);
    case CMD_INFO: return cmd_info(&o);
    case CMD_TRAIN: return sm_cli_train(&o);
    case CMD_CONVERT: return cmd_convert(&o);
    case CMD_TOKENIZE: return cmd_tokenize(&o);
    case CMD_DETOKENIZE: return cmd_detokenize(&o);
    default: return cmd_bench(&o);
    }
}
