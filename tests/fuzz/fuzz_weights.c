/*
** libFuzzer target: the weight-file validator. The input is a config.json,
** a NUL byte, then the bytes of model.bin; both go to a scratch directory
** and sm_weights_open validates them, read and mapped. Any input gives
** SM_OK or an error message; with SM_OK every tensor lies inside its file.
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_scratch.h"
#include "sm_config.h"
#include "sm_weights.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *dir = scratch_path("weights");
    const uint8_t *nul = memchr(data, 0, size);
    size_t jlen = nul ? (size_t)(nul - data) : size;
    const uint8_t *bin = nul ? nul + 1 : data + size;
    size_t blen = (size_t)(data + size - bin);
    sm_config cfg;
    sm_error err = {{0}};
    if (sm_config_parse(&cfg, (const char *)data, jlen, "fuzz/config.json", &err) != SM_OK)
        return 0;
    if (scratch_put("model.bin", bin, blen) == 0) {
        for (int mm = 0; mm < 2; mm++) {
            sm_weights w;
            if (sm_weights_open(&w, &cfg, dir, mm == 1, &err) == SM_OK) {
                for (size_t i = 0; i < cfg.n_tensors; i++) {
                    const volatile uint8_t *p = (const volatile uint8_t *)w.data[i];
                    size_t nb = cfg.tensors[i].nbytes;
                    if (nb) (void)(p[0] + p[nb - 1]); /* in bounds, or ASan says so */
                }
                sm_weights_close(&w);
            } else if (!err.msg[0]) {
                abort();
            }
        }
    }
    sm_config_free(&cfg);
    return 0;
}
