/*
** libFuzzer target: Hugging Face tokenizer.json reading (convert's
** sm_hf_tok_kind and sm_hf_tok_write, and the tokenizer's own reader for
** the files read as they are). Any input must be refused with a message or
** turned into a tokenizer, never crash; a tokenizer that loads encodes a
** text with every id in range (and, for the kinds written as files,
** decodes it back).
*/
#include "convert/convert_internal.h"
#include "fuzz_tok_common.h"
#include "json_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cJSON *root = NULL;
    sm_error err = {{0}};
    sm_tokenizer_type type;
    if (sm_json_parse_nul((const char *)data, size, "fuzz/tokenizer.json", &root, &err) != SM_OK) {
        if (!err.msg[0]) abort();
        return 0;
    }
    tok_put("tokenizer.bin", "", 0); /* makes the scratch directory */
    sm_status st = sm_hf_tok_kind(root, "fuzz/tokenizer.json", &type, &err);
    if (!st && type == SM_TOKENIZER_HF) { /* read as it is */
        cJSON_Delete(root);
        tok_put("tokenizer.json", data, size);
        sm_tokenizer t;
        if (tok_load(&t, type) == SM_OK) {
            static const char text[] = "Hello world, na\xc3\xafve cafe\xcc\x81 123 \xe4\xb8\xad\xf0\x9f\x98\x80"
                                       "\r\n  <s>\xff\xfe</s>";
            int32_t ids[512];
            size_t n = sm_tokenizer_encode(&t, text, sizeof text - 1, ids, 512);
            for (size_t i = 0; i < n && i < 512; i++)
                if (ids[i] < 0 || ids[i] >= t.n_vocab) abort();
            sm_tokenizer_free(&t);
        }
        return 0;
    }
    if (!st) st = sm_hf_tok_write(root, "fuzz/tokenizer.json", type, tok_dir, 1, 2, &err);
    cJSON_Delete(root);
    if (st) {
        if (!err.msg[0]) abort(); /* every refusal says why */
        return 0;
    }
    sm_tokenizer t;
    if (tok_load(&t, type) == SM_OK) {
        static const char text[] = "Hello world, na\xc3\xafve caf\xc3\xa9 123 \xe4\xb8\xad\xf0\x9f\x98\x80\n";
        tok_roundtrip(&t, (const uint8_t *)text, sizeof text - 1, 0);
        sm_tokenizer_free(&t);
    }
    return 0;
}
