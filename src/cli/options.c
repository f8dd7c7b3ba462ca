/*
** options.c -- the flag table, the parser (flags -> cli_opts) and --help.
**
** Every flag is one row of the table: its names, the commands it applies
** to, and its help line; a name may mean different things per command
** (-b is train's batch size, --batch generate's input file).
*/
#include "cli.h"

#include "sm_convert.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sm_config.h"


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
     "-m, --model DIR        model directory or GGUF file (default $SMALLMIND_MODEL, else models/default)"},
    {"prompt", 'p', true, CMD_GENERATE | CMD_SCORE | CMD_TOKENIZE, O_PROMPT,
     "-p, --prompt TEXT      the prompt (else -f, else stdin when it is not a terminal)"},
    {"file", 'f', true, CMD_GENERATE | CMD_SCORE | CMD_TOKENIZE | CMD_TEMPLATE | CMD_DETOKENIZE, O_FILE,
     "-f, --file FILE        read the prompt from FILE ('-' = stdin; template: the conversation)"},
    {"max-tokens", 'n', true, CMD_SAMPLE | CMD_BENCH, O_MAXTOK,
     "-n, --max-tokens N     tokens to generate (default 256, bench 128; alias --n-predict)"},
    {"n-predict", 0, true, CMD_SAMPLE | CMD_BENCH, O_MAXTOK, NULL},
    {"temp", 0, true, CMD_SAMPLE | CMD_BENCH, O_TEMP,
     "    --temp T           temperature, 0 = greedy (default 0.8; alias --temperature)"},
    {"temperature", 0, true, CMD_SAMPLE | CMD_BENCH, O_TEMP, NULL},
    {"top-k", 0, true, CMD_SAMPLE | CMD_BENCH, O_TOPK,
     "    --top-k K          keep the K most likely tokens, 0 = off (default 40)"},
    {"top-p", 0, true, CMD_SAMPLE | CMD_BENCH, O_TOPP,
     "    --top-p P          keep the smallest set with mass P, 1 = off (default 0.95)"},
    {"seed", 's', true, CMD_SAMPLE | CMD_TRAIN, O_SEED,
     "-s, --seed N           random seed (default 42, train 1337; -1 = a random seed)"},
    {"threads", 't', true, CMD_RUN | CMD_TRAIN | CMD_CONVERT, O_THREADS,
     "-t, --threads N        threads (default $SMALLMIND_THREADS, else $OMP_NUM_THREADS, else the\n"
     "                         physical cores this process may use; fewer at a time when busy)"},
    {"ctx-size", 'c', true, CMD_MODEL, O_CTX,
     "-c, --ctx-size N       context length (default and maximum: the model's)"},
    {"kv-type", 0, true, CMD_MODEL, O_KVTYPE,
     "    --kv-type T        f32 (default) or f16: type of the KV-cache (f16 halves its memory)"},
    {"kernels", 0, true, CMD_MODEL | CMD_TRAIN, O_KERNELS,
     "    --kernels SPEC     auto (this CPU's choice per operation), scalar, avx2 or avx512, or\n"
     "                         items OP=TABLE (OP: gemm, qgemm, rows, qrows, attention), e.g.\n"
     "                         avx512,rows=avx2; bf16=bf16|f32, f16=bf16|f32: prefill's 16-bit\n"
     "                         products on vdpbf16ps (activations rounded to bf16) or exact\n"
     "                         (default auto: bf16 weights on vdpbf16ps where the CPU has it);\n"
     "                         prefetch=next|hw: a decoded row on f32 weights asks for the next\n"
     "                         rows' memory itself or leaves it to the CPU (auto: per CPU)"},
    {"check-weights", 0, false, CMD_MODEL, O_CHECKW,
     "    --check-weights    scan every weight for NaN or infinity before running"},
    {"no-mmap", 0, false, CMD_MODEL, O_NOMMAP,
     "    --no-mmap          read the weights instead of mapping them"},
    {"no-repack", 0, false, CMD_MODEL, O_NOREPACK,
     "    --no-repack        multiply f32, q4_0, q8_0, q4_k..q6_k and iq4 weights as stored\n"
     "                         (default: laid out once at load, 32 rows interleaved, where the\n"
     "                         kernels take them)"},
    {"tokenizer", 0, true, CMD_CONVERT | CMD_MODEL | CMD_TOKENS, O_TOKFILE,
     "    --tokenizer FILE   llama2.c tokenizer.bin for a llama2.c checkpoint or a Llama directory"},
    {"dtype", 0, true, CMD_CONVERT, O_DTYPE,
     "    --dtype T          type of the weight matrices written: f32 (default), f16, bf16,\n"
     "                       q8_0, q4_0 (output layer q8_0), q4_k_m, q5_k_m (output layer and\n"
     "                       some down projections q6_k, Q/K/V one type up), q6_k, q4_k, q5_k,\n"
     "                       q4_1, q5_0, q5_1, iq4_nl (output layer q8_0), q2_k, q3_k,\n"
     "                       iq4_xs (output layer q6_k)"},
    {"special", 0, false, CMD_GENERATE | CMD_SCORE | CMD_TOKENIZE, O_SPECIAL,
     "    --special          text of special tokens (<|endoftext|>, <s>, </s>) becomes those tokens"},
    {"no-bos", 0, false, CMD_TOKENIZE, O_NOBOS,
     "    --no-bos           no BOS token first, even where the tokenizer adds one"},
    {"min-p", 0, true, CMD_SAMPLE, O_MINP,
     "    --min-p P          drop tokens below P times the top token's probability, 0 = off (default)"},
    {"repeat-penalty", 0, true, CMD_SAMPLE, O_REPPEN,
     "    --repeat-penalty X divide (multiply if negative) the logits of recent tokens by X, 1 = off"},
    {"repeat-last-n", 0, true, CMD_SAMPLE, O_REPLASTN,
     "    --repeat-last-n N  tokens the penalties look back over (default 64, 0 = off)"},
    {"logit-bias", 'l', true, CMD_SAMPLE, O_LOGITBIAS,
     "-l, --logit-bias ID+B  add B (-100 to 100; ID-B subtracts) to token ID's logit before sampling,\n"
     "                       as llama.cpp's and OpenAI's logit_bias: -100 all but bans ID (repeatable)"},
    {"presence-penalty", 0, true, CMD_SAMPLE, O_PRESPEN,
     "    --presence-penalty X  lower the logit of each recent token by X, 0 = off"},
    {"frequency-penalty", 0, true, CMD_SAMPLE, O_FREQPEN,
     "    --frequency-penalty X lower it by X times the token's recent count, 0 = off"},
    {"chat", 0, false, CMD_GENERATE, O_CHAT,
     "    --chat             the prompt as a user message in the model's chat template"},
    {"system", 0, true, CMD_GENERATE | CMD_CHAT | CMD_TEMPLATE, O_SYSTEM,
     "    --system TEXT      a system message first (with --chat; chat; template)"},
    {"chat-template", 0, true, CMD_GENERATE | CMD_CHAT | CMD_TEMPLATE | CMD_SERVE, O_CHATTPL,
     "    --chat-template FILE  a Jinja chat template instead of the model's"},
    {"chat-template-file", 0, true, CMD_GENERATE | CMD_CHAT | CMD_TEMPLATE, O_CHATTPL, NULL},
    {"no-generation-prompt", 0, false, CMD_TEMPLATE, O_NOGENP,
     "    --no-generation-prompt  end after the last message (no assistant header)"},
    {"ids", 0, false, CMD_TEMPLATE, O_IDS,
     "    --ids              the text's token ids, as apply_chat_template gives them (no BOS added)"},
    {"grammar", 0, true, CMD_SAMPLE, O_GRAMMAR,
     "    --grammar FILE     output that keeps to a GBNF grammar (llama.cpp's syntax; its rule 'root')"},
    {"grammar-text", 0, true, CMD_SAMPLE, O_GRAMMARTEXT,
     "    --grammar-text STR the GBNF grammar itself"},
    {"json-schema", 0, true, CMD_SAMPLE, O_JSONSCHEMA,
     "    --json-schema S    output that is JSON valid under the JSON Schema S (a file, or the\n"
     "                       schema itself when it starts with '{')"},
    {"format", 0, true, CMD_SAMPLE, O_FORMAT,
     "    --format F         json: output that is any JSON value (or F a JSON Schema, as ollama's)"},
    {"stop", 0, true, CMD_SAMPLE, O_STOP,
     "    --stop STR         end before this text (repeatable, up to 8; 1-64 bytes each)"},
    {"truncate", 0, false, CMD_GENERATE, O_TRUNCATE,
     "    --truncate         keep the end of a prompt longer than the context"},
    {"batch", 0, true, CMD_GENERATE | CMD_TOKENIZE | CMD_DETOKENIZE, O_BATCHFILE,
     "    --batch FILE       many prompts, one per line or JSONL records; JSONL out ('-' = stdin;\n"
     "                       tokenize: a JSON string or {\"text\"} a line, detokenize: [ids] or {\"ids\"})"},
    {"parallel", 0, true, CMD_GENERATE | CMD_SERVE, O_PARALLEL,
     "    --parallel N       with --batch (and serve): decode up to N records together (batch default:\n"
     "                       up to 32 as memory allows; serve: 8)"},
    {"cache-ram", 0, true, CMD_GENERATE | CMD_SERVE, O_CACHERAM,
     "    --cache-ram MiB    with --batch: keys and values of shared prompt prefixes kept for\n"
     "                       reuse, least recently used dropped (default 256, 0 = off;\n"
     "                       alias --cache-size)"},
    {"cache-size", 0, true, CMD_GENERATE | CMD_SERVE, O_CACHERAM, NULL},
    {"prompt-cache", 0, true, CMD_GENERATE | CMD_CHAT, O_PCACHE,
     "    --prompt-cache FILE  keep the prompt's keys and values in FILE; a later run whose\n"
     "                       prompt starts with the same tokens loads them instead of\n"
     "                       prefilling (--batch: the prefix its records share most)"},
    {"prompt-cache-ro", 0, false, CMD_GENERATE | CMD_CHAT, O_PCACHERO,
     "    --prompt-cache-ro  with --prompt-cache: read the file, never write it"},
    {"input-format", 0, true, CMD_GENERATE, O_INFMT,
     "    --input-format F   with --batch: auto (default: each line plain, our JSON or an OpenAI\n"
     "                       Batch API request), text (every line a prompt), jsonl or openai"},
    {"output", 'o', true, CMD_GENERATE, O_OUTPUT,
     "-o, --output FILE      with --batch: results to FILE (whole lines only) instead of stdout"},
    {"resume", 0, false, CMD_GENERATE, O_BRESUME,
     "    --resume           with --output: keep FILE's results and run only the records it\n"
     "                       lacks (by id or custom_id); a torn last line is cut and redone"},
    {"errors", 0, true, CMD_GENERATE, O_ERRORS,
     "    --errors FILE      with --batch: failed records to FILE instead of the results"},
    {"ordered", 0, false, CMD_GENERATE, O_ORDERED,
     "    --ordered          with --batch: results in input order (the default)"},
    {"unordered", 0, false, CMD_GENERATE, O_UNORDERED,
     "    --unordered        with --batch: each result as soon as it is done (id and line say which)"},
    {"allow-duplicate-ids", 0, false, CMD_GENERATE, O_ALLOWDUP,
     "    --allow-duplicate-ids  with --batch: run records whose id repeats (else an error)"},
    {"progress", 0, false, CMD_GENERATE, O_PROGRESS,
     "    --progress         with --batch: a progress line on stderr every 10 s (for logs; a\n"
     "                       terminal gets one line updated in place without it)"},
    {"progress-interval", 0, true, CMD_GENERATE, O_PROGINT,
     "    --progress-interval S  seconds between --progress lines (implies --progress)"},
    {"alias", 0, true, CMD_GENERATE | CMD_SERVE, O_ALIAS,
     "    --alias NAME       with --batch: the model's name in OpenAI results; requests naming\n"
     "                       another \"model\" are refused (default: any name, the model's path)"},
    {"host", 0, true, CMD_SERVE, O_HOST,
     "    --host ADDR        address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)"},
    {"port", 0, true, CMD_SERVE, O_PORT,
     "    --port N           TCP port (default 8080)"},
    {"api-key", 0, true, CMD_SERVE, O_APIKEY,
     "    --api-key KEY      requests need \"Authorization: Bearer KEY\" (default $SMALLMIND_API_KEY)"},
    {"queue", 0, true, CMD_SERVE, O_QUEUE,
     "    --queue N          requests that may wait for a slot; past it a 503 (default 256)"},
    {"shard", 0, true, CMD_GENERATE, O_SHARD,
     "    --shard I/N        with --batch: only records I, I+N, I+2N, ... (1-based)"},
    {"output-format", 0, true, CMD_GENERATE, O_OUTFMT,
     "    --output-format F  text or json (text, token counts, finish reason, timing)"},
    {"json", 0, false, CMD_GENERATE | CMD_SCORE | CMD_BENCH | CMD_TOKENIZE | CMD_CHAT, O_JSON,
     "    --json             machine-readable output (generate: --output-format json)"},
    {"stats", 0, false, CMD_GENERATE | CMD_SCORE | CMD_CHAT, O_STATS,
     "    --stats            timing and token counts on stderr"},
    {"prompt-tokens", 0, true, CMD_BENCH, O_PTOK,
     "    --prompt-tokens N  prompt length (default 128)"},
    {"ubatch-size", 0, true, CMD_SCORE, O_UBATCH,
     "    --ubatch-size N    tokens per forward call (default 128; 1: each token decoded\n"
     "                       through the KV-cache, as generation does)"},
    {"reps", 0, true, CMD_BENCH, O_REPS,
     "    --reps N           repetitions, best is reported (default 3)"},
    {"compare", 0, false, CMD_BENCH, O_COMPARE,
     "    --compare A B      two bench --json reports side by side, with B/A"},
    {"pick-kernels", 0, false, CMD_BENCH, O_PICK,
     "    --pick-kernels     time every kernel table's operations on fixed cases (no model) and\n"
     "                         print the choice per operation for this CPU"},
    {"peaks", 0, false, CMD_BENCH, O_PEAKS,
     "    --peaks            the CPU's arithmetic peaks (f32 FMA, int8, bf16 loops; no model) and\n"
     "                         prefill's products on the TinyLlama shape beside them"},
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


