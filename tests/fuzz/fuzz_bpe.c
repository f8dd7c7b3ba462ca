/*
** libFuzzer target: the GPT-2 byte-level BPE tokenizer. An input starting
** with 'F' is "vocab.json NUL merges.txt": loading never crashes, and if it
** loads, encoding stays in range. Any other input is text for a built-in
** vocabulary (the 256 byte characters and a few merges): GPT-2's
** pre-tokenizer and merges then decode back to exactly the text.
*/
#include "fuzz_tok_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* GPT-2's printable stand-in (UTF-8) for byte b. */
static size_t byte_char(int b, char *out) {
    static int cp[256];
    static int made;
    if (!made) {
        int extra = 0;
        for (int i = 0; i < 256; i++) {
            int printable = (i >= '!' && i <= '~') || (i >= 0xA1 && i <= 0xAC) || i >= 0xAE;
            cp[i] = printable ? i : 256 + extra++;
        }
        made = 1;
    }
    int c = cp[b];
    if (c < 0x80) {
        out[0] = (char)c;
        return 1;
    }
    out[0] = (char)(0xC0 | c >> 6);
    out[1] = (char)(0x80 | (c & 0x3F));
    return 2;
}

static void builtin(void) {
    char *buf;
    size_t len;
    FILE *f = open_memstream(&buf, &len);
    fputc('{', f);
    for (int b = 0; b < 256; b++) {
        char s[4];
        size_t n = byte_char(b, s);
        fputs(b ? ",\"" : "\"", f);
        if (b == '"' || b == '\\') fputc('\\', f);
        fwrite(s, 1, n, f);
        fprintf(f, "\":%d", b);
    }
    /* merges' results; Ġ is the space's stand-in */
    fputs(",\"\xc4\xa0t\":256,\"he\":257,\"\xc4\xa0the\":258,\"\xc4\xa0th\":259,\"in\":260,"
          "\"<|endoftext|>\":261}", f);
    fclose(f);
    tok_put("vocab.json", buf, len);
    free(buf);
    static const char merges[] = "#version: 0.2\n\xc4\xa0 t\nh e\n\xc4\xa0t h\n\xc4\xa0th e\ni n\n";
    tok_put("merges.txt", merges, sizeof merges - 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sm_tokenizer t;
    if (size && data[0] == 'F') {
        const uint8_t *nul = memchr(data + 1, 0, size - 1);
        size_t vl = nul ? (size_t)(nul - data - 1) : size - 1;
        tok_put("vocab.json", data + 1, vl);
        tok_put("merges.txt", nul ? nul + 1 : data + size, nul ? (size_t)(data + size - nul - 1) : 0);
        if (tok_load(&t, SM_TOKENIZER_GPT2) != SM_OK) return 0;
        tok_roundtrip(&t, data, size, 1); /* a loaded vocabulary has every byte */
        sm_tokenizer_free(&t);
        return 0;
    }
    tok_roundtrip(tok_builtin(SM_TOKENIZER_GPT2, builtin), data, size, 1);
    return 0;
}
