/*
** pcache.c -- --prompt-cache FILE and --prompt-cache-ro (sm_pcache.h) for
** generate, chat and --batch: a missing file is made after the run; one of
** this kind that this run cannot use (another model, kernels, KV type,
** version; truncated, corrupted) is not used, with a notice, and rewritten;
** any other file is refused and never overwritten.
*/
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sm_pcache.h"

/* Reads o->prompt_cache into pc. *usable: it was read; *save: it may be written after the run.
   Returns an exit code. */
static int read_file(const cli_opts *o, cli_runner *r, sm_pcache *pc, bool *usable, bool *save) {
    sm_error err = {{0}};
    sm_status st = sm_pcache_read(pc, o->prompt_cache, r->lm->model, &r->ls->sp, &err);
    *usable = st == SM_OK;
    *save = !o->prompt_cache_ro && (st == SM_OK || st == SM_ERR_IO || st == SM_ERR_FORMAT);
    if (st == SM_ERR_FORMAT && !o->quiet)
        fprintf(stderr, "smallmind: note: %s: not used%s\n", err.msg,
                o->prompt_cache_ro ? "" : "; it is rewritten after this run");
    if (st == SM_ERR_INPUT || st == SM_ERR_NOMEM) return cli_data_error(err.msg);
    if (st == SM_ERR_IO && *save) { /* a first run: the file must be creatable, known before the run */
        char dir[4200];
        snprintf(dir, sizeof dir, "%s", o->prompt_cache);
        char *slash = strrchr(dir, '/');
        if (slash) slash[slash == dir] = '\0';
        if (access(slash ? dir : ".", W_OK | X_OK) != 0) {
            char msg[4400];
            snprintf(msg, sizeof msg, "cannot write prompt cache '%s': %s", o->prompt_cache, strerror(errno));
            return cli_data_error(msg);
        }
    }
    return 0;
}

int cli_prompt_cache_load(const cli_opts *o, cli_runner *r, size_t n, size_t *cached, bool *save) {
    sm_pcache pc;
    bool usable;
    *cached = 0;
    int rc = read_file(o, r, &pc, &usable, save);
    if (rc || !usable) return rc;
    *cached = sm_pcache_match(&pc, r->ls->tokens, n, r->lm->model, &r->ls->sp);
    sm_pcache_load(&pc, r->ls->state, 0, *cached);
    if (sm_pcache_same(&pc, r->ls->tokens, n)) *save = false; /* nothing new to keep */
    if (o->verbose)
        fprintf(stderr, "smallmind: prompt cache '%s': %zu of the prompt's %zu tokens loaded (it holds %zu)\n",
                o->prompt_cache, *cached, n, pc.n_blocks * SM_PREFIX_BLOCK);
    sm_pcache_free(&pc);
    return 0;
}

int cli_prompt_cache_chat_load(const cli_opts *o, cli_runner *r, sm_chat_session *cs, bool *save) {
    sm_pcache pc;
    bool usable;
    int rc = read_file(o, r, &pc, &usable, save);
    if (rc || !usable) return rc;
    /* every block the windows allow: the first turn reuses what agrees with its prompt */
    size_t n = SM_PREFIX_BLOCK * sm_prefix_usable(pc.n_blocks, (size_t)-1, r->ls->sp.max_batch,
                                                  sm_model_kv_window(r->lm->model, &r->ls->sp), pc.whole);
    sm_pcache_load(&pc, r->ls->state, 0, n);
    sm_chat_session_seed(cs, pc.tokens, n);
    if (o->verbose)
        fprintf(stderr, "smallmind: prompt cache '%s': %zu tokens loaded\n", o->prompt_cache, n);
    sm_pcache_free(&pc);
    return 0;
}

int cli_prompt_cache_save(const cli_opts *o, cli_runner *r, const int32_t *tokens, size_t n, size_t end) {
    if (n < SM_PREFIX_BLOCK) return 0; /* no whole block to keep */
    sm_error err = {{0}};
    if (sm_pcache_write_state(o->prompt_cache, r->ls->state, 0, tokens, n, end, &err))
        return cli_data_error(err.msg);
    if (o->verbose)
        fprintf(stderr, "smallmind: prompt cache '%s': %zu tokens saved\n", o->prompt_cache,
                n / SM_PREFIX_BLOCK * SM_PREFIX_BLOCK);
    return 0;
}

int cli_prompt_cache_seed(const cli_opts *o, cli_runner *r, bool *save) {
    sm_pcache pc;
    bool usable;
    int rc = read_file(o, r, &pc, &usable, save);
    if (rc || !usable) return rc;
    if (!r->ls->prefix) {
        sm_pcache_free(&pc);
        return cli_usage_error(o, "--prompt-cache with --batch needs the prefix cache (--cache-ram above 0)");
    }
    sm_prefix_put(r->ls->prefix, pc.tokens, pc.n_blocks, pc.data, pc.whole);
    if (o->verbose)
        fprintf(stderr, "smallmind: prompt cache '%s': %zu tokens put in the prefix cache\n",
                o->prompt_cache, pc.n_blocks * SM_PREFIX_BLOCK);
    sm_pcache_free(&pc);
    return 0;
}

int cli_prompt_cache_save_hottest(const cli_opts *o, cli_runner *r) {
    size_t max = r->ls->sp.n_ctx / SM_PREFIX_BLOCK;
    int32_t *tokens = malloc((max + 1) * SM_PREFIX_BLOCK * sizeof *tokens);
    const void **blocks = malloc((max + 1) * sizeof *blocks);
    bool *whole = malloc(max + 1);
    int rc = 0;
    if (!tokens || !blocks || !whole) rc = cli_data_error("out of memory for the prompt cache");
    size_t nb = rc ? 0 : sm_prefix_hottest(r->ls->prefix, tokens, blocks, whole, max);
    sm_error err = {{0}};
    if (nb && sm_pcache_write(o->prompt_cache, r->lm->model, &r->ls->sp, tokens, nb, blocks, whole, &err))
        rc = cli_data_error(err.msg);
    if (!rc && o->verbose)
        fprintf(stderr, "smallmind: prompt cache '%s': %s\n", o->prompt_cache,
                nb ? "the prefix the records reused most saved" : "no prefix was reused: not written");
    free(tokens), free(blocks), free(whole);
    return rc;
}
