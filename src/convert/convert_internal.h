/*
** convert_internal.h -- what convert.c uses from its helper files.
*/
#ifndef SM_CONVERT_INTERNAL_H
#define SM_CONVERT_INTERNAL_H

#include <cJSON.h>

#include "sm_config.h"

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
