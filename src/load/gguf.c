/*
** gguf.c -- GGUF files read and validated (sm_gguf.h). Every read goes
** through a cursor that knows how many bytes are left, so no count or
** length in the file is trusted before it is checked against them.
*/
#include "sm_gguf.h"
#include "sm_config.h"
#include "sm_half.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const type_names[] = {
    "F32", "F16", "Q4_0", "Q4_1", "type 4 (removed Q4_2)", "type 5 (removed Q4_3)", "Q5_0",
    "Q5_1", "Q8_0", "Q8_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS",
    "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8", "I16", "I32", "I64", "F64",
    "IQ1_M", "BF16", "Q4_0_4_4", "Q4_0_4_8", "Q4_0_8_8", "TQ1_0", "TQ2_0", "IQ4_NL_4_4",
    "IQ4_NL_4_8", "IQ4_NL_8_8",
};

const char *sm_gguf_type_name(uint32_t t) {
    return t < sizeof type_names / sizeof *type_names ? type_names[t] : "unknown";
}

/* The ggml type of each sm_dtype, in sm_dtype order. */
static const uint32_t ggml_types[SM_DTYPE_COUNT] = {0, 1, 30, 8, 2, 12, 13, 14, 3, 6, 7, 10, 11, 20, 23};

uint32_t sm_gguf_type_of(sm_dtype dt) {
    return ggml_types[dt];
}

/* smallmind's dtype for ggml type t, or SM_DTYPE_COUNT. */
static sm_dtype dtype_of(uint32_t t) {
    int d = 0;
    while (d < SM_DTYPE_COUNT && ggml_types[d] != t) d++;
    return (sm_dtype)d;
}

bool sm_gguf_magic(const void *p, size_t n) {
    return n >= 4 && memcmp(p, "GGUF", 4) == 0;
}

/* Bytes of one scalar of type t (strings and arrays: 0). */
static size_t scalar_size(uint32_t t) {
    static const uint8_t sz[SM_GGUF_NTYPES] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return t < SM_GGUF_NTYPES ? sz[t] : 0;
}

static const char *const value_names[SM_GGUF_NTYPES] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
};

typedef struct {
    const uint8_t *p;
    size_t left;
    const char *path;
    sm_error *err;
} cursor;

static sm_status truncated(cursor *c, const char *what) {
    return sm_error_set(c->err, SM_ERR_FORMAT, "%s: truncated in %s", c->path, what);
}

static sm_status take(cursor *c, size_t n, const uint8_t **out, const char *what) {
    if (n > c->left) return truncated(c, what);
    *out = c->p;
    c->p += n, c->left -= n;
    return SM_OK;
}

static sm_status u32(cursor *c, uint32_t *v, const char *what) {
    const uint8_t *q = NULL;
    sm_status st = take(c, 4, &q, what);
    if (!st) *v = sm_read_u32le(q);
    return st;
}

static sm_status u64(cursor *c, uint64_t *v, const char *what) {
    const uint8_t *q = NULL;
    sm_status st = take(c, 8, &q, what);
    if (!st) *v = sm_read_u64le(q);
    return st;
}

/* A string: its length checked against the bytes left before it is used. */
static sm_status str(cursor *c, const char **s, size_t *len, const char *what) {
    uint64_t n;
    sm_status st = u64(c, &n, what);
    if (st) return st;
    if (n > c->left)
        return sm_error_set(c->err, SM_ERR_FORMAT,
                            "%s: %s is a string of %llu bytes, but only %zu bytes are left", c->path,
                            what, (unsigned long long)n, c->left);
    const uint8_t *q = NULL;
    take(c, (size_t)n, &q, what);
    *s = (const char *)q, *len = (size_t)n;
    return SM_OK;
}

/* Skips one value of type t (not an array), checking strings' lengths. */
static sm_status skip_value(cursor *c, uint32_t t, const char *what) {
    if (t == SM_GGUF_STRING) {
        const char *s;
        size_t n;
        return str(c, &s, &n, what);
    }
    const uint8_t *q = NULL;
    return take(c, scalar_size(t), &q, what);
}

