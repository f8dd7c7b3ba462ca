/*
** llama2c.c -- a llama2.c checkpoint (the legacy format export.py
** --version 0 writes: seven int32 -- dim, hidden_dim, n_layers, n_heads,
** n_kv_heads, vocab_size (negative: a separate classifier), seq_len -- then
** f32 arrays) into a plan. The header must account for the file's size to
** the byte; that is also how a checkpoint is told from any other file. Its
** rotary pairs are (2i, 2i+1), smallmind's own; its precomputed frequency
** tables are skipped and recomputed at load. Run as it is, every tensor is
** used where it lies (Q, K and V kept apart); planned for the converter,
** Q, K and V are fused as a smallmind directory stores them.
*/
#include "sm_plan.h"

#include <stdio.h>
#include <string.h>

/* A file with neither GGUF's magic nor a llama2.c header: both named, and why not the second. */
#define NEITHER "%s: not a GGUF file (no GGUF magic; a model is a GGUF file or a directory with " \
                "config.json) nor a llama2.c checkpoint "

sm_status sm_plan_llama2c(sm_plan *pl, const char *path, const char *tokenizer, sm_error *err) {
    sm_plan_map *m;
    sm_status st = sm_plan_map_file(pl, path, &m, err);
    if (st) return st;
    if (m->n < 28)
        return sm_error_set(err, SM_ERR_FORMAT, NEITHER "(%zu bytes, too short for its header)", path, m->n);
    if (memcmp(m->p, "24ka", 4) == 0)
        return sm_error_set(err, SM_ERR_UNSUPPORTED,
                            "%s: a llama2.c version %u checkpoint; smallmind reads the "
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
            return sm_error_set(err, SM_ERR_FORMAT, NEITHER "(header %s is %lld, expected 1 to %lld)",
                                path, names[i], (long long)vals[i], (long long)hi[i]);
    if (!tokenizer)
        return sm_error_set(err, SM_ERR_INPUT,
                            "%s: a llama2.c checkpoint needs --tokenizer FILE (its tokenizer.bin)",
                            path);
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
    snprintf(pl->tok_src[0], sizeof pl->tok_src[0], "%s", tokenizer);

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
    sm_plan_tensor *t;
    char nm[SM_NAME_MAX];
    sm_plan_add_whole(pl, "tok_embd", V, dim, emb, SM_DTYPE_F32, SM_OP_COPY);
    for (int64_t l = 0; l < L; l++) {
        size_t f = 4;
        snprintf(nm, sizeof nm, "blk.%lld.attn_norm.weight", (long long)l);
        sm_plan_add_whole(pl, nm, dim, 0, rms_att + f * (size_t)(l * dim), SM_DTYPE_F32, SM_OP_COPY);
        const unsigned char *qkv[3] = {wq + f * (size_t)(l * dim * dim), wk + f * (size_t)(l * kvd * dim),
                                       wv + f * (size_t)(l * kvd * dim)};
        if (pl->in_place) { /* three matrices, used where they lie */
            for (int j = 0; j < 3; j++) {
                snprintf(nm, sizeof nm, "blk.%lld.attn_%c.weight", (long long)l, "qkv"[j]);
                sm_plan_add_whole(pl, nm, j ? kvd : dim, dim, qkv[j], SM_DTYPE_F32, SM_OP_COPY);
            }
        } else { /* a smallmind directory's fused matrix */
            snprintf(nm, sizeof nm, "blk.%lld.attn_qkv.weight", (long long)l);
            t = sm_plan_add_tensor(pl, nm, dim + 2 * kvd, dim);
            for (int j = 0; j < 3; j++)
                sm_plan_add_part(t, qkv[j], SM_DTYPE_F32, j ? kvd : dim, dim, SM_OP_COPY, 0);
        }
        snprintf(nm, sizeof nm, "blk.%lld.attn_out.weight", (long long)l);
        sm_plan_add_whole(pl, nm, dim, dim, wo + f * (size_t)(l * dim * dim), SM_DTYPE_F32, SM_OP_COPY);
        snprintf(nm, sizeof nm, "blk.%lld.ffn_norm.weight", (long long)l);
        sm_plan_add_whole(pl, nm, dim, 0, rms_ffn + f * (size_t)(l * dim), SM_DTYPE_F32, SM_OP_COPY);
        snprintf(nm, sizeof nm, "blk.%lld.ffn_gate.weight", (long long)l);
        sm_plan_add_whole(pl, nm, hidden, dim, w1 + f * (size_t)(l * hidden * dim), SM_DTYPE_F32, SM_OP_COPY);
        snprintf(nm, sizeof nm, "blk.%lld.ffn_up.weight", (long long)l);
        sm_plan_add_whole(pl, nm, hidden, dim, w3 + f * (size_t)(l * hidden * dim), SM_DTYPE_F32, SM_OP_COPY);
        snprintf(nm, sizeof nm, "blk.%lld.ffn_down.weight", (long long)l);
        sm_plan_add_whole(pl, nm, dim, hidden, w2 + f * (size_t)(l * dim * hidden), SM_DTYPE_F32, SM_OP_COPY);
    }
    sm_plan_add_whole(pl, "norm_f.weight", dim, 0, rms_f, SM_DTYPE_F32, SM_OP_COPY);
    if (!shared) {
        sm_plan_add_whole(pl, "output.weight", V, dim, wcls, SM_DTYPE_F32, SM_OP_COPY);
    }
    return SM_OK;
}
