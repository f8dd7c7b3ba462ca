/*
** libFuzzer target: one `generate --batch` input line (sm_batch_parse), read
** in each input format (plain, ours, OpenAI's). Any line gives a record or an
** error message; a record's prompt fits the
** caller's buffer and its stop strings are within the limits.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sm_batch.h"
#include "sm_oai.h"

#include <cJSON.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    static const sm_batch_format formats[] = {SM_BATCH_AUTO, SM_BATCH_TEXT, SM_BATCH_JSONL, SM_BATCH_OPENAI};
    for (size_t f = 0; f < sizeof formats / sizeof formats[0]; f++) {
        sm_batch_record rec;
        sm_error err = {{0}};
        sm_sampler_params dflt = {.top_p = 1};
        if (sm_batch_parse((const char *)data, size, formats[f], buf, &dflt, &rec, &err) == SM_OK) {
            if (rec.prompt_len > size || rec.n_stop > SM_STOP_MAX) abort();
            if (!rec.prompt && !rec.messages && !rec.prompts) abort();
            /* its completions: as many as asked (at most 2048), each with its prompt (text or ids below
               the vocabulary) unless a chat's */
            sm_oai_choice *c;
            int32_t *ids;
            size_t n_ch, n;
            sm_status cst = sm_oai_choices(&rec, 300, &c, &n_ch, &n, &ids, &err);
            if (!cst) {
                if (n_ch < 1 || n_ch > SM_OAI_CHOICES_MAX || n < 1 || n_ch % n) abort();
                for (size_t i = 0; i < n_ch; i++) {
                    if (!rec.messages && !c[i].prompt == !c[i].ids) abort();
                    for (size_t k = 0; c[i].ids && k < c[i].n_ids; k++)
                        if (c[i].ids[k] < 0 || c[i].ids[k] >= 300) abort();
                }
                free(c), free(ids);
            } else if (cst != SM_ERR_INPUT || strcmp(rec.param, "prompt") != 0) {
                abort();
            }
            for (size_t i = 0; i < rec.n_stop; i++) {
                size_t m = strlen(rec.stop[i]);
                if (m < 1 || m > SM_STOP_MAX_BYTES) abort();
            }
            if (rec.kind == SM_REC_OAI_BAD || (formats[f] == SM_BATCH_OPENAI && rec.kind < SM_REC_OAI_CHAT)) abort();
        } else if (!err.msg[0]) {
            abort();
        }
        if (strlen(rec.id) >= SM_REC_ID_MAX || strlen(rec.model) >= SM_REC_MODEL_MAX ||
            strlen(rec.param) >= sizeof rec.param)
            abort();
        sm_batch_record_free(&rec);
    }
    free(buf);
    return 0;
}
