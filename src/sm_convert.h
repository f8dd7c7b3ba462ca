/*
** sm_convert.h -- any model source -> a smallmind model directory or a GGUF
** file. The source is read by the loading layer (sm_source.h), as generate
** reads it; this module only writes.
**
** Sources:
**   a llama2.c checkpoint (legacy format: seven int32 then float32 arrays),
**       with its tokenizer.bin;
**   a Hugging Face directory: config.json + model.safetensors (or shards
**       listed in model.safetensors.index.json), F32, F16 or BF16 tensors,
**       of the GPT-2 family (GPT2LMHeadModel) or the Llama family
**       (LlamaForCausalLM). The tokenizer is `tokenizer` (a llama2.c
**       tokenizer.bin) if given, else vocab.json + merges.txt, else
**       tokenizer.json (byte-level BPE with GPT-2's pattern, or
**       SentencePiece-style BPE with byte fallback; see hf_tokenizer.c).
**   a smallmind directory, to change the type of its matrices (quantize).
** Every header, count, shape and offset is checked against the file sizes
** before it is used. Matrices (embeddings and linear layers) are written in
** the dtype asked for (f32, f16 or bf16, rounded to nearest even; a weight
** past f16's range is an error, not an infinity; or a quantized type,
** sm_quant.h, with the mixes quantizers use: the output layer at q8_0 under
** q4_0 and at q6_k under the k types; under the "_m" mixes (q4_k_m,
** q5_k_m) each layer's fused Q/K/V matrix one type up and the down
** projection of about half the layers (the first and last eighth, every
** third between) at q6_k; GPT-2's position embedding left as it is; a
** k-type matrix whose rows are not whole 256-weight blocks at q8_0, and a
** matrix whose rows are not whole 32-weight blocks left in its source
** type, each counted in sm_convert_info), vectors (norms, biases) as f32.
** The output is written to a temporary sibling and renamed into place, so
** it is complete or absent.
*/
#ifndef SM_CONVERT_H
#define SM_CONVERT_H

#include "sm_base.h"
#include "sm_dtype.h"

#include <stdbool.h>

typedef struct sm_convert_opts {
    const char *tokenizer; /* llama2.c tokenizer.bin (required for llama2.c sources) */
    sm_dtype dtype;        /* of the matrices written (SM_DTYPE_F32 when zeroed) */
    bool mix_m;            /* the "_m" mix of a k type (q4_k_m, q5_k_m) */
    bool keep;             /* instead: a GGUF file's or smallmind directory's matrices in
                              their own types (a fused Q/K/V in the widest of its parts') */
    int threads;           /* quantizing threads (0 or 1: the caller's alone) */
    const volatile int *cancel; /* polled per tensor; once set: SM_ERR_CANCELLED, nothing left */
} sm_convert_opts;

typedef struct sm_convert_info {
    char source[64];   /* "llama2.c checkpoint", "Hugging Face gpt2", ... */
    size_t n_tensors;
    size_t params;
    size_t bytes;      /* of model.bin */
    size_t n_kept;     /* matrices left in their source type: rows not whole blocks */
    char kept[128];    /* the first of them */
    size_t n_q8;       /* k-type matrices written in a 32-weight type: rows not whole 256-weight blocks */
    char q8[128];      /* the first of them */
    bool nfc_lost;     /* to GGUF: the tokenizer normalizes to NFC, which the GGUF form cannot say
                          (llama.cpp's pre-tokenizers do not): texts NFC changes may differ */
} sm_convert_info;

/*
** A --dtype name: a dtype (sm_config.h), or a k-quant mix "q4_k_m" /
** "q5_k_m" (dtype q4_k / q5_k, mix_m set). False if unknown.
*/
bool sm_convert_dtype_parse(const char *name, sm_dtype *dtype, bool *mix_m);

/* Converts src (a file or a directory) into the new directory out (which must not exist). */
sm_status sm_convert(const char *src, const char *out, const sm_convert_opts *o,
                     sm_convert_info *info, sm_error *err);

#endif
