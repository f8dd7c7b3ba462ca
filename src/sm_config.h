/*
** sm_config.h -- a model directory's config.json as a plain, validated struct.
**
** This is the only module that sees JSON (cJSON stays inside config.c). On
** success every hyperparameter is in its supported range, every tensor entry
** has a known dtype, 1..4 positive dimensions whose byte size does not
** overflow, a plain file name and a 64-byte aligned offset. Whether tensors
** fit their files is checked by sm_weights; whether their shapes match the
** architecture by the model.
*/
#ifndef SM_CONFIG_H
#define SM_CONFIG_H

#include "sm_base.h"
#include "sm_dtype.h"

#define SM_FORMAT_NAME "smallmind"
#define SM_FORMAT_VERSION 1
#define SM_MAX_DIMS 4
#define SM_MAX_TENSORS 65536
#define SM_MAX_FILES 16
#define SM_MAX_STOP 8 /* end-of-generation ids besides eos */
#define SM_NAME_MAX 128
#define SM_FILE_NAME_MAX 128
#define SM_CONFIG_MAX_BYTES (64u << 20) /* config.json larger than this is refused */

typedef enum { SM_ARCH_GPT2 = 0, SM_ARCH_LLAMA } sm_arch;
typedef enum { SM_ACT_GELU_TANH = 0, SM_ACT_GELU_ERF, SM_ACT_SILU } sm_activation;
typedef enum {
    SM_TOKENIZER_BYTE = 0,      /* 256 ids, id = byte */
    SM_TOKENIZER_SENTENCEPIECE, /* scored pieces with byte fallback (llama2.c tokenizer.bin) */
    SM_TOKENIZER_GPT2,          /* byte-level BPE (vocab.json + merges.txt) */
    SM_TOKENIZER_HF             /* a Hugging Face tokenizer.json as it is */
} sm_tokenizer_type;

typedef struct sm_tensor_desc {
    char name[SM_NAME_MAX];
    sm_dtype dtype;
    int ndim;
    int64_t shape[SM_MAX_DIMS]; /* outermost first, row-major */
    size_t nelem;               /* product(shape), checked */
    size_t nbytes;              /* its bytes in dtype (whole blocks for the q types) */
    int file;                   /* index into sm_config.files */
    uint64_t offset;            /* byte offset in that file, 64-aligned */
} sm_tensor_desc;

typedef struct sm_config {
    sm_arch arch;
    int n_layer;
    int n_head;
    int n_embd;
    int n_ctx;   /* maximum context (rows of the position embedding) */
    int n_vocab; /* rows of the token embedding; may exceed the tokenizer's */
    float norm_eps;
    sm_activation activation;
    bool tied_output; /* output layer shares the token embedding */
    bool bias;        /* linear layers carry biases */
    /* Llama family (gpt2: n_kv_head = n_head, head_dim = n_embd / n_head) */
    int n_kv_head;    /* key/value heads; divides n_head (grouped-query attention) */
    int head_dim;     /* per head; n_head * head_dim need not equal n_embd */
    int n_ff;         /* MLP hidden width (gpt2 default 4 * n_embd) */
    float rope_theta; /* rotary base; pairs (2i, 2i+1) of each head rotate together, */
    bool rope_halves; /* or (i, i + head_dim/2), Q and K rows as Hugging Face stores them
                         (a directory run in place; not written to config.json) */
    bool qkv_bias;    /* llama family: biases on the Q, K and V projections (Qwen 2; run
                         in place, not written to config.json) */
    bool qk_norm;     /* llama family: RMSNorm over each head of Q and K before RoPE (Qwen 3) */
    bool gate_up;     /* llama family: gate and up one matrix ffn_gate_up.weight (2 n_ff, C),
                         rows gate | up (a phi3 GGUF) */
    /* rotary scaling of type llama3 (Llama 3.1/3.2): rope_factor 0 for none */
    float rope_factor, rope_low_freq, rope_high_freq;
    int rope_orig_ctx;
    /* sliding-window attention: a query sees its last sliding_window keys (0: all), on every
       layer, or with swa_pattern N > 0 on all but each N-th (Gemma 3: 5 local, 1 global) */
    int sliding_window, swa_pattern;
    /* Gemma 3: embeddings times embd_scale (sqrt(n_embd); 0: none), attention scores times
       attn_scale (query_pre_attn_scalar^-1/2; 0: head_dim^-1/2), windowed layers rotated with
       rope_local_theta (0: rope_theta), and a norm after attention and after the MLP (on their
       outputs, before the residual add); with activation gelu_tanh the MLP is gated by GELU */
    float embd_scale, attn_scale, rope_local_theta;
    bool post_norms;
    sm_tokenizer_type tokenizer;
    char tok_file[2][SM_FILE_NAME_MAX]; /* sentencepiece, huggingface: [0]; gpt2: vocab, merges */
    int32_t tok_bos, tok_eos;           /* -1 when the tokenizer has none */
    int32_t tok_stop[SM_MAX_STOP];      /* more ids that end generation (an eos_token_id list) */
    int n_stop;
    int n_files;
    char files[SM_MAX_FILES][SM_FILE_NAME_MAX];
    size_t n_tensors;
    sm_tensor_desc *tensors; /* owned; freed by sm_config_free */
    /* the chat template (Jinja text; owned, NULL: none): config.json's chat_template, a GGUF
       file's tokenizer.chat_template, or tokenizer_config.json's beside a Hugging Face model,
       whose bos_token and eos_token texts come with it (owned; NULL: the tokenizer's ids') */
    char *chat_template, *chat_bos, *chat_eos;
} sm_config;

/* The window layer l attends over (0: the whole context). */
static inline size_t sm_config_window(const sm_config *c, int l) {
    if (!c->sliding_window || (c->swa_pattern > 0 && (l + 1) % c->swa_pattern == 0)) return 0;
    return (size_t)c->sliding_window;
}

const char *sm_arch_name(sm_arch a);
const char *sm_tokenizer_type_name(sm_tokenizer_type t);
const char *sm_activation_name(sm_activation a);

/*
** Parses and validates `len` bytes of JSON. `path` is only used in messages.
** On failure returns SM_ERR_FORMAT or SM_ERR_UNSUPPORTED with a message that
** names the key (or line and column for syntax errors); *cfg is then zeroed.
*/
sm_status sm_config_parse(sm_config *cfg, const char *json, size_t len,
                          const char *path, sm_error *err);

/* Reads <dir>/config.json and parses it. */
sm_status sm_config_load(sm_config *cfg, const char *dir, sm_error *err);

void sm_config_free(sm_config *cfg);

/* Gives c its own copies of its chat strings (after a struct copy). false: out of memory. */
bool sm_config_dup_chat(sm_config *c);

/* cfg (with its tensor manifest) as config.json text; free with sm_config_json_free. */
sm_status sm_config_to_json(const sm_config *cfg, char **json, sm_error *err);
void sm_config_json_free(char *json);

/*
** A training shape file: a JSON object with any of n_layer, n_head, n_embd,
** n_ctx, norm_eps, tied_output, bias. Keys present overwrite cfg's fields;
** unknown keys and bad values are refused, naming the key.
*/
sm_status sm_config_parse_shape(sm_config *cfg, const char *json, size_t len, const char *path,
                                sm_error *err);

#endif