int cli_usage_error(const cli_opts *o, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "smallmind: %s (try 'smallmind %s%s--help')\n", msg,
            o && o->cmd_name ? o->cmd_name : "", o && o->cmd_name ? " " : "");
    return EXIT_USAGE;
}

uint64_t cli_seed(long long seed) {
    return seed >= 0 ? (uint64_t)seed : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
}

const char *cli_flag_name(opt_id id) {
    for (size_t k = 0; k < sizeof options / sizeof options[0]; k++)
        if (options[k].id == id) return options[k].name;
    return "?";
}

bool cli_parse_long(const char *s, long lo, long hi, long *out) {
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
    /* ERANGE on underflow (1e-320) still gives the nearest value: only overflow is refused */
    if ((errno && !(errno == ERANGE && fabs(v) <= DBL_MIN)) || *end || !isfinite(v)) return false;
    *out = v;
    return true;
}

#define LONG_OPT(field, lo, hi)                                                           \
    if (!cli_parse_long(v, lo, hi, &o->field))                                                \
        return cli_usage_error(o, "%s expects a whole number from %ld to %ld, got '%s'", flag, \
                           (long)(lo), (long)(hi), v);                                    \
    break
/* A number in (lo, hi], or [lo, hi] with closed */
#define REAL_OPT(field, lo, hi, closed)                                                      \
    if (!parse_double(v, &x) || x > (hi) || x < (lo) || (!(closed) && x == (lo)))            \
        return cli_usage_error(o, "%s expects a number in %c%g, %g], got '%s'", flag,            \
                           (closed) ? '[' : '(', (double)(lo), (double)(hi), v);             \
    o->field = x;                                                                            \
    break

