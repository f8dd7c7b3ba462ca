/*
** load.c -- reading a tokenizer's files into its tables: llama2.c's
** tokenizer.bin (SentencePiece-style BPE with scores) and GPT-2's
** vocab.json + merges.txt (byte-level BPE with ranked merges), every entry
** checked, errors naming the file and entry. Encoding is tokenizer.c.
*/
#include "tokenizer_internal.h"

#include "json_internal.h"
#include "sm_half.h"
#include "sm_gguf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ loading */

sm_status sm_tok_alloc_tables(sm_tokenizer *t, size_t n, size_t text_bytes, sm_error *err) {
    t->n_vocab = (int)n;
    t->text = malloc(text_bytes ? text_bytes : 1);
    t->off = calloc(n + 1, sizeof *t->off);
    t->kind = calloc(n, 1);
    bool scored = t->type == SM_TOKENIZER_SENTENCEPIECE;
    t->score = scored ? calloc(n, sizeof *t->score) : NULL;
    t->work = calloc(1, sizeof *t->work);
    if (!t->text || !t->off || !t->kind || (scored && !t->score) || !t->work ||
        !sm_tok_work_fit(t->work, SM_TOK_SEGMENT))
        return sm_error_set(err, SM_ERR_NOMEM, "out of memory for the tokenizer");
    return SM_OK;
}

int sm_tok_byte_piece(const char *p, size_t n) {
    if (n < 4 || memcmp(p, "<0x", 3) != 0 || p[n - 1] != '>') return -1;
    if (n != 6) return -2;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
              : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return -2;
        v = v * 16 + d;
    }
    return v;
}

/*
** llama2.c's tokenizer.bin: i32 max_token_length, then per token f32 score,
** i32 length, the bytes. The token count is what the file holds.
*/
static sm_status parse_sentencepiece(sm_tokenizer *t, const sm_config *cfg, const char *buf,
                                     size_t len, const char *path, sm_error *err) {
    sm_status st = SM_OK;
    const unsigned char *p = (const unsigned char *)buf;
    size_t n = 0, at = 4, text_bytes = 0;
    int32_t max_len = len >= 4 ? (int32_t)sm_read_u32le(p) : 0;
    if (len < 4) {
        st = sm_error_set(err, SM_ERR_FORMAT, "%s: %zu bytes, too short for a tokenizer", path, len);
        goto done;
    }
    if (max_len < 1 || max_len > MAX_PIECE) {
        st = sm_error_set(err, SM_ERR_FORMAT, "%s: max_token_length is %d, expected 1 to %d", path,
                          max_len, MAX_PIECE);
        goto done;
    }
    /* first pass: count and check every entry */
    while (at < len) {
        if (len - at < 8) {
            st = sm_error_set(err, SM_ERR_FORMAT, "%s: truncated at token %zu (byte %zu)", path, n,
                              at);
            goto done;
        }
        int32_t l = (int32_t)sm_read_u32le(p + at + 4);
        float score = sm_bits_to_f32(sm_read_u32le(p + at));
        if (l < 0 || l > max_len) {
            st = sm_error_set(err, SM_ERR_FORMAT,
                              "%s: token %zu has length %d, expected 0 to max_token_length %d",
                              path, n, l, max_len);
            goto done;
        }
        if (!isfinite(score)) {
            st = sm_error_set(err, SM_ERR_FORMAT, "%s: token %zu has a score that is not finite",
                              path, n);
            goto done;
        }
        if ((size_t)l > len - at - 8) {
            st = sm_error_set(err, SM_ERR_FORMAT,
                              "%s: truncated in token %zu (%d bytes announced, %zu left)", path, n,
                              l, len - at - 8);
            goto done;
        }
        at += 8 + (size_t)l;
        text_bytes += (size_t)l;
        n++;
    }
    if (n == 0 || n > (size_t)cfg->n_vocab) {
        st = sm_error_set(err, SM_ERR_FORMAT, "%s: %zu tokens; the model's vocabulary (n_vocab) is %d",
                          path, n, cfg->n_vocab);
        goto done;
    }
    if (cfg->tok_bos >= (int32_t)n || cfg->tok_eos >= (int32_t)n) {
        st = sm_error_set(err, SM_ERR_FORMAT, "%s: %zu tokens, but the config's bos/eos is %d/%d",
                          path, n, cfg->tok_bos, cfg->tok_eos);
        goto done;
    }
    if ((st = sm_tok_alloc_tables(t, n, text_bytes, err))) goto done;
    at = 4;
    size_t o = 0;
    for (size_t id = 0; id < n; id++) {
        size_t l = sm_read_u32le(p + at + 4);
        t->score[id] = sm_bits_to_f32(sm_read_u32le(p + at));
        const char *piece = buf + at + 8;
        at += 8 + l;
        t->off[id] = (uint32_t)o;
        int b = sm_tok_byte_piece(piece, l);
        if (b == -2) {
            st = sm_error_set(err, SM_ERR_FORMAT,
                              "%s: token %zu \"%.*s\" is not a valid byte token <0xNN>", path, id,
                              (int)(l < 16 ? l : 16), piece);
            goto done;
        }
        if (b >= 0) {
            t->kind[id] = KIND_BYTE;
            if (t->byte_id[b] < 0) t->byte_id[b] = (int32_t)id;
            t->text[o++] = (char)b;
        } else {
            if ((int32_t)id == cfg->tok_bos || (int32_t)id == cfg->tok_eos ||
                (l == 5 && memcmp(piece, "<unk>", 5) == 0))
                t->kind[id] = KIND_CONTROL;
            memcpy(t->text + o, piece, l);
            o += l;
        }
    }
    t->off[n] = (uint32_t)o;
    if ((st = sm_tok_build_map(t, err))) goto done;
    t->space_id = sm_tok_map_find(t, " ", 1);
done:
    return st;
}

