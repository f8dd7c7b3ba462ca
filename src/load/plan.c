/*
** plan.c -- the plan a source's tensors are read through (sm_plan.h): its
** mapped files, its tensors and their parts, and a row of a part as f32
** (or narrowed to f16 / bf16).
*/
#include "sm_plan.h"

#include "sm_half.h"
#include "sm_quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

sm_status sm_plan_map_file(sm_plan *pl, const char *path, sm_plan_map **out, sm_error *err) {
    if (pl->n_maps == SM_PLAN_FILES + 1)
        return sm_error_set(err, SM_ERR_UNSUPPORTED, "%s: more than %d weight files", path,
                            SM_PLAN_FILES);
    sm_plan_map *m = &pl->maps[pl->n_maps];
    void *p;
    sm_status st = sm_map_file(path, !pl->read, &p, &m->n, &m->mapped, err);
    if (st) return st;
    m->p = p;
    pl->n_maps++;
    *out = m;
    return SM_OK;
}

void sm_plan_free(sm_plan *pl) {
    for (int i = 0; i < pl->n_maps; i++)
        sm_unmap(pl->maps[i].p, pl->maps[i].n, pl->maps[i].mapped);
    free(pl->t);
    sm_config_free(&pl->cfg);
}

/* A new output tensor; its parts follow with add_part. Out of memory: pl->nomem, and a spare. */
sm_plan_tensor *sm_plan_add_tensor(sm_plan *pl, const char *name, int64_t rows, int64_t cols) {
    if (pl->n == pl->cap) {
        size_t cap = pl->cap ? 2 * pl->cap : 64;
        sm_plan_tensor *t = realloc(pl->t, cap * sizeof *t);
        if (!t) {
            pl->nomem = true;
            pl->spare.n_parts = 0;
            return &pl->spare;
        }
        pl->t = t;
        pl->cap = cap;
    }
    sm_plan_tensor *t = &pl->t[pl->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->rows = rows;
    t->cols = cols;
    return t;
}

void sm_plan_add_part(sm_plan_tensor *t, const unsigned char *src, sm_dtype dt, int64_t rows,
                     int64_t cols, int op, int64_t head_dim) {
    t->parts[t->n_parts++] = (sm_plan_part){src, dt, rows, cols, op, head_dim};
}

/* An output tensor made of one source tensor of the same shape. */
void sm_plan_add_whole(sm_plan *pl, const char *name, int64_t rows, int64_t cols,
                      const unsigned char *src, sm_dtype dt, int op) {
    sm_plan_add_part(sm_plan_add_tensor(pl, name, rows, cols), src, dt, rows, cols, op, 0);
}

/* Element i of a little-endian source tensor (any alignment), widened to f32. */
static float load_elem(const unsigned char *p, sm_dtype dt, size_t i) {
    if (dt == SM_DTYPE_F32) return sm_bits_to_f32(sm_read_u32le(p + 4 * i));
    uint16_t h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
    return dt == SM_DTYPE_BF16 ? sm_bf16_to_f32(h) : sm_f16_to_f32(h);
}

/* Output row r of part pt (cols elements, or one element for vectors) into out. */
void sm_plan_part_row(const sm_plan_part *pt, int64_t r, float *out) {
    int64_t C = pt->cols ? pt->cols : 1;
    if (pt->op == SM_OP_TRANSPOSE) { /* source is [cols, rows] */
        for (int64_t c = 0; c < C; c++)
            out[c] = load_elem(pt->src, pt->dt, (size_t)(c * pt->rows + r));
        return;
    }
    int64_t sr = r;
    if (sm_dtype_quantized(pt->dt)) { /* SM_OP_COPY only: a smallmind directory's rows */
        size_t rb = sm_dtype_row_bytes(pt->dt, (size_t)C);
        sm_quant_dequant(out, pt->src + (size_t)r * rb, pt->dt, (size_t)C);
        return;
    }
    if (pt->op == SM_OP_ROPE) { /* out row 2j <- source row j, 2j+1 <- j + hd/2, per head */
        int64_t hd = pt->head_dim, h = r / hd, d = r % hd;
        sr = h * hd + (d % 2 ? hd / 2 + d / 2 : d / 2);
    }
    for (int64_t c = 0; c < C; c++) out[c] = load_elem(pt->src, pt->dt, (size_t)(sr * C + c));
    if (pt->op == SM_OP_PLUS1)
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


sm_status sm_plan_plain_row(const sm_plan_tensor *t, int k, int64_t r, int64_t orow, sm_dtype dt,
                               float *row, void *out, sm_error *err) {
    sm_plan_part_row(&t->parts[k], r, row);
    size_t C = (size_t)(t->cols ? t->cols : 1);
    if (dt != SM_DTYPE_F32) return narrow_row(out, row, C, dt, t->name, orow, err);
    if (out != row) memcpy(out, row, C * sizeof *row);
    return SM_OK;
}

