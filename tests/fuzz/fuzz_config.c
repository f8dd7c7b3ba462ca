/*
** libFuzzer target: config.json parsing and validation (sm_config_parse and
** the training shape parser). Any input must give SM_OK or an error with a
** message, never a crash, a leak or undefined behaviour; a config that
** parses must also serialise and parse back.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sm_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sm_config cfg;
    sm_error err = {{0}};
    if (sm_config_parse(&cfg, (const char *)data, size, "fuzz/config.json", &err) == SM_OK) {
        char *json = NULL;
        if (sm_config_to_json(&cfg, &json, &err) == SM_OK) {
            sm_config back;
            if (sm_config_parse(&back, json, strlen(json), "fuzz/back.json", &err) != SM_OK)
                abort(); /* what we write we must read */
            sm_config_free(&back);
            sm_config_json_free(json);
        }
        sm_config_free(&cfg);
    } else if (!err.msg[0]) {
        abort(); /* every refusal says why */
    }
    sm_config shape;
    memset(&shape, 0, sizeof shape);
    shape.n_layer = 2, shape.n_head = 2, shape.n_embd = 16, shape.n_ctx = 8, shape.n_vocab = 256;
    (void)sm_config_parse_shape(&shape, (const char *)data, size, "fuzz/shape.json", &err);
    return 0;
}
