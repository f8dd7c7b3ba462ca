/*
** libFuzzer target: a chat template (sm_template_parse), rendered when it
** parses over a small conversation with tools, under tight limits. Any
** input parses or fails with a message; a render ends within its limits
** with text or a message, never past the output limit.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "sm_template.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char vars_json[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"},"
    " {\"role\": \"user\", \"content\": \"Hi {{ x }} caf\\u00e9\"},"
    " {\"role\": \"assistant\", \"content\": \"<think>a</think>\\n\\nHello\"},"
    " {\"role\": \"user\", \"content\": \"Bye\"}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"a\": [1, 2.5, true, null]}}}],"
    " \"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static cJSON *vars;
    if (!vars && !(vars = cJSON_Parse(vars_json))) abort();
    sm_template *t;
    sm_error err = {{0}};
    if (sm_template_parse(&t, (const char *)data, size, "fuzz", &err) != SM_OK) {
        if (!err.msg[0]) abort();
        return 0;
    }
    sm_template_limits lim = {.max_steps = 200000, .max_output = 1 << 20, .max_memory = 32u << 20};
    char *out = NULL;
    size_t len = 0;
    err.msg[0] = 0;
    if (sm_template_render(t, vars, &lim, &out, &len, &err) == SM_OK) {
        if (!out || len > lim.max_output || strlen(out) > len) abort();
    } else if (!err.msg[0] || out) {
        abort();
    }
    free(out);
    sm_template_free(t);
    return 0;
}
