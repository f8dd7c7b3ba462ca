/*
** checkpoint.c -- a trainer to and from a model directory.
**
** A checkpoint is an ordinary model directory (config.json, model.bin) that
** generate and score load, plus optimizer.bin (a 256-byte header with the
** step, shape, hyperparameters and the identity of the training text, then
** the two AdamW moments in the parameter layout), train.json (the same
** facts for people) and loss.csv. It is written into a temporary sibling and
** swapped in with one rename, so the directory is never half-written.
*/
#define _GNU_SOURCE /* renameat2 */
#include "train_internal.h"

#include "sm_weights.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define OPT_MAGIC "SMOPTIM"
#define OPT_VERSION 1
#define OPT_HEADER 256

sm_status sm_checkpoint_writable(const char *dir, sm_error *err) {
    struct stat sb;
    bool ok;
    if (stat(dir, &sb) != 0) {
        ok = errno == ENOENT;
    } else if (!S_ISDIR(sb.st_mode)) {
        ok = false;
    } else {
        char p[4200];
        snprintf(p, sizeof p, "%s/optimizer.bin", dir);
        ok = access(p, F_OK) == 0;
        DIR *d = ok ? NULL : opendir(dir);
        if (d) { /* an empty directory is fine too */
            struct dirent *e;
            ok = true;
            while (ok && (e = readdir(d))) ok = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
            closedir(d);
        }
    }
    if (!ok)
        return sm_error_set(err, SM_ERR_INPUT,
                            "'%s' exists and is not a smallmind training checkpoint; not "
                            "overwriting it",
                            dir);
    /* A checkpoint is written to DIR.tmp-PID, then renamed: try that now,
       before any training, and clear what killed runs left there. */
    sm_remove_stale_tmp(dir);
    char tmp[4200];
    if (!*dir || (size_t)snprintf(tmp, sizeof tmp, "%s.tmp-%ld", dir, (long)getpid()) >= sizeof tmp)
        return sm_error_set(err, SM_ERR_INPUT, "output path '%s' is empty or too long", dir);
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
        return sm_error_set(err, SM_ERR_IO, "cannot write a checkpoint to '%s': cannot create '%s': %s",
                            dir, tmp, strerror(errno));
    rmdir(tmp);
    return SM_OK;
}

static void put_f32(unsigned char *p, float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    sm_write_u32le(p, u);
}

