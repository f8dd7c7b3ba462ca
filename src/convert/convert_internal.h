/*
** convert_internal.h -- what the converter's files share: the conversion
** plan (convert.c builds and writes it; convert_hf.c fills it from a
** Hugging Face directory) and the tokenizer.json reader (hf_tokenizer.c).
*/
#ifndef SM_CONVERT_INTERNAL_H
#define SM_CONVERT_INTERNAL_H

#include <cJSON.h>

#include "sm_config.h"
#include "sm_convert.h"
#include "sm_weights.h"
#include "sm_gguf.h"
#include "sm_model.h"
#include "sm_tokenizer.h"

#define MAX_PARTS 3
#define MAX_SHARDS SM_MAX_FILES

enum { OP_COPY, OP_TRANSPOSE, OP_ROPE, OP_PLUS1 /* 1 + w: Gemma's norm gains */ };

typedef struct {
    const unsigned char *src;
    sm_dtype dt;
    int64_t rows, cols; /* of the output part; the source holds rows*cols elements */
    int op;
    int64_t head_dim;   /* OP_ROPE */
} part;

typedef struct {
    char name[SM_NAME_MAX];
    int64_t rows, cols; /* cols 0: a vector of rows elements */
    part parts[MAX_PARTS];
    int n_parts;
} otensor;

typedef struct {
    unsigned char *p;
    size_t n;
} mapped;

typedef struct {
    sm_config cfg;
    otensor *t;
    size_t n, cap;
    mapped maps[MAX_SHARDS + 1];
    int n_maps;
    char tok_src[2][4400]; /* tokenizer files to copy (empty: none) */
    cJSON *tok_json;       /* a tokenizer.json to write the tokenizer files from, or NULL */
    char tok_json_path[4400];
    bool nomem;            /* a tensor could not be added (then `spare` took it) */
    sm_dtype dtype;        /* of the matrices written */
    bool keep;             /* each matrix in its source's type instead (--dtype not given,
                              a GGUF source) */
    bool mix_m;            /* the "_m" mix of a k type */
    int threads;           /* quantizing threads (<= 1: the caller's alone) */
    const volatile int *cancel; /* polled per tensor written */
    bool from_dir;         /* a directory (else a llama2.c checkpoint) */
    bool in_place;         /* planned to run (open_hf.c): a Llama's Q, K, V kept apart and
                              unpermuted (cfg.rope_halves), so they are used where they lie */
    sm_model *src_model;   /* a smallmind directory or GGUF file as source: loaded (and so
                              checked) as generate loads it, or NULL */
    sm_tokenizer *tok_save; /* a tokenizer to write as the output's files (GGUF sources), or NULL */
    otensor spare;
} plan;

/* Maps a whole source file for the plan's lifetime (unmapped by plan_free). */
sm_status sm_convert_map(plan *pl, const char *path, mapped **out, sm_error *err);
/* A new output tensor; its parts follow with add_part. Out of memory: pl->nomem, and a spare. */
otensor *sm_convert_add_tensor(plan *pl, const char *name, int64_t rows, int64_t cols);
void sm_convert_add_part(otensor *t, const unsigned char *src, sm_dtype dt, int64_t rows,
                         int64_t cols, int op, int64_t head_dim);
/* An output tensor made of one source tensor of the same shape. */
void sm_convert_add_whole(plan *pl, const char *name, int64_t rows, int64_t cols,
                          const unsigned char *src, sm_dtype dt, int op);
/* Frees what a plan holds (its mappings, tensors, sources). */
void sm_convert_plan_free(plan *pl);
/* Output row r of part pt (cols elements, or one element for vectors) as f32 into out. */
void sm_convert_part_row(const part *pt, int64_t r, float *out);
/*
** Row r of part k of t in dt (f32, f16 or bf16) into out, through row (f32,
** the row's length; out may be row itself for f32); orow, its row in t,
** names it when a weight is past f16's range.
*/
sm_status sm_convert_plain_row(const otensor *t, int k, int64_t r, int64_t orow, sm_dtype dt,
                               float *row, void *out, sm_error *err);

/* Writes smallmind directory dir as the GGUF v3 file out (export_gguf.c), complete or absent;
   messages name the model as name (what was converted). */
sm_status sm_export_gguf(const char *dir, const char *name, const char *out, const volatile int *cancel,
                         bool *nfc_lost, sm_error *err);

/* Plans the conversion of Hugging Face directory dir (config, weights, tokenizer). */
sm_status sm_convert_from_hf(plan *pl, const char *dir, const sm_convert_opts *o, sm_error *err);

/*
** The tokenizer a parsed Hugging Face tokenizer.json (at `path`, for
** messages) describes, as one of smallmind's kinds:
**   SM_TOKENIZER_GPT2           a BPE model with the ByteLevel pre-tokenizer
**                               and GPT-2's pattern (GPT-2, and others that
**                               kept its tokenizer);
**   SM_TOKENIZER_SENTENCEPIECE  a BPE model with byte fallback and "▁" for
**                               spaces, prefixed to the text (Llama 2,
**                               TinyLlama, Mistral: SentencePiece models
**                               converted by Hugging Face).
** Anything else (Unigram or WordPiece models, other pre-tokenizers such as
** Llama 3's or digit splitting) is SM_ERR_UNSUPPORTED naming the field.
*/
/*
** tokenizer_config.json beside a Hugging Face model, if there is one: its
** chat_template (a string, or a list of {name, template} of which
** "default" is taken) and the texts of bos_token and eos_token (strings or
** {"content": ...}) into c's chat fields. A malformed file or key is an
** error naming it; no file is not.
*/
sm_status sm_hf_chat_config(const char *dir, sm_config *c, sm_error *err);

/* Gives c its own copies of its chat strings (after a struct copy). false: out of memory. */
bool sm_convert_dup_chat(sm_config *c);

sm_status sm_hf_tok_kind(const cJSON *root, const char *path, sm_tokenizer_type *type,
                         sm_error *err);

/*
** Writes that tokenizer into directory dir in smallmind's files:
** vocab.json + merges.txt (GPT2), or tokenizer.bin in llama2.c's layout
** (SENTENCEPIECE): "▁" becomes a space, bos and eos (-1: none) get
** llama2.c's "\n<s>\n" / "\n</s>\n" pieces, and each token's score is minus
** the rank of the first merge that makes it, so best-score-first merging is
** merge-rank order. Ids must cover 0..n-1 (model.vocab with added_tokens);
** every count, id and merge is checked, and errors name path and entry.
*/
sm_status sm_hf_tok_write(const cJSON *root, const char *path, sm_tokenizer_type type,
                          const char *dir, int32_t bos, int32_t eos, sm_error *err);

#endif
