/*
** load_internal.h -- what the loading layer's files share: a Hugging Face
** directory's safetensors files (safetensors.c), read by hf.c.
*/
#ifndef SM_LOAD_INTERNAL_H
#define SM_LOAD_INTERNAL_H

#include "sm_plan.h"

typedef struct st_tensor {
    char name[SM_NAME_MAX];
    sm_dtype dt;
    int ndim;
    int64_t shape[SM_MAX_DIMS];
    const unsigned char *data;
    size_t nbytes;
    bool used;
} st_tensor;

typedef struct st_set {
    st_tensor *t;
    size_t n, cap;
    const char *where; /* the source directory, for messages */
} st_set;

/*
** Maps safetensors file path into the plan and adds its tensors to set:
** the JSON header (at most 100 MB) checked, every tensor's dtype (F32, F16,
** BF16), shape and byte range checked against the file, the ranges tiling
** the data without gaps or overlaps, no name twice.
*/
sm_status sm_st_read(sm_plan *pl, st_set *set, const char *path, sm_error *err);
/* The tensor named name, or NULL. */
st_tensor *sm_st_find(st_set *set, const char *name);
/*
** Tensor `name` (also tried with `prefix` in front), checked to be
** shaped (d0[, d1]) (d1 = 0: a vector); marks it used.
*/
sm_status sm_st_take(st_set *set, const char *prefix, const char *name, int64_t d0, int64_t d1,
                     st_tensor **out, sm_error *err);

#endif
