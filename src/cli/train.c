/*
** train.c -- `smallmind train`: flags -> shape and hyperparameters, the
** training loop with progress, evaluation, the loss CSV and checkpoints.
**
** Ctrl-C finishes the step in flight, writes a checkpoint and exits 130; a
** second Ctrl-C leaves at once (the last checkpoint is still whole).
*/
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sm_train.h"

#define LN2 0.69314718055994531
#define CSV_HEADER "step,lr,train_loss,val_loss,grad_norm,tokens_per_s,elapsed_s\n"
#define CSV_ROW_MAX 160

typedef struct {
    char *buf;
    size_t len, cap;
} csv_log;

static void csv_add(csv_log *c, int step, double lr, double loss, double val, double gn,
                    double tps, double elapsed) {
    if (c->cap - c->len < CSV_ROW_MAX) return; /* sized for every step at the start */
    char v[32] = "";
    if (val >= 0) snprintf(v, sizeof v, "%.6f", val);
    c->len += (size_t)snprintf(c->buf + c->len, CSV_ROW_MAX, "%d,%.6e,%.6f,%s,%.4f,%.0f,%.1f\n",
                               step, lr, loss, v, gn, tps, elapsed);
}

/* Keeps the rows of a previous loss.csv up to `step`; returns the last elapsed time. */
static double csv_resume(csv_log *c, const char *dir, int step) {
    char path[4200], line[512];
    snprintf(path, sizeof path, "%s/loss.csv", dir);
    FILE *f = fopen(path, "r");
    double elapsed = 0;
    if (!f) return 0;
    while (fgets(line, sizeof line, f)) {
        /* a row: step first, elapsed seconds last, 7 fields; the header has no step */
        size_t n = strlen(line), commas = 0;
        for (size_t i = 0; i < n; i++) commas += line[i] == ',';
        long s = strtol(line, NULL, 10);
        if (commas != 6 || s < 1 || s > step || n >= CSV_ROW_MAX || c->cap - c->len < CSV_ROW_MAX)
            continue;
        memcpy(c->buf + c->len, line, n);
        c->len += n;
        elapsed = strtod(strrchr(line, ',') + 1, NULL);
    }
    fclose(f);
    return elapsed;
}

