/*
** smallmind.h -- the library face: run transformer language models on a CPU.
**
** One small opaque API in the spirit of llama.h. Everything here is named
** smallmind_ (the sm_ names inside the library are internal and may change).
** No function prints or exits: each returns a status and, when err is not
** NULL, one line saying what was wrong (the file, the field, the value).
**
**   smallmind_model *m;
**   smallmind_session *s;
**   smallmind_error err;
**   if (smallmind_model_open(&m, "models/default", NULL, &err) ||
**       smallmind_session_new(&s, m, NULL, &err)) { puts(err.message); ... }
**   smallmind_request r = smallmind_request_default();
**   r.prompt = "Once upon a time";
**   r.on_piece = print_piece;             (called with each piece of text)
**   smallmind_generate(s, &r, &result, &err);
**   smallmind_session_free(s);
**   smallmind_model_free(m);
**
** A model is a smallmind directory, a GGUF file, a Hugging Face directory
** or a llama2.c checkpoint (with its tokenizer.bin), opened as it is. Its
** weights are read-only once opened; any number of sessions (each with its
** own threads, KV-cache and arena, planned once) may use it. A model and
** its sessions are called from one thread at a time (the tokenizer's work
** buffers are the model's); smallmind_cancel may come from any thread or a
** signal handler. Build with `pkg-config --cflags --libs smallmind`.
*/
#ifndef SMALLMIND_H
#define SMALLMIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define SMALLMIND_API __attribute__((visibility("default")))
#else
#define SMALLMIND_API
#endif

#define SMALLMIND_VERSION "0.9.0"

typedef enum smallmind_status {
    SMALLMIND_OK = 0,
    SMALLMIND_ERR_IO,          /* a file could not be opened, read or written */
    SMALLMIND_ERR_FORMAT,      /* a file or config is malformed */
    SMALLMIND_ERR_UNSUPPORTED, /* well-formed, but not supported */
    SMALLMIND_ERR_NOMEM,       /* out of memory */
    SMALLMIND_ERR_INPUT,       /* a bad argument: prompt too long, unknown option value */
    SMALLMIND_ERR_RUNTIME,     /* a failure while running (NaN logits) */
    SMALLMIND_ERR_CANCELLED    /* smallmind_cancel was called: stopped early */
} smallmind_status;

typedef struct smallmind_error {
    smallmind_status status;
    char message[512];
} smallmind_error;

typedef struct smallmind_model smallmind_model;
typedef struct smallmind_session smallmind_session;

/* ------------------------------------------------------------- models */

typedef struct smallmind_model_params {
    bool no_mmap;          /* read the weights into memory instead of mapping them */
    bool check_weights;    /* scan every weight for NaN or infinity first */
    const char *tokenizer; /* a llama2.c tokenizer.bin (for a llama2.c checkpoint), or NULL */
} smallmind_model_params;

/* Opens path (params may be NULL). */
SMALLMIND_API smallmind_status smallmind_model_open(smallmind_model **out, const char *path,
                                                    const smallmind_model_params *params,
                                                    smallmind_error *err);
SMALLMIND_API void smallmind_model_free(smallmind_model *m);

SMALLMIND_API const char *smallmind_model_arch(const smallmind_model *m); /* "llama", "gpt2" */
SMALLMIND_API size_t smallmind_model_n_ctx(const smallmind_model *m);     /* its context */
SMALLMIND_API size_t smallmind_model_n_vocab(const smallmind_model *m);
SMALLMIND_API size_t smallmind_model_n_params(const smallmind_model *m);

/* ------------------------------------------------------------- tokens */

/*
** Text (len bytes) into ids: *n gets how many the text needs, of which the
** first cap are written. add_special: the tokenizer's BOS (and what its
** post-processor adds); parse_special: special-token texts ("<|im_end|>")
** become their ids instead of being spelled out.
*/
SMALLMIND_API smallmind_status smallmind_tokenize(const smallmind_model *m, const char *text, size_t len,
                                                  bool add_special, bool parse_special, int32_t *ids,
                                                  size_t cap, size_t *n, smallmind_error *err);
/* Ids into text: *len gets the bytes needed, the first cap written (not NUL-terminated). */
SMALLMIND_API smallmind_status smallmind_detokenize(const smallmind_model *m, const int32_t *ids, size_t n,
                                                    char *text, size_t cap, size_t *len,
                                                    smallmind_error *err);

/* --------------------------------------------------------------- chat */

typedef struct smallmind_message {
    const char *role;    /* "system", "user", "assistant", ... */
    const char *content; /* NUL-terminated UTF-8 */
} smallmind_message;

/*
** The model's chat template applied to messages (with the assistant's turn
** opened when add_generation_prompt): *out is malloc'd and NUL-terminated;
** release it with smallmind_free.
*/
SMALLMIND_API smallmind_status smallmind_chat_apply(smallmind_model *m, const smallmind_message *messages,
                                                    size_t n, bool add_generation_prompt, char **out,
                                                    size_t *len, smallmind_error *err);
SMALLMIND_API void smallmind_free(void *p);