static sm_status load_sentencepiece(sm_tokenizer *t, const sm_config *cfg, const char *path,
                                    sm_error *err) {
    char *buf;
    size_t len;
    sm_status st = sm_read_file(path, SM_TOK_FILE_MAX, &buf, &len, err);
    if (st) return st;
    st = parse_sentencepiece(t, cfg, buf, len, path, err);
    free(buf);
    return st;
}

/* GPT-2's bytes <-> printable code points: 256 characters stand for the 256 bytes. */
void sm_tok_byte_alphabet(int32_t cp_of[256]) {
    int extra = 0;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        cp_of[b] = printable ? b : 256 + extra++;
    }
}

size_t sm_tok_unmark(const char *s, size_t n, char *out) {
    size_t o = 0;
    for (size_t k = 0; k < n; k++) {
        if (k + 2 < n && (uint8_t)s[k] == 0xE2 && (uint8_t)s[k + 1] == 0x96 && (uint8_t)s[k + 2] == 0x81)
            out[o++] = ' ', k += 2;
        else
            out[o++] = s[k];
    }
    return o;
}

void sm_tok_byte_inverse(int32_t byte_of_cp[324]) {
    int32_t cp_of[256];
    sm_tok_byte_alphabet(cp_of);
    for (int i = 0; i < 324; i++) byte_of_cp[i] = -1;
    for (int b = 0; b < 256; b++) byte_of_cp[cp_of[b]] = b;
}

/* A vocab.json / merges.txt token text -> its bytes in out (at least n bytes); -1 if invalid. */
long sm_tok_unalphabet(const int32_t byte_of_cp[324], const char *s, size_t n, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        int32_t cp;
        i += sm_tok_utf8_next((const unsigned char *)s + i, n - i, &cp);
        if (cp < 0 || cp >= 324 || byte_of_cp[cp] < 0) return -1;
        out[o++] = (char)byte_of_cp[cp];
    }
    return (long)o;
}

long sm_tok_byte_level_text(const int32_t byte_of_cp[324], const char *s, size_t n, char *out, uint8_t *kind) {
    if (n == 0 || n > MAX_PIECE) return -1;
    long bl = sm_tok_unalphabet(byte_of_cp, s, n, out);
    if (bl > 0) return bl;
    memcpy(out, s, n);
    *kind = KIND_UNREACHABLE;
    return (long)n;
}

/*
** Every multi-byte token of a BPE vocabulary must be made by some merge,
** else encoding can never produce it and ids come out byte by byte: an
** empty or truncated merges.txt. Control tokens (bos/eos), added tokens
** written <...> and those raw marks (a GGUF file's control and user-defined
** tokens) are exempt.
*/
static sm_status check_reachable(const sm_tokenizer *t, size_t n, const uint8_t *raw,
                                 const char *vocab_path, const char *merges_path, sm_error *err) {
    bool *made = calloc(n, sizeof *made);
    if (!made) return sm_error_set(err, SM_ERR_NOMEM, "out of memory for the tokenizer");
    for (size_t i = 0; i <= t->merge_mask; i++)
        if (t->merges[i].a >= 0) made[t->merges[i].out] = true;
    size_t lost = 0, first = 0;
    for (size_t id = 0; id < n; id++) {
        const char *s = t->text + t->off[id];
        size_t len = t->off[id + 1] - t->off[id];
        bool added = (len >= 3 && s[0] == '<' && s[len - 1] == '>') || (raw && raw[id]);
        if (len > 1 && !made[id] && t->kind[id] == KIND_NORMAL && !added && !lost++) first = id;
    }
    free(made);
    if (!lost) return SM_OK;
    size_t fl = t->off[first + 1] - t->off[first];
    return sm_error_set(err, SM_ERR_FORMAT,
                        "%s: %zu multi-byte tokens of %s (the first: id %zu, \"%.*s\") are made "
                        "by no merge; the merges are missing or cut short",
                        merges_path, lost, vocab_path, first, (int)(fl < 40 ? fl : 40),
                        t->text + t->off[first]);
}

