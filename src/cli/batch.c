/*
** batch.c -- `smallmind generate --batch FILE|-`: records in (plain lines,
** our JSONL, OpenAI Batch API requests), the scheduler (sm_sched.h) running
** them, JSONL results out.
**
** Lines are taken as they arrive: while the scheduler works, input is only
** polled, and when it has nothing to do the command waits for the next line,
** so a coprocess or a FIFO gets each answer as soon as it is done. A result
** is formatted when its record finishes and written, one whole line at a
** time, in input order (--ordered, the default: at most `window` records
** are in flight or waiting to be written) or at once (--unordered). A
** regular file is read once more first: its record count (for progress)
** and its ids (a repeated id refuses the run before anything is written).
** --resume reads the results file first and skips every record whose id it
** holds. Ctrl-C writes no partial record.
*/
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sm_batch.h"
#include "sm_grammar.h"
#include "sm_oai.h"

#define KEY_MAX (SM_REC_ID_MAX + 8)

typedef struct pending pending;

/* One completion of a record (OpenAI's "n" and prompt lists make several): the scheduler's tag. */
typedef struct {
    pending *p;
    size_t i;
    sm_token_info *toks; /* logprobs: its tokens' log-probabilities (n_tok of cap_tok) */
    size_t n_tok, cap_tok;
    bool no_room;  /* a token's entry could not be kept (out of memory) */
    char *pre;     /* "echo": its prompt's text (pre_len bytes), taken at submit */
    size_t pre_len;
} chosen;

/* A record in flight: what its result line needs besides the result. */
struct pending {
    bool used;
    size_t idx, lineno; /* ordinal among the records run; input line */
    sm_rec_kind kind;
    char id[SM_REC_ID_MAX];
    char param[64];     /* OpenAI: the field an error names */
    const char *code;
    struct sm_gbind *grammar; /* held in the batch's cache while the record runs */
    sm_oai_choice *in;  /* (n_ch; n of each prompt) its completions, and the token prompts' ids */
    int32_t *ids;
    chosen *ch;
    cli_oai_choice *out; /* their results, kept until the last is done (several only) */
    size_t n_ch, n, n_sub, n_done; /* submitted; done */
    bool logprobs;      /* OpenAI "logprobs": its choices' tokens with their log-probabilities */
    bool echo;          /* OpenAI "echo": each choice's text after its prompt's (its tokens too) */
    char *why;          /* the first of several to fail: why (its kind) */
    sm_status why_st;
    double t_queue;
};

/* A result formatted and not yet written (ordered output). */
typedef struct {
    char *line;
    size_t len;
    bool failed;
} ready;

typedef struct {
    const cli_opts *o;
    cli_out os;
    cli_sink out, errs; /* errs.fd < 0: failed records go to out */
    bool ordered;
    pending *pend;  /* (3 P + 1): in slots, queued, and the one being submitted */
    ready *ring;    /* (window) ordered: record idx in ring[idx % window] */
    size_t window;
    size_t next_idx, written; /* records taken; records written (in order) */
    size_t failed, tokens, skipped;
    size_t failed_kept; /* --resume: error results the files held already */
    size_t total;   /* records this run has to do, when known (a regular file) */
    bool total_known;
    bool stop;      /* a write failed or the pipe closed */
    const char *model_name;
    const sm_tokenizer *tok;
    long long created;
    double t0, t_progress;
    bool tty;
    /* records with "messages": the chat template, set up at the first of them */
    int chat_state; /* 0 not yet, 1 ready, 2 failed (chat_err says why) */
    sm_chat chat;
    char chat_err[600];
    int32_t *ids;   /* (n_ctx) a templated conversation's tokens */
    pending *cur;   /* a record whose completions go in as the scheduler has room (its record: cur_rec) */
    sm_batch_record cur_rec;
    cli_gcache *grammars;      /* the records' grammars and schemas, each compiled once */
    char *flag_gtext;          /* --grammar/--json-schema's text, the records' default */
} batch;

