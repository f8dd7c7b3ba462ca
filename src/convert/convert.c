/*
** convert.c -- llama2.c checkpoints and Hugging Face directories (GPT-2 and
** Llama families, safetensors) to smallmind model directories.
**
** A conversion is a plan: the output config plus, for every output tensor,
** the source parts it is made of (a tensor is one part, or the row-wise
** concatenation of Q, K and V), each with the operation that maps it into
** the smallmind layout: a copy, a transpose (Hugging Face GPT-2's Conv1D
** stores [in, out]) or a rotary permutation (Hugging Face Llama's Q and K
** rows pair dimension i with i + head_dim/2, "rotate halves"; smallmind and
** llama2.c pair 2i with 2i+1). The writer streams the parts into model.bin,
** matrices in the dtype asked for and vectors as f32, through one f32 row.
** Sources are memory-mapped and every size is checked against the file
** before a pointer into it is formed. Hugging Face directories are planned
** by convert_hf.c; llama2.c checkpoints here.
*/
#include "sm_convert.h"

#include "convert_internal.h"
#include "json_internal.h"
#include "sm_config.h"
#include "sm_half.h"
#include "sm_pool.h"
#include "sm_quant.h"
#include "sm_tokenizer.h"
#include "sm_weights.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------ helpers */

sm_status sm_convert_map(plan *pl, const char *path, mapped **out, sm_error *err) {
    if (pl->n_maps == MAX_SHARDS + 1)
        return sm_error_set(err, SM_ERR_UNSUPPORTED, "%s: more than %d weight files", path,
                            MAX_SHARDS);
    mapped *m = &pl->maps[pl->n_maps];
    void *p;
    bool is_map;
    sm_status st = sm_map_file(path, true, &p, &m->n, &is_map, err);
    if (st) return st;
    m->p = p;
    pl->n_maps++;
    *out = m;
    return SM_OK;
}

void sm_convert_plan_free(plan *pl) {
    for (int i = 0; i < pl->n_maps; i++)
        sm_unmap(pl->maps[i].p, pl->maps[i].n, true);
    free(pl->t);
    cJSON_Delete(pl->tok_json);
    sm_config_free(&pl->cfg);
    if (pl->tok_save) sm_tokenizer_free(pl->tok_save);
    free(pl->tok_save);
    sm_model_free(pl->src_model);
}

