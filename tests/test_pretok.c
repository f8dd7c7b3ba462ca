/*
** The pre-tokenizer's window: normalizing and splitting a long text a
** segment at a time gives the words of the whole text at once, for segments
** of every size from one byte up (so every place a segment can end is
** tried), with every kind of step and split behavior, normalizers that
** compose, decompose, replace and prepend, lookbehind, anchors and invalid
** bytes. (That the whole-text words are the references' is test_tokenizers.py's.)
*/
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "tokenizer/tokenizer_internal.h"

typedef struct {
    unsigned char *buf;
    size_t n, cap;
} words;

static void add_word(void *ctx, const unsigned char *w, size_t n) {
    words *l = ctx;
    if (l->n + n + 1 > l->cap) return; /* the buffer is sized for any split of the text */
    memcpy(l->buf + l->n, w, n);
    l->n += n;
    l->buf[l->n++] = 0xFF; /* never in the words: they come from UTF-8 or one invalid byte */
}

/* A text of about n bytes from pieces that stress every pattern: runs of digits, spaces,
   letters in several scripts, combining marks, contractions, emoji, invalid bytes. */
static size_t make_text(char *out, size_t n, unsigned seed) {
    static const char *const pieces[] = {
        " neighbouring", "1234567", "456", "  ", "     ", "\t", "\n", "\r\n", " I'm", "'LL", " x",
        " they're", "'ll", "'ve",
        "e\xcc\x81", "cafe\xcc\x81", "\xcc\x81", "a\xcc\x88\xcc\x84", "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e",
        "\xed\x95\x9c\xea\xb5\xad", "\xe1\x84\x80", "\xe1\x85\xa1", "\xd0\x96\xd1\x83\xd0\xba",
        " \xd9\x85\xd8\xb1\xd8\xad\xd8\xa8\xd8\xa7", "\xf0\x9f\x98\x80", "\xe2\x80\x8d", "HTTPServer",
        "camelCase", "!!!", "...", " (a)", "\xef\xbd\x86\xef\xbd\x95", "\xef\xac\x81", "\xc3\xa9",
        "\xe2\x96\x81", "\xff", "\xc3", "3.14", "\xc2\xa0", "\xe3\x80\x80", "ab", "Z",
    };
    size_t len = 0, k = sizeof pieces / sizeof pieces[0];
    while (len < n) {
        seed = seed * 1103515245u + 12345u;
        const char *p = pieces[(seed >> 16) % k];
        size_t l = strlen(p);
        if (len + l > n) break;
        memcpy(out + len, p, l);
        len += l;
    }
    return len;
}

typedef struct {
    const char *named;        /* a tokenizer.ggml.pre name, or NULL */
    int norm;                 /* an SM_NORM_* Unicode form first, or 0 */
    bool metaspace;           /* Replace ' ' -> U+2581 and its Prepend */
    const char *re;           /* a regex step (after the named ones) */
    int behavior;
    bool digits, individual;  /* a digits step */
} setup;

static bool build(sm_tok_pre **out, const setup *s) {
    sm_error e;
    bool im;
    if (sm_tok_pre_new(out, &e)) return false;
    sm_tok_pre *p = *out;
    if (s->norm && sm_tok_pre_norm(p, s->norm, NULL, 0, NULL, 0, false, "t", &e)) return false;
    if (s->metaspace && (sm_tok_pre_norm(p, SM_NORM_REPLACE, " ", 1, "\xe2\x96\x81", 3, false, "t", &e) ||
                         sm_tok_pre_norm(p, SM_NORM_PREPEND, "\xe2\x96\x81", 3, NULL, 0, true, "t", &e)))
        return false;
    if (s->named && sm_tok_pre_named(p, s->named, strlen(s->named), &im, "t", &e)) return false;
    if (s->digits &&
        sm_tok_pre_step(p, SM_STEP_DIGITS, SM_SPLIT_ISOLATED, s->individual, NULL, 0, false, "t", &e))
        return false;
    if (s->re && sm_tok_pre_step(p, SM_STEP_REGEX, s->behavior, false, s->re, strlen(s->re), false, "t", &e))
        return false;
    return true;
}

void test_pretok_window_any_segment(void) {
    const setup setups[] = {
        {.named = "gpt-2"}, {.named = "default"}, {.named = "llama3"},
        {.named = "qwen2", .norm = SM_NORM_NFC},
        {.named = "smollm"}, {.named = "falcon"}, {.named = "deepseek-llm"}, {.named = "tekken"},
        {.metaspace = true}, /* no step: the whole text is one word */
        {.norm = SM_NORM_NFKD, .metaspace = true, .re = "\xe2\x96\x81", .behavior = SM_SPLIT_MERGED_NEXT},
        {.norm = SM_NORM_NFKC, .re = "\\s+", .behavior = SM_SPLIT_MERGED_PREV},
        {.norm = SM_NORM_NFD, .re = "\\s+", .behavior = SM_SPLIT_REMOVED},
        {.re = "\\d|\\s", .behavior = SM_SPLIT_CONTIGUOUS},
        {.re = "(?<=[a-z]{2})[A-Z]|^\\s+|\\s+$", .behavior = SM_SPLIT_ISOLATED},
        {.digits = true}, {.digits = true, .individual = true, .re = "\\p{L}+(?=\\s)"},
        /* invert (OpenAI's cl100k and o200k: the matches are the words, removed gaps) */
        {.re = "\\p{N}{1,3}|\\s+(?!\\S)|\\s+|\\p{L}+", .behavior = SM_SPLIT_REMOVED | SM_SPLIT_INVERT},
        {.re = "[a-z]+", .behavior = SM_SPLIT_ISOLATED | SM_SPLIT_INVERT},
        {.re = "\\s", .behavior = SM_SPLIT_MERGED_PREV | SM_SPLIT_INVERT},
        {.re = "\\p{L}", .behavior = SM_SPLIT_MERGED_NEXT | SM_SPLIT_INVERT},
        {.re = "\\d|\\s", .behavior = SM_SPLIT_CONTIGUOUS | SM_SPLIT_INVERT},
    };
    enum { TEXT = 3000 };
    char text[TEXT];
    words whole = {malloc(4 * 64 * TEXT), 0, 4 * 64 * TEXT}, part = {malloc(whole.cap), 0, whole.cap};
    CHECK(whole.buf && part.buf);
    for (unsigned seed = 1; seed <= 3; seed++) {
        size_t n = make_text(text, TEXT, seed);
        for (size_t k = 0; k < sizeof setups / sizeof setups[0]; k++) {
            sm_tok_pre *p = NULL;
            CHECKF(build(&p, &setups[k]), "setup %zu", k);
            whole.n = 0;
            sm_tok_pre_run(p, (const unsigned char *)text, n, true, add_word, &whole);
            CHECKF(whole.n > n / 2, "setup %zu: words of the text", k);
            for (size_t chunk = 1; chunk <= 160; chunk++) {
                sm_tok_pre_chunk(p, chunk);
                part.n = 0;
                sm_tok_pre_run(p, (const unsigned char *)text, n, true, add_word, &part);
                CHECKF(part.n == whole.n && !memcmp(part.buf, whole.buf, whole.n),
                       "setup %zu, text %u: segments of %zu bytes give other words", k, seed, chunk);
            }
            sm_tok_pre_free(p);
        }
    }
    free(whole.buf);
    free(part.buf);
}