/* A record's conversation as tokens in b->ids (*n); NULL, or why it cannot be. */
static const char *templated(batch *b, cli_runner *r, const cJSON *msgs, size_t *n,
                             sm_error *err) {
    if (!b->chat_state) { /* a record's error goes into its output, not to stderr */
        sm_status st = cli_chat_load(b->o, sm_model_config(r->lm->model), &r->lm->tok, &b->chat, err);
        if (!st && !(b->ids = malloc(r->ls->sp.n_ctx * sizeof *b->ids)))
            st = sm_error_set(err, SM_ERR_NOMEM, "out of memory");
        b->chat_state = st ? 2 : 1;
        snprintf(b->chat_err, sizeof b->chat_err, "%s", st ? err->msg : "");
    }
    if (b->chat_state == 2) return b->chat_err;
    if (sm_chat_tokens(&b->chat, &r->lm->tok, msgs, b->ids, r->ls->sp.n_ctx, n, NULL, NULL, err)) return err->msg;
    if (*n > r->ls->sp.n_ctx) {
        snprintf(err->msg, sizeof err->msg, "the templated conversation is %zu tokens, context is %zu",
                 *n, r->ls->sp.n_ctx);
        return err->msg;
    }
    return NULL;
}

/* Whether the record-th record (1-based) is this process's under --shard. */
static bool in_shard(const cli_opts *o, size_t record) {
    return !o->shard_n || (record - 1) % (size_t)o->shard_n == (size_t)(o->shard_i - 1);
}

static bool is_oai(sm_rec_kind k) {
    return k == SM_REC_OAI_CHAT || k == SM_REC_OAI_COMPLETION || k == SM_REC_OAI_BAD;
}

/*
** p's result line (an error if msg is set; status: its kind) into *out.
** Ours: {"id", "line", "text", counts, "finish_reason", "timing"} or
** {"id", "line", "error"}; OpenAI's: {"id", "custom_id", "response", "error"}.
*/
static bool format_record(batch *b, const pending *p, const char *msg, sm_status status,
                          const sm_sched_result *res, ready *out) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return false;
    if (!is_oai(p->kind)) {
        if (*p->id) fprintf(f, "{\"id\": %s, \"line\": %zu, ", p->id, p->lineno);
        else fprintf(f, "{\"id\": %zu, \"line\": %zu, ", p->lineno, p->lineno);
        if (msg) {
            fputs("\"error\": \"", f);
            cli_json_string(f, (const unsigned char *)msg, strlen(msg));
            fputs("\"}\n", f);
        } else {
            cli_json_result(f, res->text, res->len, &res->stats, res->n_truncated, res->t_queue);
            if (p->grammar) fprintf(f, ", \"valid\": %s", res->stats.valid ? "true" : "false");
            fputs("}\n", f);
        }
    } else {
        fprintf(f, "{\"id\": \"batch_req_%zu\", \"custom_id\": %s, ", p->lineno, *p->id ? p->id : "null");
        char suffix[32];
        snprintf(suffix, sizeof suffix, "%zu", p->lineno);
        if (msg && p->kind == SM_REC_OAI_BAD) { /* the line itself: no request was made */
            fputs("\"response\": null, \"error\": {\"code\": ", f);
            fprintf(f, "\"%s\", \"message\": \"", p->code ? p->code : "invalid_request");
            cli_json_string(f, (const unsigned char *)msg, strlen(msg));
            fputs("\"}}\n", f);
        } else {
            int code = !msg ? 200 : p->code && strcmp(p->code, "model_not_found") == 0 ? 404
                                  : status == SM_ERR_INPUT ? 400 : 500;
            fprintf(f, "\"response\": {\"status_code\": %d, \"request_id\": \"req_%zu\", \"body\": ", code,
                    p->lineno);
            if (msg) {
                cli_oai_error(f, msg, code == 500 ? "server_error" : "invalid_request_error", p->param, p->code);
            } else {
                cli_oai_choice one = {.text = res ? res->text : NULL, .len = res ? res->len : 0};
                if (res) {
                    const chosen *c = res->tag;
                    one.stats = res->stats, one.toks = c->toks, one.n_tok = c->n_tok;
                    one.pre = c->pre, one.pre_len = c->pre_len;
                }
                cli_oai_result r = {.kind = p->kind, .id_suffix = suffix, .model = b->model_name,
                                    .created = b->created, .ch = res ? &one : p->out,
                                    .n_ch = res ? 1 : p->n_ch, .n = res ? 1 : p->n,
                                    .t_queue = res ? res->t_queue : p->t_queue, .tok = b->tok,
                                    .logprobs = p->logprobs};
                cli_oai_body(f, &r);
            }
            fputs("}, \"error\": null}\n", f);
        }
    }
    if (fclose(f) != 0) {
        free(text);
        return false;
    }
    *out = (ready){.line = text, .len = len, .failed = msg != NULL};
    return true;
}

