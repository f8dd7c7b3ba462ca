/*
** libFuzzer target: one `generate --batch` input line (sm_batch_parse). Any
** line gives a record or an error message; a record's prompt fits the
** caller's buffer and its stop strings are within the limits.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sm_batch.h"

#include <cJSON.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    sm_batch_record rec;
    sm_error err = {{0}};
    sm_sampler_params dflt = {.top_p = 1};
    if (sm_batch_parse((const char *)data, size, buf, &dflt, &rec, &err) == SM_OK) {
        if (rec.prompt_len > size || rec.n_stop > SM_STOP_MAX) abort();
        for (size_t i = 0; i < rec.n_stop; i++) {
            size_t m = strlen(rec.stop[i]);
            if (m < 1 || m > SM_STOP_MAX_BYTES) abort();
        }
        if (strlen(rec.id) >= SM_REC_ID_MAX) abort();
        cJSON_Delete(rec.messages);
    } else if (!err.msg[0]) {
        abort();
    }
    free(buf);
    return 0;
}
