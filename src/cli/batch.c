/*
** batch.c -- `smallmind generate --batch FILE`: read lines, submit each
** record to the scheduler (sm_sched.h), write the finished records as JSONL
** in input order.
**
** Records finish out of order; each is formatted when it finishes and
** written once all records before it are, so output keeps the input order
** and every write is one whole record. Ctrl-C writes no partial record.
*/
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sm_batch.h"

/* A record in flight: what its output line needs besides the result. */
typedef struct {
    bool used;
    size_t idx, lineno; /* ordinal among this shard's records; input line */
    char id[SM_REC_ID_MAX];
} pending;

typedef struct {
    const cli_opts *o;
    cli_out os;
    pending *pend;  /* (3 P + 1): in slots, queued, and the one being submitted */
    char **ready;   /* (todo) formatted records not yet written */
    size_t *ready_len;
    size_t written; /* records written: the next to write is ready[written] */
    size_t failed, tokens;
    bool stop;      /* a write failed or the pipe closed */
    /* records with "messages": the chat template, set up at the first of them */
    int chat_state; /* 0 not yet, 1 ready, 2 failed (chat_err says why) */
    sm_chat chat;
    char chat_err[600];
    int32_t *ids;   /* (n_ctx) a templated conversation's tokens */
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

/* Formats p's record (an error if msg is set) into b->ready. false: out of memory. */
static bool format_record(batch *b, const pending *p, const char *msg, const sm_sched_result *res) {
    char idbuf[32];
    snprintf(idbuf, sizeof idbuf, "%zu", p->lineno);
    char *out = NULL;
    size_t out_len = 0;
    FILE *f = open_memstream(&out, &out_len);
    if (!f) return false;
    fprintf(f, "{\"id\": %s, ", *p->id ? p->id : idbuf);
    if (msg) {
        fprintf(f, "\"line\": %zu, \"error\": \"", p->lineno);
        cli_json_string(f, (const unsigned char *)msg, strlen(msg));
        fputs("\"}\n", f);
        b->failed++;
    } else {
        cli_json_result(f, res->text, res->len, &res->stats, res->n_truncated);
        fputs("}\n", f);
        b->tokens += res->stats.n_generated;
    }
    if (fclose(f) != 0) {
        free(out);
        return false;
    }
    b->ready[p->idx] = out;
    b->ready_len[p->idx] = out_len;
    return true;
}

/* The scheduler's done callback. */
static sm_status on_done(void *user, const sm_sched_result *res, sm_error *err) {
    batch *b = user;
    pending *p = res->tag;
    p->used = false;
    if (!format_record(b, p, res->error, res))
        return sm_error_set(err, SM_ERR_NOMEM, "out of memory for an output record");
    return SM_OK;
}

/* Writes the records that are next in input order. */
static void flush(batch *b, size_t todo, double t0, bool tty) {
    while (!b->stop && b->written < todo && b->ready[b->written]) {
        char *out = b->ready[b->written];
        b->ready[b->written] = NULL;
        if (cli_out_write(&b->os, out, b->ready_len[b->written])) b->stop = true;
        free(out);
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
** Parses record (line, n) and submits it with the flags' settings under its
** own. A record that cannot be parsed is formatted at once. Returns an exit code.
*/
static int submit(batch *b, cli_runner *r, pending *p, const char *line, size_t n, char *pbuf) {
    const cli_opts *o = b->o;
    sm_batch_record rec;
    sm_error err = {{0}};
    rec.id[0] = '\0';
    sm_sampler_params dflt = cli_sampling(o, cli_seed(o->seed));
    sm_status st = sm_batch_parse(line, n, pbuf, &dflt, &rec, &err);
    memcpy(p->id, rec.id, sizeof p->id);
    size_t n_ids = 0;
    const char *why = st ? err.msg : rec.messages ? templated(b, r, rec.messages, &n_ids, &err) : NULL;
    cJSON_Delete(rec.messages);
    if (why) {
        p->used = false;
        return format_record(b, p, why, NULL) ? 0 : cli_data_error("out of memory for an output record");
    }
    sm_sched_request req = {.prompt = rec.prompt, .prompt_len = rec.prompt_len,
                            .ids = n_ids ? b->ids : NULL, .n_ids = n_ids,
                            .max_tokens = rec.set & SM_REC_MAX_TOKENS ? (size_t)rec.max_tokens
                                                                      : (size_t)o->max_tokens,
                            .sampling = rec.sampling, .truncate = o->truncate, .tag = p};
    const char *stops[SM_STOP_MAX];
    req.n_stop = rec.set & SM_REC_STOP ? rec.n_stop : o->n_stop;
    for (size_t i = 0; i < req.n_stop; i++)
        stops[i] = rec.set & SM_REC_STOP ? rec.stop[i] : o->stop[i];
    if (n_ids) req.n_stop = sm_chat_add_stop(&b->chat, stops, req.n_stop);
    req.stop = stops;
    if (sm_sched_submit(r->ls->sched, &req, &err)) return cli_data_error(err.msg);
    return 0;
}

int cli_batch(const cli_opts *o) {
    char *input;
    size_t len;
    int rc = cli_read_all(o->batch_file, &input, &len);
    if (rc) return rc;
    /* first pass: this shard's records, and the longest line (the prompt buffer) */
    const char *line;
    size_t n, at = 0, longest = 0, todo = 0, record = 0, lineno = 0, next_idx = 0;
    while (next_line(input, len, &at, &line, &n)) {
        if (n > longest) longest = n;
        if (n) todo += in_shard(o, ++record);
    }
    size_t P = o->parallel ? (size_t)o->parallel : 8;
    if (P > todo) P = todo ? todo : 1;
    batch b = {.o = o, .os = {.last_was_newline = true}};
    sm_sched_params sched = {.cancel = (const volatile int *)&cli_interrupted, .done = on_done,
                             .user = &b};
    sm_sampler_params spar = cli_sampling(o, cli_seed(o->seed));
    cli_runner r;
    cli_run_spec spec = {.max_batch = 512, .n_seq = P, .sampling = &spar, .sched = &sched,
                         .cache_bytes = (size_t)o->cache_mib << 20, .build_state = true};
    rc = cli_runner_init(&r, o, &spec);
    if (rc) {
        free(input);
        return rc;
    }
    bool save_cache = false;
    if (o->prompt_cache && (rc = cli_prompt_cache_seed(o, &r, &save_cache))) {
        cli_runner_free(&r);
        free(input);
        return rc;
    }
    char *pbuf = malloc(longest + 1);
    b.pend = calloc(3 * P + 1, sizeof *b.pend);
    b.ready = calloc(todo + 1, sizeof *b.ready);
    b.ready_len = calloc(todo + 1, sizeof *b.ready_len);
    if (!pbuf || !b.pend || !b.ready || !b.ready_len) rc = cli_data_error("out of memory for the batch");
    double t0 = sm_time_now();
    bool tty = isatty(STDERR_FILENO) && !o->quiet, more = true;
    at = record = 0;
    while (!rc && !cli_interrupted && !b.stop) {
        while (!rc && !cli_interrupted && more && sm_sched_room(r.ls->sched) &&
               (more = next_line(input, len, &at, &line, &n))) {
            lineno++;
            if (n == 0 || !in_shard(o, ++record)) continue;
            pending *p = b.pend;
            while (p->used) p++; /* at most 3 P are in flight, so one of 3 P + 1 is free */
            *p = (pending){.used = true, .idx = next_idx++, .lineno = lineno};
            rc = submit(&b, &r, p, line, n, pbuf);
        }
        flush(&b, todo, t0, tty);
        if (rc || cli_interrupted || b.stop || (!more && !sm_sched_busy(r.ls->sched))) break;
        sm_error err = {{0}};
        sm_status sst = sm_sched_step(r.ls->sched, &err);
        if (sst) rc = cli_run_error(o, sst, err.msg);
        flush(&b, todo, t0, tty);
    }
    flush(&b, todo, t0, tty);
    if (tty) fputc('\n', stderr);
    if (!rc && !cli_interrupted && save_cache && r.ls->prefix) rc = cli_prompt_cache_save_hottest(o, &r);
    double el = sm_time_now() - t0;
    if (o->stats || (cli_interrupted && !o->quiet))
        fprintf(stderr, "batch: %zu of %zu records written (%zu failed), %zu tokens generated in "
                        "%.2f s (%.1f tokens/s, %zu decoded together)%s\n",
                b.written, todo, b.failed, b.tokens, el, el > 0 ? (double)b.tokens / el : 0, P,
                cli_interrupted ? "; interrupted" : "");
    if (o->stats && r.ls->prefix) {
        sm_prefix_stats ps = sm_prefix_stats_of(r.ls->prefix);
        fprintf(stderr, "cache: %zu of %zu records reused a prefix; %zu of %zu prompt tokens (%.1f%%) "
                        "served from the cache; %zu of %zu blocks held (%.1f of %.1f MiB), %zu stored, "
                        "%zu evicted\n",
                ps.hits, ps.lookups, ps.reused, ps.tokens,
                ps.tokens ? 100.0 * (double)ps.reused / (double)ps.tokens : 0.0, ps.blocks, ps.blocks_max,
                (double)ps.bytes / (1 << 20), (double)ps.bytes_max / (1 << 20), ps.inserted, ps.evicted);
    } else if (o->stats)
        fprintf(stderr, "cache: off%s\n", o->cache_mib ? " (the budget holds no block, or the batch "
                                                         "size is not a multiple of 16)" : "");
    if (o->stats) cli_runner_print_threads(&r, stderr);
    for (size_t i = 0; b.ready && i < todo; i++) free(b.ready[i]);
    free(b.ready), free(b.ready_len), free(b.pend), free(pbuf);
    free(input);
    free(b.ids);
    sm_chat_free(&b.chat);
    cli_runner_free(&r);
    if (!rc && cli_interrupted) rc = cli_interrupt_code();
    if (!rc && b.failed) rc = EXIT_DATA;
    return cli_finish_stdout(&b.os, rc);
}