/* Writes one result line to its file; frees it. */
static void write_one(batch *b, ready *r) {
    if (r->failed) b->failed++;
    cli_sink *s = r->failed && b->errs.fd >= 0 ? &b->errs : &b->out;
    if (!b->stop && cli_sink_write(s, &b->os, r->line, r->len)) b->stop = true;
    free(r->line);
    *r = (ready){0};
    b->written++;
}

/* Frees what p holds for its choices. */
static void release(pending *p) {
    for (size_t i = 0; p->out && i < p->n_ch; i++) free((char *)p->out[i].text);
    for (size_t i = 0; p->ch && i < p->n_ch; i++) free(p->ch[i].toks), free(p->ch[i].pre);
    free(p->in), free(p->ids), free(p->ch), free(p->out), free(p->why);
    p->in = NULL, p->ids = NULL, p->ch = NULL, p->out = NULL, p->why = NULL;
}

/* Hands p's result on (res NULL and no msg: its several choices' results): written at once (unordered),
   or held for its turn. */
static int deliver(batch *b, pending *p, const char *msg, sm_status status, const sm_sched_result *res) {
    ready r;
    p->used = false;
    cli_gcache_put(b->grammars, p->grammar);
    bool ok = format_record(b, p, msg, status, res, &r);
    release(p);
    if (!ok) return cli_data_error("out of memory for a result");
    if (b->ordered) b->ring[p->idx % b->window] = r;
    else write_one(b, &r);
    return 0;
}

/* The scheduler's done callback. */
static sm_status on_done(void *user, const sm_sched_result *res, sm_error *err) {
    batch *b = user;
    chosen *c = res->tag;
    pending *p = c->p;
    if (!res->error) b->tokens += res->stats.n_generated;
    if (c->no_room) return sm_error_set(err, SM_ERR_NOMEM, "out of memory for log-probabilities");
    p->n_done++;
    if (p->n_ch > 1) { /* one of several: kept until the last */
        if (p->n_done == 1) p->t_queue = res->t_queue;
        if (res->error && !p->why) {
            p->why_st = res->status;
            if (!(p->why = strdup(res->error))) return sm_error_set(err, SM_ERR_NOMEM, "out of memory for a result");
        } else if (!res->error) {
            char *t = malloc(res->len + 1);
            if (!t) return sm_error_set(err, SM_ERR_NOMEM, "out of memory for a result");
            memcpy(t, res->text, res->len);
            t[res->len] = '\0';
            p->out[c->i] = (cli_oai_choice){.text = t, .len = res->len, .stats = res->stats, .toks = c->toks,
                                            .n_tok = c->n_tok, .pre = c->pre, .pre_len = c->pre_len};
        }
        if (p->n_done < p->n_ch || p->n_sub < p->n_ch) return SM_OK;
        res = NULL;
    }
    if (deliver(b, p, res ? res->error : p->why, res ? res->status : p->why_st, res))
        return sm_error_set(err, SM_ERR_NOMEM, "out of memory for a result");
    return SM_OK;
}

/* The scheduler's token callback (logprobs): the choice's token kept for its result. */
static void on_token(void *user, void *tag, const sm_token_info *t) {
    (void)user;
    chosen *c = tag;
    if (!c->no_room && !cli_toks_push(&c->toks, &c->n_tok, &c->cap_tok, t)) c->no_room = true;
}

/* Writes the results that are next in input order. */
static void flush(batch *b) {
    if (!b->ordered) return;
    while (b->written < b->next_idx && b->ring[b->written % b->window].line)
        write_one(b, &b->ring[b->written % b->window]);
}

