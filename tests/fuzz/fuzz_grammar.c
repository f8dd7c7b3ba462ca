/*
** libFuzzer target: grammar texts (sm_grammar_parse) and JSON Schemas
** (sm_grammar_from_schema). Any input compiles or gives a one-line error;
** a compiled grammar then matches a few texts without crashing (its
** expansion terminates: left recursion is refused at compile time), and
** is bound to a byte vocabulary for a short walk: each step's forced
** tokens (sm_gmatch_forced) are accepted, then a token the mask allows
** (chosen by the input).
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_byte_tok.h"
#include "sm_grammar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void walk(sm_grammar *g, const uint8_t *data, size_t size) {
    sm_tokenizer tok;
    fuzz_byte_tokenizer(&tok, 256);
    sm_error err = {{0}};
    sm_gbind *b = NULL;
    sm_gmatch *m = NULL;
    if (sm_gbind_new(&b, g, &tok, NULL, &err) == SM_OK && sm_gmatch_new(&m, b, &err) == SM_OK) {
        int32_t prev = -1, forced[32];
        for (size_t step = 0; step < 16; step++) {
            size_t n = sm_gmatch_forced(m, prev, forced, 32);
            for (size_t k = 0; k < n; k++) {
                if (sm_gmatch_accept(m, prev, forced[k], &err) != SM_OK) abort(); /* forced: never refused */
                prev = forced[k];
            }
            /* the first token the mask allows from an id the input chooses */
            const uint64_t *mask = sm_gmatch_mask(m, prev);
            int32_t pick = -1, from = size ? data[step % size] : 0;
            for (int32_t i = 0; i < 256 && pick < 0; i++) {
                int32_t id = (i + from) % 256;
                if (mask[id >> 6] >> (id & 63) & 1) pick = id;
            }
            if (pick < 0 || sm_gmatch_accept(m, prev, pick, &err) != SM_OK) break;
            prev = pick;
        }
    }
    sm_gmatch_free(m);
    sm_gbind_free(b);
    sm_tokenizer_free(&tok);
}

static void exercise(sm_grammar *g, const uint8_t *data, size_t size) {
    static const char *const texts[] = {"", "a", "{}", "[1, 2]", "{\"a\": \"b\"}", "1. e4 e5\n", "true", "\"\xc3\xa9\"", "\xff"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) sm_grammar_accepts(g, texts[i], strlen(texts[i]));
    sm_grammar_accepts(g, (const char *)data, size < 256 ? size : 256);
    walk(g, data, size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sm_grammar *g = NULL;
    sm_error err = {{0}};
    if (sm_grammar_parse(&g, (const char *)data, size, &err) == SM_OK) {
        if (!g || !sm_grammar_rules(g)) abort();
        exercise(g, data, size);
        sm_grammar_free(g);
    } else if (!err.msg[0] || g) {
        abort();
    }
    g = NULL;
    memset(&err, 0, sizeof err);
    char *gbnf = NULL;
    if (sm_grammar_from_schema(&g, (const char *)data, size, &gbnf, &err) == SM_OK) {
        if (!g || !gbnf) abort();
        exercise(g, data, size);
        sm_grammar_free(g);
        free(gbnf);
    } else if (!err.msg[0] || g) {
        abort();
    }
    return 0;
}