static sm_status parse_kv(cursor *c, sm_gguf_kv *kv, size_t i) {
    char what[96];
    snprintf(what, sizeof what, "metadata entry %zu's key", i);
    sm_status st = str(c, &kv->key, &kv->key_len, what);
    if (st) return st;
    if (kv->key_len == 0 || kv->key_len > 255)
        return sm_error_set(c->err, SM_ERR_FORMAT, "%s: metadata entry %zu has a key of %zu bytes "
                            "(1 to 255 expected)", c->path, i, kv->key_len);
    snprintf(what, sizeof what, "metadata %.*s", (int)(kv->key_len < 64 ? kv->key_len : 64), kv->key);
    if ((st = u32(c, &kv->type, what))) return st;
    if (kv->type >= SM_GGUF_NTYPES)
        return sm_error_set(c->err, SM_ERR_FORMAT, "%s: %s has value type %u (0 to 12 expected)",
                            c->path, what, kv->type);
    kv->n = 1, kv->elem = kv->type;
    if (kv->type != SM_GGUF_ARRAY) {
        kv->val = c->p;
        return skip_value(c, kv->type, what);
    }
    if ((st = u32(c, &kv->elem, what)) || (st = u64(c, &kv->n, what))) return st;
    if (kv->elem == SM_GGUF_ARRAY)
        return sm_error_set(c->err, SM_ERR_FORMAT, "%s: %s is an array of arrays (not supported)",
                            c->path, what);
    if (kv->elem >= SM_GGUF_NTYPES)
        return sm_error_set(c->err, SM_ERR_FORMAT, "%s: %s is an array of value type %u "
                            "(0 to 12 expected)", c->path, what, kv->elem);
    /* each element takes at least its scalar size, or 8 bytes of string length */
    size_t least = kv->elem == SM_GGUF_STRING ? 8 : scalar_size(kv->elem);
    if (kv->n > c->left / least)
        return sm_error_set(c->err, SM_ERR_FORMAT,
                            "%s: %s claims %llu elements, more than the %zu bytes left can hold",
                            c->path, what, (unsigned long long)kv->n, c->left);
    kv->val = c->p;
    if (kv->elem != SM_GGUF_STRING) {
        const uint8_t *q;
        return take(c, (size_t)kv->n * least, &q, what);
    }
    for (uint64_t k = 0; k < kv->n && !st; k++) st = skip_value(c, SM_GGUF_STRING, what);
    return st;
}

static bool same(const char *a, size_t an, const char *b, size_t bn) {
    return an == bn && memcmp(a, b, an) == 0;
}