/* "1h02m", "3m05s", "12s" */
static void duration(char *out, size_t cap, double s) {
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(out, cap, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else if (t >= 60) snprintf(out, cap, "%ldm%02lds", t / 60, t % 60);
    else snprintf(out, cap, "%lds", t);
}

/* Progress on stderr: in place on a terminal, a line per interval with --progress (and at the end). */
static void progress(batch *b, bool last) {
    double now = sm_time_now();
    if (b->o->quiet || !(b->tty || b->o->progress)) return;
    double every = b->o->progress ? (b->o->progress_s > 0 ? b->o->progress_s : 10.0) : 0.2;
    if (!last && now - b->t_progress < every) return;
    b->t_progress = now;
    double el = now - b->t0;
    char done[64], eta[32] = "", spent[32];
    if (b->total_known) snprintf(done, sizeof done, "%zu/%zu", b->written, b->total);
    else snprintf(done, sizeof done, "%zu", b->written);
    duration(spent, sizeof spent, el);
    if (b->total_known && b->written && b->written < b->total) {
        char t[24];
        duration(t, sizeof t, el / (double)b->written * (double)(b->total - b->written));
        snprintf(eta, sizeof eta, ", ETA %s", t);
    }
    char failed[40] = "";
    if (b->failed) snprintf(failed, sizeof failed, " (%zu failed)", b->failed);
    bool in_place = b->tty && !b->o->progress;
    fprintf(stderr, "%srecords %s%s, %.1f tokens/s, %.2f records/s, %s%s%s", in_place ? "\r\033[K" : "", done,
            failed, el > 0 ? (double)b->tokens / el : 0, el > 0 ? (double)b->written / el : 0, spent, eta,
            in_place ? "" : "\n");
}

/*
** Submits p's next completions (of rec) while the scheduler has room; the
** rest wait for room (b->cur). Returns an exit code.
*/
static int more(batch *b, cli_runner *r, pending *p, const sm_batch_record *rec) {
    const cli_opts *o = b->o;
    sm_sched *s = r->ls->sched;
    while (p->n_sub < p->n_ch && sm_sched_room(s)) {
        chosen *c = &p->ch[p->n_sub];
        const sm_oai_choice *in = &p->in[p->n_sub++];
        sm_error err = {{0}};
        sm_sched_request req = {.prompt = in->prompt, .prompt_len = in->prompt_len,
                                .ids = in->ids, .n_ids = in->n_ids,
                                .max_tokens = rec->set & SM_REC_MAX_TOKENS ? (size_t)rec->max_tokens
                                                                           : (size_t)o->max_tokens,
                                .sampling = rec->sampling, .truncate = o->truncate, .grammar = p->grammar,
                                .logprobs = p->logprobs, .top_logprobs = p->logprobs ? rec->top_logprobs : 0,
                                .echo = rec->echo,
                                .tag = c};
        req.sampling.seed = in->seed;
        if (p->echo && !(c->pre = cli_oai_echo_text(b->tok, in, &c->pre_len)))
            return cli_data_error("out of memory for a record");
        if (p->logprobs &&
            !cli_toks_reserve(&c->toks, &c->cap_tok, cli_toks_room(in, p->echo, req.max_tokens, r->ls->sp.n_ctx)))
            return cli_data_error("out of memory for log-probabilities");
        const char *stops[SM_STOP_MAX];
        req.n_stop = rec->set & SM_REC_STOP ? rec->n_stop : o->n_stop;
        for (size_t i = 0; i < req.n_stop; i++)
            stops[i] = rec->set & SM_REC_STOP ? rec->stop[i] : o->stop[i];
        if (rec->messages) req.n_stop = sm_chat_add_stop(&b->chat, stops, req.n_stop);
        req.stop = stops;
        if (sm_sched_submit(s, &req, &err)) return cli_data_error(err.msg); /* (a bad prompt: to on_done) */
    }
    b->cur = p->n_sub < p->n_ch ? p : NULL;
    return 0;
}

/*
** Submits record rec (p its entry) with the flags' settings under its own;
** a record that cannot run (why, or found here) gets its error result at
** once. Returns an exit code.
*/
static int submit(batch *b, cli_runner *r, pending *p, sm_batch_record *rec, const char *why) {
    const cli_opts *o = b->o;
    sm_error err = {{0}};
    size_t n_ids = 0;
    if (!why && b->o->alias && *rec->model && strcmp(rec->model, b->o->alias) != 0) {
        snprintf(err.msg, sizeof err.msg, "The model '%s' does not exist (this run serves '%s')", rec->model,
                 b->o->alias);
        p->code = "model_not_found";
        snprintf(p->param, sizeof p->param, "model");
        why = err.msg;
    }
    if (!why && rec->stream) {
        snprintf(p->param, sizeof p->param, "stream");
        why = "\"stream\": true is not supported in a batch";
    }
    p->logprobs = rec->top_logprobs >= 0, p->echo = rec->echo; /* (OpenAI records alone set them) */
    if (!why) {
        sm_status st = sm_oai_choices(rec, r->lm->tok.n_vocab, &p->in, &p->n_ch, &p->n, &p->ids, &err);
        if (!st && (!(p->ch = calloc(p->n_ch, sizeof *p->ch)) || !(p->out = calloc(p->n_ch, sizeof *p->out))))
            st = SM_ERR_NOMEM;
        if (st == SM_ERR_NOMEM) return cli_data_error("out of memory for a record");
        if (st) snprintf(p->param, sizeof p->param, "%s", rec->param), why = err.msg;
        for (size_t i = 0; !st && i < p->n_ch; i++) p->ch[i] = (chosen){.p = p, .i = i};
    }
    if (!why && rec->messages) why = templated(b, r, rec->messages, &n_ids, &err);
    for (size_t i = 0; !why && rec->messages && i < p->n_ch; i++) /* (the batch's ids: read at submit) */
        p->in[i].ids = b->ids, p->in[i].n_ids = n_ids;
    /* the record's grammar or schema, else the flag's */
    sm_grammar_kind gk = rec->gkind ? rec->gkind : o->gkind;
    const char *gt = rec->gkind ? rec->gtext : b->flag_gtext;
    if (!why && gk) {
        sm_error gerr = {{0}};
        if (cli_gcache_get(b->grammars, gk, gt, &p->grammar, &gerr)) {
            snprintf(err.msg, sizeof err.msg, "%s", gerr.msg);
            snprintf(p->param, sizeof p->param, "%s", is_oai(p->kind) ? "response_format" : gk == SM_GK_GBNF ? "grammar" : "json_schema");
            why = err.msg;
        }
    }
    if (why) return deliver(b, p, why, SM_ERR_INPUT, NULL);
    return more(b, r, p, rec);
}

/* State of reading the input, shared by the first pass and the run. */
typedef struct {
    size_t record;    /* non-empty lines so far */
    char *pbuf;       /* a line's decoded prompt */
    size_t pcap;
    cli_keys seen;    /* keys of the records taken */
} intake;

/* Parses one line into rec (buffer grown to fit); its key into key. 0, or an exit code. */
static int parse_line(const cli_opts *o, intake *in, const char *line, size_t n, size_t lineno,
                      sm_batch_record *rec, sm_error *err, sm_status *st, char *key) {
    if (n + 1 > in->pcap) {
        char *nb = realloc(in->pbuf, n + 1);
        if (!nb) return cli_data_error("out of memory for an input line");
        in->pbuf = nb, in->pcap = n + 1;
    }
    sm_sampler_params dflt = cli_sampling(o, cli_seed(o->seed));
    *st = sm_batch_parse(line, n, o->input_format, in->pbuf, &dflt, rec, err);
    cli_record_key(key, KEY_MAX, rec->kind, rec->id, lineno);
    return 0;
}

/* A key's text for messages: the id as written ("i:7" -> 7, "c:\"a\"" -> "a", "l:3" -> line 3). */
static const char *key_text(const char *key) {
    return key[0] == 'l' ? "(none)" : key + 2;
}

/*
** The first pass over a regular file: how many records this run has to do,
** and no id twice (unless allowed). Reads from the current offset and goes
** back to it. Exit code (the message printed).
*/
static int first_pass(batch *b, cli_reader *rd, cli_keys *done) {
    const cli_opts *o = b->o;
    off_t start = lseek(rd->fd, 0, SEEK_CUR);
    if (start < 0) return 0; /* cannot go back: no first pass */
    cli_reader r = {.fd = rd->fd, .name = rd->name, .regular = true};
    intake in = {0};
    const char *line;
    size_t n;
    int k, rc = 0;
    char key[KEY_MAX];
    size_t todo = 0;
    while (!rc && (k = cli_reader_next(&r, -1, &line, &n)) == 1) {
        if (n == 0 || !in_shard(o, ++in.record)) continue;
        sm_batch_record rec;
        sm_error err = {{0}};
        sm_status st;
        if ((rc = parse_line(o, &in, line, n, r.lineno, &rec, &err, &st, key))) break;
        sm_batch_record_free(&rec);
        cli_key *e = cli_keys_add(&in.seen, key, r.lineno);
        if (!e) rc = cli_data_error("out of memory for the ids");
        else if (e->count > 1 && !o->allow_dup_ids) {
            fprintf(stderr, "smallmind: '%s' line %zu: %s %s repeats line %zu's (ids name results for "
                            "--resume; --allow-duplicate-ids runs both)\n",
                    rd->name, r.lineno, key[0] == 'c' ? "custom_id" : "id", key_text(key), e->line);
            rc = EXIT_DATA;
        } else if (!cli_keys_take(done, key)) {
            todo++;
        }
    }
    if (!rc && k < 0) rc = EXIT_DATA;
    free(r.buf);
    free(in.pbuf);
    cli_keys_free(&in.seen);
    if (!rc && lseek(rd->fd, start, SEEK_SET) < 0) rc = cli_data_error("cannot go back to the start of the input");
    b->total = todo;
    b->total_known = !rc;
    return rc;
}

int cli_batch(const cli_opts *o) {
    cli_reader rd;
    int rc = cli_reader_open(&rd, o->batch_file);
    if (rc) return rc;
    batch b = {.o = o, .os = {.last_was_newline = true}, .ordered = o->ordered >= 0,
               .out = {.fd = -1}, .errs = {.fd = -1}};
    cli_keys done = {0}, done_copy = {0};
    size_t n_done = 0;
    struct stat sb;
    for (int k = 0; k < 2 && !rc; k++) { /* results must not go over the input */
        const char *path = k ? o->errors : o->output;
        if (path && rd.regular && stat(path, &sb) == 0 && sb.st_dev == rd.dev && sb.st_ino == rd.ino)
            rc = cli_usage_error(o, "--%s names the input file '%s'", k ? "errors" : "output", path);
    }
    if (!rc && o->resume_batch) {
        size_t m = 0, f = 0;
        rc = cli_resume_scan(o->output, &done, &n_done, &b.failed_kept, o->quiet);
        if (!rc && o->errors) rc = cli_resume_scan(o->errors, &done, &m, &f, o->quiet);
        n_done += m, b.failed_kept += f;
        if (!rc) rc = cli_resume_scan(o->output, &done_copy, &m, &f, true); /* the first pass takes from a copy */
        if (!rc && o->errors) rc = cli_resume_scan(o->errors, &done_copy, &m, &f, true);
    }
    if (!rc && rd.regular) rc = first_pass(&b, &rd, &done_copy);
    cli_keys_free(&done_copy);
    if (rc) {
        cli_keys_free(&done);
        cli_reader_close(&rd);
        return rc;
    }
    /* --parallel, else 8, or up to 32 when their KV-cache fits in a quarter of the memory (larger
       steps share each pass over the weights: +14% records/s on a shared-prefix GPT-2 job) */
    size_t P = o->parallel ? (size_t)o->parallel : 8, P_max = o->parallel ? 0 : CLI_AUTO_PARALLEL;
    if (b.total_known && P > b.total) P = b.total ? b.total : 1;
    if (b.total_known && P_max > b.total) P_max = b.total;
    sm_sched_params sched = {.cancel = (const volatile int *)&cli_interrupted, .done = on_done, .token = on_token,
                             .user = &b};
    sm_sampler_params spar = cli_sampling(o, cli_seed(o->seed));
    cli_runner r;
    cli_run_spec spec = {.max_batch = 512, .n_seq = P, .n_seq_max = P_max, .sampling = &spar, .sched = &sched,
                         .cache_bytes = (size_t)o->cache_mib << 20, .build_state = true};
    rc = cli_runner_init(&r, o, &spec);
    if (rc) {
        cli_keys_free(&done);
        cli_reader_close(&rd);
        return rc;
    }
    P = r.ls->sp.n_seq; /* as many as the session holds */
    b.tok = &r.lm->tok;
    bool save_cache = false;
    if (o->prompt_cache) rc = cli_prompt_cache_seed(o, &r, &save_cache);
    if (!rc && !(b.grammars = cli_gcache_new(&r.lm->tok, r.ls->sched))) rc = cli_data_error("out of memory");
    if (!rc && (o->gkind == SM_GK_GBNF || o->gkind == SM_GK_SCHEMA)) { /* the flag's text, checked now */
        size_t glen = 0;
        if (o->ginline && !(b.flag_gtext = strdup(o->gsrc))) rc = cli_data_error("out of memory");
        else if (!o->ginline) rc = cli_read_all(o->gsrc, &b.flag_gtext, &glen);
        if (!rc && !o->ginline && strlen(b.flag_gtext) != glen)
            rc = cli_data_error("the grammar or schema file has a NUL byte");
    }
    if (!rc && o->gkind) {
        sm_gbind *gb;
        sm_error gerr = {{0}};
        if (cli_gcache_get(b.grammars, o->gkind, b.flag_gtext, &gb, &gerr)) {
            fprintf(stderr, "smallmind: --%s: %s\n", o->gflag, gerr.msg);
            rc = EXIT_DATA;
        } else {
            cli_gcache_put(b.grammars, gb);
        }
    }
    /* the model's name in OpenAI results: --alias, else the model path's last part */
    const char *slash = strrchr(o->model, '/');
    char name[SM_REC_MODEL_MAX];
    snprintf(name, sizeof name, "%s", o->alias ? o->alias : slash && slash[1] ? slash + 1 : o->model);
    b.model_name = name;
    b.created = (long long)time(NULL);
    /* files are opened (an --output emptied) only now that the run can start */
    if (!rc && o->output) rc = cli_sink_open(&b.out, o->output, o->resume_batch);
    else if (!rc) cli_sink_open(&b.out, NULL, false);
    if (!rc && o->errors) rc = cli_sink_open(&b.errs, o->errors, o->resume_batch);
    b.window = 4 * P + 64;
    b.pend = calloc(3 * P + 1, sizeof *b.pend);
    b.ring = calloc(b.window, sizeof *b.ring);
    if (!rc && (!b.pend || !b.ring)) rc = cli_data_error("out of memory for the batch");
    if (!rc && o->resume_batch && n_done && !o->quiet)
        fprintf(stderr, "smallmind: resuming: %zu results kept in %s%s%s\n", n_done, o->output,
                o->errors ? " and " : "", o->errors ? o->errors : "");
    b.t0 = b.t_progress = sm_time_now();
    b.tty = isatty(STDERR_FILENO) && !o->quiet;
    intake in = {0};
    sm_sched *s = r.ls->sched;
    while (!rc && !cli_interrupted && !b.stop) {
        /* a record's completions that wait for room go in first */
        if (b.cur && sm_sched_room(s) && !(rc = more(&b, &r, b.cur, &b.cur_rec)) && !b.cur)
            sm_batch_record_free(&b.cur_rec);
        /* take the lines that are here (waiting for one only when there is nothing else to do) */
        while (!rc && !cli_interrupted && !rd.eof && !b.cur && sm_sched_room(s) &&
               b.next_idx - b.written < b.window) {
            bool idle = !sm_sched_busy(s) && b.written == b.next_idx;
            int wait_ms = !idle ? 0 : b.o->progress ? (int)((b.o->progress_s > 0 ? b.o->progress_s : 10) * 1000) : -1;
            const char *line;
            size_t n;
            int k = cli_reader_next(&rd, wait_ms, &line, &n);
            if (k < 0) rc = EXIT_DATA;
            if (k <= 0) break;
            if (n == 0 || !in_shard(o, ++in.record)) continue;
            sm_batch_record rec;
            sm_error err = {{0}};
            sm_status st;
            char key[KEY_MAX];
            if ((rc = parse_line(o, &in, line, n, rd.lineno, &rec, &err, &st, key))) break;
            if (cli_keys_take(&done, key)) { /* its result is in the file already */
                b.skipped++;
                sm_batch_record_free(&rec);
                continue;
            }
            cli_key *e = cli_keys_add(&in.seen, key, rd.lineno);
            pending *p = b.pend;
            while (p->used) p++; /* at most 3 P are in flight, so one of 3 P + 1 is free */
            *p = (pending){.used = true, .idx = b.next_idx++, .lineno = rd.lineno, .kind = rec.kind,
                           .code = rec.code};
            memcpy(p->id, rec.id, sizeof p->id);
            memcpy(p->param, rec.param, sizeof p->param);
            const char *why = st ? err.msg : NULL;
            if (!e) {
                rc = cli_data_error("out of memory for the ids");
            } else if (!why && e->count > 1 && !o->allow_dup_ids) { /* (a stream: a file was checked) */
                snprintf(err.msg, sizeof err.msg, "%s %s repeats line %zu's (--allow-duplicate-ids runs both)",
                         key[0] == 'c' ? "custom_id" : "id", key_text(key), e->line);
                if (is_oai(p->kind)) p->kind = SM_REC_OAI_BAD, p->code = "duplicate_custom_id";
                why = err.msg;
            }
            if (!rc) rc = submit(&b, &r, p, &rec, why);
            if (b.cur) b.cur_rec = rec; /* its completions go on as the scheduler has room */
            else sm_batch_record_free(&rec);
        }
        flush(&b);
        progress(&b, false);
        if (rc || cli_interrupted || b.stop) break;
        if (sm_sched_busy(s)) {
            sm_error err = {{0}};
            sm_status sst = sm_sched_step(s, &err);
            if (sst) rc = cli_run_error(o, sst, err.msg);
            flush(&b);
        } else if (rd.eof && b.written == b.next_idx) {
            break;
        }
    }
    flush(&b);
    if (b.cur) sm_batch_record_free(&b.cur_rec);
    if (b.tty || o->progress) progress(&b, true);
    if (b.tty && !o->progress && !o->quiet) fputc('\n', stderr);
    if (!rc && !cli_interrupted && save_cache && r.ls->prefix) rc = cli_prompt_cache_save_hottest(o, &r);
    double el = sm_time_now() - b.t0;
    if (o->stats || (cli_interrupted && !o->quiet))
        fprintf(stderr, "batch: %zu records written (%zu failed), %zu skipped as done (%zu of them failed), "
                        "%zu tokens generated in %.2f s (%.1f tokens/s, %zu decoded together)%s\n",
                b.written, b.failed, b.skipped, b.failed_kept, b.tokens, el, el > 0 ? (double)b.tokens / el : 0, P,
                cli_interrupted ? "; interrupted" : "");
    if (o->stats && r.ls->prefix) {
        sm_prefix_stats ps = sm_prefix_stats_of(r.ls->prefix);
        fprintf(stderr, "cache: %zu of %zu records reused a prefix; %zu of %zu prompt tokens (%.1f%%) "
                        "served from the cache (%zu read in place, not copied); %zu of %zu blocks held "
                        "(%.1f of %.1f MiB), %zu stored, %zu evicted, %zu not stored (prompts in a row "
                        "stored blocks none reused)\n",
                ps.hits, ps.lookups, ps.reused, ps.tokens,
                ps.tokens ? 100.0 * (double)ps.reused / (double)ps.tokens : 0.0, ps.in_place, ps.blocks, ps.blocks_max,
                (double)ps.bytes / (1 << 20), (double)ps.bytes_max / (1 << 20), ps.inserted, ps.evicted,
                ps.held_back);
    } else if (o->stats)
        fprintf(stderr, "cache: off%s\n", o->cache_mib ? " (the budget holds no block, or the batch "
                                                         "size is not a multiple of 16)" : "");
    if (o->stats) cli_runner_print_threads(&r, stderr);
    for (size_t i = 0; b.pend && i < 3 * P + 1; i++) release(&b.pend[i]); /* (an interrupt's records in flight) */
    for (size_t i = 0; b.ring && i < b.window; i++) free(b.ring[i].line);
    free(b.ring), free(b.pend), free(in.pbuf);
    free(b.ids);
    cli_keys_free(&in.seen);
    cli_keys_free(&done);
    sm_chat_free(&b.chat);
    cli_gcache_free(b.grammars);
    free(b.flag_gtext);
    cli_runner_free(&r);
    cli_reader_close(&rd);
    int frc = b.errs.fd >= 0 ? cli_sink_close(&b.errs) : 0;
    if (o->output) frc = cli_sink_close(&b.out) ? EXIT_DATA : frc;
    if (!rc) rc = frc;
    if (!rc && cli_interrupted) rc = cli_interrupt_code();
    if (!rc && (b.failed || b.failed_kept)) rc = EXIT_DATA; /* the job's status, wherever it was resumed */
    return cli_finish_stdout(&b.os, rc);
}
