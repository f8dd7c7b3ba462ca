/*
** generate.c -- smallmind's library face in one small program.
**
**   cc generate.c $(pkg-config --cflags --libs smallmind) -o generate
**   ./generate MODEL N PROMPT            greedy continuation, streamed
**   ./generate MODEL N PROMPT PROMPT...  the prompts as one batch (decoded
**                                        together), one line each: index, tab,
**                                        the continuation with \n as "\n"
**
** Uses only smallmind.h: open a model, make a session, generate with a
** callback per piece or run many requests on the scheduler, free.
*/
#include <smallmind.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int print_piece(void *user, const char *piece, size_t len) {
    (void)user;
    fwrite(piece, 1, len, stdout);
    fflush(stdout);
    return 0; /* go on */
}

typedef struct {
    char **texts;
    size_t *lens;
} collected;

static int keep(void *user, size_t index, const char *text, size_t len, const smallmind_result *res,
                const char *error) {
    collected *c = user;
    (void)res;
    if (error) {
        fprintf(stderr, "request %zu: %s\n", index, error);
        return 1; /* stop the batch */
    }
    c->texts[index] = malloc(len + 1);
    if (!c->texts[index]) return 1;
    memcpy(c->texts[index], text, len);
    c->lens[index] = len;
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s MODEL N PROMPT [PROMPT...]\n", argv[0]);
        return 2;
    }
    smallmind_model *m = NULL;
    smallmind_session *s = NULL;
    smallmind_error err;
    size_t n_prompts = (size_t)argc - 3;
    smallmind_session_params sp = {.n_parallel = n_prompts > 4 ? 4 : (int)n_prompts};
    if (smallmind_model_open(&m, argv[1], NULL, &err) || smallmind_session_new(&s, m, &sp, &err)) {
        fprintf(stderr, "%s\n", err.message);
        smallmind_model_free(m);
        return 1;
    }
    int32_t ids[8];
    size_t n_ids;
    smallmind_tokenize(m, argv[3], strlen(argv[3]), true, false, ids, 8, &n_ids, NULL);
    fprintf(stderr, "%s model, %zu parameters; the first prompt is %zu tokens\n", smallmind_model_arch(m),
            smallmind_model_n_params(m), n_ids);
    smallmind_request *reqs = calloc(n_prompts, sizeof *reqs);
    collected c = {calloc(n_prompts, sizeof(char *)), calloc(n_prompts, sizeof(size_t))};
    int rc = 0;
    for (size_t i = 0; reqs && i < n_prompts; i++) {
        reqs[i] = smallmind_request_default();
        reqs[i].prompt = argv[3 + i];
        reqs[i].max_tokens = (size_t)atol(argv[2]);
        reqs[i].sampling.temperature = 0; /* greedy */
        reqs[i].on_piece = print_piece;
    }
    smallmind_result res;
    if (!reqs || !c.texts || !c.lens) {
        fprintf(stderr, "out of memory\n");
        rc = 1;
    } else if (n_prompts == 1) {
        if (smallmind_generate(s, &reqs[0], &res, &err)) {
            fprintf(stderr, "%s\n", err.message);
            rc = 1;
        } else {
            fprintf(stderr, "\n%zu prompt tokens, %zu generated\n", res.n_prompt, res.n_generated);
        }
    } else if (smallmind_run_batch(s, reqs, n_prompts, keep, &c, &err)) {
        fprintf(stderr, "%s\n", err.message);
        rc = 1;
    } else {
        for (size_t i = 0; i < n_prompts; i++) {
            printf("%zu\t", i);
            for (size_t k = 0; c.texts[i] && k < c.lens[i]; k++)
                c.texts[i][k] == '\n' ? fputs("\\n", stdout) : putchar(c.texts[i][k]);
            putchar('\n');
        }
    }
    for (size_t i = 0; c.texts && i < n_prompts; i++) free(c.texts[i]);
    free(c.texts);
    free(c.lens);
    free(reqs);
    smallmind_session_free(s);
    smallmind_model_free(m);
    return rc;
}