static int set_value(cli_opts *o, const struct option_def *d, const char *flag, const char *v) {
    double x;
    o->given[d->id / 64] |= 1ull << (d->id % 64);
    switch (d->id) {
    case O_MODEL: o->model = v; break;
    case O_PROMPT: o->prompt = v; break;
    case O_FILE: o->file = v; break;
    case O_KERNELS: o->kernels = v; break;
    case O_MAXTOK:
        if (!cli_parse_long(v, 0, 1L << 30, &o->max_tokens))
            return cli_usage_error(o, "%s expects a whole number >= 0, got '%s'", flag, v);
        break;
    case O_TEMP:
        if (!parse_double(v, &x) || x < 0 || x > 1000)
            return cli_usage_error(o, "%s expects a number from 0 to 1000, got '%s'", flag, v);
        o->temp = x;
        break;
    case O_TOPP:
        if (!parse_double(v, &x) || !(x > 0 && x <= 1))
            return cli_usage_error(o, "%s expects a number in (0, 1], got '%s'", flag, v);
        o->top_p = x;
        break;
    case O_TOPK:
        if (!cli_parse_long(v, 0, 1L << 30, &o->top_k))
            return cli_usage_error(o, "%s expects a whole number >= 0 (0 = off), got '%s'", flag, v);
        break;
    case O_SEED: {
        long s;
        if (!cli_parse_long(v, -1, 0x7FFFFFFFL, &s))
            return cli_usage_error(o, "%s expects a whole number from 0 to 2147483647, or -1 for a random seed, got '%s'", flag, v);
        o->seed = s;
        break;
    }
    case O_THREADS:
        if (!cli_parse_long(v, 1, MAX_THREADS, &o->threads))
            return cli_usage_error(o, "%s expects a whole number from 1 to %d, got '%s'", flag, MAX_THREADS, v);
        break;
    case O_CTX:
        if (!cli_parse_long(v, 1, 1L << 20, &o->ctx))
            return cli_usage_error(o, "%s expects a whole number from 1 to %ld, got '%s'", flag, 1L << 20, v);
        break;
    case O_PTOK:
        if (!cli_parse_long(v, 1, 1L << 20, &o->prompt_tokens))
            return cli_usage_error(o, "%s expects a whole number >= 1, got '%s'", flag, v);
        break;
    case O_UBATCH:
        if (!cli_parse_long(v, 1, 4096, &o->ubatch))
            return cli_usage_error(o, "%s expects a whole number from 1 to 4096, got '%s'", flag, v);
        break;
    case O_REPS:
        if (!cli_parse_long(v, 1, 1000, &o->reps))
            return cli_usage_error(o, "%s expects a whole number from 1 to 1000, got '%s'", flag, v);
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
        if (o->n_stop == 8) return cli_usage_error(o, "%s: at most 8 stop strings", flag);
        if (strlen(v) < 1 || strlen(v) > 64)
            return cli_usage_error(o, "%s expects 1 to 64 bytes, got %zu", flag, strlen(v));
        o->stop[o->n_stop++] = v;
        break;
    case O_OUTFMT:
        if (strcmp(v, "json") == 0 || strcmp(v, "jsonl") == 0)
            o->json = true;
        else if (strcmp(v, "text") == 0)
            o->json = false;
        else
            return cli_usage_error(o, "%s expects text, json or jsonl, got '%s'", flag, v);
        break;
    case O_TRUNCATE: o->truncate = true; break;
    case O_BATCHFILE: o->batch_file = v; break;
    case O_PARALLEL: LONG_OPT(parallel, 1, SM_MAX_SEQ);
    case O_CACHERAM: LONG_OPT(cache_mib, 0, 1L << 24);
    case O_PCACHE: o->prompt_cache = v; break;
    case O_PCACHERO: o->prompt_cache_ro = true; break;
    case O_SHARD: {
        char *end;
        errno = 0;
        long i = strtol(v, &end, 10), n = 0;
        if (!errno && end != v && *end == '/') n = strtol(end + 1, &end, 10);
        if (errno || *end || n < 1 || n > 1000000 || i < 1 || i > n)
            return cli_usage_error(o, "%s expects I/N with 1 <= I <= N, got '%s'", flag, v);
        o->shard_i = i;
        o->shard_n = n;
        break;
    }
    case O_INFMT:
        if (strcmp(v, "auto") == 0) o->input_format = SM_BATCH_AUTO;
        else if (strcmp(v, "text") == 0) o->input_format = SM_BATCH_TEXT;
        else if (strcmp(v, "jsonl") == 0) o->input_format = SM_BATCH_JSONL;
        else if (strcmp(v, "openai") == 0) o->input_format = SM_BATCH_OPENAI;
        else return cli_usage_error(o, "%s expects auto, text, jsonl or openai, got '%s'", flag, v);
        break;
    case O_OUTPUT: o->output = v; break;
    case O_BRESUME: o->resume_batch = true; break;
    case O_ERRORS: o->errors = v; break;
    case O_ORDERED: o->ordered = 1; break;
    case O_UNORDERED: o->ordered = -1; break;
    case O_ALLOWDUP: o->allow_dup_ids = true; break;
    case O_PROGRESS: o->progress = true; break;
    case O_PROGINT:
        if (!parse_double(v, &x) || x < 0.1 || x > 86400)
            return cli_usage_error(o, "%s expects seconds from 0.1 to 86400, got '%s'", flag, v);
        o->progress = true;
        o->progress_s = x;
        break;
    case O_ALIAS:
        if (!*v || strlen(v) >= SM_REC_MODEL_MAX)
            return cli_usage_error(o, "%s expects a name of 1 to %d bytes", flag, SM_REC_MODEL_MAX - 1);
        o->alias = v;
        break;
    case O_GRAMMAR: case O_GRAMMARTEXT: case O_JSONSCHEMA: case O_FORMAT: {
        if (o->gkind) return cli_usage_error(o, "%s: give one of --grammar, --grammar-text, --json-schema, --format", flag);
        const char *t = v;
        while (*t == ' ' || *t == '\t' || *t == '\n') t++;
        o->gsrc = v, o->gflag = d->name;
        if (d->id == O_GRAMMAR) o->gkind = SM_GK_GBNF;
        else if (d->id == O_GRAMMARTEXT) o->gkind = SM_GK_GBNF, o->ginline = true;
        else if (d->id == O_JSONSCHEMA) o->gkind = SM_GK_SCHEMA, o->ginline = *t == '{';
        else if (strcmp(v, "json") == 0) o->gkind = SM_GK_JSON;
        else if (*t == '{') o->gkind = SM_GK_SCHEMA, o->ginline = true;
        else return cli_usage_error(o, "%s expects json or a JSON Schema, got '%.40s'", flag, v);
        break;
    }
    case O_HOST: o->host = v; break;
    case O_PORT: LONG_OPT(port, 1, 65535);
    case O_APIKEY:
        if (!*v) return cli_usage_error(o, "%s expects a key", flag);
        o->api_key = v;
        break;
    case O_QUEUE: LONG_OPT(queue, 1, 100000);
    case O_UNTIED: o->untied = true; break;
    case O_NOBIAS: o->no_bias = true; break;
    case O_QUIET: o->quiet = true; break;
    case O_STATS: o->stats = true; break;
    case O_VERBOSE: o->verbose = true; break;
    case O_JSON: o->json = true; break;
    case O_NOMMAP: o->no_mmap = true; break;
    case O_NOREPACK: o->no_repack = true; break;
    case O_CHECKW: o->check_weights = true; break;
    case O_TOKFILE: o->tokenizer = v; break;
    case O_DTYPE:
        if (!sm_convert_dtype_parse(v, &o->dtype, &o->mix_m))
            return cli_usage_error(o, "%s expects f32, f16, bf16, q8_0, q4_0, q4_k_m, q5_k_m, q6_k, "
                                      "q4_k, q5_k, q4_1, q5_0, q5_1, q2_k, q3_k, iq4_nl or iq4_xs, got '%s'", flag, v);
        o->dtype_given = true;
        break;
    case O_KVTYPE:
        o->kv_type = strcmp(v, "f32") == 0 ? SM_DTYPE_F32 : strcmp(v, "f16") == 0 ? SM_DTYPE_F16
                                                                                : SM_DTYPE_COUNT;
        if (o->kv_type == SM_DTYPE_COUNT)
            return cli_usage_error(o, "%s expects f32 or f16, got '%s'", flag, v);
        break;
    case O_SPECIAL: o->special = true; break;
    case O_NOBOS: o->no_bos = true; break;
    case O_COMPARE: o->compare = true; break;
    case O_PICK: o->pick = true; break;
    case O_PEAKS: o->peaks = true; break;
    case O_CHAT: o->chat = true; break;
    case O_SYSTEM: o->system = v; break;
    case O_CHATTPL: o->chat_template = v; break;
    case O_NOGENP: o->no_gen_prompt = true; break;
    case O_IDS: o->ids = true; break;
    case O_MINP: REAL_OPT(min_p, 0, 1, true);
    case O_REPPEN: REAL_OPT(repeat_penalty, 0, 100, false);
    case O_REPLASTN: LONG_OPT(repeat_last_n, 0, SM_SAMPLER_MAX_LAST_N);
    case O_LOGITBIAS: {
        char *end;
        errno = 0;
        long id = strtol(v, &end, 10);
        double b = (*end == '+' || *end == '-') && v[0] >= '0' && v[0] <= '9' ? strtod(end, &end) : NAN;
        if (errno || id < 0 || id > INT32_MAX || *end || !(b >= -100 && b <= 100))
            return cli_usage_error(o, "%s expects TOKEN_ID+BIAS or TOKEN_ID-BIAS (a bias from -100 to 100), got '%s'",
                                   flag, v);
        if (!sm_sampler_add_bias(&o->bias, (int32_t)id, (float)b))
            return cli_usage_error(o, "%s: at most %d tokens", flag, SM_SAMPLER_MAX_BIAS);
        break;
    }
    case O_PRESPEN: REAL_OPT(presence_penalty, -100, 100, true);
    case O_FREQPEN: REAL_OPT(frequency_penalty, -100, 100, true);
    case O_COUNT_: break;
    case O_HELP: o->help = true; break;
    case O_VERSION: o->version = true; break;
    }
    return 0;
}