/*
** A byte-level BPE's tables: n tokens (token id's text str[id], slen[id]
** bytes, in GPT-2's byte alphabet) and the merges text (merges.txt's lines).
** The paths name the sources in messages.
*/
static sm_status gpt2_tables(sm_tokenizer *t, const sm_config *cfg, size_t n,
                             const char *const *str, const size_t *slen, const uint8_t *raw,
                             const char *vocab_path, const char *mbuf, size_t mlen,
                             const char *merges_path, sm_error *err) {
    int32_t byte_of_cp[324];
    sm_tok_byte_inverse(byte_of_cp);
    size_t text_bytes = 0;
    for (size_t id = 0; id < n; id++) text_bytes += slen[id];
    sm_status st = sm_tok_alloc_tables(t, n, text_bytes, err);
    if (st) return st;
    size_t o = 0;
    for (size_t id = 0; id < n && !st; id++) {
        const char *s = str[id];
        size_t sl = slen[id];
        t->off[id] = (uint32_t)o;
        long bl = sl && sl <= MAX_PIECE ? (long)sl : -1;
        if (!(raw && raw[id]))
            bl = sm_tok_byte_level_text(byte_of_cp, s, sl, t->text + o, &t->kind[id]);
        else if (bl > 0) /* an added token: its text as it is */
            memcpy(t->text + o, s, sl);
        if (bl <= 0)
            st = sm_error_set(err, SM_ERR_FORMAT, "%s: token %zu \"%.*s\" is empty or longer than %d bytes",
                              vocab_path, id, (int)(sl < 40 ? sl : 40), s, MAX_PIECE);
        else
            o += (size_t)bl;
    }
    t->off[n] = (uint32_t)o;
    if (st) return st;
    for (int k = 0; k < 2; k++) {
        int32_t id = k ? cfg->tok_eos : cfg->tok_bos;
        if (id >= (int32_t)n)
            return sm_error_set(err, SM_ERR_FORMAT, "%s: %zu tokens, but the config's %s is %d",
                                vocab_path, n, k ? "eos" : "bos", id);
        if (id >= 0) t->kind[id] = KIND_CONTROL;
    }
    if ((st = sm_tok_build_map(t, err))) return st; /* added tokens too: merges may make them */

    /* merges.txt: "#version" line, then "LEFT RIGHT" per line, best first */
    size_t lines = 1;
    for (size_t i = 0; i < mlen; i++) lines += mbuf[i] == '\n';
    if ((st = sm_tok_merges_new(t, lines, err))) return st;
    int32_t rank = 0;
    size_t line = 0;
    char tmp[2 * MAX_PIECE];
    for (size_t at = 0; at < mlen;) {
        line++;
        const char *eol = memchr(mbuf + at, '\n', mlen - at);
        size_t e = eol ? (size_t)(eol - mbuf) : mlen, ll = e - at;
        const char *ln = mbuf + at;
        at = e + 1;
        if (ll && ln[ll - 1] == '\r') ll--;
        if (ll == 0 || (line == 1 && ll >= 8 && memcmp(ln, "#version", 8) == 0)) continue;
        const char *sp = memchr(ln, ' ', ll);
        long la = -1, lb = -1;
        if (sp && sp > ln && (size_t)(sp - ln) < MAX_PIECE && ll - (size_t)(sp - ln) - 1 < MAX_PIECE &&
            !memchr(sp + 1, ' ', ll - (size_t)(sp - ln) - 1)) {
            la = sm_tok_unalphabet(byte_of_cp, ln, (size_t)(sp - ln), tmp);
            if (la > 0) lb = sm_tok_unalphabet(byte_of_cp, sp + 1, ll - (size_t)(sp - ln) - 1, tmp + la);
        }
        if (la <= 0 || lb <= 0)
            return sm_error_set(err, SM_ERR_FORMAT,
                                "%s: line %zu: expected two tokens separated by one space",
                                merges_path, line);
        int32_t a = sm_tok_map_find(t, tmp, (size_t)la), b = sm_tok_map_find(t, tmp + la, (size_t)lb);
        int32_t m = sm_tok_map_find(t, tmp, (size_t)(la + lb));
        if (a < 0 || b < 0 || m < 0)
            return sm_error_set(err, SM_ERR_FORMAT, "%s: line %zu: merge \"%.*s\" names an unknown %s",
                                merges_path, line, (int)(ll < 60 ? ll : 60), ln,
                                a < 0 || b < 0 ? "token" : "merged token (not in the vocabulary)");
        if (sm_tok_merge_add(t, a, b, rank, m)) rank++;
    }
    return check_reachable(t, n, raw, vocab_path, merges_path, err);
}

