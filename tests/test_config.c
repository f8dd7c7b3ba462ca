/* config.json parsing: a valid config, and errors that name the key. */
#include <stdio.h>
#include <string.h>

#include "sm_config.h"
#include "test.h"

#define BASE_FMT \
    "{\"format\":\"smallmind\",\"format_version\":1,\"architecture\":\"gpt2\",\n" \
    " \"n_layer\":%s,\"n_head\":2,\"n_embd\":8,\"n_ctx\":16,\"n_vocab\":256,\"norm_eps\":1e-5,\n" \
    " \"activation\":\"gelu_tanh\",\"tied_output\":true,\"bias\":true,\"tokenizer\":{\"type\":\"byte\"},\n" \
    " \"tensors\":[{\"name\":\"a\",\"dtype\":\"f32\",\"shape\":[%s],\"file\":\"m.bin\",\"offset\":64}]%s}"

static sm_status parse(const char *layers, const char *shape, const char *extra, sm_error *err,
                       sm_config *cfg) {
    char buf[2048];
    snprintf(buf, sizeof buf, BASE_FMT, layers, shape, extra);
    return sm_config_parse(cfg, buf, strlen(buf), "config.json", err);
}

void test_config_valid(void) {
    sm_config c;
    sm_error e = {{0}};
    CHECKF(parse("3", "256,8", "", &e, &c) == SM_OK, "%s", e.msg);
    CHECK(c.n_layer == 3 && c.n_head == 2 && c.n_embd == 8 && c.n_ctx == 16 && c.n_vocab == 256);
    CHECK(c.n_tensors == 1 && c.tensors[0].nbytes == 256 * 8 * 4 && c.tensors[0].offset == 64);
    CHECK(strcmp(c.files[c.tensors[0].file], "m.bin") == 0 && c.tied_output && c.bias);
    sm_config_free(&c);
}

static void expect(const char *json, sm_status st, const char *needle) {
    sm_config c;
    sm_error e = {{0}};
    sm_status got = sm_config_parse(&c, json, strlen(json), "config.json", &e);
    CHECKF(got == st, "status %d for %s", got, json);
    CHECKF(strstr(e.msg, needle) != NULL, "message '%s' lacks '%s'", e.msg, needle);
    CHECK(c.tensors == NULL); /* zeroed on failure */
}

void test_config_errors(void) {
    char buf[2048];
    expect("{\n  \"a\": [1,\n  }", SM_ERR_FORMAT, "line 3, column 3");
    expect("{} x", SM_ERR_FORMAT, "after the JSON value at line 1, column 4");
    expect("", SM_ERR_FORMAT, "empty");
    char deep[3000];
    memset(deep, '[', sizeof deep - 1);
    deep[sizeof deep - 1] = 0;
    expect(deep, SM_ERR_FORMAT, "invalid JSON");
    expect("{\"a\":1,\"a\":2}", SM_ERR_FORMAT, "duplicate key \"a\"");
    expect("[1]", SM_ERR_FORMAT, "object");
    const struct {
        const char *layers, *shape, *extra;
        sm_status st;
        const char *needle;
    } cases[] = {
        {"\"3\"", "1", "", SM_ERR_FORMAT, "\"n_layer\" must be a number"},
        {"3.5", "1", "", SM_ERR_FORMAT, "\"n_layer\" must be a whole number"},
        {"0", "1", "", SM_ERR_FORMAT, "\"n_layer\" is 0, expected 1 to 1024"},
        {"-2", "1", "", SM_ERR_FORMAT, "\"n_layer\" is -2"},
        {"1e300", "1", "", SM_ERR_FORMAT, "\"n_layer\" is 1e+300"},
        {"1", "0", "", SM_ERR_FORMAT, "a.shape[0]\" is 0"},
        {"1", "2147483647,2147483647,2147483647", "", SM_ERR_FORMAT, "shape product overflows"},
        {"1", "1,1,1,1,1", "", SM_ERR_FORMAT, "5 dimensions"},
        {"1", "1", ",\"extra\":1", SM_ERR_UNSUPPORTED, "unsupported key \"extra\""},
        {"1", "1", ",\"n_layer\":2", SM_ERR_FORMAT, "duplicate key \"n_layer\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(buf, sizeof buf, BASE_FMT, cases[i].layers, cases[i].shape, cases[i].extra);
        expect(buf, cases[i].st, cases[i].needle);
        if (test_failed()) return;
    }
    /* edits of the valid config that must fail */
    const struct {
        const char *from, *to;
        sm_status st;
        const char *needle;
    } edits[] = {
        {"\"gpt2\"", "\"mamba\"", SM_ERR_UNSUPPORTED, "unsupported architecture \"mamba\""},
        {"\"n_head\":2", "\"n_head\":3", SM_ERR_FORMAT, "n_embd (8) is not a multiple of n_head (3)"},
        {"\"n_ctx\":16", "\"n_ctx\":0", SM_ERR_FORMAT, "\"n_ctx\" is 0"},
        {"\"f32\"", "\"q7_k\"", SM_ERR_UNSUPPORTED, "unknown dtype \"q7_k\""},
        {"\"offset\":64", "\"offset\":65", SM_ERR_FORMAT, "not 64-byte aligned"},
        {"\"offset\":64", "\"offset\":18446744073709551615", SM_ERR_FORMAT, "a.offset\" is"},
        {"\"m.bin\"", "\"../m.bin\"", SM_ERR_FORMAT, "plain file name"},
        {"\"byte\"", "\"bpe\"", SM_ERR_UNSUPPORTED, "unsupported tokenizer.type"},
        {"\"gelu_tanh\"", "\"relu\"", SM_ERR_UNSUPPORTED, "unsupported activation"},
        {"\"format_version\":1", "\"format_version\":2", SM_ERR_UNSUPPORTED, "format_version 2"},
        {"\"tied_output\":true", "\"tied_output\":1", SM_ERR_FORMAT, "true or false"},
        {"\"n_vocab\":256,", "", SM_ERR_FORMAT, "missing key \"n_vocab\""},
        {"\"norm_eps\":1e-5", "\"norm_eps\":-1", SM_ERR_FORMAT, "norm_eps"},
        /* positive, but 0 as the float the model holds (the config written back would be refused) */
        {"\"norm_eps\":1e-5", "\"norm_eps\":1e-66", SM_ERR_FORMAT, "norm_eps\" must be a number in (0, 1)"},
        {"\"name\":\"a\"", "\"name\":\"a\\u0000b\"", SM_ERR_UNSUPPORTED, "(NUL) escape at line 4"},
    };
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        char good[2048], *p;
        snprintf(good, sizeof good, BASE_FMT, "1", "1", "");
        p = strstr(good, edits[i].from);
        CHECKF(p, "edit %zu does not apply", i);
        snprintf(buf, sizeof buf, "%.*s%s%s", (int)(p - good), good, edits[i].to, p + strlen(edits[i].from));
        expect(buf, edits[i].st, edits[i].needle);
        if (test_failed()) return;
    }
}