static float get_f32(const unsigned char *p) {
    uint32_t u = sm_read_u32le(p);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void opt_header(const sm_trainer *t, unsigned char h[OPT_HEADER]) {
    const sm_config *c = &t->cfg;
    const sm_train_hparams *hp = &t->hp;
    memset(h, 0, OPT_HEADER);
    memcpy(h, OPT_MAGIC, 8);
    sm_write_u32le(h + 8, OPT_VERSION);
    sm_write_u32le(h + 12, OPT_HEADER);
    sm_write_u64le(h + 16, (uint64_t)t->step);
    sm_write_u64le(h + 24, t->n_floats);
    sm_write_u64le(h + 32, hp->seed);
    sm_write_u64le(h + 40, t->n_train);
    sm_write_u64le(h + 48, t->n_val);
    sm_write_u64le(h + 56, sm_hash_bytes(t->text, t->n_train + t->n_val));
    const int ints[] = {c->n_layer, c->n_head, c->n_embd, c->n_ctx, c->tied_output, c->bias,
                        hp->batch, hp->steps, hp->warmup};
    for (int i = 0; i < 9; i++) sm_write_u32le(h + 64 + 4 * i, (uint32_t)ints[i]);
    const float fl[] = {hp->lr, hp->lr_min, hp->weight_decay, hp->grad_clip, hp->beta1,
                        hp->beta2, hp->adam_eps, c->norm_eps};
    for (int i = 0; i < 8; i++) put_f32(h + 100 + 4 * i, fl[i]);
}

sm_status sm_trainer_save(const sm_trainer *t, const char *dir, const char *csv, size_t csv_len,
                          sm_error *err) {
    sm_status st = sm_checkpoint_writable(dir, err);
    if (st) return st;
    struct stat sb;
    bool exists = stat(dir, &sb) == 0;
    char tmp[4200], p[4300];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp-%ld", dir, (long)getpid()) >= sizeof tmp)
        return sm_error_set(err, SM_ERR_INPUT, "output path '%s' is too long", dir);
    sm_remove_dir(tmp);
    if (mkdir(tmp, 0755) != 0)
        return sm_error_set(err, SM_ERR_IO, "cannot create '%s': %s", tmp, strerror(errno));

    char *json = NULL;
    if ((st = sm_config_to_json(&t->cfg, &json, err))) goto fail;
    snprintf(p, sizeof p, "%s/config.json", tmp);
    st = sm_write_file(p, (sm_piece[]){{json, strlen(json)}, {"\n", 1}}, 2, err);
    sm_config_json_free(json);
    if (st) goto fail;

    unsigned char wh[SM_WEIGHTS_HEADER];
    sm_weights_header(wh);
    snprintf(p, sizeof p, "%s/model.bin", tmp);
    if ((st = sm_write_file(p, (sm_piece[]){{wh, sizeof wh}, {t->params, t->n_floats * sizeof(float)}},
                         2, err)))
        goto fail;

    unsigned char oh[OPT_HEADER];
    opt_header(t, oh);
    snprintf(p, sizeof p, "%s/optimizer.bin", tmp);
    size_t nb = t->n_floats * sizeof(float);
    if ((st = sm_write_file(p, (sm_piece[]){{oh, OPT_HEADER}, {t->m, nb}, {t->v, nb}}, 3, err)))
        goto fail;

    const sm_train_hparams *hp = &t->hp;
    char info[1024];
    int len = snprintf(info, sizeof info,
                       "{\n \"step\": %d,\n \"steps\": %d,\n \"batch\": %d,\n \"warmup\": %d,\n"
                       " \"lr\": %.9g,\n \"lr_min\": %.9g,\n \"weight_decay\": %.9g,\n"
                       " \"grad_clip\": %.9g,\n \"beta1\": %.9g,\n \"beta2\": %.9g,\n \"adam_eps\": %.9g,\n"
                       " \"seed\": %llu,\n \"train_bytes\": %zu,\n \"val_bytes\": %zu,\n"
                       " \"tokens_seen\": %llu\n}\n",
                       t->step, hp->steps, hp->batch, hp->warmup, (double)hp->lr,
                       (double)hp->lr_min, (double)hp->weight_decay, (double)hp->grad_clip,
                       (double)hp->beta1, (double)hp->beta2, (double)hp->adam_eps,
                       (unsigned long long)hp->seed,
                       t->n_train, t->n_val,
                       (unsigned long long)t->step * t->B * t->T);
    snprintf(p, sizeof p, "%s/train.json", tmp);
    if ((st = sm_write_file(p, &(sm_piece){info, (size_t)len}, 1, err))) goto fail;
    if (csv) {
        snprintf(p, sizeof p, "%s/loss.csv", tmp);
        if ((st = sm_write_file(p, &(sm_piece){csv, csv_len}, 1, err))) goto fail;
    }

    if (!exists) {
        if (rename(tmp, dir) != 0) {
            st = sm_error_set(err, SM_ERR_IO, "cannot rename '%s' to '%s': %s", tmp, dir,
                              strerror(errno));
            goto fail;
        }
        return SM_OK;
    }
    /* swap atomically; the old checkpoint then sits at tmp */
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, dir, RENAME_EXCHANGE) != 0) {
        char old[4300];
        snprintf(old, sizeof old, "%s.old-%ld", dir, (long)getpid());
        if (rename(dir, old) != 0 || rename(tmp, dir) != 0) {
            st = sm_error_set(err, SM_ERR_IO, "cannot replace '%s': %s", dir, strerror(errno));
            goto fail;
        }
        sm_remove_dir(old);
        return SM_OK;
    }
    sm_remove_dir(tmp);
    return SM_OK;
fail:
    sm_remove_dir(tmp);
    return st;
}

/* Reads and checks optimizer.bin's header. */
static sm_status read_opt_header(const char *dir, unsigned char h[OPT_HEADER], FILE **keep,
                                 sm_error *err) {
    char p[4200];
    snprintf(p, sizeof p, "%s/optimizer.bin", dir);
    int fd;
    size_t size;
    sm_error oerr;
    if (sm_open_regular(p, &fd, &size, &oerr))
        return sm_error_set(err, SM_ERR_IO, "%s (is '%s' a training checkpoint?)", oerr.msg, dir);
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return sm_error_set(err, SM_ERR_IO, "cannot open '%s': %s", p, strerror(errno));
    }
    if (fread(h, 1, OPT_HEADER, f) != OPT_HEADER || memcmp(h, OPT_MAGIC, 8) != 0 ||
        sm_read_u32le(h + 12) != OPT_HEADER) {
        fclose(f);
        return sm_error_set(err, SM_ERR_FORMAT, "%s: not a smallmind optimizer state", p);
    }
    if (sm_read_u32le(h + 8) != OPT_VERSION) {
        fclose(f);
        return sm_error_set(err, SM_ERR_UNSUPPORTED, "%s: version %u is not supported", p,
                            sm_read_u32le(h + 8));
    }
    if (keep)
        *keep = f;
    else
        fclose(f);
    return SM_OK;
}

