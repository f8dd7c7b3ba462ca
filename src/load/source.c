/*
** source.c -- the loading layer's entry (sm_source.h): what a path is,
** decided once, and each kind opened into a config, a pointer per tensor
** and where its tokenizer is.
**
** A planned source (a Hugging Face directory, a llama2.c checkpoint) is run
** as it is: a tensor that is one source tensor copied as it is, in f32, f16
** or bf16, at an address aligned for its type, is used in place in the
** mapped file (a Llama's Q, K and V too: kept apart, a Hugging Face one's
** rotated by halves as stored, cfg.rope_halves; a llama2.c checkpoint thus
** runs with nothing made); the others (GPT-2's Conv1D weights, which need
** a transpose; 16-bit norms and biases,
** which the model takes as f32; a misaligned tensor) are made once, into
** one heap block, in the source's type (vectors f32). A GGUF file's
** tensors lie at multiples of its general.alignment; those under
** SM_GGUF_MIN_ALIGN (a file may say 1) are copied into that block too.
*/
#include "sm_source.h"

#include "json_internal.h"
#include "sm_plan.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ------------------------------------------------------------ kinds */

/* dir's config.json: 1 if it says "format": "smallmind", 2 if it has "model_type" and no "format"
   (Hugging Face), else 0 (then loading it as smallmind's says what is wrong). */
static int config_kind(const char *dir) {
    char path[4400];
    cJSON *j = NULL;
    sm_error e;
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (sm_json_read_file(path, 64u << 20, &j, &e)) return 0;
    int kind = 0;
    if (cJSON_IsObject(j)) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(j, "format");
        if (cJSON_IsString(f) && strcmp(f->valuestring, "smallmind") == 0)
            kind = 1;
        else if (!f && cJSON_GetObjectItemCaseSensitive(j, "model_type"))
            kind = 2;
    }
    cJSON_Delete(j);
    return kind;
}

bool sm_source_gguf_name(const char *path) {
    size_t n = strlen(path);
    return n > 5 && strcmp(path + n - 5, ".gguf") == 0;
}

static bool gguf_magic(const char *path) {
    unsigned char h[4];
    FILE *f = fopen(path, "rb");
    bool yes = f && fread(h, 1, 4, f) == 4 && sm_gguf_magic(h, 4);
    if (f) fclose(f);
    return yes;
}

