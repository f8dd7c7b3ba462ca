/*
** convert_internal.h -- what the converter's files share: the GGUF writer
** (export_gguf.c) and the tokenizer.json kinds it writes as smallmind's
** own files (hf_tokenizer.c).
*/
#ifndef SM_CONVERT_INTERNAL_H
#define SM_CONVERT_INTERNAL_H

#include <cJSON.h>

#include "sm_config.h"
#include "sm_convert.h"
#include "sm_gguf.h"
#include "sm_model.h"
#include "sm_plan.h"
#include "sm_tokenizer.h"

/* Writes smallmind directory dir as the GGUF v3 file out (export_gguf.c), complete or absent;
   messages name the model as name (what was converted). */
sm_status sm_export_gguf(const char *dir, const char *name, const char *out, const volatile int *cancel,
                         bool *nfc_lost, sm_error *err);

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
**   SM_TOKENIZER_HF             anything else BPE (Llama 3's or Qwen's
**                               pre-tokenizers, a NUL token): copied as it is.
** A model that is not BPE is SM_ERR_UNSUPPORTED naming the field.
*/
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
