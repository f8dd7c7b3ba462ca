/*
** sm_source.h -- the loading layer (src/load/): a model's files recognised
** once, checked, and handed to the model and the tokenizer in memory.
**
** A source is one of
**   SM_SOURCE_SMALLMIND  a directory whose config.json says "format":
**                        "smallmind": its weight files and tokenizer files;
**   SM_SOURCE_GGUF       a file starting with GGUF's magic (or named .gguf):
**                        its tensors used in place, its tokenizer tables;
**   SM_SOURCE_HF         a directory whose config.json has "model_type" (a
**                        Hugging Face model): safetensors, tokenizer.json
**                        (or vocab.json + merges.txt) and
**                        tokenizer_config.json's chat template;
**   SM_SOURCE_LLAMA2C    any other file (not empty, not named .gguf): a
**                        llama2.c checkpoint, whose header must account for
**                        its size exactly, with opts->tokenizer (its
**                        tokenizer.bin).
** Files are mapped (or read) through sm_map_file. Tensors are used where
** they lie when their layout is smallmind's; the others (GPT-2's Conv1D
** weights, 16-bit norms, a tensor misaligned for the kernels)
** are made once into one heap block the source owns. Nothing is written.
** Every check generate relies on is made here, so generate, convert, info
** and tokenize refuse the same inputs with the same messages.
*/
#ifndef SM_SOURCE_H
#define SM_SOURCE_H

#include "sm_config.h"
#include "sm_gguf.h"
#include "sm_tokenizer.h"
#include "sm_weights.h"

typedef enum { SM_SOURCE_SMALLMIND, SM_SOURCE_GGUF, SM_SOURCE_HF, SM_SOURCE_LLAMA2C } sm_source_kind;

typedef struct sm_source_opts {
    bool read;             /* read the files into memory instead of mapping them */
    bool no_weights;       /* the config and the tokenizer only: no tensor made or copied
                              (a GGUF file then needs only its vocabulary) */
    const char *tokenizer; /* a llama2.c tokenizer.bin: a llama2.c checkpoint's, or one to use
                              instead of a Hugging Face directory's own; NULL: none */
    bool plan_only;        /* SM_SOURCE_HF, SM_SOURCE_LLAMA2C: the plan alone, laid out as a
                              smallmind directory stores it (Q, K, V fused, rotary pairs
                              interleaved), for the converter to write; no config, no tensors */
} sm_source_opts;

struct sm_plan;

typedef struct sm_source {
    sm_source_kind kind;
    char path[4200];
    sm_config cfg;        /* tensors under smallmind's names and in its layout */
    sm_weights w;         /* w.data: each tensor's data (NULL with no_weights) */
    sm_gguf gguf;         /* SM_SOURCE_GGUF: the file (its metadata, its tokenizer tables) */
    char tok_dir[4200];   /* the directory of the tokenizer files cfg.tok_file names */
    size_t made_bytes;    /* of the tensors made at open */
    size_t made_tensors;
    /* private */
    struct sm_plan *pl;   /* SM_SOURCE_HF, SM_SOURCE_LLAMA2C: what the tensors are made of */
    unsigned char *block; /* the tensors made */
} sm_source;

/* What path is (the one place that decides): SM_ERR_IO / SM_ERR_INPUT naming it if nothing. */
sm_status sm_source_kind_of(const char *path, sm_source_kind *kind, sm_error *err);
const char *sm_source_kind_name(sm_source_kind kind);
/* Whether path's name ends in .gguf: a GGUF file whatever it holds (a file read is then checked
** as one, and its header says what is wrong; convert writes one). */
bool sm_source_gguf_name(const char *path);

/* Opens path (any kind) into *out (free with sm_source_close). */
sm_status sm_source_open(sm_source **out, const char *path, const sm_source_opts *opts, sm_error *err);
void sm_source_close(sm_source *s);
/* Whether the n bytes at p lie in one of the source's files as mapped read-only (not read, not
** made): pages the process may drop and find again in the file. */
bool sm_source_file_backed(const sm_source *s, const void *p, size_t n);

/* The source's tokenizer (its files or its GGUF tables), checked against its config. */
sm_status sm_source_tokenizer(const sm_source *s, sm_tokenizer *t, sm_error *err);

/* The plan of an SM_SOURCE_HF or SM_SOURCE_LLAMA2C source (the converter writes it), else NULL. */
struct sm_plan *sm_source_plan(sm_source *s);

#endif