sm_status sm_source_kind_of(const char *path, sm_source_kind *kind, sm_error *err) {
    struct stat sb;
    if (stat(path, &sb) != 0)
        return sm_error_set(err, SM_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    if (S_ISDIR(sb.st_mode)) {
        *kind = config_kind(path) == 2 ? SM_SOURCE_HF : SM_SOURCE_SMALLMIND;
        return SM_OK;
    }
    if (!S_ISREG(sb.st_mode)) /* a FIFO would block the open for ever */
        return sm_error_set(err, SM_ERR_INPUT, "'%s' is not a regular file (a model is a directory with "
                            "config.json, a GGUF file or a llama2.c checkpoint)", path);
    /* an empty file is not a GGUF file either (its message says so) */
    bool gguf = sb.st_size == 0 || gguf_magic(path) || sm_source_gguf_name(path);
    *kind = gguf ? SM_SOURCE_GGUF : SM_SOURCE_LLAMA2C;
    return SM_OK;
}

const char *sm_source_kind_name(sm_source_kind kind) {
    static const char *const names[] = {"smallmind directory", "GGUF file", "Hugging Face directory",
                                        "llama2.c checkpoint"};
    return (unsigned)kind < 4 ? names[kind] : "?";
}

/* ------------------------------------------------------ planned sources */

/* The type tensor t is kept in: its parts' type if they agree (vectors f32), else f32. */
static sm_dtype kept_type(const sm_plan_tensor *t) {
    sm_dtype dt = t->parts[0].dt;
    for (int k = 1; k < t->n_parts; k++)
        if (t->parts[k].dt != dt) dt = SM_DTYPE_F32;
    return t->cols ? dt : SM_DTYPE_F32;
}

static bool in_place(const sm_plan_tensor *t) {
    const sm_plan_part *p = &t->parts[0];
    return t->n_parts == 1 && p->op == SM_OP_COPY && kept_type(t) == p->dt &&
           (uintptr_t)p->src % sm_dtype_row_bytes(p->dt, 1) == 0;
}

/* Tensor t made into dst (rows x cols of dt): exact, the values are 16-bit or f32 sources' own. */
static sm_status make(const sm_plan_tensor *t, sm_dtype dt, unsigned char *dst, float *row, sm_error *err) {
    size_t rb = (size_t)(t->cols ? t->cols : 1) * sm_dtype_row_bytes(dt, 1);
    int64_t orow = 0;
    sm_status st = SM_OK;
    for (int k = 0; k < t->n_parts && !st; k++)
        for (int64_t r = 0; r < t->parts[k].rows && !st; r++, orow++)
            st = sm_plan_plain_row(t, k, r, orow, dt, row, dst + (size_t)orow * rb, err);
    return st;
}

/* The config of a planned source (each tensor in its kept type) and, with weights, its data. */
static sm_status open_planned(sm_source *s, bool weights, sm_error *err) {
    sm_plan *pl = s->pl;
    sm_config *cfg = &s->cfg;
    *cfg = pl->cfg;
    pl->cfg.tensors = NULL; /* the source's config owns the chat strings now */
    pl->cfg.chat_template = pl->cfg.chat_bos = pl->cfg.chat_eos = NULL;
    cfg->n_tensors = pl->n;
    cfg->n_files = pl->n_maps; /* the files the weights are used from (info says how many) */
    cfg->tensors = calloc(pl->n ? pl->n : 1, sizeof *cfg->tensors);
    s->w.cfg = cfg;
    s->w.data = calloc(pl->n ? pl->n : 1, sizeof *s->w.data);
    if (!cfg->tensors || !s->w.data) return sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    size_t need = 0, maxc = 1;
    for (size_t i = 0; i < pl->n; i++) {
        const sm_plan_tensor *t = &pl->t[i];
        sm_tensor_desc *td = &cfg->tensors[i];
        snprintf(td->name, sizeof td->name, "%s", t->name);
        td->dtype = kept_type(t);
        td->ndim = t->cols ? 2 : 1;
        td->shape[0] = t->rows, td->shape[1] = t->cols;
        td->nelem = (size_t)t->rows * (size_t)(t->cols ? t->cols : 1);
        td->nbytes = td->nelem * sm_dtype_row_bytes(td->dtype, 1);
        if (weights && !in_place(t)) need += (td->nbytes + 63) & ~(size_t)63, s->made_tensors++;
        if ((size_t)t->cols > maxc) maxc = (size_t)t->cols;
    }
    for (int k = 0; k < 2; k++) /* the tokenizer's files: names in cfg, their directory here */
        if (pl->tok_src[k][0]) {
            const char *slash = strrchr(pl->tok_src[k], '/');
            snprintf(cfg->tok_file[k], SM_FILE_NAME_MAX, "%s", slash ? slash + 1 : pl->tok_src[k]);
            if (k == 0)
                snprintf(s->tok_dir, sizeof s->tok_dir, "%.*s", slash ? (int)(slash - pl->tok_src[0]) : 1,
                         slash ? pl->tok_src[0] : ".");
        }
    if (!weights) return SM_OK;
    float *row = malloc(maxc * sizeof *row);
    if (!row || (need && !(s->block = aligned_alloc(64, need)))) {
        free(row);
        return sm_error_set(err, SM_ERR_NOMEM, "cannot allocate %zu bytes for the tensors %s makes",
                            need, s->path);
    }
    s->made_bytes = need;
    size_t at = 0;
    sm_status st = SM_OK;
    for (size_t i = 0; i < pl->n && !st; i++) {
        const sm_plan_tensor *t = &pl->t[i];
        if (in_place(t)) {
            s->w.data[i] = t->parts[0].src;
            continue;
        }
        st = make(t, cfg->tensors[i].dtype, s->block + at, row, err);
        s->w.data[i] = s->block + at;
        at += (cfg->tensors[i].nbytes + 63) & ~(size_t)63;
    }
    free(row);
    return st;
}

/* A GGUF file's tensors: in place, those the kernels cannot read where they lie copied. */
static sm_status open_gguf_tensors(sm_source *s, sm_error *err) {
    sm_status st = sm_weights_in_place(&s->w, &s->cfg, s->gguf.base, err);
    size_t total = 0;
    for (size_t i = 0; !st && i < s->cfg.n_tensors; i++)
        if ((uintptr_t)s->w.data[i] % SM_GGUF_MIN_ALIGN) {
            size_t sz;
            if (!sm_size_align(&sz, s->cfg.tensors[i].nbytes, 64) || !sm_size_add(&total, total, sz))
                return sm_error_set(err, SM_ERR_FORMAT, "%s: tensor sizes overflow", s->path);
            s->made_tensors++;
        }
    if (st || !total) return st;
    if (!(s->block = aligned_alloc(64, total)))
        return sm_error_set(err, SM_ERR_NOMEM, "out of memory copying %zu misaligned tensors (%zu bytes)",
                            s->made_tensors, total);
    unsigned char *at = s->block;
    for (size_t i = 0; i < s->cfg.n_tensors; i++)
        if ((uintptr_t)s->w.data[i] % SM_GGUF_MIN_ALIGN) {
            memcpy(at, s->w.data[i], s->cfg.tensors[i].nbytes);
            s->w.data[i] = at;
            s->made_bytes += s->cfg.tensors[i].nbytes;
            at += (s->cfg.tensors[i].nbytes + 63) & ~(size_t)63;
        }
    return SM_OK;
}

/* ------------------------------------------------------------- opening */

sm_status sm_source_open(sm_source **out, const char *path, const sm_source_opts *opts, sm_error *err) {
    static const sm_source_opts none = {0};
    const sm_source_opts *o = opts ? opts : &none;
    *out = NULL;
    sm_source_kind kind;
    sm_status st = sm_source_kind_of(path, &kind, err);
    if (st) return st;
    sm_source *s = calloc(1, sizeof *s);
    if (!s) return sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    s->kind = kind;
    snprintf(s->path, sizeof s->path, "%s", path);
    snprintf(s->tok_dir, sizeof s->tok_dir, "%s", path);
    bool weights = !o->no_weights;
    if (o->tokenizer && (kind == SM_SOURCE_GGUF || kind == SM_SOURCE_SMALLMIND)) {
        st = sm_error_set(err, SM_ERR_INPUT, "--tokenizer is for a llama2.c checkpoint or a Hugging Face "
                          "directory; '%s' is a %s with its own tokenizer", path, sm_source_kind_name(kind));
        goto fail;
    }
    switch (kind) {
    case SM_SOURCE_SMALLMIND:
        if (!(st = sm_config_load(&s->cfg, path, err)) && weights)
            st = sm_weights_open(&s->w, &s->cfg, path, !o->read, err);
        break;
    case SM_SOURCE_GGUF:
        if ((st = sm_gguf_open(&s->gguf, path, !o->read, err))) break;
        st = weights ? sm_gguf_config(&s->cfg, &s->gguf, path, err)
                     : sm_gguf_vocab_config(&s->cfg, &s->gguf, path, err);
        if (!st && weights) st = open_gguf_tensors(s, err);
        break;
    case SM_SOURCE_HF:
    case SM_SOURCE_LLAMA2C:
        if (!(s->pl = calloc(1, sizeof *s->pl))) {
            st = sm_error_set(err, SM_ERR_NOMEM, "out of memory");
            break;
        }
        s->pl->in_place = !o->plan_only;
        s->pl->read = o->read;
        s->pl->from_dir = kind == SM_SOURCE_HF;
        st = kind == SM_SOURCE_HF ? sm_plan_hf(s->pl, path, o->tokenizer, err)
                                  : sm_plan_llama2c(s->pl, path, o->tokenizer, err);
        if (!st && s->pl->nomem) st = sm_error_set(err, SM_ERR_NOMEM, "out of memory planning %s", path);
        if (!st && !o->plan_only) st = open_planned(s, weights, err);
        break;
    }
    if (st) goto fail;
    *out = s;
    return SM_OK;
fail:
    sm_source_close(s);
    return st;
}

bool sm_source_file_backed(const sm_source *s, const void *p, size_t n) {
    const unsigned char *a = p;
#define IN(b, sz) ((b) && a >= (const unsigned char *)(b) && n <= (sz) && \
                   (size_t)(a - (const unsigned char *)(b)) <= (sz) - n)
    if (s->kind == SM_SOURCE_GGUF) return s->gguf.mapped && IN(s->gguf.base, s->gguf.size);
    for (int i = 0; i < SM_MAX_FILES; i++)
        if (s->w.files[i].mapped && IN(s->w.files[i].base, s->w.files[i].size)) return true;
    return false;
#undef IN
}

void sm_source_close(sm_source *s) {
    if (!s) return;
    sm_weights_close(&s->w); /* its files (a smallmind directory's), its pointers */
    sm_config_free(&s->cfg);
    sm_gguf_close(&s->gguf);
    if (s->pl) sm_plan_free(s->pl);
    free(s->pl);
    free(s->block);
    free(s);
}

sm_status sm_source_tokenizer(const sm_source *s, sm_tokenizer *t, sm_error *err) {
    return sm_tokenizer_init(t, &s->cfg, s->tok_dir, s->kind == SM_SOURCE_GGUF ? &s->gguf : NULL, err);
}

struct sm_plan *sm_source_plan(sm_source *s) {
    return s->pl;
}
