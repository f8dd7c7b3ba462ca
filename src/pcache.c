/*
** pcache.c -- the prompt-cache file (sm_pcache.h): identity, reading with
** every check, matching under the prefix cache's rules, atomic writing.
*/
#include "sm_pcache.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sm_config.h"
#include "sm_kernels.h"

#define B SM_PREFIX_BLOCK
/* 3: the kernels' identity says which 16-bit weights prefill on vdpbf16ps (the avx512 table's
   bf16 products changed arithmetic under the same name); 4: and whether q4_0 / q8_0 matrices are
   repacked (/r32: their decoding products sum as the packed ones do); 5: a lone query (decoded,
   or a prompt's last when T % 4 == 1) attends beside the other heads of its key/value head; 6:
   /r32 lays out f32 matrices as panels too (every f32 product then sums as the packed one); 7: and
   q4_k / q5_k matrices (q4_k_r32, q5_k_r32: their decoding products sum as the packed ones do);
   8: and every q6_k matrix (q6_k_r32), not only an output layer; 9: and f16 / bf16 matrices as
   16-bit panels (their decoding products sum as the packed ones do); 10: the avx2 table lays out
   f32 / f16 / bf16 matrices as panels too; 11: and q4_0 / q4_k / q5_k / q6_k (q8_0 with AVX-VNNI)
   matrices repacked; 12: and bf16 (f16 under f16=bf16) matrices where they prefill on vdpbf16ps
   (their decoding products sum as the panels' exact ones do); 13: and iq4_nl / iq4_xs matrices
   repacked, their packed product on a zero point of 128 (a whole integer, not q4_k's min); 14:
   q3_k prefills on the packed integer product (with vpdpbusd), not dequantized into f32; 15: and
   q2_k (every flavour); 16: q2_k's one-row and batched products sum the mins in a chain of
   their own, added last */
#define VERSION 17u
#define MAGIC "SMPCACHE"

typedef struct header {
    char magic[8];
    uint32_t version, kv_type;
    uint64_t model;       /* sm_pcache identity of the model */
    char kernels[112];    /* table (a composed one names its parts)/int8 products[/vdpbf16ps:types][/r32], NUL-padded */
    uint64_t max_batch, n_ctx, block_bytes, n_blocks;
} header;

/* A checksum of n bytes continuing h: four multiply-rotate lanes over 8-byte words (the
   blocks are tens of megabytes; a byte-wise hash would cost more than loading them). */
static uint64_t checksum(uint64_t h, const void *p, size_t n) {
    const unsigned char *s = p;
    const uint64_t K1 = 0x9e3779b97f4a7c15ull, K2 = 0xc2b2ae3d27d4eb4full;
    uint64_t l[4] = {h ^ K1, h + K2, h ^ (uint64_t)n, ~h};
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++) {
            uint64_t w;
            memcpy(&w, s + i + 8 * k, 8);
            l[k] = (l[k] ^ w) * K2;
            l[k] = (l[k] << 31 | l[k] >> 33) * K1;
        }
    uint64_t r = sm_hash_bytes(s + i, n - i);
    for (int k = 0; k < 4; k++) r = (r ^ l[k]) * K1, r ^= r >> 29;
    return r;
}

/* The model's identity: its shape and every tensor's name, type, shape and sampled bytes. */
static uint64_t model_identity(const sm_model *m) {
    const sm_config *c = sm_model_config(m);
    int shape[] = {(int)c->arch, c->n_layer, c->n_head, c->n_kv_head, c->n_embd, c->head_dim,
                   c->n_ff, c->n_vocab, c->n_ctx, c->sliding_window, c->swa_pattern};
    float scal[] = {c->norm_eps, c->rope_theta, c->rope_factor, c->rope_low_freq, c->rope_high_freq,
                    c->embd_scale, c->attn_scale, c->rope_local_theta};
    uint64_t h = checksum(1, shape, sizeof shape);
    h = checksum(h, scal, sizeof scal);
    for (size_t i = 0; i < c->n_tensors; i++) {
        const sm_tensor_desc *t = &c->tensors[i];
        const unsigned char *d = sm_model_tensor_data(m, i);
        h = checksum(h, t->name, strlen(t->name));
        uint64_t meta[2 + SM_MAX_DIMS] = {(uint64_t)t->dtype, t->nbytes};
        for (int k = 0; k < SM_MAX_DIMS; k++) meta[2 + k] = (uint64_t)t->shape[k];
        h = checksum(h, meta, sizeof meta);
        size_t span = t->nbytes < 256 ? t->nbytes : 256;
        if (d && span) { /* its start, middle and end */
            h = checksum(h, d, span);
            h = checksum(h, d + (t->nbytes - span) / 2, span);
            h = checksum(h, d + t->nbytes - span, span);
        }
    }
    return h;
}