/* A new output tensor; its parts follow with add_part. Out of memory: pl->nomem, and a spare. */
otensor *sm_convert_add_tensor(plan *pl, const char *name, int64_t rows, int64_t cols) {
    if (pl->n == pl->cap) {
        size_t cap = pl->cap ? 2 * pl->cap : 64;
        otensor *t = realloc(pl->t, cap * sizeof *t);
        if (!t) {
            pl->nomem = true;
            pl->spare.n_parts = 0;
            return &pl->spare;
        }
        pl->t = t;
        pl->cap = cap;
    }
    otensor *t = &pl->t[pl->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->rows = rows;
    t->cols = cols;
    return t;
}

void sm_convert_add_part(otensor *t, const unsigned char *src, sm_dtype dt, int64_t rows,
                     int64_t cols, int op, int64_t head_dim) {
    t->parts[t->n_parts++] = (part){src, dt, rows, cols, op, head_dim};
}

/* An output tensor made of one source tensor of the same shape. */
void sm_convert_add_whole(plan *pl, const char *name, int64_t rows, int64_t cols,
                      const unsigned char *src, sm_dtype dt, int op) {
    sm_convert_add_part(sm_convert_add_tensor(pl, name, rows, cols), src, dt, rows, cols, op, 0);
}

/* Element i of a little-endian source tensor (any alignment), widened to f32. */
static float load_elem(const unsigned char *p, sm_dtype dt, size_t i) {
    if (dt == SM_DTYPE_F32) return sm_bits_to_f32(sm_read_u32le(p + 4 * i));
    uint16_t h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
    return dt == SM_DTYPE_BF16 ? sm_bf16_to_f32(h) : sm_f16_to_f32(h);
}

/* Output row r of part pt (cols elements, or one element for vectors) into out. */
void sm_convert_part_row(const part *pt, int64_t r, float *out) {
    int64_t C = pt->cols ? pt->cols : 1;
    if (pt->op == OP_TRANSPOSE) { /* source is [cols, rows] */
        for (int64_t c = 0; c < C; c++)
            out[c] = load_elem(pt->src, pt->dt, (size_t)(c * pt->rows + r));
        return;
    }
    int64_t sr = r;
    if (sm_dtype_quantized(pt->dt)) { /* OP_COPY only: a smallmind directory's rows */
        size_t rb = sm_dtype_row_bytes(pt->dt, (size_t)C);
        sm_quant_dequant(out, pt->src + (size_t)r * rb, pt->dt, (size_t)C);
        return;
    }
    if (pt->op == OP_ROPE) { /* out row 2j <- source row j, 2j+1 <- j + hd/2, per head */
        int64_t hd = pt->head_dim, h = r / hd, d = r % hd;
        sr = h * hd + (d % 2 ? hd / 2 + d / 2 : d / 2);
    }
    for (int64_t c = 0; c < C; c++) out[c] = load_elem(pt->src, pt->dt, (size_t)(sr * C + c));
    if (pt->op == OP_PLUS1)
        for (int64_t c = 0; c < C; c++) out[c] += 1.0f;
}

/* row (n floats) narrowed to dt (f16 or bf16) into out; a finite weight f16 cannot hold is an error. */
static sm_status narrow_row(uint16_t *out, const float *row, size_t n, sm_dtype dt,
                            const char *name, int64_t r, sm_error *err) {
    for (size_t c = 0; c < n; c++) {
        out[c] = dt == SM_DTYPE_F16 ? sm_f32_to_f16(row[c]) : sm_f32_to_bf16(row[c]);
        if (dt == SM_DTYPE_F16 && (out[c] & 0x7FFFu) == 0x7C00u && isfinite(row[c]))
            return sm_error_set(err, SM_ERR_INPUT,
                                "--dtype f16: tensor %s [%lld, %zu] is %g, past f16's largest "
                                "value 65504; convert with --dtype bf16 or f32",
                                name, (long long)r, c, (double)row[c]);
    }
    return SM_OK;
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
    return dt == SM_DTYPE_Q4_K || dt == SM_DTYPE_Q5_K || dt == SM_DTYPE_Q6_K;
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
** it is tied to, at q8_0 under q4_0 and q6_k under the k types, as
** quantizers keep it at higher precision; the "_m" mixes' Q/K/V and down
** projections); GPT-2's position embedding in its source type (it is
** small); a k-type matrix whose rows are not whole 256-weight blocks at
** q8_0, and a matrix whose rows are not whole 32-weight blocks in its source
** type (f16 if that is quantized), each counted in info.
*/
static sm_dtype out_dtype(const plan *pl, const otensor *t, sm_convert_info *info) {
    if (!t->cols) return SM_DTYPE_F32;
    if (pl->keep) { /* the source's type; of parts of different types (a fused Q/K/V), the widest */
        sm_dtype dt = t->parts[0].dt;
        for (int i = 1; i < t->n_parts; i++)
            if (sm_dtype_row_bytes(t->parts[i].dt, 256) > sm_dtype_row_bytes(dt, 256)) dt = t->parts[i].dt;
        return dt;
    }
    sm_dtype dt = pl->dtype;
    if (!sm_dtype_quantized(dt)) return dt;
    if (strcmp(t->name, "pos_embd") == 0) return t->parts[0].dt; /* small; kept as it is */
    bool out = strcmp(t->name, "output.weight") == 0 ||
               (pl->cfg.tied_output && strcmp(t->name, "tok_embd") == 0);
    if (out && dt == SM_DTYPE_Q4_0) dt = SM_DTYPE_Q8_0;
    if (out && is_k(dt)) dt = SM_DTYPE_Q6_K;
    if (pl->mix_m && layer_of(t->name, "attn_qkv.weight") >= 0)
        dt = dt == SM_DTYPE_Q4_K ? SM_DTYPE_Q5_K : SM_DTYPE_Q6_K;
    int l = layer_of(t->name, "ffn_down.weight");
    if (l < 0) l = layer_of(t->name, "mlp_down.weight");
    if (pl->mix_m && l >= 0 && more_bits(l, pl->cfg.n_layer)) dt = SM_DTYPE_Q6_K;
    if ((size_t)t->cols % sm_dtype_block(dt) == 0) return dt;
    if (is_k(dt) && (size_t)t->cols % SM_QK == 0) {
        if (info->n_q8++ == 0) snprintf(info->q8, sizeof info->q8, "%s", t->name);
        return SM_DTYPE_Q8_0;
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
    q->bad_row[ith] = q->n;
    for (size_t r = b; r < e; r++) {
        size_t k = sm_quant_quantize(q->out + r * q->rb, q->rows + r * q->C, q->dt, q->C);
        if (k < q->C / sm_dtype_block(q->dt)) {
            q->bad_row[ith] = r, q->bad_block[ith] = k;
            return;
        }
    }
}

/* Rows [orow - n, orow) of tensor t, gathered in q: quantized and written. */
static sm_status flush_quantized(qwriter *q, const otensor *t, int64_t orow, FILE *f,
                                 const char *path, sm_error *err) {
    if (!q->n) return SM_OK;
    int nth = q->pool ? sm_pool_threads(q->pool) : 1;
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
static sm_status write_quantized(qwriter *q, const otensor *t, sm_dtype dt, size_t C, FILE *f,
                                 const char *path, sm_error *err) {
    q->n = 0, q->C = C, q->dt = dt, q->rb = sm_dtype_row_bytes(dt, C);
    size_t per = q->cap / C;
    int64_t orow = 0;
    sm_status st = SM_OK;
    for (int k = 0; k < t->n_parts && !st; k++)
        for (int64_t r = 0; r < t->parts[k].rows && !st; r++, orow++) {
            sm_convert_part_row(&t->parts[k], r, q->rows + q->n * C);
            if (++q->n == per) st = flush_quantized(q, t, orow + 1, f, path, err);
            if (!st && q->n == 0 && q->cancel && *q->cancel) st = sm_error_set(err, SM_ERR_CANCELLED, "interrupted");
        }
    return st ? st : flush_quantized(q, t, orow, f, path, err);
}

/* Tensor t (rows of C; a vector's rows are 1 wide) as f32, f16 or bf16 into f, through row and half. */
sm_status sm_convert_plain_row(const otensor *t, int k, int64_t r, int64_t orow, sm_dtype dt,
                               float *row, void *out, sm_error *err) {
    sm_convert_part_row(&t->parts[k], r, row);
    size_t C = (size_t)(t->cols ? t->cols : 1);
    if (dt != SM_DTYPE_F32) return narrow_row(out, row, C, dt, t->name, orow, err);
    if (out != row) memcpy(out, row, C * sizeof *row);
    return SM_OK;
}

static sm_status write_plain(const otensor *t, sm_dtype dt, size_t C, float *row, uint16_t *half,
                             FILE *f, const char *path, sm_error *err) {
    int64_t orow = 0; /* output row, over the parts */
    sm_status st = SM_OK;
    void *out = dt == SM_DTYPE_F32 ? (void *)row : (void *)half;
    for (int k = 0; k < t->n_parts && !st; k++)
        for (int64_t r = 0; r < t->parts[k].rows && !st; r++, orow++)
            if (!(st = sm_convert_plain_row(t, k, r, orow, dt, row, out, err)))
                st = write_all(f, out, C * sm_dtype_row_bytes(dt, 1), path, err);
    return st;
}

/* Whether every part of t is quantized blocks of dt to copy as they are (re-quantizing the
** values they stand for would not give the same blocks back). */
static bool same_blocks(const otensor *t, sm_dtype dt) {
    if (!sm_dtype_quantized(dt)) return false;
    for (int k = 0; k < t->n_parts; k++)
        if (t->parts[k].dt != dt || t->parts[k].op != OP_COPY) return false;
    return true;
}

static sm_status write_blocks(const otensor *t, sm_dtype dt, size_t C, FILE *f, const char *path,
                              sm_error *err) {
    sm_status st = SM_OK;
    for (int k = 0; k < t->n_parts && !st; k++)
        st = write_all(f, t->parts[k].src, (size_t)t->parts[k].rows * sm_dtype_row_bytes(dt, C), path, err);
    return st;
}

/* Writes the plan as a model directory into tmp: config.json, model.bin, tokenizer files. */
static sm_status write_plan(plan *pl, const char *tmp, sm_convert_info *info, sm_error *err) {
    sm_config *c = &pl->cfg;
    c->n_files = 1;
    snprintf(c->files[0], SM_FILE_NAME_MAX, "model.bin");
    c->n_tensors = pl->n;
    c->tensors = calloc(pl->n, sizeof *c->tensors);
    if (!c->tensors) return sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    size_t off = SM_WEIGHTS_HEADER, maxrow = 1;
    for (size_t i = 0; i < pl->n; i++) {
        const otensor *t = &pl->t[i];
        sm_tensor_desc *d = &c->tensors[i];
        snprintf(d->name, sizeof d->name, "%s", t->name);
        d->dtype = out_dtype(pl, t, info);
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
    qwriter qw = {.cancel = pl->cancel};
    bool quantizes = false; /* a tensor quantized here (not copied as its source's blocks) */
    for (size_t i = 0; i < pl->n; i++)
        quantizes |= sm_dtype_quantized(c->tensors[i].dtype) && !same_blocks(&pl->t[i], c->tensors[i].dtype);
    if (quantizes) { /* a chunk holds at least one row */
        qw.cap = QCHUNK_BYTES / sizeof(float) > maxrow ? QCHUNK_BYTES / sizeof(float) : maxrow;
        qw.rows = malloc(qw.cap * sizeof *qw.rows);
        qw.out = malloc(qw.cap * sizeof *qw.rows); /* quantized: < 4 bytes a weight */
        if (pl->threads > 1 && sm_pool_create(&qw.pool, pl->threads)) qw.pool = NULL;
    }
    bool have = row && half && (!qw.cap || (qw.rows && qw.out));
    unsigned char hdr[SM_WEIGHTS_HEADER], zero[64] = {0};
    sm_weights_header(hdr);
    st = have ? write_all(f, hdr, sizeof hdr, path, err)
              : sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < pl->n && !st; i++) {
        if (pl->cancel && *pl->cancel) {
            st = sm_error_set(err, SM_ERR_CANCELLED, "interrupted");
            break;
        }
        const otensor *t = &pl->t[i];
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
    if (!st && pl->tok_json)
        st = sm_hf_tok_write(pl->tok_json, pl->tok_json_path, c->tokenizer, tmp, c->tok_bos,
                             c->tok_eos, err);
    if (!st && pl->tok_save) {
        char saved[2][SM_FILE_NAME_MAX];
        st = sm_tokenizer_save(pl->tok_save, tmp, saved, err);
    }
    return st;
}

/* Loads the tokenizer the written config names, so a bad tokenizer fails the conversion. */
static sm_status check_output(const char *dir, sm_error *err) {
    sm_config cfg;
    sm_status st = sm_config_load(&cfg, dir, err);
    if (st) return st;
    sm_tokenizer tok;
    st = sm_tokenizer_init(&tok, &cfg, dir, err);
    if (!st) sm_tokenizer_free(&tok);
    sm_config_free(&cfg);
    return st;
}

/*
** A message about a file of the temporary output (TMP/NAME: ...) names the
** source it came from instead: the --tokenizer file or the tokenizer files
** copied, tokenizer.json, or the source's config.
*/
static void blame_source(sm_error *err, const char *tmp, const plan *pl, const char *src) {
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
    if (!who && pl->tok_json && strncmp(name, "config.json", nl) != 0) who = pl->tok_json_path;
    if (!who) {
        snprintf(cfg, sizeof cfg, "%s%s", src, pl->from_dir ? "/config.json" : "");
        who = cfg;
    }
    char msg[sizeof err->msg];
    snprintf(msg, sizeof msg, "%.200s%.300s", who, rest);
    memcpy(err->msg, msg, sizeof msg);
}

/* ------------------------------------------------------------ llama2.c */

static sm_status from_llama2c(plan *pl, const char *path, const sm_convert_opts *o,
                              sm_error *err) {
    mapped *m;
    sm_status st = sm_convert_map(pl, path, &m, err);
    if (st) return st;
    if (!o->tokenizer)
        return sm_error_set(err, SM_ERR_INPUT,
                            "%s: a llama2.c checkpoint needs --tokenizer FILE (its tokenizer.bin)",
                            path);
    if (m->n < 28)
        return sm_error_set(err, SM_ERR_FORMAT, "%s: %zu bytes, too short for a llama2.c header",
                            path, m->n);
    if (memcmp(m->p, "24ka", 4) == 0)
        return sm_error_set(err, SM_ERR_UNSUPPORTED,
                            "%s: a llama2.c version %u checkpoint; this converter reads the "
                            "legacy format (export.py --version 0)",
                            path, (unsigned)sm_read_u32le(m->p + 4));
    int32_t h[7];
    for (int i = 0; i < 7; i++) h[i] = (int32_t)sm_read_u32le(m->p + 4 * i);
    int64_t dim = h[0], hidden = h[1], L = h[2], H = h[3], KVH = h[4], V = h[5], ctx = h[6];
    bool shared = V > 0;
    if (V < 0) V = -V;
    static const char *const names[7] = {"dim", "hidden_dim", "n_layers", "n_heads",
                                         "n_kv_heads", "vocab_size", "seq_len"};
    static const int64_t hi[7] = {65536, 1 << 20, 1024, 1024, 1024, 1 << 24, 1 << 20};
    const int64_t vals[7] = {dim, hidden, L, H, KVH, V, ctx};
    for (int i = 0; i < 7; i++)
        if (vals[i] < 1 || vals[i] > hi[i])
            return sm_error_set(err, SM_ERR_FORMAT,
                                "%s: header %s is %lld, expected 1 to %lld (is this a llama2.c "
                                "checkpoint?)",
                                path, names[i], (long long)vals[i], (long long)hi[i]);
    if (dim % H || H % KVH || (dim / H) % 2)
        return sm_error_set(err, SM_ERR_FORMAT,
                            "%s: dim %lld, n_heads %lld, n_kv_heads %lld do not fit (dim must "
                            "split into heads of even size, heads into kv groups)",
                            path, (long long)dim, (long long)H, (long long)KVH);
    int64_t hs = dim / H, kvd = KVH * hs;
    /* every count above is bounded, so these products fit in 64 bits */
    int64_t floats = V * dim + L * dim + L * dim * dim + 2 * L * dim * kvd + L * dim * dim +
                     L * dim + 3 * L * dim * hidden + dim + ctx * hs;
    int64_t want = 28 + 4 * floats + (shared ? 0 : 4 * V * dim);
    if ((int64_t)m->n != want)
        return sm_error_set(err, SM_ERR_FORMAT,
                            "%s: %zu bytes, but the header (dim %lld, %lld layers, vocabulary "
                            "%lld%s) needs %lld",
                            path, m->n, (long long)dim, (long long)L, (long long)V,
                            shared ? ", shared classifier" : "", (long long)want);
    sm_config *c = &pl->cfg;
    c->arch = SM_ARCH_LLAMA;
    c->n_layer = (int)L, c->n_head = (int)H, c->n_kv_head = (int)KVH, c->n_embd = (int)dim;
    c->head_dim = (int)hs, c->n_ff = (int)hidden, c->n_ctx = (int)ctx, c->n_vocab = (int)V;
    c->norm_eps = 1e-5f, c->rope_theta = 10000.0f, c->activation = SM_ACT_SILU;
    c->tied_output = shared, c->bias = false;
    c->tokenizer = SM_TOKENIZER_SENTENCEPIECE;
    snprintf(c->tok_file[0], SM_FILE_NAME_MAX, "tokenizer.bin");
    c->tok_bos = 1, c->tok_eos = 2;
    snprintf(pl->tok_src[0], sizeof pl->tok_src[0], "%s", o->tokenizer);

    const unsigned char *p = m->p + 28;
#define TAKE(var, count)                 \
    const unsigned char *var = p;        \
    p += 4 * (size_t)(count)
    TAKE(emb, V * dim);
    TAKE(rms_att, L * dim);
    TAKE(wq, L * dim * dim);
    TAKE(wk, L * kvd * dim);
    TAKE(wv, L * kvd * dim);
    TAKE(wo, L * dim * dim);
    TAKE(rms_ffn, L * dim);
    TAKE(w1, L * hidden * dim);
    TAKE(w2, L * dim * hidden);
    TAKE(w3, L * hidden * dim);
    TAKE(rms_f, dim);
    TAKE(freqs, ctx * hs); /* precomputed rotary tables: recomputed at load instead */
    TAKE(wcls, shared ? 0 : V * dim);
#undef TAKE
    (void)freqs;
    otensor *t;
    char nm[SM_NAME_MAX];
    sm_convert_add_whole(pl, "tok_embd", V, dim, emb, SM_DTYPE_F32, OP_COPY);
    for (int64_t l = 0; l < L; l++) {
        size_t f = 4;
        snprintf(nm, sizeof nm, "blk.%lld.attn_norm.weight", (long long)l);
        sm_convert_add_whole(pl, nm, dim, 0, rms_att + f * (size_t)(l * dim), SM_DTYPE_F32, OP_COPY);
        snprintf(nm, sizeof nm, "blk.%lld.attn_qkv.weight", (long long)l);
        t = sm_convert_add_tensor(pl, nm, dim + 2 * kvd, dim);
        sm_convert_add_part(t, wq + f * (size_t)(l * dim * dim), SM_DTYPE_F32, dim, dim, OP_COPY, 0);
        sm_convert_add_part(t, wk + f * (size_t)(l * kvd * dim), SM_DTYPE_F32, kvd, dim, OP_COPY, 0);
        sm_convert_add_part(t, wv + f * (size_t)(l * kvd * dim), SM_DTYPE_F32, kvd, dim, OP_COPY, 0);
        snprintf(nm, sizeof nm, "blk.%lld.attn_out.weight", (long long)l);
        sm_convert_add_whole(pl, nm, dim, dim, wo + f * (size_t)(l * dim * dim), SM_DTYPE_F32, OP_COPY);
        snprintf(nm, sizeof nm, "blk.%lld.ffn_norm.weight", (long long)l);
        sm_convert_add_whole(pl, nm, dim, 0, rms_ffn + f * (size_t)(l * dim), SM_DTYPE_F32, OP_COPY);
        snprintf(nm, sizeof nm, "blk.%lld.ffn_gate.weight", (long long)l);
        sm_convert_add_whole(pl, nm, hidden, dim, w1 + f * (size_t)(l * hidden * dim), SM_DTYPE_F32, OP_COPY);
        snprintf(nm, sizeof nm, "blk.%lld.ffn_up.weight", (long long)l);
        sm_convert_add_whole(pl, nm, hidden, dim, w3 + f * (size_t)(l * hidden * dim), SM_DTYPE_F32, OP_COPY);
        snprintf(nm, sizeof nm, "blk.%lld.ffn_down.weight", (long long)l);
        sm_convert_add_whole(pl, nm, dim, hidden, w2 + f * (size_t)(l * dim * hidden), SM_DTYPE_F32, OP_COPY);
    }
    sm_convert_add_whole(pl, "norm_f.weight", dim, 0, rms_f, SM_DTYPE_F32, OP_COPY);
    if (!shared) {
        sm_convert_add_whole(pl, "output.weight", V, dim, wcls, SM_DTYPE_F32, OP_COPY);
    }
    return SM_OK;
}

/* ----------------------------------------------------------- smallmind */

/* dir's config.json: 1 if it says "format": "smallmind", 2 if it has "model_type" and no "format" (Hugging Face), else 0. */
static int config_kind(const char *dir) {
    char path[4400], *buf;
    size_t len;
    cJSON *j = NULL;
    sm_error e;
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (sm_read_file(path, 64u << 20, &buf, &len, &e)) return 0;
    int kind = 0;
    if (!sm_json_parse_strict(buf, len, path, &j, &e) && cJSON_IsObject(j)) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(j, "format");
        if (cJSON_IsString(f) && strcmp(f->valuestring, "smallmind") == 0)
            kind = 1;
        else if (!f && cJSON_GetObjectItemCaseSensitive(j, "model_type"))
            kind = 2;
    }
    cJSON_Delete(j);
    free(buf);
    return kind;
}

bool sm_convert_is_smallmind_dir(const char *dir) {
    return config_kind(dir) == 1;
}

bool sm_convert_is_hf_dir(const char *dir) {
    return config_kind(dir) == 2;
}

/* A smallmind directory (to re-type its matrices): every tensor copied, the tokenizer files too. */
static sm_status from_smallmind(plan *pl, const char *dir, sm_error *err) {
    sm_status st = sm_model_load(&pl->src_model, dir, true, err);
    if (st) return st;
    const sm_config *s = sm_model_config(pl->src_model);
    pl->cfg = *s;
    pl->cfg.tensors = NULL;
    pl->cfg.n_tensors = 0;
    if (!sm_convert_dup_chat(&pl->cfg)) return sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < s->n_tensors; i++) {
        const sm_tensor_desc *d = &s->tensors[i];
        if (d->ndim > 2)
            return sm_error_set(err, SM_ERR_UNSUPPORTED, "%s: tensor %s has %d dimensions", dir,
                                d->name, d->ndim);
        sm_convert_add_whole(pl, d->name, d->shape[0], d->ndim == 2 ? d->shape[1] : 0,
                             sm_model_tensor_data(pl->src_model, i), d->dtype, OP_COPY);
    }
    for (int k = 0; k < 2; k++)
        if (s->tok_file[k][0]) snprintf(pl->tok_src[k], sizeof pl->tok_src[k], "%s/%s", dir, s->tok_file[k]);
    return SM_OK;
}

/* ---------------------------------------------------------------- GGUF */

/* Whether the file at path starts with GGUF's magic. */
/* A name ending in .gguf (what the file is meant to be, whatever it holds). */
static bool gguf_name(const char *path) {
    size_t n = strlen(path);
    return n > 5 && strcmp(path + n - 5, ".gguf") == 0;
}

static bool is_gguf(const char *path) {
    unsigned char h[4];
    FILE *f = fopen(path, "rb");
    bool yes = f && fread(h, 1, 4, f) == 4 && sm_gguf_magic(h, 4);
    if (f) fclose(f);
    return yes;
}

/*
** A GGUF file: its tensors under smallmind's names (a Llama's separate Q, K
** and V rows concatenated into the fused matrix), its tokenizer written as
** smallmind's files.
*/
static sm_status from_gguf(plan *pl, const char *path, sm_error *err) {
    sm_status st = sm_model_load(&pl->src_model, path, true, err); /* checked as generate does */
    if (st) return st;
    const sm_config *s = sm_model_config(pl->src_model);
    pl->cfg = *s;
    pl->cfg.tensors = NULL, pl->cfg.n_tensors = 0, pl->cfg.gguf = NULL;
    if (!sm_convert_dup_chat(&pl->cfg)) return sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < s->n_tensors; i++) {
        const sm_tensor_desc *d = &s->tensors[i];
        const unsigned char *data = sm_model_tensor_data(pl->src_model, i);
        const char *q = strstr(d->name, ".attn_q.weight");
        if (strstr(d->name, ".attn_k.weight") || strstr(d->name, ".attn_v.weight")) continue;
        if (d->ndim > 2)
            return sm_error_set(err, SM_ERR_UNSUPPORTED, "%s: tensor %s has %d dimensions", path,
                                d->name, d->ndim);
        if (!q) {
            sm_convert_add_whole(pl, d->name, d->shape[0], d->ndim == 2 ? d->shape[1] : 0, data,
                                 d->dtype, OP_COPY);
            continue;
        }
        char nm[SM_NAME_MAX];
        const sm_tensor_desc *kv[2] = {NULL, NULL};
        size_t kvi[2] = {0, 0};
        for (int k = 0; k < 2; k++) {
            snprintf(nm, sizeof nm, "%.*s.attn_%c.weight", (int)(q - d->name), d->name, k ? 'v' : 'k');
            for (size_t j = 0; j < s->n_tensors; j++)
                if (strcmp(s->tensors[j].name, nm) == 0) kv[k] = &s->tensors[j], kvi[k] = j;
            if (!kv[k] || kv[k]->ndim != 2 || kv[k]->shape[1] != d->shape[1])
                return sm_error_set(err, SM_ERR_FORMAT, "%s: %s is %s", path, nm,
                                    kv[k] ? "not a matrix as wide as the Q projection" : "missing");
        }
        snprintf(nm, sizeof nm, "%.*s.attn_qkv.weight", (int)(q - d->name), d->name);
        otensor *t = sm_convert_add_tensor(pl, nm, d->shape[0] + kv[0]->shape[0] + kv[1]->shape[0],
                                           d->shape[1]);
        sm_convert_add_part(t, data, d->dtype, d->shape[0], d->shape[1], OP_COPY, 0);
        for (int k = 0; k < 2; k++)
            sm_convert_add_part(t, sm_model_tensor_data(pl->src_model, kvi[k]), kv[k]->dtype,
                                kv[k]->shape[0], kv[k]->shape[1], OP_COPY, 0);
    }
    if (s->tokenizer != SM_TOKENIZER_BYTE) {
        if (!(pl->tok_save = calloc(1, sizeof *pl->tok_save)))
            return sm_error_set(err, SM_ERR_NOMEM, "out of memory");
        if ((st = sm_tokenizer_init(pl->tok_save, s, path, err))) {
            free(pl->tok_save);
            pl->tok_save = NULL;
            return st;
        }
        bool spm = s->tokenizer == SM_TOKENIZER_SENTENCEPIECE;
        snprintf(pl->cfg.tok_file[0], SM_FILE_NAME_MAX, "%s", spm ? "tokenizer.bin" : "vocab.json");
        snprintf(pl->cfg.tok_file[1], SM_FILE_NAME_MAX, "%s", spm ? "" : "merges.txt");
    }
    return SM_OK;
}