/* GPT-2's vocab.json (token -> id, ids 0..n-1 each once) and merges.txt. */
static sm_status load_gpt2(sm_tokenizer *t, const sm_config *cfg, const char *vocab_path,
                           const char *merges_path, sm_error *err) {
    char *mbuf = NULL;
    size_t mlen, n = 0;
    cJSON *root = NULL;
    const char **str = NULL;
    size_t *slen = NULL;
    sm_status st = sm_json_read_file(vocab_path, SM_TOK_FILE_MAX, &root, err);
    if (st) return st;
    if (!cJSON_IsObject(root)) {
        st = sm_error_set(err, SM_ERR_FORMAT, "%s: expected an object of token -> id", vocab_path);
        goto done;
    }
    n = (size_t)cJSON_GetArraySize(root);
    if (n == 0 || n > (size_t)cfg->n_vocab) {
        st = sm_error_set(err, SM_ERR_FORMAT, "%s: %zu tokens; the model's vocabulary (n_vocab) is %d",
                          vocab_path, n, cfg->n_vocab);
        goto done;
    }
    str = calloc(n, sizeof *str);
    slen = calloc(n, sizeof *slen);
    if (!str || !slen) {
        st = sm_error_set(err, SM_ERR_NOMEM, "out of memory for the tokenizer");
        goto done;
    }
    for (const cJSON *e = root->child; e && !st; e = e->next) {
        double d = cJSON_IsNumber(e) ? e->valuedouble : -1;
        if (d < 0 || d >= (double)n || d != floor(d) || str[(size_t)d])
            st = sm_error_set(err, SM_ERR_FORMAT,
                              "%s: token \"%.40s\" has id %s; ids must be 0 to %zu, each once",
                              vocab_path, e->string, cJSON_IsNumber(e) ? "out of range or repeated" : "that is not a number", n - 1);
        else
            str[(size_t)d] = e->string, slen[(size_t)d] = strlen(e->string);
    }
    if (!st && !(st = sm_read_file(merges_path, SM_TOK_FILE_MAX, &mbuf, &mlen, err)))
        st = gpt2_tables(t, cfg, n, str, slen, NULL, vocab_path, mbuf, mlen, merges_path, err);
    for (int b = 0; b < 256 && !st; b++) /* GPT-2's files have every byte (GGUF files may not) */
        if (t->byte_id[b] < 0)
            st = sm_error_set(err, SM_ERR_FORMAT, "%s: no token for byte 0x%02X", vocab_path, b);
done:
    free(str);
    free(slen);
    cJSON_Delete(root);
    free(mbuf);
    return st;
}

