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

#include "sm_model.h"
#include "sm_weights.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define OPT_MAGIC "SMOPTIM"
#define OPT_VERSION 1
#define OPT_HEADER 256

/* Writes all of buf to path (created), fsynced. */
static sm_status write_file(const char *path, const void *a, size_t na, const void *b, size_t nb,
                            sm_error *err) {
    FILE *f = fopen(path, "wb");
    if (!f) return sm_error_set(err, SM_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
    bool ok = fwrite(a, 1, na, f) == na && (nb == 0 || fwrite(b, 1, nb, f) == nb) &&
              fflush(f) == 0 && fsync(fileno(f)) == 0;
    int e = errno;
    if (fclose(f) != 0 && ok) {
        ok = false;
        e = errno;
    }
    return ok ? SM_OK : sm_error_set(err, SM_ERR_IO, "cannot write '%s': %s", path, strerror(e));
}

/* Removes the regular files of a directory we wrote, then the directory. */
static void remove_dir(const char *path) {
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
                unlinkat(dirfd(d), e->d_name, 0);
        closedir(d);
    }
    rmdir(path);
}

/* 0: missing; 1: a checkpoint or empty directory (replaceable); -1: refuse. */
static int dir_state(const char *dir) {
    struct stat sb;
    if (stat(dir, &sb) != 0) return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(sb.st_mode)) return -1;
    char p[4200];
    snprintf(p, sizeof p, "%s/optimizer.bin", dir);
    if (access(p, F_OK) == 0) return 1;
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n == 0 ? 1 : -1;
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
    sm_write_u64le(h + 56, sm_train_hash(t->text, t->n_train + t->n_val));
    const int ints[] = {c->n_layer, c->n_head, c->n_embd, c->n_ctx, c->tied_output, c->bias,
                        hp->batch, hp->steps, hp->warmup};
    for (int i = 0; i < 9; i++) sm_write_u32le(h + 64 + 4 * i, (uint32_t)ints[i]);
    const float fl[] = {hp->lr, hp->lr_min, hp->weight_decay, hp->grad_clip, hp->beta1,
                        hp->beta2, hp->adam_eps, c->norm_eps};
    for (int i = 0; i < 8; i++) put_f32(h + 100 + 4 * i, fl[i]);
}

sm_status sm_trainer_save(const sm_trainer *t, const char *dir, const char *csv, size_t csv_len,
                          sm_error *err) {
    int state = dir_state(dir);
    if (state < 0)
        return sm_error_set(err, SM_ERR_INPUT,
                            "'%s' exists and is not a smallmind training checkpoint; not "
                            "overwriting it",
                            dir);
    char tmp[4200], p[4300];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp-%ld", dir, (long)getpid()) >= sizeof tmp)
        return sm_error_set(err, SM_ERR_INPUT, "output path '%s' is too long", dir);
    remove_dir(tmp);
    if (mkdir(tmp, 0755) != 0)
        return sm_error_set(err, SM_ERR_IO, "cannot create '%s': %s", tmp, strerror(errno));

    sm_status st;
    char *json = NULL;
    if ((st = sm_config_to_json(&t->cfg, &json, err))) goto fail;
    snprintf(p, sizeof p, "%s/config.json", tmp);
    st = write_file(p, json, strlen(json), "\n", 1, err);
    sm_config_json_free(json);
    if (st) goto fail;

    unsigned char wh[SM_WEIGHTS_HEADER] = {0};
    memcpy(wh, SM_WEIGHTS_MAGIC, 8);
    sm_write_u32le(wh + 8, 1);
    sm_write_u32le(wh + 12, SM_WEIGHTS_HEADER);
    snprintf(p, sizeof p, "%s/model.bin", tmp);
    if ((st = write_file(p, wh, sizeof wh, t->params, t->n_floats * sizeof(float), err)))
        goto fail;

    unsigned char oh[OPT_HEADER];
    opt_header(t, oh);
    snprintf(p, sizeof p, "%s/optimizer.bin", tmp);
    FILE *f = fopen(p, "wb");
    if (!f) {
        st = sm_error_set(err, SM_ERR_IO, "cannot create '%s': %s", p, strerror(errno));
        goto fail;
    }
    size_t n = t->n_floats;
    bool ok = fwrite(oh, 1, OPT_HEADER, f) == OPT_HEADER && fwrite(t->m, 4, n, f) == n &&
              fwrite(t->v, 4, n, f) == n && fflush(f) == 0 && fsync(fileno(f)) == 0;
    if (fclose(f) != 0) ok = false;
    if (!ok) {
        st = sm_error_set(err, SM_ERR_IO, "cannot write '%s': %s", p, strerror(errno));
        goto fail;
    }

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
    if ((st = write_file(p, info, (size_t)len, NULL, 0, err))) goto fail;
    if (csv) {
        snprintf(p, sizeof p, "%s/loss.csv", tmp);
        if ((st = write_file(p, csv, csv_len, NULL, 0, err))) goto fail;
    }

    if (state == 0) {
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
        remove_dir(old);
        return SM_OK;
    }
    remove_dir(tmp);
    return SM_OK;
fail:
    remove_dir(tmp);
    return st;
}

/* Reads and checks optimizer.bin's header. */
static sm_status read_opt_header(const char *dir, unsigned char h[OPT_HEADER], FILE **keep,
                                 sm_error *err) {
    char p[4200];
    snprintf(p, sizeof p, "%s/optimizer.bin", dir);
    FILE *f = fopen(p, "rb");
    if (!f)
        return sm_error_set(err, SM_ERR_IO, "cannot open '%s': %s (is '%s' a training checkpoint?)",
                            p, strerror(errno), dir);
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
    sm_model *m = NULL;
    sm_status st = sm_model_load(&m, dir, true, err);
    if (st) return st;
    const sm_config *mc = sm_model_config(m);
    if (mc->n_tensors != t->cfg.n_tensors || mc->n_layer != t->cfg.n_layer ||
        mc->n_embd != t->cfg.n_embd || mc->n_head != t->cfg.n_head ||
        mc->n_ctx != t->cfg.n_ctx || mc->n_vocab != t->cfg.n_vocab) {
        sm_model_free(m);
        return sm_error_set(err, SM_ERR_FORMAT, "%s/config.json: shape differs from optimizer.bin",
                            dir);
    }
    /* parameters: copy each tensor through the model's validated view */
    sm_weights w;
    if ((st = sm_weights_open(&w, mc, dir, true, err))) {
        sm_model_free(m);
        return st;
    }
    for (size_t i = 0; i < t->cfg.n_tensors; i++) {
        long j = sm_weights_find(&w, t->cfg.tensors[i].name);
        if (j < 0 || mc->tensors[j].nbytes != t->cfg.tensors[i].nbytes ||
            mc->tensors[j].dtype != SM_DTYPE_F32) {
            st = sm_error_set(err, SM_ERR_FORMAT, "%s: tensor %s is missing or differs", dir,
                              t->cfg.tensors[i].name);
            break;
        }
        memcpy(t->params + t->offset[i], w.data[j], t->cfg.tensors[i].nbytes);
    }
    sm_weights_close(&w);
    sm_model_free(m);
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
    uint64_t step = sm_read_u64le(h + 16);
    if (step > (uint64_t)t->hp.steps)
        return sm_error_set(err, SM_ERR_FORMAT, "%s/optimizer.bin: step %llu is past %d", dir,
                            (unsigned long long)step, t->hp.steps);
    t->step = (int)step;
    return SM_OK;
}
