/*
** cli.h -- what the command-line files share (private to src/cli/).
**
** The CLI is the only code that prints or exits. main.c picks the command,
** options.c turns flags into cli_opts, output.c owns stdout and JSON text,
** runner.c loads a model and carves the run's arena; each command is one
** file (generate.c, batch.c, score.c, info.c, bench.c, train.c, convert.c,
** tokenize.c) that uses these shared files and never another command file.
**
** Exit codes: 0 success (also when stdout is a closed pipe), 1 data or
** run-time error, 2 usage error, 130 interrupted. stdout carries only
** results; everything else goes to stderr.
*/
#ifndef SM_CLI_H
#define SM_CLI_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "sm_base.h"
#include "sm_batch.h"
#include "sm_chat.h"
#include "sm_generate.h"
#include "sm_model.h"
#include "sm_oai.h"
#include "sm_sampler.h"
#include "sm_sched.h"
#include "sm_source.h"
#include "smallmind_internal.h"
#include "sm_tokenizer.h"

#define SM_VERSION "0.1.0"
#define MAX_THREADS 512

#define EXIT_DATA 1
#define EXIT_USAGE 2

enum {
    CMD_GENERATE = 1, CMD_SCORE = 2, CMD_INFO = 4, CMD_BENCH = 8, CMD_TRAIN = 16,
    CMD_CONVERT = 32, CMD_TOKENIZE = 64, CMD_DETOKENIZE = 128, CMD_CHAT = 256, CMD_TEMPLATE = 512,
    CMD_SERVE = 1024
};

typedef enum {
    O_MODEL, O_PROMPT, O_FILE, O_MAXTOK, O_TEMP, O_TOPK, O_TOPP, O_SEED, O_THREADS, O_CTX,
    O_QUIET, O_STATS, O_VERBOSE, O_JSON, O_NOMMAP, O_NOREPACK, O_KERNELS, O_HELP, O_VERSION, O_PTOK, O_REPS, O_UBATCH,
    O_DATA, O_OUT, O_RESUME, O_CONFIG, O_LAYERS, O_HEADS, O_EMBD, O_TCTX, O_UNTIED, O_NOBIAS,
    O_STEPS, O_BATCH, O_LR, O_LRMIN, O_WARMUP, O_WD, O_CLIP, O_VALFRAC, O_EVALEVERY,
    O_EVALSEQS, O_CKPT, O_LOGEVERY, O_STOP, O_OUTFMT, O_TRUNCATE, O_BATCHFILE, O_SHARD,
    O_PARALLEL, O_CHECKW, O_TOKFILE, O_SPECIAL, O_DTYPE, O_COMPARE, O_PICK, O_PEAKS, O_KVTYPE, O_NOBOS,
    O_CHAT, O_SYSTEM, O_CHATTPL, O_NOGENP, O_MINP, O_REPPEN, O_REPLASTN, O_PRESPEN, O_FREQPEN, O_LOGITBIAS,
    O_IDS, O_CACHERAM, O_PCACHE, O_PCACHERO, O_INFMT, O_OUTPUT, O_BRESUME, O_ERRORS, O_ORDERED,
    O_UNORDERED, O_ALLOWDUP, O_PROGRESS, O_PROGINT, O_ALIAS, O_GRAMMAR, O_GRAMMARTEXT, O_JSONSCHEMA,
    O_FORMAT, O_HOST, O_PORT, O_APIKEY, O_QUEUE, O_COUNT_
} opt_id;

#define CMD_RUN (CMD_GENERATE | CMD_SCORE | CMD_BENCH | CMD_CHAT | CMD_SERVE)
#define CMD_MODEL (CMD_RUN | CMD_INFO)              /* load the weights */
#define CMD_TOKENS (CMD_TOKENIZE | CMD_DETOKENIZE | CMD_TEMPLATE) /* load only the tokenizer */
#define CMD_ALL (CMD_MODEL | CMD_TOKENS | CMD_TRAIN | CMD_CONVERT)
#define CMD_SAMPLE (CMD_GENERATE | CMD_CHAT | CMD_SERVE) /* sampling flags (serve: the requests' defaults) */