/*
** A GGUF file's tokenizer (tokenizer.ggml.*). "llama": tokens, scores (and
** token types: control ones become control pieces), SentencePiece's "\xe2\x96\x81"
** for a space turned into the space, laid out as llama2.c's tokenizer.bin
** and read by the same parser. "gpt2": tokens in GPT-2's byte alphabet and
** merges "a b", read by the same tables as vocab.json + merges.txt, for the
** pre-tokenizer GPT-2's pattern is (tokenizer.ggml.pre gpt-2 or default).
*/
static sm_status load_gguf(sm_tokenizer *t, const sm_config *cfg, const sm_gguf *g,
                           const char *path, sm_error *err) {
    const sm_gguf_kv *tok, *sc = NULL, *ty = NULL, *mg = NULL;
    sm_status st = sm_gguf_array(g, "tokenizer.ggml.tokens", SM_GGUF_STRING, &tok, path, err);
    if (st) return st;
    size_t n = (size_t)tok->n;
    if (n == 0 || n > (size_t)cfg->n_vocab)
        return sm_error_set(err, SM_ERR_FORMAT, "%s: tokenizer.ggml.tokens has %zu tokens; the "
                            "model's vocabulary is %d", path, n, cfg->n_vocab);
    if (sm_gguf_find(g, "tokenizer.ggml.token_type") &&
        (st = sm_gguf_array(g, "tokenizer.ggml.token_type", SM_GGUF_I32, &ty, path, err)))
        return st;
    if (ty && ty->n != n)
        return sm_error_set(err, SM_ERR_FORMAT, "%s: tokenizer.ggml.token_type has %llu entries for "
                            "%zu tokens", path, (unsigned long long)ty->n, n);
    for (size_t i = 0; ty && i < n; i++) { /* llama.cpp's types: 1 normal ... 6 byte */
        int32_t v = (int32_t)sm_read_u32le(ty->val + 4 * i);
        if (v < 1 || v > 6)
            return sm_error_set(err, SM_ERR_FORMAT, "%s: tokenizer.ggml.token_type of token %zu is %d, "
                                "expected 1 to 6 (normal, unknown, control, user-defined, unused, byte)",
                                path, i, (int)v);
    }
    const char *pre = "default"; /* absent: llama.cpp's default */
    size_t pl = 7;
    if ((st = sm_gguf_string(g, "tokenizer.ggml.pre", &pre, &pl, NULL, path, err))) return st;
    char here[4300];
    if (cfg->tokenizer == SM_TOKENIZER_SENTENCEPIECE) {
        if ((st = sm_gguf_array(g, "tokenizer.ggml.scores", SM_GGUF_F32, &sc, path, err))) return st;
        if (sc->n != n)
            return sm_error_set(err, SM_ERR_FORMAT, "%s: tokenizer.ggml.scores has %llu entries for "
                                "%zu tokens", path, (unsigned long long)sc->n, n);
        size_t bytes = 4, maxl = 1, len;
        const uint8_t *p = tok->val;
        for (size_t i = 0; i < n; i++) sm_gguf_next_string(&p, &len), bytes += 8 + len;
        char *buf = malloc(bytes);
        if (!buf) return sm_error_set(err, SM_ERR_NOMEM, "out of memory for the tokenizer");
        size_t at = 4;
        p = tok->val;
        for (size_t i = 0; i < n; i++) {
            const char *s = sm_gguf_next_string(&p, &len);
            size_t o = at + 8 + sm_tok_unmark(s, len, buf + at + 8);
            memcpy(buf + at, sc->val + 4 * i, 4);
            sm_write_u32le(buf + at + 4, (uint32_t)(o - at - 8));
            if (o - at - 8 > maxl) maxl = o - at - 8;
            at = o;
        }
        sm_write_u32le(buf, (uint32_t)(maxl < MAX_PIECE ? maxl : MAX_PIECE));
        snprintf(here, sizeof here, "%s (tokenizer.ggml.tokens)", path);
        st = parse_sentencepiece(t, cfg, buf, at, here, err);
        free(buf);
    } else {
        if ((st = sm_tok_pre_new(&t->pre, err)) ||
            (st = sm_tok_pre_named(t->pre, pre, pl, &t->ignore_merges, path, err)) ||
            (st = sm_gguf_array(g, "tokenizer.ggml.merges", SM_GGUF_STRING, &mg, path, err)))
            return st;
        const char **str = calloc(n, sizeof *str);
        size_t *slen = calloc(n, sizeof *slen), mbytes = 1, len;
        uint8_t *raw = calloc(n, 1);
        const uint8_t *p = mg->val;
        for (uint64_t i = 0; i < mg->n; i++) sm_gguf_next_string(&p, &len), mbytes += len + 1;
        char *mbuf = malloc(mbytes);
        if (!str || !slen || !mbuf || !raw) {
            free(str), free(slen), free(mbuf), free(raw);
            return sm_error_set(err, SM_ERR_NOMEM, "out of memory for the tokenizer");
        }
        for (size_t i = 0; ty && i < n; i++) {
            int32_t k = (int32_t)sm_read_u32le(ty->val + 4 * i);
            raw[i] = k == 3 || k == 4 || k == 5 ? (uint8_t)k : 0;
        }
        p = tok->val;
        for (size_t i = 0; i < n; i++) str[i] = sm_gguf_next_string(&p, &slen[i]);
        size_t mlen = 0;
        p = mg->val;
        for (uint64_t i = 0; i < mg->n; i++) { /* "a b" lines, as merges.txt without "#version" */
            const char *s = sm_gguf_next_string(&p, &len);
            memcpy(mbuf + mlen, s, len);
            mlen += len;
            mbuf[mlen++] = '\n';
        }
        char mhere[4300];
        snprintf(here, sizeof here, "%s (tokenizer.ggml.tokens)", path);
        snprintf(mhere, sizeof mhere, "%s (tokenizer.ggml.merges)", path);
        st = gpt2_tables(t, cfg, n, str, slen, raw, here, mbuf, mlen, mhere, err);
        free(str), free(slen), free(mbuf), free(raw);
    }
    for (size_t i = 0; ty && !st && i < n; i++) { /* control tokens are never text; user-defined
                                                      ones are matched in it before merging */
        int32_t k = (int32_t)sm_read_u32le(ty->val + 4 * i);
        if (k == 3) t->kind[i] = KIND_CONTROL;
        if (k == 5) t->kind[i] = KIND_UNUSED; /* never made, matched or shown */
        if (k == 4 && t->kind[i] == KIND_NORMAL && t->off[i + 1] > t->off[i]) t->kind[i] = KIND_USER;
    }
    bool add = cfg->tokenizer == SM_TOKENIZER_SENTENCEPIECE, found, eos_add = false;
    if (!st && cfg->tokenizer == SM_TOKENIZER_SENTENCEPIECE)
        st = sm_gguf_bool(g, "tokenizer.ggml.add_space_prefix", &t->space_prefix, &found, path, err);
    if (!st && !(st = sm_gguf_bool(g, "tokenizer.ggml.add_bos_token", &add, &found, path, err)))
        t->add_bos = add && cfg->tok_bos >= 0;
    if (!st && !(st = sm_gguf_bool(g, "tokenizer.ggml.add_eos_token", &eos_add, &found, path, err)))
        t->add_eos = eos_add && cfg->tok_eos >= 0;
    /* the other special ids must name tokens; end-of-turn also ends generation */
    static const char *const ids[] = {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.unknown_token_id",
                                      "tokenizer.ggml.padding_token_id"};
    for (int k = 0; k < 3 && !st; k++) {
        int32_t id;
        if (!(st = sm_gguf_token_id(g, ids[k], (int64_t)n, &id, path, err)) && k == 0) t->eot = id;
    }
    return st;
}

