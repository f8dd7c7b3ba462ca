/*
** libFuzzer target: the prompt-cache reader (sm_pcache.h). The model is
** models/default (run from the source tree; without it the target does
** nothing). Each input is read twice: as a whole file, and laid over a
** valid prompt cache of this model at an offset its first two bytes pick
** (so the header's checks, the sizes and the checksum are all reached).
** Any input gives SM_OK or a status with a message, never a crash; what
** reads OK is matched against a prompt and loaded into a state.
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_scratch.h"
#include "sm_pcache.h"
#include "sm_pool.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static sm_model *model;
static sm_state *state;
static sm_state_params sp;
static sm_arena arena;
static unsigned char *valid;
static size_t valid_len;

static bool setup(void) {
    static int done;
    if (done) return model != NULL;
    done = 1;
    sm_error err = {{0}};
    if (sm_model_load(&model, "models/default", true, &err)) return false;
    /* as `smallmind generate -c 64 --kv-type f16` runs it (its files are the seed corpus) */
    sp = (sm_state_params){.n_ctx = 64, .max_batch = 64, .kernels = sm_kernels_select(NULL), .n_seq = 1,
                           .n_threads = 1, .kv_type = SM_DTYPE_F16};
    sm_state_plan plan;
    static sm_pool *pool;
    if (sm_state_plan_bytes(model, &sp, &plan, &err) || sm_pool_create(&pool, 1) ||
        sm_arena_init(&arena, plan.total) || sm_state_init(&state, model, &sp, pool, &arena, &err))
        abort();
    int32_t toks[48];
    for (int i = 0; i < 48; i++) toks[i] = 'a' + i % 26;
    const float *lg;
    if (sm_state_prefill(state, toks, 48, 0, &lg, &err)) abort();
    char path[256];
    snprintf(path, sizeof path, "%s/valid", scratch_path("pcache"));
    if (sm_pcache_write_state(path, state, 0, toks, 48, 48, &err)) abort();
    char *buf;
    if (sm_read_file(path, 1u << 24, &buf, &valid_len, &err)) abort();
    valid = (unsigned char *)buf;
    return true;
}

static void try_file(const unsigned char *bytes, size_t n) {
    char path[256];
    snprintf(path, sizeof path, "%s/c.bin", scratch_path("pcache"));
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(bytes, 1, n, f) != n || fclose(f)) abort();
    sm_pcache pc;
    sm_error err = {{0}};
    sm_status st = sm_pcache_read(&pc, path, model, &sp, &err);
    if (st != SM_OK) {
        if (!err.msg[0]) abort();
        return;
    }
    int32_t prompt[60];
    for (int i = 0; i < 60; i++) prompt[i] = 'a' + i % 26;
    size_t P = sm_pcache_match(&pc, prompt, 60, model, &sp);
    if (P % SM_PREFIX_BLOCK || P >= 60) abort();
    sm_pcache_load(&pc, state, 0, P);
    sm_pcache_free(&pc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!setup()) return 0;
    try_file(data, size);
    if (size < 2) return 0;
    size_t at = ((size_t)data[0] << 8 | data[1]) % valid_len, n = size - 2;
    size_t len = at + n > valid_len ? at + n : valid_len;
    unsigned char *buf = malloc(len);
    if (!buf) abort();
    memcpy(buf, valid, valid_len);
    memcpy(buf + at, data + 2, n);
    try_file(buf, len);
    free(buf);
    return 0;
}
