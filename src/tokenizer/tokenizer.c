/*
** tokenizer.c -- the byte tokenizer and UTF-8 boundary helper.
*/
#include "sm_tokenizer.h"

#include <string.h>

sm_status sm_tokenizer_init(sm_tokenizer *t, const sm_config *cfg, sm_error *err) {
    memset(t, 0, sizeof *t);
    if (cfg->tokenizer != SM_TOKENIZER_BYTE)
        return sm_error_set(err, SM_ERR_UNSUPPORTED, "unsupported tokenizer");
    t->type = SM_TOKENIZER_BYTE;
    t->n_vocab = 256;
    t->bos = t->eos = -1;
    for (int i = 0; i < 256; i++) t->bytes[i] = (char)i;
    if (cfg->n_vocab < t->n_vocab)
        return sm_error_set(err, SM_ERR_FORMAT,
                            "config.json: n_vocab is %d but the byte tokenizer needs %d ids",
                            cfg->n_vocab, t->n_vocab);
    return SM_OK;
}

size_t sm_tokenizer_encode(const sm_tokenizer *t, const char *text, size_t len, int32_t *out,
                           size_t cap) {
    (void)t;
    size_t n = len < cap ? len : cap;
    for (size_t i = 0; i < n; i++) out[i] = (unsigned char)text[i];
    return len;
}

const char *sm_tokenizer_piece(const sm_tokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->n_vocab) {
        *len = 0;
        return "";
    }
    *len = 1;
    return t->bytes + id;
}

size_t sm_utf8_complete(const unsigned char *s, size_t n) {
    /* Look back at most 3 bytes for the lead byte of the last character. */
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        unsigned char c = s[n - back];
        if ((c & 0xC0) == 0x80) continue; /* continuation byte: keep looking */
        size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
        return need > back ? n - back : n;
    }
    return n;
}
