/*
** libFuzzer target: grammar texts (sm_grammar_parse) and JSON Schemas
** (sm_grammar_from_schema). Any input compiles or gives a one-line error;
** a compiled grammar then matches a few texts without crashing (its
** expansion terminates: left recursion is refused at compile time).
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sm_grammar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void exercise(sm_grammar *g, const uint8_t *data, size_t size) {
    static const char *const texts[] = {"", "a", "{}", "[1, 2]", "{\"a\": \"b\"}", "1. e4 e5\n", "true", "\"\xc3\xa9\"", "\xff"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) sm_grammar_accepts(g, texts[i], strlen(texts[i]));
    sm_grammar_accepts(g, (const char *)data, size < 256 ? size : 256);
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