/* ----------------------------------------------------------- sessions */

typedef struct smallmind_session_params {
    int n_threads;       /* 0: $SMALLMIND_THREADS, $OMP_NUM_THREADS, else the CPUs this process may use */
    size_t n_ctx;        /* KV-cache length in tokens; 0: the model's context */
    const char *kv_type; /* "f32" (NULL) or "f16" */
    int n_parallel;      /* requests decoded together by smallmind_run_batch; 0: 1 */
    const char *kernels; /* "auto" (NULL), "scalar", "avx2", "avx512", or a table per
                            operation: "avx512,rows=avx2" (see --kernels) */
    size_t prefix_cache; /* bytes of keys and values kept for prompt prefixes that
                            smallmind_run_batch's requests share (0: none) */
    bool no_repack;      /* multiply q4_0/q8_0 weights (and a q6_k output layer) as stored; by
                            default the first session whose kernels take them repacks them once
                            (32 rows interleaved, a copy the model keeps; faster decoding) */
} smallmind_session_params;

/* A session on model m (params may be NULL): threads, KV-cache and one arena, planned once. */
SMALLMIND_API smallmind_status smallmind_session_new(smallmind_session **out, smallmind_model *m,
                                                     const smallmind_session_params *params,
                                                     smallmind_error *err);
SMALLMIND_API void smallmind_session_free(smallmind_session *s);

/* Asks the session's running call to stop soon (SMALLMIND_ERR_CANCELLED); safe from a signal handler. */
SMALLMIND_API void smallmind_cancel(smallmind_session *s);

/* --------------------------------------------------------- generation */

typedef struct smallmind_logit_bias {
    int32_t token; /* a token id of the model's vocabulary */
    float bias;    /* -100 to 100, added to its logit before anything else */
} smallmind_logit_bias;

typedef struct smallmind_sampling {
    float temperature;       /* 0: greedy */
    int top_k;               /* 0: off */
    float top_p, min_p;      /* 1, 0: off */
    float repeat_penalty;    /* 1: off */
    int repeat_last_n;
    float presence_penalty, frequency_penalty;
    uint64_t seed;
    const smallmind_logit_bias *logit_bias; /* OpenAI's logit_bias: n_logit_bias (up to 1,024) of them */
    size_t n_logit_bias;
} smallmind_sampling;

/* A piece of generated text; return non-zero to stop generating. */
typedef int (*smallmind_piece_fn)(void *user, const char *piece, size_t len);

#define SMALLMIND_MAX_STOP 8 /* stop strings per request, each 1 to 64 bytes */

typedef struct smallmind_request {
    const char *prompt;                 /* text (its tokenizer's BOS added), or NULL: */
    size_t prompt_len;                  /* (0: strlen(prompt)) */
    const smallmind_message *messages;  /* a conversation, through the chat template */
    size_t n_messages;
    size_t max_tokens;
    smallmind_sampling sampling;
    const char *const *stop;            /* text that ends generation (not emitted) */
    size_t n_stop;
    smallmind_piece_fn on_piece;        /* smallmind_generate: each piece as it is made, or NULL */
    void *user;
} smallmind_request;

/* Defaults: 256 tokens, temperature 0.8, top_k 40, top_p 0.95, seed 42 (as the CLI). */
SMALLMIND_API smallmind_request smallmind_request_default(void);

typedef enum smallmind_finish {
    SMALLMIND_FINISH_LENGTH = 0, /* max_tokens, or the context is full */
    SMALLMIND_FINISH_EOS,        /* the model ended its text */
    SMALLMIND_FINISH_STOP,       /* a stop string */
    SMALLMIND_FINISH_ABORTED,    /* on_piece asked to stop */
    SMALLMIND_FINISH_CANCELLED   /* smallmind_cancel */
} smallmind_finish;

typedef struct smallmind_result {
    smallmind_finish finish;
    size_t n_prompt, n_generated;
    double t_prefill, t_decode; /* seconds */
    size_t n_cached;            /* prompt tokens served from the prefix cache, not prefilled */
} smallmind_result;

/* One request, its text streamed through r->on_piece. */
SMALLMIND_API smallmind_status smallmind_generate(smallmind_session *s, const smallmind_request *r,
                                                  smallmind_result *result, smallmind_error *err);

/*
** A finished request of a batch: its index, its whole text, its result; or
** error (then text is empty) when the request could not run (its prompt
** does not fit). Return non-zero to stop the batch.
*/
typedef int (*smallmind_done_fn)(void *user, size_t index, const char *text, size_t len,
                                 const smallmind_result *result, const char *error);

/*
** Many requests on the session's scheduler: up to n_parallel decoded
** together, each text byte for byte what smallmind_generate gives it
** alone. done is called as each finishes (not in order).
*/
SMALLMIND_API smallmind_status smallmind_run_batch(smallmind_session *s, const smallmind_request *reqs,
                                                   size_t n, smallmind_done_fn done, void *user,
                                                   smallmind_error *err);

#ifdef __cplusplus
}
#endif

#endif