/* One piece of t as its tokenizer file spells it: byte tokens <0xNN>; into buf (cap >= 8). */
static size_t piece_text(const sm_tokenizer *t, size_t id, char *buf, const char **out) {
    const char *p = t->text + t->off[id];
    size_t n = t->off[id + 1] - t->off[id];
    if (t->kind[id] == KIND_BYTE) {
        n = (size_t)snprintf(buf, 8, "<0x%02X>", (unsigned char)p[0]);
        p = buf;
    }
    *out = p;
    return n;
}

static int cmp_rank(const void *a, const void *b) {
    const sm_tok_merge *x = *(const sm_tok_merge *const *)a, *y = *(const sm_tok_merge *const *)b;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

_Static_assert(KIND_BYTE == (int)SM_TOK_BYTE && KIND_CONTROL == (int)SM_TOK_CONTROL &&
               KIND_USER == (int)SM_TOK_USER && KIND_UNUSED == (int)SM_TOK_UNUSED &&
               KIND_UNREACHABLE == (int)SM_TOK_UNREACHABLE, "kinds as sm_tok_kind");

bool sm_tokenizer_is_end(const sm_tokenizer *t, int32_t id) {
    if (id < 0) return false;
    if (id == t->eos || id == t->eot) return true;
    for (int i = 0; i < t->n_stop; i++)
        if (t->stop[i] == id) return true;
    return false;
}

sm_tok_kind sm_tokenizer_kind(const sm_tokenizer *t, int32_t id) {
    if (t->type == SM_TOKENIZER_BYTE || id < 0 || id >= t->n_vocab) return SM_TOK_NORMAL;
    return (sm_tok_kind)t->kind[id];
}

size_t sm_tokenizer_merges(const sm_tokenizer *t, int32_t (*pairs)[2], size_t cap) {
    if ((t->type != SM_TOKENIZER_GPT2 && t->type != SM_TOKENIZER_HF) || !t->merges) return 0;
    size_t n = 0;
    for (size_t i = 0; i <= t->merge_mask; i++) n += t->merges[i].a >= 0;
    if (!pairs || cap < n) return n;
    const sm_tok_merge **ms = malloc((n ? n : 1) * sizeof *ms);
    if (!ms) return 0;
    size_t k = 0;
    for (size_t i = 0; i <= t->merge_mask; i++)
        if (t->merges[i].a >= 0) ms[k++] = &t->merges[i];
    qsort(ms, n, sizeof *ms, cmp_rank);
    for (size_t i = 0; i < n; i++) pairs[i][0] = ms[i]->a, pairs[i][1] = ms[i]->b;
    free(ms);
    return n;
}

sm_status sm_tokenizer_gguf_kind(const sm_tokenizer *t, sm_tokenizer_gguf *k, sm_error *err) {
    *k = (sm_tokenizer_gguf){0};
    if (t->type == SM_TOKENIZER_SENTENCEPIECE || t->type == SM_TOKENIZER_BYTE) {
        k->model = t->type == SM_TOKENIZER_BYTE ? "gpt2" : "llama";
        snprintf(k->pre, sizeof k->pre, "%s", t->type == SM_TOKENIZER_BYTE ? "gpt-2" : "default");
        k->space_prefix = t->space_prefix;
        return SM_OK;
    }
    if (t->type == SM_TOKENIZER_GPT2) {
        k->model = "gpt2";
        snprintf(k->pre, sizeof k->pre, "gpt-2");
        return SM_OK;
    }
    if (t->byte_level) {
        k->model = "gpt2";
        if (!sm_tok_pre_name(t->pre, t->ignore_merges, &k->lossy_nfc, k->pre))
            return sm_error_set(err, SM_ERR_UNSUPPORTED, "its tokenizer.json's normalizer and pre-tokenizer "
                                "are not one llama.cpp names (tokenizer.ggml.pre: llama-bpe, qwen2, "
                                "tekken, gpt-2, ...)");
        return SM_OK;
    }
    bool prepend;
    if (!sm_tok_pre_is_spm(t->pre, &prepend) || t->ignore_merges)
        return sm_error_set(err, SM_ERR_UNSUPPORTED, "its tokenizer.json is neither byte-level BPE nor "
                            "SentencePiece-style BPE with byte fallback, which GGUF files hold");
    k->model = "llama";
    snprintf(k->pre, sizeof k->pre, "default");
    k->space_prefix = prepend;
    return SM_OK;
}

void sm_tokenizer_rank_scores(const sm_tokenizer *t, float *scores) {
    float worst = -(float)sm_tokenizer_merges(t, NULL, 0);
    for (int id = 0; id < t->n_vocab; id++) scores[id] = worst;
    for (size_t i = 0; t->merges && i <= t->merge_mask; i++) {
        const sm_tok_merge *m = &t->merges[i];
        if (m->a >= 0 && m->out >= 0 && -(float)m->rank > scores[m->out]) scores[m->out] = -(float)m->rank;
    }
}

size_t sm_tokenizer_alphabet(const char *bytes, size_t n, char *out) {
    int32_t cp_of[256];
    sm_tok_byte_alphabet(cp_of);
    size_t o = 0;
    for (size_t k = 0; k < n; k++) {
        int32_t c = cp_of[(unsigned char)bytes[k]];
        if (c < 0x80)
            out[o++] = (char)c;
        else
            out[o++] = (char)(0xC0 | c >> 6), out[o++] = (char)(0x80 | (c & 0x3F));
    }
    return o;
}

sm_status sm_tokenizer_save(const sm_tokenizer *t, const char *dir, char names[2][SM_FILE_NAME_MAX],
                            sm_error *err) {
    char path[4400];
    names[0][0] = names[1][0] = 0;
    if (t->type == SM_TOKENIZER_BYTE) return SM_OK;
    size_t n = (size_t)t->n_vocab, bytes = 4;
    char bb[8];
    const char *p;
    if (t->type == SM_TOKENIZER_SENTENCEPIECE) { /* llama2.c's tokenizer.bin */
        uint32_t maxl = 1;
        for (size_t id = 0; id < n; id++) {
            size_t l = piece_text(t, id, bb, &p);
            bytes += 8 + l;
            if (l > maxl) maxl = (uint32_t)l;
        }
        char *buf = malloc(bytes);
        if (!buf) return sm_error_set(err, SM_ERR_NOMEM, "out of memory writing the tokenizer");
        sm_write_u32le(buf, maxl);
        size_t at = 4;
        for (size_t id = 0; id < n; id++) {
            size_t l = piece_text(t, id, bb, &p);
            sm_write_u32le(buf + at, sm_f32_to_bits(t->score[id]));
            sm_write_u32le(buf + at + 4, (uint32_t)l);
            memcpy(buf + at + 8, p, l);
            at += 8 + l;
        }
        snprintf(names[0], SM_FILE_NAME_MAX, "tokenizer.bin");
        snprintf(path, sizeof path, "%s/tokenizer.bin", dir);
        sm_status st = sm_write_file(path, (sm_piece[]){{buf, at}}, 1, err);
        free(buf);
        return st;
    }
    /* GPT-2's files: every piece and merge in the byte alphabet */
    size_t nm = sm_tokenizer_merges(t, NULL, 0), mbytes = 16;
    int32_t (*pairs)[2] = malloc((nm ? nm : 1) * sizeof *pairs);
    cJSON *vocab = cJSON_CreateObject();
    char *mtext = NULL, *enc = malloc(2 * MAX_PIECE + 8);
    sm_status st = SM_OK;
    if (!vocab || !pairs || !enc || sm_tokenizer_merges(t, pairs, nm) != nm)
        st = sm_error_set(err, SM_ERR_NOMEM, "out of memory writing the tokenizer");
    for (size_t id = 0; id < n && !st; id++) {
        size_t el = sm_tokenizer_alphabet(t->text + t->off[id], t->off[id + 1] - t->off[id], enc);
        enc[el] = 0;
        if (!cJSON_AddItemToObject(vocab, enc, cJSON_CreateNumber((double)id)))
            st = sm_error_set(err, SM_ERR_NOMEM, "out of memory writing the tokenizer");
    }
    for (size_t i = 0; !st && i < nm; i++)
        for (int k = 0; k < 2; k++) mbytes += 2 * (t->off[pairs[i][k] + 1] - t->off[pairs[i][k]]) + 1;
    if (!st && !(mtext = malloc(mbytes))) st = sm_error_set(err, SM_ERR_NOMEM, "out of memory writing the tokenizer");
    if (!st) {
        size_t ml = (size_t)snprintf(mtext, mbytes, "#version: 0.2\n");
        for (size_t i = 0; i < nm; i++)
            for (int k = 0; k < 2; k++) {
                int32_t id = pairs[i][k];
                ml += sm_tokenizer_alphabet(t->text + t->off[id], t->off[id + 1] - t->off[id], mtext + ml);
                mtext[ml++] = k ? '\n' : ' ';
            }
        char *json = cJSON_PrintUnformatted(vocab);
        if (!json) {
            st = sm_error_set(err, SM_ERR_NOMEM, "out of memory writing the tokenizer");
        } else {
            snprintf(names[0], SM_FILE_NAME_MAX, "vocab.json");
            snprintf(names[1], SM_FILE_NAME_MAX, "merges.txt");
            snprintf(path, sizeof path, "%s/vocab.json", dir);
            st = sm_write_file(path, (sm_piece[]){{json, strlen(json)}}, 1, err);
            snprintf(path, sizeof path, "%s/merges.txt", dir);
            if (!st) st = sm_write_file(path, (sm_piece[]){{mtext, ml}}, 1, err);
            free(json);
        }
    }
    cJSON_Delete(vocab);
    free(pairs);
    free(mtext);
    free(enc);
    return st;
}

static sm_status join(char *out, size_t cap, const char *dir, const char *file, sm_error *err) {
    if ((size_t)snprintf(out, cap, "%s/%s", dir ? dir : ".", file) >= cap)
        return sm_error_set(err, SM_ERR_IO, "cannot open '%s/%s': path too long", dir, file);
    return SM_OK;
}

sm_status sm_tokenizer_init(sm_tokenizer *t, const sm_config *cfg, const char *dir,
                            const sm_gguf *gguf, sm_error *err) {
    memset(t, 0, sizeof *t);
    t->type = cfg->tokenizer;
    t->bos = t->eos = t->eot = t->space_id = -1;
    for (int b = 0; b < 256; b++) t->byte_id[b] = -1;
    if (cfg->tokenizer == SM_TOKENIZER_BYTE) {
        t->n_vocab = 256;
        for (int i = 0; i < 256; i++) t->bytes[i] = (char)i;
        if (cfg->n_vocab < t->n_vocab)
            return sm_error_set(err, SM_ERR_FORMAT,
                                "config.json: n_vocab is %d but the byte tokenizer needs %d ids",
                                cfg->n_vocab, t->n_vocab);
        return SM_OK;
    }
    char p0[4400], p1[4400];
    sm_status st;
    t->unk = -1;
    t->space_prefix = cfg->tokenizer == SM_TOKENIZER_SENTENCEPIECE;
    t->byte_level = cfg->tokenizer == SM_TOKENIZER_GPT2;
    if (gguf) {
        st = load_gguf(t, cfg, gguf, dir, err);
    } else if (cfg->tokenizer == SM_TOKENIZER_SENTENCEPIECE) {
        if (!(st = join(p0, sizeof p0, dir, cfg->tok_file[0], err)))
            st = load_sentencepiece(t, cfg, p0, err);
        t->add_bos = true;
    } else if (cfg->tokenizer == SM_TOKENIZER_GPT2) {
        if (!(st = join(p0, sizeof p0, dir, cfg->tok_file[0], err)) &&
            !(st = join(p1, sizeof p1, dir, cfg->tok_file[1], err)) &&
            !(st = load_gpt2(t, cfg, p0, p1, err)) && !(st = sm_tok_pre_new(&t->pre, err)))
            st = sm_tok_pre_step(t->pre, SM_STEP_GPT2, SM_SPLIT_ISOLATED, false, NULL, 0, false, p0, err);
    } else if (cfg->tokenizer == SM_TOKENIZER_HF) {
        if (!(st = join(p0, sizeof p0, dir, cfg->tok_file[0], err)))
            st = sm_tok_load_hf(t, cfg, p0, err);
    } else {
        st = sm_error_set(err, SM_ERR_UNSUPPORTED, "unsupported tokenizer");
    }
    if (cfg->tokenizer != SM_TOKENIZER_HF) { /* a tokenizer.json names its own (post-processor) */
        t->bos = cfg->tok_bos;
        t->eos = cfg->tok_eos;
    }
    for (int i = 0; !st && i < cfg->n_stop && t->n_stop < SM_MAX_STOP; i++)
        if (cfg->tok_stop[i] >= 0 && cfg->tok_stop[i] < t->n_vocab) t->stop[t->n_stop++] = cfg->tok_stop[i];
    if (!st && t->type != SM_TOKENIZER_BYTE) { /* ends of turn by their text, as llama.cpp finds them */
        static const char *const ends[] = {"<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<end_of_turn>",
                                           "<|end|>"};
        for (int32_t id = 0; id < t->n_vocab && t->n_stop < SM_MAX_STOP; id++) {
            size_t l = t->off[id + 1] - t->off[id];
            for (size_t k = 0; t->kind[id] == KIND_CONTROL && k < sizeof ends / sizeof *ends; k++)
                if (l == strlen(ends[k]) && memcmp(t->text + t->off[id], ends[k], l) == 0 &&
                    !sm_tokenizer_is_end(t, id))
                    t->stop[t->n_stop++] = id;
        }
    }
    /* added tokens are matched in text; tokenizer.bin spells BOS/EOS "\n<s>\n" (see encode) */
    if (!st && (gguf || cfg->tokenizer != SM_TOKENIZER_SENTENCEPIECE)) st = sm_tok_index_added(t, err);
    if (st) sm_tokenizer_free(t);
    return st;
}

void sm_tokenizer_free(sm_tokenizer *t) {
    if (t->work) {
        free(t->work->buf);
        free(t->work->syms);
        free(t->work->heap);
        free(t->work);
    }
    free(t->text);
    free(t->off);
    free(t->score);
    free(t->kind);
    free(t->map);
    free(t->merges);
    sm_tok_pre_free(t->pre);
    free(t->shown);
    free(t->shown_off);
    free(t->added_map);
    free(t->added_long);
    sm_tokenizer_type type = t->type;
    memset(t, 0, sizeof *t);
    t->type = type;
    t->bos = t->eos = t->eot = -1;
}
