/*
** libFuzzer target: a Hugging Face directory given to convert. The input is
** a config.json, a NUL byte, then the bytes of model.safetensors; both go to
** a scratch directory and sm_convert plans the conversion: config.json
** mapped onto the GPT-2 or Llama config (types, ranges, head size), the
** safetensors header parsed and its tensors checked to tile the data
** exactly, each tensor taken by name and shape. The directory has no
** tokenizer, so a plan that gets that far fails there; any input gives an
** error message and writes nothing.
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_scratch.h"
#include "sm_convert.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *dir = scratch_path("hfdir");
    const uint8_t *nul = memchr(data, 0, size);
    size_t jlen = nul ? (size_t)(nul - data) : size;
    const uint8_t *st = nul ? nul + 1 : data + size;
    if (scratch_put("config.json", data, jlen) || scratch_put("model.safetensors", st, (size_t)(data + size - st)))
        return 0;
    char out[96];
    snprintf(out, sizeof out, "%s-out", dir);
    sm_convert_opts o = {0};
    sm_convert_info info;
    sm_error err = {{0}};
    sm_status s = sm_convert(dir, out, &o, &info, &err);
    struct stat sb;
    if (s == SM_OK || !err.msg[0] || stat(out, &sb) == 0) abort(); /* no tokenizer: never a model */
    return 0;
}
