/*
** libFuzzer target: a GGUF file's bytes. sm_gguf_parse must accept or refuse
** with a message, never crash or read outside the input; a file that parses
** goes on to the model config (sm_gguf_config) and, when that holds, the
** tokenizer built from its metadata and one encode and decode with it.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sm_config.h"
#include "sm_gguf.h"
#include "sm_tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* a copy of exactly size bytes, so reading past the end is caught */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    sm_gguf g;
    sm_error err = {{0}};
    if (sm_gguf_parse(&g, buf, size, "fuzz.gguf", &err) != SM_OK) {
        if (!err.msg[0]) abort(); /* every refusal says why */
        sm_gguf_close(&g);
        free(buf);
        return 0;
    }
    sm_config cfg;
    if (sm_gguf_config(&cfg, &g, "fuzz.gguf", &err) == SM_OK) {
        sm_tokenizer tok;
        if (sm_tokenizer_init(&tok, &cfg, "fuzz.gguf", &g, &err) == SM_OK) {
            int32_t ids[64];
            size_t n = sm_tokenizer_encode(&tok, "Once upon a time, \xe2\x96\x81 <s>", 26, ids, 64);
            for (size_t i = 0; i < n && i < 64; i++) {
                size_t len;
                (void)sm_tokenizer_piece(&tok, ids[i], &len);
            }
            sm_tokenizer_free(&tok);
        } else if (!err.msg[0]) {
            abort();
        }
    } else if (!err.msg[0]) {
        abort();
    }
    sm_config_free(&cfg);
    sm_gguf_close(&g);
    free(buf);
    return 0;
}
