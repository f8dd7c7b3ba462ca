/*
** sm_plan.h -- how a source's tensors become smallmind's (the loading
** layer, src/load/; the converter writes plans, src/convert/).
**
** A plan is the config plus, for every smallmind tensor, the source parts it
** is made of (one part, or the row-wise concatenation of Q, K and V), each
** with the operation that maps it into smallmind's layout: a copy, a
** transpose (Hugging Face GPT-2's Conv1D stores [in, out]), a rotary
** permutation (Hugging Face Llama's Q and K rows pair dimension i with
** i + head_dim/2; smallmind and llama2.c pair 2i with 2i+1) or 1 + w
** (Gemma's norm gains). Sources are mapped for the plan's lifetime and every
** size is checked against its file before a pointer into it is formed.
** Hugging Face directories are planned by load/hf.c, llama2.c checkpoints
** by load/llama2c.c.
*/
#ifndef SM_PLAN_H
#define SM_PLAN_H

#include "sm_config.h"

#define SM_PLAN_PARTS 3
#define SM_PLAN_FILES SM_MAX_FILES

enum { SM_OP_COPY, SM_OP_TRANSPOSE, SM_OP_ROPE, SM_OP_PLUS1 };

typedef struct sm_plan_part {
    const unsigned char *src;
    sm_dtype dt;
    int64_t rows, cols; /* of the output part; the source holds rows*cols elements */
    int op;             /* SM_OP_* */
    int64_t head_dim;   /* SM_OP_ROPE */
} sm_plan_part;

typedef struct sm_plan_tensor {
    char name[SM_NAME_MAX];
    int64_t rows, cols; /* cols 0: a vector of rows elements */
    sm_plan_part parts[SM_PLAN_PARTS];
    int n_parts;
} sm_plan_tensor;

typedef struct sm_plan_map {
    unsigned char *p;
    size_t n;
    bool mapped; /* else read into memory (sm_map_file) */
} sm_plan_map;

typedef struct sm_plan {
    sm_config cfg;
    sm_plan_tensor *t;
    size_t n, cap;
    sm_plan_map maps[SM_PLAN_FILES + 1];
    int n_maps;
    char tok_src[2][4400]; /* the tokenizer's files, full paths (cfg.tok_file names them) */
    bool nomem;            /* a tensor could not be added (then `spare` took it) */
    bool from_dir;         /* a directory (else a llama2.c checkpoint) */
    bool in_place;         /* planned to run: a Llama's Q, K, V kept apart (and a Hugging
                              Face one's unpermuted, cfg.rope_halves), so they are used where
                              they lie */
    bool read;             /* files read into memory instead of mapped (--no-mmap) */
    sm_plan_tensor spare;
} sm_plan;

/* Maps (or with pl->read reads) a whole source file for the plan's lifetime (sm_plan_free
** releases it). */
sm_status sm_plan_map_file(sm_plan *pl, const char *path, sm_plan_map **out, sm_error *err);
/* A new output tensor; its parts follow with add_part. Out of memory: pl->nomem, and a spare. */
sm_plan_tensor *sm_plan_add_tensor(sm_plan *pl, const char *name, int64_t rows, int64_t cols);
void sm_plan_add_part(sm_plan_tensor *t, const unsigned char *src, sm_dtype dt, int64_t rows,
                      int64_t cols, int op, int64_t head_dim);
/* An output tensor made of one source tensor of the same shape. */
void sm_plan_add_whole(sm_plan *pl, const char *name, int64_t rows, int64_t cols,
                       const unsigned char *src, sm_dtype dt, int op);
/* Frees what a plan holds (its mappings, tensors, config). */
void sm_plan_free(sm_plan *pl);
/* Output row r of part pt (cols elements, or one element for vectors) as f32 into out. */
void sm_plan_part_row(const sm_plan_part *pt, int64_t r, float *out);
/*
** Row r of part k of t in dt (f32, f16 or bf16) into out, through row (f32,
** the row's length; out may be row itself for f32); orow, its row in t,
** names it when a weight is past f16's range.
*/
sm_status sm_plan_plain_row(const sm_plan_tensor *t, int k, int64_t r, int64_t orow, sm_dtype dt,
                            float *row, void *out, sm_error *err);

/*
** Plans Hugging Face directory dir (config.json, safetensors, tokenizer):
** its tokenizer is `tokenizer` (a llama2.c tokenizer.bin) if given, else
** tokenizer.json (SM_TOKENIZER_HF), else vocab.json + merges.txt (GPT-2's).
*/
sm_status sm_plan_hf(sm_plan *pl, const char *dir, const char *tokenizer, sm_error *err);
/*
** Plans llama2.c checkpoint path (legacy format: seven int32, then f32
** arrays; the header must account for the file's size exactly) with its
** tokenizer.bin `tokenizer`. A file whose header no checkpoint has is
** neither GGUF nor llama2.c, and the message says so.
*/
sm_status sm_plan_llama2c(sm_plan *pl, const char *path, const char *tokenizer, sm_error *err);
/*
** tokenizer_config.json beside a Hugging Face model, if there is one: its
** chat_template (a string, or a list of {name, template} of which
** "default" is taken) and the texts of bos_token and eos_token (strings or
** {"content": ...}) into c's chat fields. A malformed file or key is an
** error naming it; no file is not.
*/
sm_status sm_plan_chat_config(const char *dir, sm_config *c, sm_error *err);

#endif
