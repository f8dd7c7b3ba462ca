/*
** libFuzzer target: the tokenizer. Encoding arbitrary bytes and decoding the
** ids back gives the same bytes; decoding arbitrary ids (in range or not)
** never reads out of bounds; the UTF-8 boundary helper never points past
** its input or into the middle of a complete character.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_byte_tok.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sm_tokenizer tok;
    fuzz_byte_tokenizer(&tok, 300);
    int32_t *ids = malloc((size + 1) * sizeof *ids);
    char *back = malloc(size + 1);
    if (!ids || !back) goto out;
    size_t n = sm_tokenizer_encode(&tok, (const char *)data, size, ids, size);
    if (n > size) abort();
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        size_t pl;
        const char *p = sm_tokenizer_piece(&tok, ids[i], &pl);
        if (len + pl > size) abort();
        memcpy(back + len, p, pl);
        len += pl;
    }
    if (len != size || (size && memcmp(back, data, size) != 0)) abort();
    /* arbitrary ids from the input, 4 bytes each */
    for (size_t i = 0; i + 4 <= size; i += 4) {
        int32_t id;
        memcpy(&id, data + i, 4);
        size_t pl;
        const char *p = sm_tokenizer_piece(&tok, id, &pl);
        for (size_t k = 0; k < pl; k++) (void)((volatile const char *)p)[k];
    }
    size_t c = sm_utf8_complete(data, size);
    if (c > size) abort();
out:
    free(ids);
    free(back);
    return 0;
}