/* Whether flag id was on the command line. */
#define CLI_GIVEN(o, id) (((o)->given[(id) / 64] >> ((id) % 64)) & 1)


typedef struct {
    unsigned cmd;
    const char *cmd_name;
    uint64_t given[(O_COUNT_ + 63) / 64]; /* a bit per opt_id given on the command line */
    const char *model;
    const char *prompt, *file;
    long max_tokens;
    double temp, top_p;
    long top_k;
    long long seed;
    long threads;
    long ctx;
    bool quiet, stats, verbose, json, no_mmap, no_repack, help, version, check_weights;
    const char *kernels;
    long prompt_tokens, reps;
    long ubatch; /* score: tokens per forward call (0: 128) */
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
    long cache_mib;           /* --cache-ram: the prefix cache of --batch, MiB (0: off) */
    const char *prompt_cache; /* --prompt-cache FILE */
    bool prompt_cache_ro;     /* --prompt-cache-ro: read it, never write it */
    sm_batch_format input_format; /* --input-format (SM_BATCH_AUTO when zeroed) */
    const char *output;       /* --output FILE: results there instead of stdout */
    const char *errors;       /* --errors FILE: failed records there */
    bool resume_batch;        /* generate --resume: append to --output, skipping records it has */
    int ordered;              /* 1 --ordered, -1 --unordered, 0 the default (ordered) */
    bool allow_dup_ids;       /* --allow-duplicate-ids */
    bool progress;            /* --progress: a progress line on stderr every progress_s */
    double progress_s;
    const char *alias;        /* --alias NAME: the model's name in OpenAI results */
    sm_grammar_kind gkind;    /* --grammar, --grammar-text, --json-schema, --format: what output keeps to */
    const char *gsrc;         /* the flag's value: a file, or the text itself (ginline) */
    bool ginline;
    const char *gflag;        /* the flag, for messages */
    /* serve */
    const char *host;         /* --host (default 127.0.0.1) */
    long port;                /* --port (default 8080) */
    const char *api_key;      /* --api-key: requests need "Authorization: Bearer KEY" */
    long queue;               /* --queue: requests waiting for a slot at most (0: 256) */
    /* convert, tokenize, detokenize */
    const char *tokenizer;
    sm_dtype dtype; /* convert --dtype */
    bool dtype_given;
    bool mix_m;     /* --dtype q4_k_m / q5_k_m */
    sm_dtype kv_type; /* --kv-type (SM_DTYPE_F32 when zeroed) */
    bool compare;   /* bench --compare A.json B.json */
    bool pick;      /* bench --pick-kernels */
    bool peaks;     /* bench --peaks */
    bool special;
    bool no_bos;   /* tokenize: no BOS even where the tokenizer adds one */
    /* chat */
    bool chat;                 /* generate --chat: the prompt as a user message, templated */
    const char *system;        /* --system: a system message first */
    const char *chat_template; /* --chat-template FILE */
    bool no_gen_prompt;        /* template --no-generation-prompt */
    bool ids;                  /* template --ids: token ids instead of text */
    double min_p, repeat_penalty, presence_penalty, frequency_penalty;
    sm_bias_list bias;         /* --logit-bias ID(+|-)BIAS, repeatable */
    long repeat_last_n;
    const char **args; /* positional arguments, in argv (any number) */
    size_t n_args;
} cli_opts;

/* ---- options.c */

