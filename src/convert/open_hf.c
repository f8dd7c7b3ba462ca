/*
** open_hf.c -- a Hugging Face directory run as it is (sm_convert_open_hf):
** the conversion plan convert_hf.c makes, without writing anything. A
** tensor that is one source tensor copied as it is, in f32, f16 or bf16,
** stored at an address aligned for its type, is used in place in the
** mapped safetensors (a Llama's Q, K and V too: kept apart, and rotated by
** halves as stored, cfg->rope_halves); the others (GPT-2's Conv1D
** weights, which need a transpose; 16-bit norms and biases, which the
** model takes as f32; a misaligned tensor) are made once, into one heap block, in the
** source's type (vectors f32). A tokenizer.json is written as smallmind's
** tokenizer files into a private temporary directory, removed on close.
*/
#include "convert_internal.h"


#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct sm_hf_dir {
    plan pl;
    unsigned char *block; /* the made tensors */
    size_t block_bytes;
    char tok_dir[4400];   /* the tokenizer files: the model directory, or a temporary one */
    bool tok_tmp;
};

static size_t elem_bytes(sm_dtype dt) {
    return dt == SM_DTYPE_F32 ? 4 : 2;
}

/* The type tensor t is kept in: its parts' type if they agree (vectors f32), else f32. */
static sm_dtype kept_type(const otensor *t) {
    sm_dtype dt = t->parts[0].dt;
    for (int k = 1; k < t->n_parts; k++)
        if (t->parts[k].dt != dt) dt = SM_DTYPE_F32;
    return t->cols ? dt : SM_DTYPE_F32;
}

static bool in_place(const otensor *t) {
    const part *p = &t->parts[0];
    return t->n_parts == 1 && p->op == OP_COPY && kept_type(t) == p->dt &&
           (uintptr_t)p->src % elem_bytes(p->dt) == 0;
}

/* Tensor t made into dst (rows x cols of dt) by convert's row writer (exact: the values are
** 16-bit or f32 sources' own). */
static sm_status make(const otensor *t, sm_dtype dt, unsigned char *dst, float *row, sm_error *err) {
    size_t rb = (size_t)(t->cols ? t->cols : 1) * elem_bytes(dt);
    int64_t orow = 0;
    sm_status st = SM_OK;
    for (int k = 0; k < t->n_parts && !st; k++)
        for (int64_t r = 0; r < t->parts[k].rows && !st; r++, orow++)
            st = sm_convert_plain_row(t, k, r, orow, dt, row, dst + (size_t)orow * rb, err);
    return st;
}

sm_status sm_convert_open_hf(const char *dir, bool weights, sm_hf_dir **out, sm_config *cfg,
                             const void ***data, size_t *made_bytes, sm_error *err) {
    *out = NULL;
    memset(cfg, 0, sizeof *cfg);
    sm_hf_dir *h = calloc(1, sizeof *h);
    if (!h) return sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    plan *pl = &h->pl;
    pl->in_place = true;
    sm_convert_opts o = {0};
    sm_status st = sm_convert_from_hf(pl, dir, &o, err);
    if (!st && pl->nomem) st = sm_error_set(err, SM_ERR_NOMEM, "out of memory planning %s", dir);
    if (st) goto fail;
    /* the config: every tensor's name, shape and kept type */
    *cfg = pl->cfg;
    pl->cfg.tensors = NULL; /* cfg owns them now, and the chat strings */
    pl->cfg.chat_template = pl->cfg.chat_bos = pl->cfg.chat_eos = NULL;
    cfg->n_tensors = pl->n;
    cfg->tensors = calloc(pl->n ? pl->n : 1, sizeof *cfg->tensors);
    const void **d = calloc(pl->n ? pl->n : 1, sizeof *d);
    size_t need = 0, maxc = 1;
    if (!cfg->tensors || !d) {
        free(d);
        st = sm_error_set(err, SM_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < pl->n; i++) {
        const otensor *t = &pl->t[i];
        sm_tensor_desc *td = &cfg->tensors[i];
        snprintf(td->name, sizeof td->name, "%s", t->name);
        td->dtype = kept_type(t);
        td->ndim = t->cols ? 2 : 1;
        td->shape[0] = t->rows, td->shape[1] = t->cols;
        td->nelem = (size_t)t->rows * (size_t)(t->cols ? t->cols : 1);
        td->nbytes = td->nelem * elem_bytes(td->dtype);
        if (weights && !in_place(t)) need += (td->nbytes + 63) & ~(size_t)63;
        if ((size_t)t->cols > maxc) maxc = (size_t)t->cols;
    }
    float *row = malloc(maxc * sizeof *row);
    if (need && !(h->block = aligned_alloc(64, need))) {
        free(row), free(d);
        st = sm_error_set(err, SM_ERR_NOMEM, "cannot allocate %zu bytes for the transformed tensors of %s",
                          need, dir);
        goto fail;
    }
    if (!row) {
        free(d);
        st = sm_error_set(err, SM_ERR_NOMEM, "out of memory");
        goto fail;
    }
    h->block_bytes = need;
    size_t at = 0;
    for (size_t i = 0; i < pl->n && weights; i++) {
        const otensor *t = &pl->t[i];
        if (in_place(t)) {
            d[i] = t->parts[0].src;
            continue;
        }
        if ((st = make(t, cfg->tensors[i].dtype, h->block + at, row, err))) {
            free(row), free(d);
            goto fail;
        }
        d[i] = h->block + at;
        at += (cfg->tensors[i].nbytes + 63) & ~(size_t)63;
    }
    free(row);
    /* the tokenizer: the directory's vocab.json + merges.txt, or tokenizer.json written out */
    snprintf(h->tok_dir, sizeof h->tok_dir, "%s", dir);
    if (pl->tok_json) {
        const char *base = getenv("TMPDIR");
        snprintf(h->tok_dir, sizeof h->tok_dir, "%s/smallmind-tok-XXXXXX", base && *base ? base : "/tmp");
        if (!mkdtemp(h->tok_dir)) {
            free(d);
            st = sm_error_set(err, SM_ERR_IO, "cannot create a directory for %s's tokenizer: %s", dir,
                              strerror(errno));
            goto fail;
        }
        h->tok_tmp = true;
        st = sm_hf_tok_write(pl->tok_json, pl->tok_json_path, cfg->tokenizer, h->tok_dir, cfg->tok_bos,
                             cfg->tok_eos, err);
        if (st) {
            free(d);
            goto fail;
        }
    }
    cfg->tok_dir = h->tok_dir;
    cfg->n_files = pl->n_maps; /* the safetensors files the weights are used from (info says how many) */
    if (data) *data = d;
    else free(d);
    if (made_bytes) *made_bytes = h->block_bytes;
    *out = h;
    return SM_OK;
fail:
    sm_config_free(cfg);
    sm_convert_close_hf(h);
    return st;
}

void sm_convert_close_hf(sm_hf_dir *h) {
    if (!h) return;
    if (h->tok_tmp) sm_remove_dir(h->tok_dir);
    sm_convert_plan_free(&h->pl);
    free(h->block);
    free(h);
}