static void fmt_time(char *out, size_t n, double s) {
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(out, n, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else if (t >= 60)
        snprintf(out, n, "%ldm%02lds", t / 60, t % 60);
    else
        snprintf(out, n, "%lds", t);
}

static const opt_id fixed_on_resume[] = {O_LAYERS, O_HEADS,  O_EMBD, O_TCTX, O_UNTIED,
                                         O_NOBIAS, O_CONFIG, O_BATCH, O_LR,  O_LRMIN,
                                         O_WARMUP, O_WD,     O_CLIP,  O_SEED, O_VALFRAC};
/* Shape and hyperparameters from flags (new run) or the checkpoint (resume). */
static int setup(const cli_opts *o, sm_config *shape, sm_train_hparams *hp,
                 sm_checkpoint_info *info) {
    sm_error err = {{0}};
    if (o->resume) {
        for (size_t i = 0; i < sizeof fixed_on_resume / sizeof fixed_on_resume[0]; i++)
            if (CLI_GIVEN(o, fixed_on_resume[i]))
                return cli_usage_error(o, "--%s cannot change when resuming; the checkpoint fixes it",
                                   cli_flag_name(fixed_on_resume[i]));
        if (sm_checkpoint_peek(o->resume, info, &err)) return cli_data_error(err.msg);
        *shape = info->shape;
        *hp = info->hp;
        if (CLI_GIVEN(o, O_STEPS)) {
            if (o->steps < info->step)
                return cli_usage_error(o, "--steps %ld is below the checkpoint's step %d", o->steps,
                                   info->step);
            hp->steps = (int)o->steps;
        }
        return 0;
    }
    memset(shape, 0, sizeof *shape);
    shape->arch = SM_ARCH_GPT2;
    shape->activation = SM_ACT_GELU_TANH;
    shape->tokenizer = SM_TOKENIZER_BYTE;
    shape->n_vocab = 256;
    shape->norm_eps = 1e-5f;
    shape->n_layer = (int)o->layers;
    shape->n_head = (int)o->heads;
    shape->n_embd = (int)o->embd;
    shape->n_ctx = (int)o->tctx;
    shape->tied_output = !o->untied;
    shape->bias = !o->no_bias;
    if (o->config) {
        char *json;
        size_t len;
        int rc = cli_read_all(o->config, &json, &len);
        if (rc) return rc;
        sm_status st = sm_config_parse_shape(shape, json, len, o->config, &err);
        free(json);
        if (st) return cli_data_error(err.msg);
        /* flags given explicitly win over the file */
        if (CLI_GIVEN(o, O_LAYERS)) shape->n_layer = (int)o->layers;
        if (CLI_GIVEN(o, O_HEADS)) shape->n_head = (int)o->heads;
        if (CLI_GIVEN(o, O_EMBD)) shape->n_embd = (int)o->embd;
        if (CLI_GIVEN(o, O_TCTX)) shape->n_ctx = (int)o->tctx;
        if (CLI_GIVEN(o, O_UNTIED)) shape->tied_output = false;
        if (CLI_GIVEN(o, O_NOBIAS)) shape->bias = false;
    }
    /* the trainer's defaults, then the flags given; warm-up and the final rate follow
       --steps and --lr unless given */
    sm_train_hparams_default(hp);
#define GIVEN(id) CLI_GIVEN(o, id)
    if (GIVEN(O_BATCH)) hp->batch = (int)o->batch;
    if (GIVEN(O_STEPS)) hp->steps = (int)o->steps;
    if (GIVEN(O_LR)) hp->lr = (float)o->lr;
    if (GIVEN(O_WD)) hp->weight_decay = (float)o->weight_decay;
    if (GIVEN(O_CLIP)) hp->grad_clip = (float)o->grad_clip;
    if (GIVEN(O_SEED)) hp->seed = cli_seed(o->seed);
    hp->lr_min = GIVEN(O_LRMIN) ? (float)o->lr_min : hp->lr / 10;
    hp->warmup = GIVEN(O_WARMUP) ? (int)o->warmup : hp->steps / 10 < 200 ? hp->steps / 10 : 200;
#undef GIVEN
    if (shape->n_embd % shape->n_head)
        return cli_usage_error(o, "--embd %d is not a multiple of --heads %d", shape->n_embd,
                           shape->n_head);
    if (sm_train_check(shape, hp, &err)) return cli_usage_error(o, "%s", err.msg);
    return 0;
}

/* Reads the text and splits it; checks it against a checkpoint's on resume. */
static int load_text(const cli_opts *o, const sm_config *shape, const sm_checkpoint_info *info,
                     char **text, size_t *n_train, size_t *n_val) {
    size_t len;
    int rc = cli_read_all(o->data, text, &len);
    if (rc) return rc;
    char msg[700];
    size_t need = (size_t)shape->n_ctx + 2;
    if (len == 0) {
        snprintf(msg, sizeof msg, "'%s' is empty; training needs text", o->data);
        goto fail;
    }
    if (o->resume) {
        if (len != info->n_train + info->n_val ||
            sm_hash_bytes(*text, len) != info->data_hash) {
            snprintf(msg, sizeof msg,
                     "'%s' is not the text checkpoint '%s' was trained on (that one had %llu bytes)",
                     o->data, o->resume, (unsigned long long)(info->n_train + info->n_val));
            goto fail;
        }
        *n_train = info->n_train;
        *n_val = info->n_val;
        return 0;
    }
    *n_val = (size_t)((double)len * o->val_fraction);
    *n_train = len - *n_val;
    if (*n_train < need) {
        snprintf(msg, sizeof msg,
                 "'%s' leaves %zu bytes for training; with a context of %d it needs at least %zu",
                 o->data, *n_train, shape->n_ctx, need);
        goto fail;
    }
    if (*n_val > 0 && *n_val < (size_t)shape->n_ctx + 1) {
        snprintf(msg, sizeof msg,
                 "--val-fraction %g holds out %zu bytes of '%s'; an evaluation needs at least %d "
                 "(use more text or --val-fraction 0)",
                 o->val_fraction, *n_val, o->data, shape->n_ctx + 1);
        goto fail;
    }
    return 0;
fail:
    free(*text);
    *text = NULL;
    return cli_data_error(msg);
}

int cli_train(const cli_opts *o) {
    if (!o->data) return cli_usage_error(o, "--data FILE is required");
    if (!o->out && !o->resume) return cli_usage_error(o, "--out DIR is required");
    if ((o->out && !*o->out) || (o->resume && !*o->resume))
        return cli_usage_error(o, "%s needs a directory name, got ''", o->out && !*o->out ? "--out" : "--resume");
    const char *out = o->out ? o->out : o->resume;
    sm_config shape;
    sm_train_hparams hp;
    sm_checkpoint_info info;
    memset(&info, 0, sizeof info);
    int rc = setup(o, &shape, &hp, &info);
    if (rc) return rc;
    sm_error err = {{0}};
    if ((!o->resume || strcmp(out, o->resume) != 0) && sm_checkpoint_writable(out, &err)) {
        fprintf(stderr, "smallmind: %s (choose another --out)\n", err.msg);
        return EXIT_DATA;
    }
    const sm_kernels *k;
    if (sm_kernels_choose(o->kernels, &k, &err)) return cli_usage_error(o, "--%s", err.msg);

    char *text = NULL;
    size_t n_train = 0, n_val = 0;
    if ((rc = load_text(o, &shape, &info, &text, &n_train, &n_val))) return rc;

    sm_pool *pool = NULL;
    sm_trainer *t = NULL;
    csv_log csv = {0};
    if (sm_pool_create(&pool, (int)o->threads)) {
        fprintf(stderr, "smallmind: cannot start %ld threads\n", o->threads);
        rc = EXIT_DATA;
        goto done;
    }
    if (sm_trainer_create(&t, &shape, &hp, (const uint8_t *)text, n_train, n_val, k, pool, &err) ||
        (o->resume && sm_trainer_load(t, o->resume, &err))) {
        rc = cli_data_error(err.msg);
        goto done;
    }
    csv.cap = sizeof CSV_HEADER + (size_t)(hp.steps + 2) * CSV_ROW_MAX;
    csv.buf = malloc(csv.cap);
    if (!csv.buf) {
        rc = cli_data_error("out of memory for the loss log");
        goto done;
    }
    memcpy(csv.buf, CSV_HEADER, sizeof CSV_HEADER - 1);
    csv.len = sizeof CSV_HEADER - 1;
    int first = sm_trainer_step_index(t);
    double elapsed0 = o->resume ? csv_resume(&csv, o->resume, first) : 0;
    size_t tok_per_step = (size_t)hp.batch * (size_t)shape.n_ctx;
    bool tty = isatty(STDERR_FILENO), progress = !o->quiet;
    if (!o->quiet)
        fprintf(stderr,
                "smallmind: training %d layers, %d heads, %d wide, context %d: %zu parameters; "
                "%zu bytes train, %zu held out; %d steps of %d x %d tokens from step %d; "
                "%s kernels, %ld threads, %zu MiB\n",
                shape.n_layer, shape.n_head, shape.n_embd, shape.n_ctx, sm_trainer_params(t),
                n_train, n_val, hp.steps, hp.batch, shape.n_ctx, first, k->name, o->threads,
                sm_trainer_arena_bytes(t) >> 20);

    double t_start = sm_time_now(), tps = 0, last_val = -1, last_loss = 0, t_shown = 0;
    cli_exit_now = 0; /* from here a signal ends the step in flight and writes a checkpoint */
    while (sm_trainer_step_index(t) < hp.steps && !cli_interrupted) {
        double t0 = sm_time_now();
        sm_train_stats s;
        if (sm_trainer_step(t, &s, &err)) {
            rc = cli_data_error(err.msg);
            break;
        }
        double dt = sm_time_now() - t0;
        tps = (double)tok_per_step / dt;
        last_loss = s.loss;
        double val = -1;
        if ((o->eval_every && s.step % o->eval_every == 0) || s.step == hp.steps)
            val = last_val = sm_trainer_eval(t, (int)o->eval_seqs);
        double run = sm_time_now() - t_start, elapsed = elapsed0 + run;
        csv_add(&csv, s.step, s.lr, s.loss, val, s.grad_norm, tps, elapsed);
        bool show = tty ? run - t_shown >= 0.1 : s.step % o->log_every == 0;
        if (progress && (show || val >= 0 || s.step == hp.steps)) {
            t_shown = run;
            char el[32], eta[32], vs[48] = "";
            fmt_time(el, sizeof el, elapsed);
            fmt_time(eta, sizeof eta, run / (s.step - first) * (hp.steps - s.step));
            if (last_val >= 0) snprintf(vs, sizeof vs, "  val %.4f", last_val);
            fprintf(stderr, "%sstep %d/%d  loss %.4f%s  lr %.2e  %.0f tok/s  %s  ETA %s%s",
                    tty ? "\r\033[K" : "", s.step, hp.steps, s.loss, vs, s.lr, tps, el, eta,
                    tty && s.step < hp.steps ? "" : "\n");
        }
        if (o->ckpt_every && s.step % o->ckpt_every == 0 && s.step < hp.steps &&
            sm_trainer_save(t, out, csv.buf, csv.len, &err)) {
            rc = cli_data_error(err.msg);
            break;
        }
    }
    if (rc) goto done;
    if (tty && progress && cli_interrupted) fputc('\n', stderr);
    if (sm_trainer_save(t, out, csv.buf, csv.len, &err)) {
        rc = cli_data_error(err.msg);
        goto done;
    }
    int step = sm_trainer_step_index(t);
    if (cli_interrupted) {
        fprintf(stderr, "smallmind: interrupted at step %d of %d; checkpoint in '%s' "
                        "(continue with --resume %s)\n", step, hp.steps, out, out);
        rc = cli_interrupt_code();
    } else if (!o->quiet) {
        double run = sm_time_now() - t_start;
        char el[32];
        fmt_time(el, sizeof el, run);
        fprintf(stderr, "smallmind: %d steps (%llu tokens) in %s, %.0f tokens/s", step - first,
                (unsigned long long)(step - first) * tok_per_step, el,
                run > 0 ? (double)(step - first) * (double)tok_per_step / run : 0);
        if (step > first)
            fprintf(stderr, "; train loss %.4f (%.3f bits/byte)", last_loss, last_loss / LN2);
        if (last_val >= 0)
            fprintf(stderr, ", held-out %.4f (%.3f bits/byte)", last_val, last_val / LN2);
        fprintf(stderr, "; model in '%s'\n", out);
    }
done:
    free(csv.buf);
    sm_trainer_free(t);
    sm_pool_free(pool);
    free(text);
    return rc;
}
