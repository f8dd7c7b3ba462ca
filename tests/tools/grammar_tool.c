/*
** grammar_tool.c -- the grammar engine from the command line, for tests.
**   grammar_tool gbnf SCHEMA.json                  the schema's GBNF on stdout
**   grammar_tool check (-g GRAMMAR | -s SCHEMA)    compile; "ok" or the error (exit 1)
**   grammar_tool accepts (-g|-s) FILE TEXT...      "1" or "0" per text file: a whole sentence?
**   grammar_tool masks (-g|-s) FILE MODEL STEPS SEED
**        random walks: at each step the matcher's mask is compared with every
**        token checked on its own from the text so far (bytes stepped one by
**        one through a separate core); prints mismatches and mask timings.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/grammar/core.h"
#include "sm_base.h"
#include "sm_source.h"

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0;
    char *b = malloc(cap + 1);
    size_t got;
    while (b && (got = fread(b + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap) {
            char *nb = realloc(b, 2 * cap + 1);
            if (!nb) break;
            b = nb, cap *= 2;
        }
    }
    fclose(f);
    if (b) b[len] = '\0';
    *n = len;
    return b;
}

static sm_grammar *compile(const char *flag, const char *path) {
    size_t n;
    char *text = slurp(path, &n);
    if (!text) {
        fprintf(stderr, "cannot read %s\n", path);
        return NULL;
    }
    sm_grammar *g = NULL;
    sm_error err = {{0}};
    sm_status st = strcmp(flag, "-s") == 0 ? sm_grammar_from_schema(&g, text, n, NULL, &err)
                                           : sm_grammar_parse(&g, text, n, &err);
    free(text);
    if (st) printf("%s\n", err.msg);
    return st ? NULL : g;
}

static uint64_t rng(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

/* The tokenizer of the model at path (its source in *src); false (said) if it cannot be had. */
static bool open_tokenizer(const char *path, sm_source **src, sm_tokenizer *tok) {
    sm_error err = {{0}};
    *src = NULL;
    if (sm_source_open(src, path, &(sm_source_opts){.no_weights = true}, &err) || sm_source_tokenizer(*src, tok, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return false;
    }
    return true;
}

static int masks(sm_grammar *g, const char *model, int steps, uint64_t seed) {
    sm_source *src = NULL;
    sm_tokenizer tok;
    sm_error err = {{0}};
    if (!open_tokenizer(model, &src, &tok)) return 1;
    sm_gbind *b = NULL;
    sm_gmatch *m = NULL;
    double t0 = sm_time_now();
    if (sm_gbind_new(&b, g, &tok, NULL, &err) || sm_gmatch_new(&m, b, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    double t_bind = sm_time_now() - t0;
    gc_core ref;
    if (gc_init(&ref, g, 4096, false)) return 1;
    size_t V = (size_t)tok.n_vocab, bad = 0, n_masks = 0, walks = 0, allowed_total = 0;
    double t_mask = 0, t_max = 0;
    char *text = malloc(1 << 20);
    for (int step = 0; step < steps;) {
        sm_gmatch_reset(m);
        gc_clear(&ref);
        gc_at at = {gc_start(&ref), 0};
        size_t len = 0;
        int32_t prev = tok.bos;
        walks++;
        for (; step < steps; step++) {
            double t1 = sm_time_now();
            const uint64_t *mask = sm_gmatch_mask(m, prev);
            double dt = sm_time_now() - t1;
            t_mask += dt, n_masks++;
            if (dt > t_max) t_max = dt;
            /* every token on its own */
            int32_t pick[64];
            size_t n_pick = 0, n_allowed = 0;
            for (size_t id = 0; id < V; id++) {
                bool want;
                if (sm_tokenizer_is_end(&tok, (int32_t)id)) {
                    want = !at.part && gc_has(&ref, at.s, GC_ACCEPT);
                } else {
                    size_t pl;
                    const char *p = sm_tokenizer_piece_after(&tok, prev, (int32_t)id, &pl);
                    sm_tok_kind k = tok.type == SM_TOKENIZER_BYTE ? SM_TOK_NORMAL : sm_tokenizer_kind(&tok, (int32_t)id);
                    gc_at t = at;
                    want = pl > 0 && k != SM_TOK_CONTROL && k != SM_TOK_UNUSED && (int32_t)id != tok.bos;
                    for (size_t i = 0; want && i < pl; i++) {
                        t = gc_step_byte(&ref, t, (uint8_t)p[i]);
                        want = t.s != GC_DEAD;
                    }
                }
                bool got = (mask[id >> 6] >> (id & 63)) & 1;
                if (got != want) {
                    if (bad++ < 10) {
                        size_t pl;
                        const char *p = sm_tokenizer_piece(&tok, (int32_t)id, &pl);
                        printf("mismatch at step %d after %zu bytes '%.*s': token %zu '%.*s' mask %d, check %d\n", step,
                               len, (int)(len < 60 ? len : 60), text + (len < 60 ? 0 : len - 60), id, (int)pl, p, got, want);
                    }
                }
                if (got) {
                    n_allowed++;
                    if (n_pick < 64 && (n_pick < 8 || rng(&seed) % 8 == 0)) pick[n_pick++] = (int32_t)id;
                }
            }
            allowed_total += n_allowed;
            if (n_allowed == 0) break;
            /* a random allowed token, often one of the first (ends come late in ids: take them sometimes) */
            int32_t id = pick[rng(&seed) % n_pick];
            for (size_t k = 0; k < n_pick; k++)
                if (sm_tokenizer_is_end(&tok, pick[k]) && rng(&seed) % 4 == 0) id = pick[k];
            if (sm_tokenizer_is_end(&tok, id)) {
                step++;
                break;
            }
            if (sm_gmatch_accept(m, prev, id, &err)) {
                printf("accept of an allowed token failed: %s\n", err.msg);
                bad++;
                break;
            }
            size_t pl;
            const char *p = sm_tokenizer_piece_after(&tok, prev, id, &pl);
            for (size_t i = 0; i < pl; i++) at = gc_step_byte(&ref, at, (uint8_t)p[i]);
            if (len + pl < (1 << 20)) memcpy(text + len, p, pl), len += pl;
            prev = id;
            if (!sm_gmatch_can_continue(m) && !sm_gmatch_complete(m)) break;
        }
    }
    printf("masks: %zu steps in %zu walks, %zu mismatches; bind %.1f ms; mask mean %.3f ms, max %.3f ms; "
           "%.1f tokens allowed on average of %zu\n",
           n_masks, walks, bad, t_bind * 1e3, t_mask / (double)n_masks * 1e3, t_max * 1e3,
           (double)allowed_total / (double)n_masks, V);
    free(text);
    gc_free(&ref);
    sm_gmatch_free(m);
    sm_gbind_free(b);
    sm_tokenizer_free(&tok);
    sm_source_close(src);
    return bad ? 1 : 0;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* speed: masks and steps only (no brute force): median, p99 and max mask time over random walks. */
static int speed(sm_grammar *g, const char *model, int steps, uint64_t seed) {
    sm_source *src = NULL;
    sm_tokenizer tok;
    sm_error err = {{0}};
    if (!open_tokenizer(model, &src, &tok)) return 1;
    sm_gbind *b = NULL;
    sm_gmatch *m = NULL;
    double t0 = sm_time_now();
    if (sm_gbind_new(&b, g, &tok, NULL, &err) || sm_gmatch_new(&m, b, &err)) return 1;
    double t_bind = sm_time_now() - t0;
    size_t V = (size_t)tok.n_vocab;
    double *t = malloc((size_t)steps * sizeof *t);
    int32_t *cand = malloc(V * sizeof *cand);
    int n = 0, walks = 0;
    while (n < steps) {
        sm_gmatch_reset(m);
        int32_t prev = -1;
        walks++;
        for (; n < steps; n++) {
            double t1 = sm_time_now();
            const uint64_t *mask = sm_gmatch_mask(m, prev);
            t[n] = sm_time_now() - t1;
            size_t k = 0;
            for (size_t id = 0; id < V; id++)
                if ((mask[id >> 6] >> (id & 63)) & 1) cand[k++] = (int32_t)id;
            if (!k) { n++; break; }
            int32_t id = cand[rng(&seed) % k];
            if (sm_tokenizer_is_end(&tok, id)) { n++; break; }
            if (sm_gmatch_accept(m, prev, id, &err)) return 1;
            prev = id;
            if (!sm_gmatch_can_continue(m)) { n++; break; }
        }
    }
    qsort(t, (size_t)n, sizeof *t, cmp_d);
    double sum = 0;
    int slow = 0;
    for (int i = 0; i < n; i++) sum += t[i], slow += t[i] > 1e-4;
    printf("speed: %d masks in %d walks; bind %.1f ms; mask median %.4f ms, p99 %.4f ms, max %.3f ms, mean %.4f ms; "
           "%d over 0.1 ms\n", n, walks, t_bind * 1e3, t[n / 2] * 1e3, t[(size_t)(n * 0.99)] * 1e3, t[n - 1] * 1e3,
           sum / n * 1e3, slow);
    free(t), free(cand);
    sm_gmatch_free(m), sm_gbind_free(b), sm_tokenizer_free(&tok), sm_source_close(src);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 3 && strcmp(argv[1], "gbnf") == 0) {
        size_t n;
        char *text = slurp(argv[2], &n), *g = NULL;
        sm_error err = {{0}};
        if (!text || sm_schema_to_gbnf(text, n, &g, &err)) {
            printf("%s\n", text ? err.msg : "cannot read the schema");
            free(text);
            return 1;
        }
        fputs(g, stdout);
        free(g), free(text);
        return 0;
    }
    if (argc < 4) {
        fprintf(stderr, "usage: see grammar_tool.c\n");
        return 2;
    }
    sm_grammar *g = compile(argv[2], argv[3]);
    if (!g) return 1;
    int rc = 0;
    if (strcmp(argv[1], "check") == 0) {
        printf("ok (%zu rules)\n", sm_grammar_rules(g));
    } else if (strcmp(argv[1], "accepts") == 0) {
        for (int i = 4; i < argc; i++) {
            size_t n;
            char *t = slurp(argv[i], &n);
            printf("%d\n", t && sm_grammar_accepts(g, t, n));
            free(t);
        }
    } else if (strcmp(argv[1], "speed") == 0 && argc >= 7) {
        rc = speed(g, argv[4], atoi(argv[5]), (uint64_t)strtoull(argv[6], NULL, 10));
    } else if (strcmp(argv[1], "masks") == 0 && argc >= 7) {
        rc = masks(g, argv[4], atoi(argv[5]), (uint64_t)strtoull(argv[6], NULL, 10));
    } else {
        rc = 2;
    }
    sm_grammar_free(g);
    return rc;
}
