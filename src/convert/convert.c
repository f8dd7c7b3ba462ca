/*
** convert.c -- any source (sm_source.h) written as a smallmind model
** directory, or through one as a GGUF file (export_gguf.c).
**
** The source is read by the loading layer: a Hugging Face directory or a
** llama2.c checkpoint as its plan (sm_plan.h: every output tensor, the
** source parts it is made of and the operation that maps each into
** smallmind's layout); a smallmind directory or a GGUF file as a model,
** checked as generate checks it, whose tensors become a plan here. The
** writer streams the parts into model.bin, matrices in the dtype asked for
** (or their own, or quantized in chunks on a pool) and vectors as f32,
** through one f32 row; then the tokenizer's files, and the output is
** loaded back before it is renamed into place.
*/
#include "sm_convert.h"

#include "convert_internal.h"
#include "json_internal.h"
#include "sm_config.h"
#include "sm_half.h"
#include "sm_pool.h"
#include "sm_quant.h"
#include "sm_tokenizer.h"
#include "sm_source.h"
#include "sm_weights.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A conversion: the plan read from the source, and how to write it. */
typedef struct {
    sm_plan *pl;           /* the source's plan, or own */
    sm_plan own;           /* made here from a model's tensors (smallmind or GGUF sources) */
    sm_source *src;        /* a Hugging Face directory or llama2.c checkpoint, planned */
    sm_model *src_model;   /* a smallmind directory or GGUF file, loaded (and so checked) as
                              generate loads it */
    sm_dtype dtype;        /* of the matrices written */
    bool keep;             /* each matrix in its source's type instead (--dtype not given,
                              a GGUF source) */
    bool mix_m;            /* the "_m" mix of a k type */
    int threads;           /* quantizing threads (<= 1: the caller's alone) */
    const volatile int *cancel; /* polled per tensor written */
    sm_tokenizer *tok_save; /* a tokenizer to write as the output's files (GGUF sources), or NULL */
    cJSON *tok_json;       /* a tokenizer.json to write smallmind's files from, or NULL */
} job;

static void job_free(job *j) {
    sm_plan_free(&j->own);
    sm_source_close(j->src);
    sm_model_free(j->src_model);
    if (j->tok_save) sm_tokenizer_free(j->tok_save);
    free(j->tok_save);
    cJSON_Delete(j->tok_json);
}