int cli_parse_args(cli_opts *o, int argc, char **argv, int first) {
    o->args = (const char **)argv + first; /* positional arguments move down in argv, in order */
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
            if (!d) return cli_usage_error(o, "unknown flag '%s'", flag);
            if (eq) {
                if (!d->takes_value) return cli_usage_error(o, "%s takes no value", flag);
                value = eq + 1;
            }
        } else if (a[0] == '-' && a[1] && a[1] != '-') {
            for (size_t k = 0; k < sizeof options / sizeof options[0]; k++)
                if (options[k].short_name == a[1] && (!d || (options[k].cmds & o->cmd)))
                    d = &options[k];
            snprintf(flag, sizeof flag, "-%c", a[1]);
            if (!d) return cli_usage_error(o, "unknown flag '%s'", flag);
            if (a[2]) {
                if (!d->takes_value) return cli_usage_error(o, "unknown flag '%s'", a);
                value = a + 2;
            }
        } else if (o->cmd & (CMD_CONVERT | CMD_DETOKENIZE | CMD_BENCH)) {
            o->args[o->n_args++] = a; /* at most i - first: never past what is read */
            continue;
        } else {
            return cli_usage_error(o, "unexpected argument '%s'", a);
        }
        if (!(d->cmds & o->cmd))
            return cli_usage_error(o, "%s does not apply to '%s'", flag, o->cmd_name);
        if (d->takes_value && !value) {
            if (i + 1 >= argc) return cli_usage_error(o, "%s needs a value", flag);
            value = argv[++i];
        }
        int rc = set_value(o, d, flag, value);
        if (rc) return rc;
    }
    if (o->prompt && o->file) return cli_usage_error(o, "give -p or -f, not both");
    if (o->batch_file && (o->prompt || o->file || o->n_args))
        return cli_usage_error(o, "--batch takes the prompts from its file; drop -p/-f");
    if (o->shard_n && !o->batch_file) return cli_usage_error(o, "--shard goes with --batch");
    if (o->parallel && !o->batch_file && o->cmd != CMD_SERVE) return cli_usage_error(o, "--parallel goes with --batch");
    static const opt_id batch_only[] = {O_INFMT, O_OUTPUT, O_BRESUME, O_ERRORS, O_ORDERED, O_UNORDERED,
                                        O_ALLOWDUP, O_PROGRESS, O_PROGINT, O_ALIAS};
    for (size_t k = 0; k < sizeof batch_only / sizeof batch_only[0]; k++)
        if (CLI_GIVEN(o, batch_only[k]) && !o->batch_file && !(o->cmd == CMD_SERVE && batch_only[k] == O_ALIAS))
            return cli_usage_error(o, "--%s goes with --batch", cli_flag_name(batch_only[k]));
    if (o->resume_batch && !o->output)
        return cli_usage_error(o, "--resume goes with --output FILE (the results to keep)");
    if (CLI_GIVEN(o, O_ORDERED) && CLI_GIVEN(o, O_UNORDERED))
        return cli_usage_error(o, "give --ordered or --unordered, not both");
    if (o->output && o->errors && strcmp(o->output, o->errors) == 0)
        return cli_usage_error(o, "--errors names the --output file; give another");
    if (CLI_GIVEN(o, O_CACHERAM) && !o->batch_file && o->cmd != CMD_SERVE)
        return cli_usage_error(o, "--cache-ram goes with --batch");
    if (o->prompt_cache_ro && !o->prompt_cache)
        return cli_usage_error(o, "--prompt-cache-ro goes with --prompt-cache FILE");
    if (o->system && o->cmd == CMD_GENERATE && !o->chat)
        return cli_usage_error(o, "--system goes with --chat");
    if (o->chat_template && o->cmd == CMD_GENERATE && !o->chat && !o->batch_file)
        return cli_usage_error(o, "--chat-template goes with --chat (or --batch records with messages)");
    return 0;
}