static header header_of(const sm_model *m, const sm_state_params *sp, size_t n_blocks) {
    header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, MAGIC, 8);
    h.version = VERSION;
    h.kv_type = (uint32_t)sp->kv_type;
    h.model = model_identity(m);
    const unsigned d16 = sp->kernels->from[SM_KOP_GEMM]->dot16_types;
    snprintf(h.kernels, sizeof h.kernels, "%s/%s%s%s%s%s", sp->kernels->name, sm_kernels_int8_name(sp->kernels),
             d16 ? "/vdpbf16ps:" : "", d16 >> SM_DTYPE_F16 & 1u ? "f16," : "", d16 >> SM_DTYPE_BF16 & 1u ? "bf16" : "",
             sp->repack ? "/r32" : "");
    h.max_batch = sp->max_batch;
    h.n_ctx = sp->n_ctx;
    h.block_bytes = B * sm_model_kv_bytes(m, sp->kv_type);
    h.n_blocks = n_blocks;
    return h;
}

void sm_pcache_free(sm_pcache *pc) {
    free(pc->file);
    memset(pc, 0, sizeof *pc);
}

/* Checks the file's header against this run's; one line naming the file and the mismatch. */
static sm_status check_header(const header *f, const header *want, const char *path, size_t len,
                              sm_error *err) {
#define BAD(...) sm_error_set(err, SM_ERR_FORMAT, __VA_ARGS__)
    if (f->version != VERSION)
        return BAD("prompt cache '%s' is of version %u; this smallmind reads version %u", path,
                   f->version, VERSION);
    if (f->model != want->model)
        return BAD("prompt cache '%s' was made with another model", path);
    if (memcmp(f->kernels, want->kernels, sizeof f->kernels) != 0 || f->kernels[sizeof f->kernels - 1])
        return BAD("prompt cache '%s' was made with the %.47s kernels; this run uses %s", path,
                   f->kernels, want->kernels);
    if (f->kv_type != want->kv_type)
        return BAD("prompt cache '%s' holds a KV-cache of another type (this run: --kv-type %s)", path,
                   sm_dtype_name((sm_dtype)want->kv_type));
    if (f->max_batch != want->max_batch)
        return BAD("prompt cache '%s' was made with forward calls of %llu tokens; this run makes "
                   "%llu", path, (unsigned long long)f->max_batch, (unsigned long long)want->max_batch);
    if (f->block_bytes != want->block_bytes)
        return BAD("prompt cache '%s' has blocks of %llu bytes; this model's are %llu", path,
                   (unsigned long long)f->block_bytes, (unsigned long long)want->block_bytes);
    if (f->n_blocks == 0 || f->n_blocks > want->n_ctx / B)
        return BAD("prompt cache '%s' holds %llu blocks of %d tokens; the context holds %llu", path,
                   (unsigned long long)f->n_blocks, B, (unsigned long long)(want->n_ctx / B));
    size_t n = (size_t)f->n_blocks;
    size_t need = sizeof *f + n * (B * sizeof(int32_t) + 1 + (size_t)f->block_bytes) + 8;
    if (len != need)
        return BAD("prompt cache '%s' is %zu bytes; its header says %zu (%s)", path, len, need,
                   len < need ? "truncated" : "trailing bytes");
    return SM_OK;
#undef BAD
}