static sm_status write_all(FILE *f, const void *p, size_t n, const char *path, sm_error *err) {
    if (n && fwrite(p, 1, n, f) != n)
        return sm_error_set(err, SM_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    return SM_OK;
}

static sm_status copy_file(const char *from, const char *to, sm_error *err) {
    char *buf;
    size_t len;
    sm_status st = sm_read_file(from, SM_TOK_FILE_MAX, &buf, &len, err);
    if (!st) st = sm_write_file(to, &(sm_piece){buf, len}, 1, err);
    free(buf);
    return st;
}

bool sm_convert_dtype_parse(const char *name, sm_dtype *dtype, bool *mix_m) {
    *mix_m = strcmp(name, "q4_k_m") == 0 || strcmp(name, "q5_k_m") == 0;
    if (*mix_m) {
        *dtype = name[1] == '4' ? SM_DTYPE_Q4_K : SM_DTYPE_Q5_K;
        return true;
    }
    *dtype = sm_dtype_parse(name);
    return *dtype != SM_DTYPE_COUNT;
}

static bool is_k(sm_dtype dt) {
    return sm_dtype_quantized(dt) && sm_dtype_block(dt) == SM_QK_K;
}

/* Whether layer i of n gets more bits in the "_m" mixes: the first and last eighth, every third between. */
static bool more_bits(int i, int n) {
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

/* The layer of blk.N.<what>, or -1 if the name is not that. */
static int layer_of(const char *name, const char *what) {
    int l, end = 0;
    if (sscanf(name, "blk.%d.%n", &l, &end) != 1 || !end) return -1;
    return strcmp(name + end, what) == 0 ? l : -1;
}

/*
** The type tensor t is written in: vectors f32; matrices the type asked for
** with the mixes of sm_convert.h (the output layer, or the token embedding
** it is tied to, at q8_0 under the 32-weight types and q6_k under the k types and iq4_xs, as
** quantizers keep it at higher precision; the "_m" mixes' Q/K/V and down
** projections); GPT-2's position embedding in its source type (it is
** small); a k-type matrix whose rows are not whole 256-weight blocks in
** llama-quantize's type for it (q4_k q5_0, q5_k q5_1, q6_k q8_0, q2_k and
** q3_k q4_0, iq4_xs iq4_nl), and a matrix whose rows are not whole 32-weight blocks in its source
** type (f16 if that is quantized), each counted in info.
*/
static sm_dtype out_dtype(const job *j, const sm_plan_tensor *t, sm_convert_info *info) {
    if (!t->cols) return SM_DTYPE_F32;
    if (j->keep) { /* the source's type; of parts of different types (a fused Q/K/V), the widest */
        sm_dtype dt = t->parts[0].dt;
        for (int i = 1; i < t->n_parts; i++)
            if (sm_dtype_row_bytes(t->parts[i].dt, 256) > sm_dtype_row_bytes(dt, 256)) dt = t->parts[i].dt;
        return dt;
    }
    sm_dtype dt = j->dtype;
    if (!sm_dtype_quantized(dt)) return dt;
    if (strcmp(t->name, "pos_embd") == 0) return t->parts[0].dt; /* small; kept as it is */
    bool out = strcmp(t->name, "output.weight") == 0 ||
               (j->pl->cfg.tied_output && strcmp(t->name, "tok_embd") == 0);
    if (out && sm_dtype_block(dt) == SM_QK) dt = SM_DTYPE_Q8_0; /* q4_0, q4_1, q5_0, q5_1 */
    if (out && is_k(dt)) dt = SM_DTYPE_Q6_K;
    if (j->mix_m && layer_of(t->name, "attn_qkv.weight") >= 0)
        dt = dt == SM_DTYPE_Q4_K ? SM_DTYPE_Q5_K : SM_DTYPE_Q6_K;
    int l = layer_of(t->name, "ffn_down.weight");
    if (l < 0) l = layer_of(t->name, "mlp_down.weight");
    if (j->mix_m && l >= 0 && more_bits(l, j->pl->cfg.n_layer)) dt = SM_DTYPE_Q6_K;
    if ((size_t)t->cols % sm_dtype_block(dt) == 0) return dt;
    if (is_k(dt) && (size_t)t->cols % SM_QK == 0) { /* llama-quantize's fallbacks */
        if (info->n_q8++ == 0) snprintf(info->q8, sizeof info->q8, "%s", t->name);
        return dt == SM_DTYPE_Q4_K ? SM_DTYPE_Q5_0 : dt == SM_DTYPE_Q5_K ? SM_DTYPE_Q5_1
             : dt == SM_DTYPE_Q6_K ? SM_DTYPE_Q8_0 : dt == SM_DTYPE_IQ4_XS ? SM_DTYPE_IQ4_NL : SM_DTYPE_Q4_0;
    }
    if (info->n_kept++ == 0) snprintf(info->kept, sizeof info->kept, "%s", t->name);
    sm_dtype src = t->parts[0].dt;
    return sm_dtype_quantized(src) ? SM_DTYPE_F16 : src;
}

/*
** Quantizing is the slow part of a conversion (a scale search per block),
** so rows go in chunks of about QCHUNK_BYTES of f32: gathered in order,
** quantized by the pool's threads (each its own rows), written in order.
*/
#define QCHUNK_BYTES (8u << 20)
#define QMAX_THREADS 64

typedef struct {
    sm_pool *pool;       /* NULL: one thread */
    float *rows;         /* a chunk of rows, f32 */
    unsigned char *out;  /* the chunk quantized */
    size_t cap;          /* floats rows holds */
    /* the current chunk */
    size_t n, C, rb;
    sm_dtype dt;
    size_t bad_row[QMAX_THREADS], bad_block[QMAX_THREADS]; /* per thread; n: none */
    const volatile int *cancel; /* looked at between chunks: a signal stops a long tensor */
} qwriter;

static void quant_rows(void *arg, int ith, int nth) {
    qwriter *q = arg;
    size_t b, e;
    sm_pool_split(q->n, 1, ith, nth, &b, &e);
    for (size_t r = b; r < e; r++) {
        size_t k = sm_quant_quantize(q->out + r * q->rb, q->rows + r * q->C, q->dt, q->C);
        if (k < q->C / sm_dtype_block(q->dt)) {
            q->bad_row[ith] = r, q->bad_block[ith] = k;
            return;
        }
    }
}

/* Rows [orow - n, orow) of tensor t, gathered in q: quantized and written. */
static sm_status flush_quantized(qwriter *q, const sm_plan_tensor *t, int64_t orow, FILE *f,
                                 const char *path, sm_error *err) {
    if (!q->n) return SM_OK;
    int nth = q->pool ? sm_pool_threads(q->pool) : 1;
    for (int i = 0; i < nth; i++) q->bad_row[i] = q->n; /* a run may use fewer threads (sm_pool.h) */
    if (q->pool)
        sm_pool_run(q->pool, quant_rows, q);
    else
        quant_rows(q, 0, 1);
    size_t bad = q->n, block = 0;
    for (int i = 0; i < nth; i++)
        if (q->bad_row[i] < bad) bad = q->bad_row[i], block = q->bad_block[i];
    if (bad < q->n)
        return sm_error_set(err, SM_ERR_INPUT,
                            "--dtype %s: tensor %s row %lld, block %zu: a NaN or infinite weight, "
                            "or one too large for an f16 scale",
                            sm_dtype_name(q->dt), t->name, (long long)(orow - (int64_t)q->n + (int64_t)bad), block);
    sm_status st = write_all(f, q->out, q->n * q->rb, path, err);
    q->n = 0;
    return st;
}

/* Tensor t (rows of C) quantized to dt into f, a chunk of rows at a time. */
static sm_status write_quantized(qwriter *q, const sm_plan_tensor *t, sm_dtype dt, size_t C, FILE *f,
                                 const char *path, sm_error *err) {
    q->n = 0, q->C = C, q->dt = dt, q->rb = sm_dtype_row_bytes(dt, C);
    size_t per = q->cap / C;
    int64_t orow = 0;
    sm_status st = SM_OK;
    for (int k = 0; k < t->n_parts && !st; k++)
        for (int64_t r = 0; r < t->parts[k].rows && !st; r++, orow++) {
            sm_plan_part_row(&t->parts[k], r, q->rows + q->n * C);
            if (++q->n == per) st = flush_quantized(q, t, orow + 1, f, path, err);
            if (!st && q->n == 0 && q->cancel && *q->cancel) st = sm_error_set(err, SM_ERR_CANCELLED, "interrupted");
        }
    return st ? st : flush_quantized(q, t, orow, f, path, err);
}

static sm_status write_plain(const sm_plan_tensor *t, sm_dtype dt, size_t C, float *row, uint16_t *half,
                             FILE *f, const char *path, sm_error *err) {
    int64_t orow = 0; /* output row, over the parts */
    sm_status st = SM_OK;
    void *out = dt == SM_DTYPE_F32 ? (void *)row : (void *)half;
    for (int k = 0; k < t->n_parts && !st; k++)
        for (int64_t r = 0; r < t->parts[k].rows && !st; r++, orow++)
            if (!(st = sm_plan_plain_row(t, k, r, orow, dt, row, out, err)))
                st = write_all(f, out, C * sm_dtype_row_bytes(dt, 1), path, err);
    return st;
}

/* Whether every part of t is quantized blocks of dt to copy as they are (re-quantizing the
** values they stand for would not give the same blocks back). */
static bool same_blocks(const sm_plan_tensor *t, sm_dtype dt) {
    if (!sm_dtype_quantized(dt)) return false;
    for (int k = 0; k < t->n_parts; k++)
        if (t->parts[k].dt != dt || t->parts[k].op != SM_OP_COPY) return false;
    return true;
}

static sm_status write_blocks(const sm_plan_tensor *t, sm_dtype dt, size_t C, FILE *f, const char *path,
                              sm_error *err) {
    sm_status st = SM_OK;
    for (int k = 0; k < t->n_parts && !st; k++)
        st = write_all(f, t->parts[k].src, (size_t)t->parts[k].rows * sm_dtype_row_bytes(dt, C), path, err);
    return st;
}

/* Writes the plan as a model directory into tmp: config.json, model.bin, tokenizer files. */
static sm_status write_plan(job *j, const char *tmp, sm_convert_info *info, sm_error *err) {
    sm_plan *pl = j->pl;
    sm_config *c = &pl->cfg;
    c->n_files = 1;
    snprintf(c->files[0], SM_FILE_NAME_MAX, "model.bin");
    c->n_tensors = pl->n;
    c->tensors = calloc(pl->n, sizeof *c->tensors);
    if (!c->tensors) return sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    size_t off = SM_WEIGHTS_HEADER, maxrow = 1;
    for (size_t i = 0; i < pl->n; i++) {
        const sm_plan_tensor *t = &pl->t[i];
        sm_tensor_desc *d = &c->tensors[i];
        snprintf(d->name, sizeof d->name, "%s", t->name);
        d->dtype = out_dtype(j, t, info);
        d->ndim = t->cols ? 2 : 1;
        d->shape[0] = t->rows;
        d->shape[1] = t->cols;
        d->nelem = (size_t)t->rows * (size_t)(t->cols ? t->cols : 1);
        d->nbytes = (size_t)t->rows * sm_dtype_row_bytes(d->dtype, (size_t)(t->cols ? t->cols : 1));
        d->offset = off;
        off += (d->nbytes + 63) & ~(size_t)63;
        if ((size_t)t->cols > maxrow) maxrow = (size_t)t->cols;
        info->params += d->nelem;
    }
    info->n_tensors = pl->n;
    char path[4600], *json = NULL;
    sm_status st = sm_config_to_json(c, &json, err);
    if (st) return st;
    snprintf(path, sizeof path, "%s/config.json", tmp);
    st = sm_write_file(path, (sm_piece[]){{json, strlen(json)}, {"\n", 1}}, 2, err);
    sm_config_json_free(json);
    if (st) return st;

    snprintf(path, sizeof path, "%s/model.bin", tmp);
    FILE *f = fopen(path, "wb");
    if (!f) return sm_error_set(err, SM_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
    float *row = malloc(maxrow * sizeof *row);
    uint16_t *half = malloc(maxrow * sizeof *half); /* a 16-bit row */
    qwriter qw = {.cancel = j->cancel};
    bool quantizes = false; /* a tensor quantized here (not copied as its source's blocks) */
    for (size_t i = 0; i < pl->n; i++)
        quantizes |= sm_dtype_quantized(c->tensors[i].dtype) && !same_blocks(&pl->t[i], c->tensors[i].dtype);
    if (quantizes) { /* a chunk holds at least one row */
        qw.cap = QCHUNK_BYTES / sizeof(float) > maxrow ? QCHUNK_BYTES / sizeof(float) : maxrow;
        qw.rows = malloc(qw.cap * sizeof *qw.rows);
        qw.out = malloc(qw.cap * sizeof *qw.rows); /* quantized: < 4 bytes a weight */
        if (j->threads > 1 && sm_pool_create(&qw.pool, j->threads)) qw.pool = NULL;
    }
    bool have = row && half && (!qw.cap || (qw.rows && qw.out));
    unsigned char hdr[SM_WEIGHTS_HEADER], zero[64] = {0};
    sm_weights_header(hdr);
    st = have ? write_all(f, hdr, sizeof hdr, path, err)
              : sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < pl->n && !st; i++) {
        if (j->cancel && *j->cancel) {
            st = sm_error_set(err, SM_ERR_CANCELLED, "interrupted");
            break;
        }
        const sm_plan_tensor *t = &pl->t[i];
        size_t C = (size_t)(t->cols ? t->cols : 1);
        sm_dtype dt = c->tensors[i].dtype;
        st = same_blocks(t, dt)         ? write_blocks(t, dt, C, f, path, err)
             : sm_dtype_quantized(dt) ? write_quantized(&qw, t, dt, C, f, path, err)
                                      : write_plain(t, dt, C, row, half, f, path, err);
        size_t pad = (64 - c->tensors[i].nbytes % 64) % 64;
        if (!st && i + 1 < pl->n) st = write_all(f, zero, pad, path, err);
    }
    free(row);
    free(half);
    free(qw.rows);
    free(qw.out);
    if (qw.pool) sm_pool_free(qw.pool);
    if (fflush(f) != 0 && !st) st = sm_error_set(err, SM_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    if (fclose(f) != 0 && !st) st = sm_error_set(err, SM_ERR_IO, "cannot write '%s'", path);
    info->bytes = off;
    const char *names[2] = {c->tok_file[0], c->tok_file[1]};
    for (int k = 0; k < 2 && !st; k++) {
        if (!pl->tok_src[k][0]) continue;
        snprintf(path, sizeof path, "%s/%s", tmp, names[k]);
        st = copy_file(pl->tok_src[k], path, err);
    }
    if (!st && j->tok_json)
        st = sm_hf_tok_write(j->tok_json, pl->tok_src[0], c->tokenizer, tmp, c->tok_bos,
                             c->tok_eos, err);
    if (!st && j->tok_save) {
        char saved[2][SM_FILE_NAME_MAX];
        st = sm_tokenizer_save(j->tok_save, tmp, saved, err);
    }
    return st;
}

/* Loads the tokenizer the written config names, so a bad tokenizer fails the conversion. */
static sm_status check_output(const char *dir, sm_error *err) {
    sm_config cfg;
    sm_status st = sm_config_load(&cfg, dir, err);
    if (st) return st;
    sm_tokenizer tok;
    st = sm_tokenizer_init(&tok, &cfg, dir, NULL, err);
    if (!st) sm_tokenizer_free(&tok);
    sm_config_free(&cfg);
    return st;
}

/*
** A message about a file of the temporary output (TMP/NAME: ...) names the
** source it came from instead: the --tokenizer file or the tokenizer files
** copied, tokenizer.json, or the source's config.
*/
static void blame_source(sm_error *err, const char *tmp, const job *j, const char *src) {
    const sm_plan *pl = j->pl;
    size_t tl = strlen(tmp);
    if (strncmp(err->msg, tmp, tl) != 0 || err->msg[tl] != '/') return;
    const char *name = err->msg + tl + 1, *rest = strchr(name, ':');
    if (!rest) return;
    size_t nl = (size_t)(rest - name);
    const char *who = NULL;
    char cfg[4300];
    for (int k = 0; k < 2 && !who; k++)
        if (pl->tok_src[k][0] && strlen(pl->cfg.tok_file[k]) == nl &&
            strncmp(name, pl->cfg.tok_file[k], nl) == 0)
            who = pl->tok_src[k];
    if (!who && j->tok_json && strncmp(name, "config.json", nl) != 0) who = pl->tok_src[0];
    if (!who) {
        snprintf(cfg, sizeof cfg, "%s%s", src, pl->from_dir ? "/config.json" : "");
        who = cfg;
    }
    char msg[sizeof err->msg];
    snprintf(msg, sizeof msg, "%.200s%.300s", who, rest);
    memcpy(err->msg, msg, sizeof msg);
}

/* ------------------------------------------------- smallmind, GGUF */

/*
** A smallmind directory or a GGUF file, opened (and so checked) as generate
** opens it: its tensors under smallmind's names, a Llama's separate Q, K
** and V rows concatenated into the fused matrix; its tokenizer files copied
** (a directory's) or written from its tables (a GGUF file's).
*/
static sm_status from_model(job *j, const char *path, const char *tokenizer, sm_error *err) {
    sm_plan *pl = j->pl = &j->own;
    sm_source *src;
    sm_status st = sm_source_open(&src, path, &(sm_source_opts){.tokenizer = tokenizer}, err);
    if (st || (st = sm_model_open(&j->src_model, src, err))) return st;
    const sm_config *s = sm_model_config(j->src_model);
    pl->cfg = *s;
    pl->cfg.tensors = NULL, pl->cfg.n_tensors = 0;
    pl->from_dir = src->kind == SM_SOURCE_SMALLMIND;
    if (!sm_config_dup_chat(&pl->cfg)) return sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < s->n_tensors; i++) {
        const sm_tensor_desc *d = &s->tensors[i];
        const unsigned char *data = sm_model_tensor_data(j->src_model, i);
        const char *q = strstr(d->name, ".attn_q.weight");
        if (strstr(d->name, ".attn_k.weight") || strstr(d->name, ".attn_v.weight")) continue;
        if (d->ndim > 2)
            return sm_error_set(err, SM_ERR_UNSUPPORTED, "%s: tensor %s has %d dimensions", path,
                                d->name, d->ndim);
        if (!q) {
            sm_plan_add_whole(pl, d->name, d->shape[0], d->ndim == 2 ? d->shape[1] : 0, data,
                                 d->dtype, SM_OP_COPY);
            continue;
        }
        char nm[SM_NAME_MAX];
        const sm_tensor_desc *kv[2] = {NULL, NULL};
        size_t kvi[2] = {0, 0};
        for (int k = 0; k < 2; k++) {
            snprintf(nm, sizeof nm, "%.*s.attn_%c.weight", (int)(q - d->name), d->name, k ? 'v' : 'k');
            for (size_t x = 0; x < s->n_tensors; x++)
                if (strcmp(s->tensors[x].name, nm) == 0) kv[k] = &s->tensors[x], kvi[k] = x;
            if (!kv[k] || kv[k]->ndim != 2 || kv[k]->shape[1] != d->shape[1])
                return sm_error_set(err, SM_ERR_FORMAT, "%s: %s is %s", path, nm,
                                    kv[k] ? "not a matrix as wide as the Q projection" : "missing");
        }
        snprintf(nm, sizeof nm, "%.*s.attn_qkv.weight", (int)(q - d->name), d->name);
        sm_plan_tensor *t = sm_plan_add_tensor(pl, nm, d->shape[0] + kv[0]->shape[0] + kv[1]->shape[0],
                                           d->shape[1]);
        sm_plan_add_part(t, data, d->dtype, d->shape[0], d->shape[1], SM_OP_COPY, 0);
        for (int k = 0; k < 2; k++)
            sm_plan_add_part(t, sm_model_tensor_data(j->src_model, kvi[k]), kv[k]->dtype,
                                kv[k]->shape[0], kv[k]->shape[1], SM_OP_COPY, 0);
    }
    if (pl->from_dir) {
        for (int k = 0; k < 2; k++)
            if (s->tok_file[k][0])
                snprintf(pl->tok_src[k], sizeof pl->tok_src[k], "%s/%s", path, s->tok_file[k]);
    } else if (s->tokenizer != SM_TOKENIZER_BYTE) {
        if (!(j->tok_save = calloc(1, sizeof *j->tok_save)))
            return sm_error_set(err, SM_ERR_NOMEM, "out of memory");
        if ((st = sm_source_tokenizer(src, j->tok_save, err))) {
            free(j->tok_save);
            j->tok_save = NULL;
            return st;
        }
        bool spm = s->tokenizer == SM_TOKENIZER_SENTENCEPIECE;
        snprintf(pl->cfg.tok_file[0], SM_FILE_NAME_MAX, "%s", spm ? "tokenizer.bin" : "vocab.json");
        snprintf(pl->cfg.tok_file[1], SM_FILE_NAME_MAX, "%s", spm ? "" : "merges.txt");
    }
    return SM_OK;
}

/* ------------------------------------------------ Hugging Face, llama2.c */

/*
** How a Hugging Face tokenizer.json is written: as GPT-2's vocab.json +
** merges.txt when it is byte-level BPE with GPT-2's pattern (the directory's
** own copies if it has them), as llama2.c's tokenizer.bin when it is
** SentencePiece-style BPE with byte fallback, else copied as it is (read by
** smallmind's tokenizer.json reader, as generate reads it in place).
*/
static sm_status plan_tokenizer_files(job *j, const char *dir, sm_error *err) {
    sm_plan *pl = j->pl;
    sm_config *c = &pl->cfg;
    if (c->tokenizer != SM_TOKENIZER_HF) return SM_OK;
    cJSON *root;
    sm_tokenizer_type ty;
    sm_status st = sm_json_read_file_nul(pl->tok_src[0], SM_TOK_FILE_MAX, &root, err);
    if (!st) st = sm_hf_tok_kind(root, pl->tok_src[0], &ty, err);
    if (st || ty == SM_TOKENIZER_HF) {
        cJSON_Delete(root);
        return st;
    }
    char v[4400], m[4400];
    snprintf(v, sizeof v, "%s/vocab.json", dir);
    snprintf(m, sizeof m, "%s/merges.txt", dir);
    c->tokenizer = ty;
    if (ty == SM_TOKENIZER_GPT2) {
        snprintf(c->tok_file[0], SM_FILE_NAME_MAX, "vocab.json");
        snprintf(c->tok_file[1], SM_FILE_NAME_MAX, "merges.txt");
    } else {
        snprintf(c->tok_file[0], SM_FILE_NAME_MAX, "tokenizer.bin");
    }
    if (ty == SM_TOKENIZER_GPT2 && access(v, F_OK) == 0 && access(m, F_OK) == 0) {
        snprintf(pl->tok_src[0], sizeof pl->tok_src[0], "%s", v); /* copied */
        snprintf(pl->tok_src[1], sizeof pl->tok_src[1], "%s", m);
        cJSON_Delete(root);
        return SM_OK;
    }
    j->tok_json = root; /* written from it (write_plan names the file by tok_src[0]) */
    return SM_OK;
}

/* A Hugging Face directory or llama2.c checkpoint: the loading layer's plan (its tokenizer is
** checked as it is written, and the output loaded back before it is renamed into place). */
static sm_status from_planned(job *j, const char *src, const sm_convert_opts *o, sm_error *err) {
    sm_status st = sm_source_open(&j->src, src, &(sm_source_opts){.tokenizer = o->tokenizer,
                                                                   .plan_only = true}, err);
    if (st) return st;
    j->pl = sm_source_plan(j->src);
    return plan_tokenizer_files(j, src, err);
}

/* ------------------------------------------------------------- driver */

sm_status sm_convert(const char *src, const char *out, const sm_convert_opts *o,
                     sm_convert_info *info, sm_error *err) {
    memset(info, 0, sizeof *info);
    bool to_gguf = sm_source_gguf_name(out); /* the output is then a GGUF file */
    if (lstat(out, &(struct stat){0}) == 0)
        return sm_error_set(err, SM_ERR_INPUT, "'%s' exists; convert writes a new %s", out,
                            to_gguf ? "file" : "directory");
    if (to_gguf) { /* a directory of the types asked for first, then that as GGUF */
        char dir[4300];
        if ((size_t)snprintf(dir, sizeof dir, "%s.dir-%ld", out, (long)getpid()) >= sizeof dir)
            return sm_error_set(err, SM_ERR_INPUT, "output path '%s' is too long", out);
        sm_remove_dir(dir);
        sm_remove_stale_tmp(out); /* what killed runs left: OUT.dir-PID[.tmp-PID], OUT.tmp-PID */
        sm_status st = sm_convert(src, dir, o, info, err);
        if (!st && o->cancel && *o->cancel) st = sm_error_set(err, SM_ERR_CANCELLED, "interrupted");
        if (!st) st = sm_export_gguf(dir, src, out, o->cancel, &info->nfc_lost, err);
        sm_remove_dir(dir);
        return st;
    }
    job j = {.dtype = o->dtype, .mix_m = o->mix_m, .cancel = o->cancel,
             .threads = o->threads > QMAX_THREADS ? QMAX_THREADS : o->threads};
    sm_source_kind kind;
    sm_status st = sm_source_kind_of(src, &kind, err);
    if (st) return st;
    j.keep = o->keep && (kind == SM_SOURCE_GGUF || kind == SM_SOURCE_SMALLMIND);
    if (kind == SM_SOURCE_SMALLMIND || kind == SM_SOURCE_GGUF) {
        st = from_model(&j, src, o->tokenizer, err); /* --tokenizer refused there: they have their own */
        snprintf(info->source, sizeof info->source, "%s %s", kind == SM_SOURCE_GGUF ? "GGUF" : "smallmind",
                 sm_arch_name(j.own.cfg.arch));
    } else {
        st = from_planned(&j, src, o, err);
        if (kind == SM_SOURCE_HF)
            snprintf(info->source, sizeof info->source, "Hugging Face %s",
                     j.pl && j.pl->cfg.arch == SM_ARCH_LLAMA ? "llama" : "gpt2");
        else
            snprintf(info->source, sizeof info->source, "llama2.c checkpoint");
    }
    if (!j.pl) j.pl = &j.own;
    char tmp[4200];
    if (!st && j.pl->nomem) st = sm_error_set(err, SM_ERR_NOMEM, "out of memory planning the conversion");
    if (!st && (size_t)snprintf(tmp, sizeof tmp, "%s.tmp-%ld", out, (long)getpid()) >= sizeof tmp)
        st = sm_error_set(err, SM_ERR_INPUT, "output path '%s' is too long", out);
    if (st) {
        job_free(&j);
        return st;
    }
    sm_remove_dir(tmp);
    sm_remove_stale_tmp(out);
    if (mkdir(tmp, 0755) != 0) {
        job_free(&j);
        return sm_error_set(err, SM_ERR_IO, "cannot create '%s': %s", tmp, strerror(errno));
    }
    st = write_plan(&j, tmp, info, err);
    if (!st && (st = check_output(tmp, err))) blame_source(err, tmp, &j, src);
    job_free(&j);
    if (!st && rename(tmp, out) != 0)
        st = sm_error_set(err, SM_ERR_IO, "cannot rename '%s' to '%s': %s", tmp, out, strerror(errno));
    if (st) sm_remove_dir(tmp);
    return st;
}

