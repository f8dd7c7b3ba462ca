/* The byte tokenizer and the UTF-8 boundary helper. */
#include <string.h>

#include "sm_tokenizer.h"
#include "test.h"

void test_tokenizer_byte_roundtrip(void) {
    sm_config cfg = {.tokenizer = SM_TOKENIZER_BYTE, .n_vocab = 300};
    sm_tokenizer t;
    CHECK(sm_tokenizer_init(&t, &cfg, NULL, NULL, NULL) == SM_OK && t.n_vocab == 256 && t.bos < 0);
    const char text[] = "h\xC3\xA9llo \xE4\xB8\xAD\x00\xFF\n"; /* accents, CJK, NUL, invalid byte */
    size_t len = sizeof text - 1;
    int32_t ids[32];
    CHECK(sm_tokenizer_encode(&t, text, len, ids, 32) == len);
    char back[32];
    for (size_t i = 0; i < len; i++) {
        CHECK(ids[i] == (unsigned char)text[i]);
        size_t pl;
        const char *p = sm_tokenizer_piece(&t, ids[i], &pl);
        CHECK(pl == 1);
        back[i] = p[0];
    }
    CHECK(memcmp(back, text, len) == 0);
    CHECK(sm_tokenizer_encode(&t, text, len, ids, 3) == len); /* count beyond the capacity */
    size_t pl;
    sm_tokenizer_piece(&t, 256, &pl);
    CHECK(pl == 0); /* padding ids of a larger model vocabulary have no text */
    cfg.n_vocab = 100;
    CHECK(sm_tokenizer_init(&t, &cfg, NULL, NULL, NULL) == SM_ERR_FORMAT); /* tokenizer larger than model */
}

void test_utf8_complete(void) {
    const struct {
        const char *s;
        size_t want;
    } cases[] = {
        {"abc", 3},
        {"a\xC3", 1},             /* lead of a 2-byte char */
        {"a\xC3\xA9", 3},
        {"\xE4\xB8", 0},          /* 2 of 3 */
        {"\xE4\xB8\xAD", 3},
        {"x\xF0\x9F\x98", 1},     /* 3 of 4 (emoji) */
        {"x\xF0\x9F\x98\x80", 5},
        {"\x80\x80", 2},          /* stray continuation bytes pass through */
        {"\xFF", 1},              /* invalid byte passes through */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECKF(sm_utf8_complete((const unsigned char *)cases[i].s, strlen(cases[i].s)) == cases[i].want,
               "case %zu", i);
}