sm_status sm_pcache_read(sm_pcache *pc, const char *path, const sm_model *m,
                         const sm_state_params *sp, sm_error *err) {
    memset(pc, 0, sizeof *pc);
    struct stat sb;
    if (stat(path, &sb) != 0)
        return sm_error_set(err, errno == ENOENT ? SM_ERR_IO : SM_ERR_INPUT, "prompt cache '%s': %s",
                            path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return sm_error_set(err, SM_ERR_INPUT, "prompt cache '%s' is not a regular file", path);
    char *buf;
    size_t len;
    sm_status st = sm_read_file(path, (size_t)1 << 40, &buf, &len, err);
    if (st) return st == SM_ERR_NOMEM ? st : sm_error_set(err, SM_ERR_INPUT, "%s", err->msg);
    header f, want = header_of(m, sp, 0);
    if (len < sizeof f || memcmp(buf, MAGIC, 8) != 0) {
        free(buf);
        return sm_error_set(err, SM_ERR_INPUT, "'%s' is not a smallmind prompt cache (it is "
                            "neither read nor overwritten)", path);
    }
    memcpy(&f, buf, sizeof f);
    if ((st = check_header(&f, &want, path, len, err))) {
        free(buf);
        return st;
    }
    size_t n = (size_t)f.n_blocks, bb = (size_t)f.block_bytes;
    char *at = buf + sizeof f;
    uint64_t h = checksum(0, buf, sizeof f);
    pc->tokens = (int32_t *)(void *)at; /* 4-aligned: the header is 8-aligned in size */
    h = checksum(h, at, n * B * sizeof(int32_t));
    at += n * B * sizeof(int32_t);
    const unsigned char *wb = (const unsigned char *)at;
    bool ok = true;
    for (size_t k = 0; k < n; k++) ok = ok && wb[k] <= 1; /* before they are read as bools */
    pc->whole = (bool *)at;
    h = checksum(h, at, n);
    at += n;
    pc->data = (unsigned char *)at;
    for (size_t k = 0; k < n; k++) h = checksum(h, at + k * bb, bb);
    at += n * bb;
    uint64_t want_sum;
    memcpy(&want_sum, at, 8);
    const sm_config *c = sm_model_config(m);
    ok = ok && h == want_sum;
    for (size_t i = 0; ok && i < n * B; i++) ok = pc->tokens[i] >= 0 && pc->tokens[i] < c->n_vocab;
    if (!ok) {
        free(buf);
        memset(pc, 0, sizeof *pc);
        return sm_error_set(err, SM_ERR_FORMAT, "prompt cache '%s' is corrupted (its checksum or "
                            "contents do not hold)", path);
    }
    pc->n_blocks = n;
    pc->block_bytes = bb;
    pc->file = buf;
    return SM_OK;
}

size_t sm_pcache_match(const sm_pcache *pc, const int32_t *tokens, size_t n, const sm_model *m,
                       const sm_state_params *sp) {
    size_t d = 0;
    while (d < pc->n_blocks && (d + 1) * B <= n &&
           memcmp(pc->tokens + d * B, tokens + d * B, B * sizeof *tokens) == 0)
        d++;
    return B * sm_prefix_usable(d, n, sp->max_batch, sm_model_kv_window(m, sp), pc->whole);
}

void sm_pcache_load(const sm_pcache *pc, sm_state *s, size_t seq, size_t n_tokens) {
    for (size_t k = 0; k < n_tokens / B && k < pc->n_blocks; k++)
        sm_state_kv_put(s, seq, k * B, B, pc->data + k * pc->block_bytes);
}

bool sm_pcache_same(const sm_pcache *pc, const int32_t *tokens, size_t n) {
    return pc->n_blocks == n / B && memcmp(pc->tokens, tokens, pc->n_blocks * B * sizeof *tokens) == 0;
}

sm_status sm_pcache_write(const char *path, const sm_model *m, const sm_state_params *sp,
                          const int32_t *tokens, size_t n_blocks, const void *const *blocks,
                          const bool *whole, sm_error *err) {
    header h = header_of(m, sp, n_blocks);
    sm_piece *pieces = malloc((n_blocks + 4) * sizeof *pieces);
    unsigned char *w = malloc(n_blocks + 1);
    if (!pieces || !w) {
        free(pieces), free(w);
        return sm_error_set(err, SM_ERR_NOMEM, "out of memory writing prompt cache '%s'", path);
    }
    for (size_t k = 0; k < n_blocks; k++) w[k] = whole[k] ? 1 : 0;
    size_t np = 0;
    pieces[np++] = (sm_piece){&h, sizeof h};
    pieces[np++] = (sm_piece){tokens, n_blocks * B * sizeof *tokens};
    pieces[np++] = (sm_piece){w, n_blocks};
    for (size_t k = 0; k < n_blocks; k++) pieces[np++] = (sm_piece){blocks[k], (size_t)h.block_bytes};
    uint64_t sum = 0; /* of the pieces in order, as the reader sums them */
    for (size_t k = 0; k < np; k++) sum = checksum(sum, pieces[k].p, pieces[k].n);
    pieces[np++] = (sm_piece){&sum, sizeof sum};
    sm_status st = sm_write_file(path, pieces, np, err);
    free(pieces), free(w);
    return st;
}

sm_status sm_pcache_write_state(const char *path, const sm_state *s, size_t seq,
                                const int32_t *tokens, size_t n, size_t end, sm_error *err) {
    const sm_model *m = sm_state_model(s);
    const sm_state_params *sp = sm_state_params_of(s);
    size_t nb = n / B, bb = B * sm_state_kv_bytes(s);
    unsigned char *data = malloc(nb * bb + 1);
    const void **blocks = malloc((nb + 1) * sizeof *blocks);
    bool *whole = malloc(nb + 1);
    sm_status st = SM_OK;
    if (!data || !blocks || !whole)
        st = sm_error_set(err, SM_ERR_NOMEM, "out of memory writing prompt cache '%s'", path);
    for (size_t k = 0; !st && k < nb; k++) {
        whole[k] = sm_state_kv_get(s, seq, k * B, B, end, data + k * bb);
        blocks[k] = data + k * bb;
    }
    if (!st) st = sm_pcache_write(path, m, sp, tokens, nb, blocks, whole, err);
    free(data), free(blocks), free(whole);
    return st;
}