static int cmp_offset(const void *a, const void *b) {
    const sm_gguf_tensor *x = *(const sm_gguf_tensor *const *)a, *y = *(const sm_gguf_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static sm_status parse_tensor(cursor *c, sm_gguf_tensor *t, size_t i) {
    char what[96];
    snprintf(what, sizeof what, "tensor info %zu's name", i);
    sm_status st = str(c, &t->name, &t->name_len, what);
    if (st) return st;
    if (t->name_len == 0 || t->name_len >= SM_NAME_MAX)
        return sm_error_set(c->err, SM_ERR_FORMAT, "%s: tensor %zu has a name of %zu bytes "
                            "(1 to %d expected)", c->path, i, t->name_len, SM_NAME_MAX - 1);
    snprintf(what, sizeof what, "tensor %.*s", (int)t->name_len, t->name);
    uint32_t nd;
    if ((st = u32(c, &nd, what))) return st;
    if (nd < 1 || nd > 4)
        return sm_error_set(c->err, SM_ERR_FORMAT, "%s: %s has %u dimensions (1 to 4 expected)",
                            c->path, what, nd);
    t->ndim = (int)nd;
    size_t n = 1;
    for (uint32_t d = 0; d < nd; d++) {
        if ((st = u64(c, &t->ne[d], what))) return st;
        if (t->ne[d] == 0 || t->ne[d] > INT64_MAX || !sm_size_mul(&n, n, (size_t)t->ne[d]) ||
            n > (size_t)1 << 56) /* so every byte count below fits */
            return sm_error_set(c->err, SM_ERR_FORMAT,
                                "%s: %s has dimension %u of %llu (zero, or too many elements)",
                                c->path, what, d, (unsigned long long)t->ne[d]);
    }
    t->nelem = n;
    uint64_t off;
    if ((st = u32(c, &t->ggml_type, what)) || (st = u64(c, &off, what))) return st;
    t->dtype = dtype_of(t->ggml_type);
    if (t->dtype == SM_DTYPE_COUNT)
        return sm_error_set(c->err, SM_ERR_UNSUPPORTED,
                            "%s: %s has type %s, which smallmind does not run (supported: F32, "
                            "F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS)",
                            c->path, what, sm_gguf_type_name(t->ggml_type));
    size_t blk = sm_dtype_block(t->dtype);
    if (t->ne[0] % blk)
        return sm_error_set(c->err, SM_ERR_FORMAT,
                            "%s: %s is %s with rows of %llu, not whole %zu-element blocks",
                            c->path, what, sm_gguf_type_name(t->ggml_type),
                            (unsigned long long)t->ne[0], blk);
    t->nbytes = sm_dtype_row_bytes(t->dtype, (size_t)t->ne[0]) * (n / (size_t)t->ne[0]);
    t->offset = off > SIZE_MAX ? SIZE_MAX : (size_t)off; /* placed (and checked) later */
    return SM_OK;
}

sm_status sm_gguf_parse(sm_gguf *g, const uint8_t *buf, size_t size, const char *path,
                        sm_error *err) {
    memset(g, 0, sizeof *g);
    g->base = buf, g->size = size;
    cursor c = {buf, size, path, err};
    const uint8_t *q = NULL;
    uint64_t nt, nkv;
    sm_status st;
    if (size < 4 || !sm_gguf_magic(buf, size))
        return sm_error_set(err, SM_ERR_FORMAT,
                            "%s: not a GGUF file (no GGUF magic; a model is a GGUF file or a "
                            "directory with config.json)", path);
    take(&c, 4, &q, "the header");
    if ((st = u32(&c, &g->version, "the header"))) return st;
    if (g->version == 1)
        return sm_error_set(err, SM_ERR_UNSUPPORTED, "%s: GGUF version 1 is not supported (2 and 3 are)", path);
    if (g->version >= 0x01000000u)
        return sm_error_set(err, SM_ERR_UNSUPPORTED,
                            "%s: a big-endian GGUF file (version %u byte-swapped); only "
                            "little-endian files are supported", path, __builtin_bswap32(g->version));
    if (g->version != 2 && g->version != 3)
        return sm_error_set(err, SM_ERR_UNSUPPORTED, "%s: GGUF version %u is not supported (2 and 3 are)",
                            path, g->version);
    if ((st = u64(&c, &nt, "the header")) || (st = u64(&c, &nkv, "the header"))) return st;
    /* a metadata entry takes at least 8 + 1 + 4 + 1 bytes, a tensor info 8 + 1 + 4 + 8 + 4 + 8 */
    if (nkv > SM_GGUF_MAX_KV || nkv > c.left / 14)
        return sm_error_set(err, SM_ERR_FORMAT, "%s: the header claims %llu metadata entries, more "
                            "than the file's %zu bytes (or %d) allow", path,
                            (unsigned long long)nkv, size, SM_GGUF_MAX_KV);
    if (nt > SM_GGUF_MAX_TENSORS || nt > c.left / 33)
        return sm_error_set(err, SM_ERR_FORMAT, "%s: the header claims %llu tensors, more than the "
                            "file's %zu bytes (or %d) allow", path, (unsigned long long)nt, size,
                            SM_GGUF_MAX_TENSORS);
    g->n_kv = (size_t)nkv, g->n_tensors = (size_t)nt;
    g->kv = calloc(g->n_kv ? g->n_kv : 1, sizeof *g->kv);
    g->tensors = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *g->tensors);
    if (!g->kv || !g->tensors) return sm_error_set(err, SM_ERR_NOMEM, "out of memory reading %s", path);
    for (size_t i = 0; i < g->n_kv; i++)
        if ((st = parse_kv(&c, &g->kv[i], i))) return st;
    for (size_t i = 0; i < g->n_kv; i++) /* unique keys (a hash is not worth it at these counts) */
        for (size_t j = 0; j < i; j++)
            if (same(g->kv[i].key, g->kv[i].key_len, g->kv[j].key, g->kv[j].key_len))
                return sm_error_set(err, SM_ERR_FORMAT, "%s: metadata key %.*s appears twice", path,
                                    (int)(g->kv[i].key_len < 64 ? g->kv[i].key_len : 64), g->kv[i].key);
    g->alignment = 32;
    const sm_gguf_kv *al = sm_gguf_find(g, "general.alignment");
    if (al) {
        uint32_t a = al->type == SM_GGUF_U32 ? sm_read_u32le(al->val) : 0;
        if (a == 0 || (a & (a - 1)) || a > 65536)
            return sm_error_set(err, SM_ERR_FORMAT,
                                "%s: general.alignment must be a u32 power of two up to 65536", path);
        g->alignment = a;
    }
    for (size_t i = 0; i < g->n_tensors; i++)
        if ((st = parse_tensor(&c, &g->tensors[i], i))) return st;
    size_t pos = size - c.left;
    if (!sm_size_align(&g->data_off, pos, g->alignment) || (g->n_tensors && g->data_off > size))
        return sm_error_set(err, SM_ERR_FORMAT, "%s: no data section after the tensor infos", path);
    const sm_gguf_tensor **by = malloc((g->n_tensors ? g->n_tensors : 1) * sizeof *by);
    if (!by) return sm_error_set(err, SM_ERR_NOMEM, "out of memory reading %s", path);
    for (size_t i = 0; i < g->n_tensors && !st; i++) {
        sm_gguf_tensor *t = &g->tensors[i];
        size_t end;
        if (t->offset % g->alignment || t->offset > size - g->data_off ||
            !sm_size_add(&end, g->data_off + t->offset, t->nbytes) || end > size)
            st = sm_error_set(err, SM_ERR_FORMAT,
                              "%s: tensor %.*s's data (offset %zu, %zu bytes) is %s", path,
                              (int)t->name_len, t->name, t->offset, t->nbytes,
                              t->offset % g->alignment ? "not aligned" : "outside the file");
        t->offset += g->data_off;
        by[i] = t;
    }
    for (size_t i = 0; i < g->n_tensors && !st; i++)
        for (size_t j = 0; j < i && !st; j++)
            if (same(g->tensors[i].name, g->tensors[i].name_len, g->tensors[j].name, g->tensors[j].name_len))
                st = sm_error_set(err, SM_ERR_FORMAT, "%s: tensor name %.*s appears twice", path,
                                  (int)g->tensors[i].name_len, g->tensors[i].name);
    if (!st) qsort(by, g->n_tensors, sizeof *by, cmp_offset);
    /* the tensors tile the data section: each starts where the one before ends (aligned), the
       first at its start, and after the last only padding to the alignment (as llama.cpp and
       safetensors lay them out) */
    size_t end = g->data_off;
    for (size_t i = 0; i < g->n_tensors && !st; i++) {
        const sm_gguf_tensor *t = by[i];
        size_t want;
        if (!sm_size_align(&want, end, g->alignment)) want = SIZE_MAX;
        if (i && end > t->offset)
            st = sm_error_set(err, SM_ERR_FORMAT, "%s: tensors %.*s and %.*s overlap", path,
                              (int)by[i - 1]->name_len, by[i - 1]->name, (int)t->name_len, t->name);
        else if (t->offset != want)
            st = sm_error_set(err, SM_ERR_FORMAT,
                              "%s: %zu bytes of no tensor before tensor %.*s (offset %zu; its type "
                              "or shape does not match the data)", path, t->offset - end,
                              (int)t->name_len, t->name, t->offset - g->data_off);
        end = t->offset + t->nbytes;
    }
    if (!st && g->n_tensors && size > end && size - end >= g->alignment)
        st = sm_error_set(err, SM_ERR_FORMAT, "%s: %zu bytes after the last tensor (%.*s)", path,
                          size - end, (int)by[g->n_tensors - 1]->name_len, by[g->n_tensors - 1]->name);
    free(by);
    return st;
}

sm_status sm_gguf_open(sm_gguf *g, const char *path, bool use_mmap, sm_error *err) {
    memset(g, 0, sizeof *g);
    void *base;
    size_t size;
    bool mapped;
    sm_status st = sm_map_file(path, use_mmap, &base, &size, &mapped, err);
    if (st) return st;
    if (size == 0) return sm_error_set(err, SM_ERR_FORMAT, "%s: empty file, not a GGUF file", path);
    st = sm_gguf_parse(g, base, size, path, err);
    g->base = base, g->size = size, g->mapped = mapped, g->owned = true;
    if (st) sm_gguf_close(g);
    return st;
}

void sm_gguf_close(sm_gguf *g) {
    if (g->owned) sm_unmap((void *)g->base, g->size, g->mapped);
    free(g->kv);
    free(g->tensors);
    memset(g, 0, sizeof *g);
}

const sm_gguf_kv *sm_gguf_find(const sm_gguf *g, const char *key) {
    size_t n = strlen(key);
    for (size_t i = 0; i < g->n_kv; i++)
        if (same(g->kv[i].key, g->kv[i].key_len, key, n)) return &g->kv[i];
    return NULL;
}

const sm_gguf_tensor *sm_gguf_tensor_find(const sm_gguf *g, const char *name) {
    size_t n = strlen(name);
    for (size_t i = 0; i < g->n_tensors; i++)
        if (same(g->tensors[i].name, g->tensors[i].name_len, name, n)) return &g->tensors[i];
    return NULL;
}

static sm_status wrong(const sm_gguf_kv *kv, const char *key, const char *want, const char *path,
                       sm_error *err) {
    return sm_error_set(err, SM_ERR_FORMAT, "%s: metadata %s is %s%s, expected %s", path, key,
                        kv->type == SM_GGUF_ARRAY ? "an array of " : "a ",
                        value_names[kv->type == SM_GGUF_ARRAY ? kv->elem : kv->type], want);
}

sm_status sm_gguf_int(const sm_gguf *g, const char *key, int64_t lo, int64_t hi, int64_t *out,
                      bool *found, const char *path, sm_error *err) {
    const sm_gguf_kv *kv = sm_gguf_find(g, key);
    if (found) *found = kv != NULL;
    if (!kv) return SM_OK;
    const uint8_t *p = kv->val;
    int64_t v;
    bool big = false;
    switch (kv->type) {
    case SM_GGUF_U8: v = p[0]; break;
    case SM_GGUF_I8: v = (int8_t)p[0]; break;
    case SM_GGUF_U16: v = (uint16_t)(p[0] | p[1] << 8); break;
    case SM_GGUF_I16: v = (int16_t)(uint16_t)(p[0] | p[1] << 8); break;
    case SM_GGUF_U32: v = sm_read_u32le(p); break;
    case SM_GGUF_I32: v = (int32_t)sm_read_u32le(p); break;
    case SM_GGUF_U64: big = sm_read_u64le(p) > INT64_MAX; v = (int64_t)(sm_read_u64le(p) & INT64_MAX); break;
    case SM_GGUF_I64: v = (int64_t)sm_read_u64le(p); break;
    default: return wrong(kv, key, "an integer", path, err);
    }
    if (big)
        return sm_error_set(err, SM_ERR_FORMAT, "%s: metadata %s is %llu, expected %lld to %lld", path,
                            key, (unsigned long long)sm_read_u64le(p), (long long)lo, (long long)hi);
    if (v < lo || v > hi)
        return sm_error_set(err, SM_ERR_FORMAT, "%s: metadata %s is %lld, expected %lld to %lld",
                            path, key, (long long)v, (long long)lo, (long long)hi);
    *out = v;
    return SM_OK;
}

sm_status sm_gguf_float(const sm_gguf *g, const char *key, double *out, bool *found,
                        const char *path, sm_error *err) {
    const sm_gguf_kv *kv = sm_gguf_find(g, key);
    if (found) *found = kv != NULL;
    if (!kv) return SM_OK;
    if (kv->type == SM_GGUF_F32)
        *out = sm_bits_to_f32(sm_read_u32le(kv->val));
    else if (kv->type == SM_GGUF_F64) {
        uint64_t b = sm_read_u64le(kv->val);
        double d;
        memcpy(&d, &b, sizeof d);
        *out = d;
    } else
        return wrong(kv, key, "a float", path, err);
    return SM_OK;
}

sm_status sm_gguf_bool(const sm_gguf *g, const char *key, bool *out, bool *found,
                       const char *path, sm_error *err) {
    const sm_gguf_kv *kv = sm_gguf_find(g, key);
    if (found) *found = kv != NULL;
    if (!kv) return SM_OK;
    if (kv->type != SM_GGUF_BOOL || kv->val[0] > 1) return wrong(kv, key, "a bool (0 or 1)", path, err);
    *out = kv->val[0];
    return SM_OK;
}

sm_status sm_gguf_string(const sm_gguf *g, const char *key, const char **s, size_t *len,
                         bool *found, const char *path, sm_error *err) {
    const sm_gguf_kv *kv = sm_gguf_find(g, key);
    if (found) *found = kv != NULL;
    if (!kv) return SM_OK;
    if (kv->type != SM_GGUF_STRING) return wrong(kv, key, "a string", path, err);
    const uint8_t *p = kv->val;
    *s = sm_gguf_next_string(&p, len);
    if (memchr(*s, 0, *len)) /* read as text: a NUL would cut it ("llama\0..." read as llama) */
        return sm_error_set(err, SM_ERR_FORMAT, "%s: metadata %s has a NUL byte", path, key);
    return SM_OK;
}

sm_status sm_gguf_array(const sm_gguf *g, const char *key, uint32_t elem, const sm_gguf_kv **kv,
                        const char *path, sm_error *err) {
    *kv = sm_gguf_find(g, key);
    if (!*kv) return sm_error_set(err, SM_ERR_FORMAT, "%s: metadata %s is missing", path, key);
    if ((*kv)->type != SM_GGUF_ARRAY || (*kv)->elem != elem) {
        char want[40];
        snprintf(want, sizeof want, "an array of %s", value_names[elem]);
        return wrong(*kv, key, want, path, err);
    }
    return SM_OK;
}

sm_status sm_gguf_token_id(const sm_gguf *g, const char *key, int64_t n_vocab, int32_t *id,
                           const char *path, sm_error *err) {
    int64_t v;
    bool found;
    *id = -1;
    sm_status st = sm_gguf_int(g, key, -1, UINT32_MAX, &v, &found, path, err);
    if (st || !found || v == -1 || v == UINT32_MAX) return st;
    if (v >= n_vocab)
        return sm_error_set(err, SM_ERR_FORMAT, "%s: metadata %s is %lld, expected 0 to %lld", path, key,
                            (long long)v, (long long)n_vocab - 1);
    *id = (int32_t)v;
    return SM_OK;
}
