/*
** cli_internal.h -- what the subcommands in cli.c and cli_train.c share.
*/
#ifndef SM_CLI_INTERNAL_H
#define SM_CLI_INTERNAL_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sm_base.h"

#define EXIT_DATA 1
#define EXIT_USAGE 2
#define EXIT_INTERRUPTED 130

enum {
    CMD_GENERATE = 1, CMD_SCORE = 2, CMD_INFO = 4, CMD_BENCH = 8, CMD_TRAIN = 16,
    CMD_CONVERT = 32, CMD_TOKENIZE = 64, CMD_DETOKENIZE = 128
};

typedef enum {
    O_MODEL, O_PROMPT, O_FILE, O_MAXTOK, O_TEMP, O_TOPK, O_TOPP, O_SEED, O_THREADS, O_CTX,
    O_QUIET, O_STATS, O_VERBOSE, O_JSON, O_NOMMAP, O_KERNELS, O_HELP, O_VERSION, O_PTOK, O_REPS,
    O_DATA, O_OUT, O_RESUME, O_CONFIG, O_LAYERS, O_HEADS, O_EMBD, O_TCTX, O_UNTIED, O_NOBIAS,
    O_STEPS, O_BATCH, O_LR, O_LRMIN, O_WARMUP, O_WD, O_CLIP, O_VALFRAC, O_EVALEVERY,
    O_EVALSEQS, O_CKPT, O_LOGEVERY, O_STOP, O_OUTFMT, O_TRUNCATE, O_BATCHFILE, O_SHARD,
    O_PARALLEL, O_CHECKW, O_TOKFILE, O_SPECIAL, O_DTYPE, O_COMPARE
} opt_id;

#define MAX_ARGS 4096 /* positional arguments (convert SRC OUT, detokenize IDS...) */

typedef struct {
    unsigned cmd;
    const char *cmd_name;
    uint64_t given; /* bit (1 << opt_id) for every flag on the command line */
    const char *model;
    const char *prompt, *file;
    long max_tokens;
    double temp, top_p;
    long top_k;
    long long seed;
    long threads;
    long ctx;
    bool quiet, stats, verbose, json, no_mmap, help, version, check_weights;
    const char *kernels;
    long prompt_tokens, reps;
    /* train */
    const char *data, *out, *resume, *config;
    long layers, heads, embd, tctx, steps, batch, warmup, eval_every, eval_seqs, ckpt_every,
        log_every;
    double lr, lr_min, weight_decay, grad_clip, val_fraction;
    bool untied, no_bias;
    /* generate */
    const char *stop[8];
    size_t n_stop;
    bool truncate;
    const char *batch_file;
    long shard_i, shard_n;
    long parallel; /* 0: not given */
    /* convert, tokenize, detokenize */
    const char *tokenizer;
    sm_dtype dtype; /* convert --dtype */
    bool compare;   /* bench --compare A.json B.json */
    bool special;
    const char *args[MAX_ARGS];
    size_t n_args;
} cli_opts;

extern volatile sig_atomic_t interrupted;

/* One line on stderr; return the exit code to use. */
int usage_error(const cli_opts *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int data_error(const char *msg);
/* Reads a whole file ('-' = stdin) into a malloc'd buffer. Returns an exit code. */
int read_all(const char *path, char **out, size_t *len);

/* The seed to use for -s N: N itself, or a fresh one for -1. */
uint64_t cli_seed(long long seed);
/* The long name (without "--") of the flag that sets `id`. */
const char *cli_flag_name(opt_id id);

int sm_cli_train(const cli_opts *o);

/* Heap allocations the program's own code has made so far (src/alloc_count.c). */
size_t cli_allocs(void);

#endif