/* ------------------------------------------------------------- driver */

sm_status sm_convert(const char *src, const char *out, const sm_convert_opts *o,
                     sm_convert_info *info, sm_error *err) {
    memset(info, 0, sizeof *info);
    struct stat sb;
    if (stat(src, &sb) != 0)
        return sm_error_set(err, SM_ERR_IO, "cannot open '%s': %s", src, strerror(errno));
    if (!S_ISDIR(sb.st_mode) && !S_ISREG(sb.st_mode)) /* a FIFO would block the open for ever */
        return sm_error_set(err, SM_ERR_INPUT, "'%s' is not a regular file (a model is a directory, a "
                            "GGUF file or a llama2.c checkpoint)", src);
    bool to_gguf = gguf_name(out);
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
    plan pl;
    memset(&pl, 0, sizeof pl);
    pl.dtype = o->dtype;
    pl.mix_m = o->mix_m;
    pl.threads = o->threads > QMAX_THREADS ? QMAX_THREADS : o->threads;
    pl.cancel = o->cancel;
    sm_status st;
    bool gguf = !S_ISDIR(sb.st_mode) && (is_gguf(src) || gguf_name(src));
    bool sm_dir = S_ISDIR(sb.st_mode) && sm_convert_is_smallmind_dir(src);
    if (o->tokenizer && (gguf || sm_dir)) /* it would be ignored: say so */
        return sm_error_set(err, SM_ERR_INPUT, "--tokenizer is for a llama2.c checkpoint or a Hugging "
                            "Face directory; '%s' is a %s with its own tokenizer", src,
                            gguf ? "GGUF file" : "smallmind directory");
    if (sm_dir) {
        pl.from_dir = true;
        pl.keep = o->keep;
        st = from_smallmind(&pl, src, err);
        snprintf(info->source, sizeof info->source, "smallmind %s", sm_arch_name(pl.cfg.arch));
    } else if (S_ISDIR(sb.st_mode)) {
        pl.from_dir = true;
        st = sm_convert_from_hf(&pl, src, o, err);
        snprintf(info->source, sizeof info->source, "Hugging Face %s",
                 pl.cfg.arch == SM_ARCH_LLAMA ? "llama" : "gpt2");
    } else if (gguf) { /* GGUF's magic, or a .gguf name (its header then says what is wrong) */
        pl.keep = o->keep;
        st = from_gguf(&pl, src, err);
        snprintf(info->source, sizeof info->source, "GGUF %s", sm_arch_name(pl.cfg.arch));
    } else {
        st = from_llama2c(&pl, src, o, err);
        snprintf(info->source, sizeof info->source, "llama2.c checkpoint");
    }
    char tmp[4200];
    if (!st && pl.nomem) st = sm_error_set(err, SM_ERR_NOMEM, "out of memory planning the conversion");
    if (!st && (size_t)snprintf(tmp, sizeof tmp, "%s.tmp-%ld", out, (long)getpid()) >= sizeof tmp)
        st = sm_error_set(err, SM_ERR_INPUT, "output path '%s' is too long", out);
    if (st) {
        sm_convert_plan_free(&pl);
        return st;
    }
    sm_remove_dir(tmp);
    sm_remove_stale_tmp(out);
    if (mkdir(tmp, 0755) != 0) {
        sm_convert_plan_free(&pl);
        return sm_error_set(err, SM_ERR_IO, "cannot create '%s': %s", tmp, strerror(errno));
    }
    st = write_plan(&pl, tmp, info, err);
    if (!st && (st = check_output(tmp, err))) blame_source(err, tmp, &pl, src);
    sm_convert_plan_free(&pl);
    if (!st && rename(tmp, out) != 0)
        st = sm_error_set(err, SM_ERR_IO, "cannot rename '%s' to '%s': %s", tmp, out, strerror(errno));
    if (st) sm_remove_dir(tmp);
    return st;
}