sm_status sm_checkpoint_peek(const char *dir, sm_checkpoint_info *info, sm_error *err) {
    memset(info, 0, sizeof *info);
    unsigned char h[OPT_HEADER];
    sm_status st = read_opt_header(dir, h, NULL, err);
    if (st) return st;
    sm_config *c = &info->shape;
    sm_train_hparams *hp = &info->hp;
    c->arch = SM_ARCH_GPT2;
    c->activation = SM_ACT_GELU_TANH;
    c->tokenizer = SM_TOKENIZER_BYTE;
    c->n_vocab = 256;
    int v[9];
    for (int i = 0; i < 9; i++) v[i] = (int)sm_read_u32le(h + 64 + 4 * i);
    c->n_layer = v[0], c->n_head = v[1], c->n_embd = v[2], c->n_ctx = v[3];
    c->tied_output = v[4] != 0, c->bias = v[5] != 0;
    hp->batch = v[6], hp->steps = v[7], hp->warmup = v[8];
    float *fl[] = {&hp->lr, &hp->lr_min, &hp->weight_decay, &hp->grad_clip, &hp->beta1,
                   &hp->beta2, &hp->adam_eps, &c->norm_eps};
    for (int i = 0; i < 8; i++) *fl[i] = get_f32(h + 100 + 4 * i);
    hp->seed = sm_read_u64le(h + 32);
    uint64_t step = sm_read_u64le(h + 16);
    info->n_train = sm_read_u64le(h + 40);
    info->n_val = sm_read_u64le(h + 48);
    info->data_hash = sm_read_u64le(h + 56);
    if ((st = sm_train_check(c, hp, err)) || step > (uint64_t)hp->steps)
        return st ? st
                  : sm_error_set(err, SM_ERR_FORMAT, "%s/optimizer.bin: step %llu is past %d",
                                 dir, (unsigned long long)step, hp->steps);
    info->step = (int)step;
    return SM_OK;
}

sm_status sm_trainer_load(sm_trainer *t, const char *dir, sm_error *err) {
    unsigned char h[OPT_HEADER];
    FILE *f = NULL;
    sm_config mc;
    sm_status st = sm_config_load(&mc, dir, err);
    if (st) return st;
    sm_weights w;
    if (mc.n_tensors != t->cfg.n_tensors || mc.n_head != t->cfg.n_head) {
        st = sm_error_set(err, SM_ERR_FORMAT, "%s/config.json: shape differs from optimizer.bin",
                          dir);
    } else if (!(st = sm_weights_open(&w, &mc, dir, true, err))) {
        /* parameters: each tensor by name, its shape checked against the trainer's */
        for (size_t i = 0; i < t->cfg.n_tensors && !st; i++) {
            const sm_tensor_desc *want = &t->cfg.tensors[i];
            long j = sm_weights_find(&w, want->name);
            const sm_tensor_desc *have = j < 0 ? NULL : &mc.tensors[j];
            if (!have || have->dtype != SM_DTYPE_F32 || have->ndim != want->ndim ||
                memcmp(have->shape, want->shape, (size_t)want->ndim * sizeof *want->shape) != 0)
                st = sm_error_set(err, SM_ERR_FORMAT, "%s: tensor %s is missing or differs", dir,
                                  want->name);
            else
                memcpy(t->params + t->offset[i], w.data[j], want->nbytes);
        }
        sm_weights_close(&w);
    }
    sm_config_free(&mc);
    if (st) return st;
    if ((st = read_opt_header(dir, h, &f, err))) return st;
    if (sm_read_u64le(h + 24) != t->n_floats) {
        fclose(f);
        return sm_error_set(err, SM_ERR_FORMAT, "%s/optimizer.bin: holds %llu floats, expected %zu",
                            dir, (unsigned long long)sm_read_u64le(h + 24), t->n_floats);
    }
    size_t n = t->n_floats;
    bool ok = fread(t->m, 4, n, f) == n && fread(t->v, 4, n, f) == n && fgetc(f) == EOF;
    fclose(f);
    if (!ok)
        return sm_error_set(err, SM_ERR_FORMAT, "%s/optimizer.bin: truncated or too long", dir);
    for (size_t i = 0; i < n; i++) /* Adam's moments: finite, and the second never negative */
        if (!isfinite(t->m[i]) || !isfinite(t->v[i]) || t->v[i] < 0)
            return sm_error_set(err, SM_ERR_FORMAT,
                                "%s/optimizer.bin: moment %zu is %s (%g, %g); the optimizer "
                                "state is damaged",
                                dir, i, !isfinite(t->m[i]) || !isfinite(t->v[i]) ? "not finite" : "negative",
                                (double)t->m[i], (double)t->v[i]);
    uint64_t step = sm_read_u64le(h + 16);
    if (step > (uint64_t)t->hp.steps)
        return sm_error_set(err, SM_ERR_FORMAT, "%s/optimizer.bin: step %llu is past %d", dir,
                            (unsigned long long)step, t->hp.steps);
    t->step = (int)step;
    return SM_OK;
}
