/*
** libFuzzer target: the SentencePiece tokenizer. An input starting with 'F'
** is the rest taken as a tokenizer.bin: loading it never crashes, and if it
** loads, encoding a few texts (and the file itself) stays in range. Any
** other input is text for a small built-in vocabulary with every byte
** piece: encode then decode gives the text back exactly.
*/
#include "fuzz_tok_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void put_piece(FILE *f, float score, const char *s, size_t n) {
    int32_t l = (int32_t)n;
    fwrite(&score, 4, 1, f);
    fwrite(&l, 4, 1, f);
    fwrite(s, 1, n, f);
}

/* <unk> <s> </s>, the 256 byte pieces, then scored pieces with spaces and UTF-8. */
static void builtin(void) {
    static const char *const pieces[] = {" ", "a", "b", "e", " a", "ab", "ba", " ab", "aa",
                                         " aa", "\xc3\xa9", "e\xcc\x81", " \xc3\xa9", "  ", "\n"};
    char *buf;
    size_t len;
    FILE *f = open_memstream(&buf, &len);
    int32_t max = 16;
    fwrite(&max, 4, 1, f);
    put_piece(f, 0, "<unk>", 5);
    put_piece(f, 0, "\n<s>\n", 5);
    put_piece(f, 0, "\n</s>\n", 6);
    for (int b = 0; b < 256; b++) {
        char s[8];
        snprintf(s, sizeof s, "<0x%02X>", b);
        put_piece(f, 0, s, 6);
    }
    for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++)
        put_piece(f, -(float)(i % 5), pieces[i], strlen(pieces[i]));
    fclose(f);
    tok_put("tokenizer.bin", buf, len);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sm_tokenizer t;
    if (size && data[0] == 'F') {
        tok_put("tokenizer.bin", data + 1, size - 1);
        if (tok_load(&t, SM_TOKENIZER_SENTENCEPIECE) != SM_OK) return 0;
        static const char *const texts[] = {"", "a", "hello world", "\xff\xfe\xc3", "  \n\n  x"};
        for (size_t i = 0; i < 5; i++)
            tok_roundtrip(&t, (const uint8_t *)texts[i], strlen(texts[i]), 0);
        tok_roundtrip(&t, data, size, 0);
        sm_tokenizer_free(&t);
        return 0;
    }
    sm_tokenizer *fixed = tok_builtin(SM_TOKENIZER_SENTENCEPIECE, builtin);
    tok_roundtrip(fixed, data, size, 1);
    fixed->parse_special = 1; /* "<s>" in the text: still in range */
    tok_roundtrip(fixed, data, size, 0);
    fixed->parse_special = 0;
    return 0;
}