/* Parses argv[first..] into o (o->cmd set; defaults filled). Returns an exit code. */
int cli_parse_args(cli_opts *o, int argc, char **argv, int first);
void cli_print_help(const cli_opts *o);
/* A whole number s in [lo, hi]. */
bool cli_parse_long(const char *s, long lo, long hi, long *out);
/* The seed to use for -s N: N itself, or a fresh one for -1. */
uint64_t cli_seed(long long seed);
/* The long name (without "--") of the flag that sets `id`. */
const char *cli_flag_name(opt_id id);
/* One line on stderr; return the exit code to use. */
int cli_usage_error(const cli_opts *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- output.c */

/* The number of the first SIGINT, SIGTERM or SIGHUP (main.c's handler; a
   second one exits at once), else 0. Commands poll it and stop. */
extern volatile sig_atomic_t cli_interrupted;
/* Set while nothing needs flushing (loading, tokenizing): a signal exits at once. */
extern volatile sig_atomic_t cli_exit_now;
/*
** What SIGBUS says: a memory-mapped file (the weights) shrank during the run;
** main.c's handler writes this message and exits 1. cli_set_mapped names
** the files (before mapping them).
*/
extern char cli_bus_msg[4600];
extern size_t cli_bus_len;
void cli_set_mapped(const char *what);

/* The exit code after a signal: 128 + its number (130 for Ctrl-C). */
int cli_interrupt_code(void);

int cli_data_error(const char *msg);
/* An error of a run of the model: a run-time one (NaN logits) names the model first. Exit 1. */
int cli_run_error(const cli_opts *o, sm_status st, const char *msg);

/* State of stdout: a closed pipe ends the run quietly; other errors are reported. */
typedef struct cli_out {
    bool pipe_closed;
    int write_errno;
    bool last_was_newline;
} cli_out;

/* Writes s[0..n) straight to the descriptor; non-zero once output cannot go on. */
int cli_out_write(cli_out *os, const char *s, size_t n);
/* Final flush and close of stdout; returns the exit code to use. */
int cli_finish_stdout(cli_out *os, int code);
/* Appends s[0..n) to f as the inside of a JSON string; invalid UTF-8 bytes become U+FFFD. */
void cli_json_string(FILE *f, const unsigned char *s, size_t n);
/* Token ids from JSON array a (a request's "tokens", a batch line's "ids") into *ids (capacity
   *cap, grown), *n of them; false with err naming field and the item that is not an id. */
struct cJSON;
bool cli_json_ids(const struct cJSON *a, const char *field, int32_t n_vocab, int32_t **ids, size_t *cap,
                  size_t *n, char *err, size_t errcap);
/* The text of ids[0..n) after prev (sm_tokenizer_decode) into *buf (capacity *cap, grown), *len
   bytes; false when memory runs out. */
bool cli_decode(const sm_tokenizer *t, int32_t prev, const int32_t *ids, size_t n, char **buf, size_t *cap,
                size_t *len);
/* "text": ..., counts, finish reason, timing (with queue_ms when t_queue >= 0, seconds): a
   generation result's JSON fields. */
void cli_json_result(FILE *f, const char *text, size_t len, const sm_gen_stats *gs,
                     size_t dropped, double t_queue);
/* Reads a whole file ('-' = stdin) into a malloc'd buffer (a NUL after it). Returns an exit code. */
int cli_read_all(const char *path, char **out, size_t *len);
/* The text to work on: -p, else -f, else stdin if it is not a terminal. */
int cli_get_text(const cli_opts *o, char **text, size_t *len, bool *owned);

/* ---- batch_io.c: --batch input lines, record keys, result files */

/* Lines of a file, pipe, FIFO or stdin ('-'), read as they arrive. */
typedef struct cli_reader {
    int fd;
    bool own, regular, eof;
    bool had_newline;  /* the last line returned ended with a newline (not the end of the input) */
    const char *name;
    char *buf;         /* (cap) unread bytes are buf[lo..hi); no newline in buf[lo..scan) */
    size_t cap, lo, hi, scan;
    size_t lineno;     /* lines returned so far */
    off_t pos;         /* offset in the input just past the last line returned */
    dev_t dev;         /* of a file, to refuse writing results over it */
    ino_t ino;
} cli_reader;

/* Opens path ('-' = stdin). Returns an exit code (0 = open; the message printed). */
int cli_reader_open(cli_reader *r, const char *path);
/*
** The next line in *line, *n (no newline or trailing CR; valid until the next
** call): returns 1. Without a whole line, waits up to timeout_ms for input
** (-1: until a line, the end, or a signal) and returns 0: at the end r->eof
** is set, else nothing complete has arrived yet. The last line of an input
** that does not end in a newline is returned at the end. -1: a read error
** (printed).
*/
int cli_reader_next(cli_reader *r, int timeout_ms, const char **line, size_t *n);
void cli_reader_close(cli_reader *r);

/* A multiset of keys (record ids), each with the line it was first added at. */
typedef struct cli_key {
    char *key;
    size_t count, line;
} cli_key;
typedef struct cli_keys {
    cli_key *t; /* (cap) open addressing */
    size_t cap, n;
} cli_keys;
/* Adds one of key; NULL when out of memory. */
cli_key *cli_keys_add(cli_keys *k, const char *key, size_t line);
size_t cli_keys_count(cli_keys *k, const char *key);
/* Takes one of key away; false if there is none. */
bool cli_keys_take(cli_keys *k, const char *key);
void cli_keys_free(cli_keys *k);
/*
** A record's key: "i:ID" for our records (a record without an id: its line
** number, the id its result carries), "c:CUSTOM_ID" for OpenAI requests,
** "l:LINE" for an OpenAI line without a custom_id.
*/
void cli_record_key(char *out, size_t cap, sm_rec_kind kind, const char *id, size_t line);

/* Where results go: stdout (path NULL), or a file written a whole line at a time. */
typedef struct cli_sink {
    int fd;
    const char *path;
    int err;
} cli_sink;
/* Opens path for results: appended to with append, else emptied. Exit code. */
int cli_sink_open(cli_sink *s, const char *path, bool append);
/* Writes p[0..n) (one or more whole lines); non-zero once nothing more can be written. */
int cli_sink_write(cli_sink *s, cli_out *os, const char *p, size_t n);
/* Syncs and closes a file; exit code (errors printed). */
int cli_sink_close(cli_sink *s);
/*
** --resume: adds the key of every whole line of the results file at path to
** done (*n_lines of them, *n_failed of them errors); a missing file is
** empty. A torn last line (no newline) is cut off the file; a whole line
** that is not a result refuses the run. Exit code.
*/
int cli_resume_scan(const char *path, cli_keys *done, size_t *n_lines, size_t *n_failed, bool quiet);

/* ---- oai_out.c: results in OpenAI's shapes */

/* A choice's generated tokens with their log-probabilities (logprobs), as the scheduler reports them:
   room for max_tokens of them taken at submit (false: out of memory), so none allocates while the
   choice decodes; t appended (the room doubled should it fill; false: out of memory, nothing added). */
bool cli_toks_reserve(sm_token_info **a, size_t *cap, size_t max_tokens);
/* The room for a choice's tokens: max_tokens, and with echo its prompt's, within n_ctx (all a choice
   can have, so cli_toks_push never grows it). */
size_t cli_toks_room(const sm_oai_choice *in, bool echo, size_t max_tokens, size_t n_ctx);
bool cli_toks_push(sm_token_info **a, size_t *n, size_t *cap, const sm_token_info *t);
/* The "logprobs" object of tokens t[from, to): chat's {"content": [{token, logprob, bytes,
   top_logprobs}]}, completions' {"tokens", "token_logprobs", "top_logprobs"} lists. */
void cli_oai_logprobs(FILE *f, const sm_tokenizer *tok, bool chat, const sm_token_info *t, size_t from, size_t to);

typedef struct {
    const char *pre;           /* "echo": the prompt's text, written before text (pre_len bytes), or NULL */
    size_t pre_len;
    const char *text;
    size_t len;
    sm_gen_stats stats;
    const sm_token_info *toks; /* (n_tok) its tokens' log-probabilities, where the result has them */
    size_t n_tok;
} cli_oai_choice;

typedef struct cli_oai_result {
    sm_rec_kind kind;        /* SM_REC_OAI_CHAT or SM_REC_OAI_COMPLETION */
    const char *id_suffix;   /* the response's id is "chatcmpl-" / "cmpl-" and this */
    const char *model;
    long long created;       /* Unix time */
    const cli_oai_choice *ch; /* (n_ch) the choices: prompt p's j-th of n is ch[p n + j] */
    size_t n_ch, n;
    double t_queue;          /* seconds */
    const sm_tokenizer *tok; /* logprobs: the choices' "logprobs" objects (else null) from their toks */
    bool logprobs;
} cli_oai_result;

/* A request's usage, choice by choice: each prompt's tokens once (first: the prompt's first choice),
   every choice's completion; and its "usage" object (no separator). */
void cli_oai_usage_add(sm_gen_stats *sum, const sm_gen_stats *gs, bool first);
void cli_oai_usage(FILE *f, const sm_gen_stats *sum);
/* The text of a completion's prompt for "echo" (a string as given; token ids decoded as a whole text,
   as /detokenize does but without the space sentencepiece prefixed), NUL-ended, malloc'd (*len bytes);
   NULL: out of memory. */
char *cli_oai_echo_text(const sm_tokenizer *tok, const sm_oai_choice *in, size_t *len);
/* A chat.completion or text_completion object (no newline). */
void cli_oai_body(FILE *f, const cli_oai_result *r);
/* {"error": {"message", "type", "param", "code"}}; param and code may be NULL. */
void cli_oai_error(FILE *f, const char *msg, const char *type, const char *param, const char *code);

/* ---- constrain.c: structured output (sm_grammar.h) */

struct sm_grammar;
struct sm_gbind;
/* Compiles a grammar of kind from text[0..len) (none for the JSON kinds) and binds it to tok. */
struct sm_vtrie;
sm_status cli_grammar_compile(sm_grammar_kind kind, const char *text, size_t len, const sm_tokenizer *tok,
                              const struct sm_vtrie *trie, struct sm_grammar **g, struct sm_gbind **b, sm_error *err);
/* The grammar of --grammar/--grammar-text/--json-schema/--format (none: *g NULL). Exit code. */
int cli_grammar_flag(const cli_opts *o, const sm_tokenizer *tok, struct sm_grammar **g, struct sm_gbind **b);
/* A batch's bindings by text, each compiled once; a binding no record uses may go. */
typedef struct cli_gcache cli_gcache;
cli_gcache *cli_gcache_new(const sm_tokenizer *tok, sm_sched *sched);
void cli_gcache_free(cli_gcache *c);
/* The binding of (kind, text), held until cli_gcache_put; err says why a text does not compile. */
sm_status cli_gcache_get(cli_gcache *c, sm_grammar_kind kind, const char *text, struct sm_gbind **out, sm_error *err);
void cli_gcache_put(cli_gcache *c, struct sm_gbind *b);

/* ---- runner.c */

typedef struct cli_runner {
    smallmind_model *lm;    /* the library face's model (owns model and tokenizer) */
    smallmind_session *ls;  /* and session (owns pool, arena, state, samplers, scheduler) */
    sm_face_layout layout;  /* what the command asked the session to carve */
    double t_load; /* seconds to load and set up */
} cli_runner;

/* --batch without --parallel: at most this many records together (sm_face_auto_seq) */
#define CLI_AUTO_PARALLEL 32

/* What a command asks of the run it sets up. */
typedef struct cli_run_spec {
    bool all_logits;  /* logits of every token (score) */
    size_t max_batch; /* tokens per forward call at most */
    size_t n_seq;     /* sequences decoded together */
    size_t n_seq_max; /* more than n_seq: up to this many where memory allows (sm_face_auto_seq) */
    const sm_sampler_params *sampling; /* for the samplers */
    size_t n_samplers;
    const sm_sched_params *sched;      /* non-NULL: a scheduler over the n_seq sequences */
    size_t cache_bytes;               /* with sched: its prefix cache (0: none) */
    bool build_state; /* false: only the plan (info) */
} cli_run_spec;

/* Loads o->model and builds what spec asks. Returns an exit code (0 = ready); on failure r is freed. */
int cli_runner_init(cli_runner *r, const cli_opts *o, const cli_run_spec *spec);
void cli_runner_free(cli_runner *r);
/* The --stats line on threads: how many, and the share of steps each width ran. */
void cli_runner_print_threads(const cli_runner *r, FILE *f);
/*
** A model's source without its weights (any kind: sm_source.h) and its
** tokenizer; --special and --no-bos applied. Returns an exit code; on
** failure nothing is left to free (else sm_source_close(*src) and
** sm_tokenizer_free(tok)).
*/
int cli_load_tokenizer(const cli_opts *o, sm_source **src, sm_tokenizer *tok);

/* ---- pcache.c: --prompt-cache (exit codes) */

/* Loads into sequence 0 what the prompt r->ls->tokens[0..n) may reuse from the file
   (*cached tokens); *save: write the file after the run (cli_prompt_cache_save). */
int cli_prompt_cache_load(const cli_opts *o, cli_runner *r, size_t n, size_t *cached, bool *save);
/* chat: loads the file's blocks into sequence 0 for the session's first turn. */
int cli_prompt_cache_chat_load(const cli_opts *o, cli_runner *r, sm_chat_session *cs, bool *save);
/* Writes the whole blocks of tokens[0..n) from sequence 0 (positions [0, end) filled). */
int cli_prompt_cache_save(const cli_opts *o, cli_runner *r, const int32_t *tokens, size_t n, size_t end);
/* --batch: puts the file's blocks into the prefix cache; *save as above. */
int cli_prompt_cache_seed(const cli_opts *o, cli_runner *r, bool *save);
/* --batch: writes the path of blocks the records reused most (nothing if none was). */
int cli_prompt_cache_save_hottest(const cli_opts *o, cli_runner *r);

/* The sampling flags as sampler parameters. */
sm_sampler_params cli_sampling(const cli_opts *o, uint64_t seed);

/*
** The chat template: --chat-template FILE, else the model's (cfg); c is
** free-safe either way. cli_chat_load returns the status (err says why),
** cli_chat_setup prints it and returns an exit code.
*/
sm_status cli_chat_load(const cli_opts *o, const sm_config *cfg, sm_tokenizer *tok, sm_chat *c,
                        sm_error *err);
int cli_chat_setup(const cli_opts *o, const sm_config *cfg, sm_tokenizer *tok, sm_chat *c);

/* Carves the run's buffers from a (a measuring arena plans them). */
sm_status cli_runner_carve(cli_runner *r, sm_arena *a, sm_error *err);

/* ---- the commands, one file each */

int cli_generate(const cli_opts *o);
int cli_batch(const cli_opts *o);
int cli_score(const cli_opts *o);
int cli_info(const cli_opts *o);
int cli_bench(const cli_opts *o);
/* bench --pick-kernels: each table's operations timed, the choice per operation (bench_pick.c). */
int cli_bench_pick(const cli_opts *o);
/* bench --peaks: the arithmetic peaks and prefill's products beside them (bench_peaks.c). */
int cli_bench_peaks(const cli_opts *o);
int cli_train(const cli_opts *o);
int cli_convert(const cli_opts *o);
int cli_tokenize(const cli_opts *o);
int cli_chat(const cli_opts *o);
int cli_template(const cli_opts *o);
int cli_serve(const cli_opts *o);
int cli_detokenize(const cli_opts *o);

/* Heap allocations the program's own code has made so far (alloc_count.c). */
size_t cli_allocs(void);

#endif
