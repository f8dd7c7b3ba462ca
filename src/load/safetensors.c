/*
** safetensors.c -- safetensors files for the Hugging Face planner
** (load_internal.h): an 8-byte header length, a JSON header naming each
** tensor's dtype, shape and byte range, then the data, mapped in place.
*/
#include "load_internal.h"

#include "json_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ST_HEADER_MAX (100u << 20) /* safetensors JSON header cap */

static int by_data(const void *a, const void *b) {
    const st_tensor *x = *(const st_tensor *const *)a, *y = *(const st_tensor *const *)b;
    return x->data < y->data ? -1 : x->data > y->data;
}

/*
** The tensors set->t[first..] of one file must tile its data section as the
** safetensors format requires: in offset order each starts where the one
** before ends, the first at 0, the last at the end; no gap, no overlap (two
** tensors sharing bytes), nothing after.
*/
static sm_status st_check_tiling(st_set *set, size_t first, const unsigned char *data,
                                 size_t data_len, const char *path, sm_error *err) {
    size_t n = set->n - first;
    const st_tensor **order = malloc((n ? n : 1) * sizeof *order);
    if (!order) return sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) order[i] = &set->t[first + i];
    qsort(order, n, sizeof *order, by_data);
    size_t at = 0;
    sm_status st = SM_OK;
    for (size_t i = 0; i < n && !st; i++) {
        size_t b = (size_t)(order[i]->data - data);
        if (b < at)
            st = sm_error_set(err, SM_ERR_FORMAT, "%s: tensors %s and %s overlap (data_offsets)",
                              path, order[i - 1]->name, order[i]->name);
        else if (b > at)
            st = sm_error_set(err, SM_ERR_FORMAT,
                              "%s: data bytes %zu..%zu belong to no tensor (before %s)", path, at,
                              b, order[i]->name);
        at = b + order[i]->nbytes;
    }
    if (!st && at != data_len)
        st = sm_error_set(err, SM_ERR_FORMAT,
                          "%s: %zu bytes after the last tensor's data; the tensors must cover the "
                          "data section exactly",
                          path, data_len - at);
    free(order);
    return st;
}