void cli_print_help(const cli_opts *o) {
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
               "  chat       talk with an instruct model (interactive on a terminal)\n"
               "  template   a conversation as the model's chat template renders it\n"
               "  serve      an OpenAI-compatible HTTP server (/v1/chat/completions, /v1/completions)\n"
               "  tokenize   token ids of a text\n"
               "  detokenize the text of token ids\n\n"
               "'smallmind COMMAND --help' lists a command's flags.\n",
               SM_VERSION);
        return;
    }
    printf("usage: smallmind %s [flags]%s\n\n", o->cmd_name,
           o->cmd == CMD_CONVERT ? " SRC OUT" : o->cmd == CMD_DETOKENIZE ? " [ID...]" : "");
    const char *what = o->cmd == CMD_GENERATE ? "Streams a continuation of the prompt to stdout."
                       : o->cmd == CMD_SCORE  ? "Scores each token of a text given the ones before it."
                       : o->cmd == CMD_INFO   ? "Prints a model's architecture, size and memory plan."
                       : o->cmd == CMD_CONVERT
                           ? "Converts a llama2.c checkpoint (SRC a file, with --tokenizer) or a\n"
                             "Hugging Face GPT-2 or Llama directory (config.json + safetensors)\n"
                             "into the new model directory OUT."
                       : o->cmd == CMD_TOKENIZE ? "Prints the token ids of a text (-p, -f or stdin), space-separated."
                       : o->cmd == CMD_DETOKENIZE ? "Prints the text of the token ids: the arguments, else those in -f FILE or\n"
                                                    "stdin (as tokenize prints them; commas and [ ] may separate them). The\n"
                                                    "text is written as it is (a newline only on a terminal), so\n"
                                                    "'tokenize | detokenize' gives the text back byte for byte."
                       : o->cmd == CMD_CHAT ? "A conversation with an instruct model through its chat template. On a\n"
                                              "terminal: line editing and history, Ctrl-C stops a reply, Ctrl-D or /exit\n"
                                              "ends; /reset, /system TEXT, /save FILE, /load FILE. Otherwise each line of\n"
                                              "stdin is a user turn and each reply is printed after it (--json: JSONL)."
                       : o->cmd == CMD_SERVE ? "Serves the model over HTTP as the OpenAI API does: POST /v1/chat/completions\n"
                                               "and /v1/completions (streamed as server-sent events with \"stream\": true),\n"
                                               "GET /v1/models, /health and /metrics, POST /tokenize and /detokenize.\n"
                                               "Requests share decode steps; each text is what generate gives alone.\n"
                                               "The sampling flags are the requests' defaults (no -s: a random seed each)."
                       : o->cmd == CMD_TEMPLATE ? "Prints a conversation (-f: a JSON list of {role, content}, or an object\n"
                                                  "of template variables with \"messages\") rendered by the chat template."
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