/* Reads one safetensors file's header and records its tensors (checked against the file). */
sm_status sm_st_read(sm_plan *pl, st_set *set, const char *path, sm_error *err) {
    sm_plan_map *m;
    sm_status st = sm_plan_map_file(pl, path, &m, err);
    if (st) return st;
    if (m->n < 8)
        return sm_error_set(err, SM_ERR_FORMAT, "%s: %zu bytes, too short for safetensors", path,
                            m->n);
    uint64_t hn = sm_read_u64le(m->p);
    if (hn > ST_HEADER_MAX || hn > m->n - 8)
        return sm_error_set(err, SM_ERR_FORMAT,
                            "%s: header length %llu does not fit the file (%zu bytes)", path,
                            (unsigned long long)hn, m->n);
    cJSON *root;
    if ((st = sm_json_parse_strict((const char *)m->p + 8, (size_t)hn, path, &root, err)))
        return st;
    size_t data0 = 8 + (size_t)hn, data_len = m->n - data0, first = set->n;
    if (!cJSON_IsObject(root)) st = sm_error_set(err, SM_ERR_FORMAT, "%s: header is not an object", path);
    for (const cJSON *e = root ? root->child : NULL; e && !st; e = e->next) {
        if (strcmp(e->string, "__metadata__") == 0) { /* a map of strings to strings */
            bool strings = cJSON_IsObject(e);
            for (const cJSON *k = strings ? e->child : NULL; k; k = k->next) strings = strings && cJSON_IsString(k);
            if (!strings)
                st = sm_error_set(err, SM_ERR_FORMAT, "%s: __metadata__ must be an object of strings",
                                  path);
            continue;
        }
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
        const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
        const cJSON *of = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
        if (strlen(e->string) >= SM_NAME_MAX || !cJSON_IsString(dt) || !cJSON_IsArray(sh) ||
            !cJSON_IsArray(of) || cJSON_GetArraySize(of) != 2) {
            st = sm_error_set(err, SM_ERR_FORMAT,
                              "%s: tensor \"%.60s\" needs dtype, shape and two data_offsets",
                              path, e->string);
            break;
        }
        st_tensor x = {0};
        snprintf(x.name, sizeof x.name, "%s", e->string);
        const char *d = dt->valuestring;
        x.dt = strcmp(d, "F32") == 0 ? SM_DTYPE_F32 : strcmp(d, "F16") == 0 ? SM_DTYPE_F16
             : strcmp(d, "BF16") == 0 ? SM_DTYPE_BF16 : SM_DTYPE_COUNT;
        if (x.dt == SM_DTYPE_COUNT) {
            st = sm_error_set(err, SM_ERR_UNSUPPORTED,
                              "%s: tensor %s has dtype %s (supported: F32, F16, BF16)", path,
                              x.name, d);
            break;
        }
        x.ndim = cJSON_GetArraySize(sh);
        size_t bytes = sm_dtype_row_bytes(x.dt, 1);
        bool ok = x.ndim >= 0 && x.ndim <= SM_MAX_DIMS;
        int k = 0;
        for (const cJSON *s = sh->child; ok && s; s = s->next, k++) {
            double v = cJSON_IsNumber(s) ? s->valuedouble : -1;
            ok = v >= 1 && v <= INT32_MAX && v == floor(v) && sm_size_mul(&bytes, bytes, (size_t)v);
            if (ok) x.shape[k] = (int64_t)v;
        }
        double b = cJSON_IsNumber(of->child) ? of->child->valuedouble : -1;
        double en = cJSON_IsNumber(of->child->next) ? of->child->next->valuedouble : -1;
        if (!ok || b < 0 || en < b || en > (double)data_len || b != floor(b) || en != floor(en) ||
            (size_t)(en - b) != bytes) {
            st = sm_error_set(err, SM_ERR_FORMAT,
                              "%s: tensor %s: shape, dtype and data_offsets [%.0f, %.0f] do not "
                              "agree with each other or the file (%zu data bytes)",
                              path, x.name, b, en, data_len);
            break;
        }
        x.nbytes = bytes;
        x.data = m->p + data0 + (size_t)b;
        if (set->n == set->cap) {
            size_t cap = set->cap ? 2 * set->cap : 256;
            st_tensor *t = realloc(set->t, cap * sizeof *t);
            if (!t) {
                st = sm_error_set(err, SM_ERR_NOMEM, "out of memory");
                break;
            }
            set->t = t, set->cap = cap;
        }
        for (size_t i = 0; i < set->n && !st; i++)
            if (strcmp(set->t[i].name, x.name) == 0)
                st = sm_error_set(err, SM_ERR_FORMAT, "%s: tensor %s appears twice", path, x.name);
        if (!st) set->t[set->n++] = x;
    }
    cJSON_Delete(root);
    return st ? st : st_check_tiling(set, first, m->p + data0, data_len, path, err);
}

st_tensor *sm_st_find(st_set *set, const char *name) {
    for (size_t i = 0; i < set->n; i++)
        if (strcmp(set->t[i].name, name) == 0) return &set->t[i];
    return NULL;
}

/*
** Tensor `name` (also tried with `prefix` in front), checked to be
** shaped (d0[, d1]) (d1 = 0: a vector); marks it used.
*/
sm_status sm_st_take(st_set *set, const char *prefix, const char *name, int64_t d0,
                         int64_t d1, st_tensor **out, sm_error *err) {
    char full[SM_NAME_MAX * 2];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    st_tensor *x = sm_st_find(set, full);
    if (!x) x = sm_st_find(set, name);
    if (!x) return sm_error_set(err, SM_ERR_FORMAT, "%s: missing tensor %s", set->where, full);
    int nd = d1 ? 2 : 1;
    if (x->ndim != nd || x->shape[0] != d0 || (nd == 2 && x->shape[1] != d1))
        return sm_error_set(err, SM_ERR_FORMAT,
                            "%s: tensor %s has %d dimensions [%lld, %lld], expected "
                            "[%lld, %lld]",
                            set->where, x->name, x->ndim, (long long)x->shape[0],
                            (long long)(x->ndim > 1 ? x->shape[1] : 0), (long long)d0,
                            (long long)d1);
    x->used = true;
    *out = x;
    return SM_OK;
}

