/*
** sm_tokenizer.h -- text <-> token ids.
**
** Three kinds, named by the model's config:
**   byte           256 ids, id = byte value; no BOS or EOS.
**   sentencepiece  scored pieces with byte fallback <0xNN>, as llama2.c's
**                  tokenizer.bin stores them (Llama, TinyStories): a space
**                  is prefixed to the text, characters become pieces (or
**                  their bytes), then the adjacent pair whose concatenation
**                  is the best-scored piece merges, leftmost first, until
**                  none does. BOS starts every encoding.
**   gpt2           byte-level BPE from vocab.json + merges.txt: GPT-2's
**                  pre-tokenizer pattern splits the text (Unicode classes
**                  from generated tables), then each word's bytes merge by
**                  merge rank.
**   huggingface    a Hugging Face tokenizer.json read as it is: BPE over
**                  bytes or characters (byte fallback), its normalizers
**                  (NFC, NFKC, replace, prepend), pre-tokenizer (regex
**                  splits with PCRE2, ByteLevel, Digits, Metaspace), added
**                  tokens, ignore_merges and post-processor. A GGUF "gpt2"
**                  vocabulary with its tokenizer.ggml.pre runs on the same
**                  machinery.
** Added tokens (special ones when parse_special is set) are matched in the
** text first, leftmost and then longest.
** Any input bytes are representable (invalid UTF-8 goes through as bytes)
** and decoding returns the exact bytes of each token. Work memory is
** allocated when the tokenizer is loaded: encoding never allocates.
*/
#ifndef SM_TOKENIZER_H
#define SM_TOKENIZER_H

#include "sm_config.h"

/* Largest tokenizer file read. */
#define SM_TOK_FILE_MAX (256u << 20)
/* Most tokens an encoding ends with (Command R's post-processor adds two). */
#define SM_TOK_SUFFIX_MAX 4

typedef struct sm_tok_work sm_tok_work;
typedef struct sm_tok_merge sm_tok_merge;
typedef struct sm_tok_pre sm_tok_pre;

typedef struct sm_tokenizer {
    sm_tokenizer_type type;
    int n_vocab;        /* ids the tokenizer produces: 0..n_vocab-1 */
    int32_t bos, eos;   /* -1 when the tokenizer has none */
    int32_t eot;        /* end of turn (GGUF tokenizer.ggml.eot_token_id), ends generation too; or -1 */
    int32_t stop[SM_MAX_STOP]; /* more ids that end generation: the config's eos list, and the
                                  control tokens written as ends of turn (<|eot_id|>, <|im_end|>,
                                  <end_of_turn>, <|end|>, <|eom_id|>) */
    int n_stop;
    bool add_bos;       /* encodings start with bos (sentencepiece) */
    bool add_eos;       /* encodings end with the suffix (GGUF add_eos_token: eos) */
    int32_t suffix[SM_TOK_SUFFIX_MAX]; /* what add_eos appends: eos, or a tokenizer.json
                                          post-processor's tokens after the text */
    int n_suffix;
    bool parse_special; /* encode turns the text of bos/eos tokens into their ids */
    char bytes[256];    /* byte tokenizer: piece of id i is bytes + i, length 1 */
    /* sentencepiece and gpt2, built at load (owned) */
    char *text;         /* every piece's bytes, back to back */
    uint32_t *off;      /* (n_vocab + 1): piece i is text[off[i] .. off[i + 1]) */
    float *score;       /* (n_vocab) sentencepiece merge scores */
    uint8_t *kind;      /* (n_vocab) normal, byte or control piece */
    int32_t *map;       /* open-addressed: normal piece bytes -> id */
    uint32_t map_mask;
    sm_tok_merge *merges; /* gpt2: open-addressed (left, right) -> rank, result */
    uint32_t merge_mask;
    int32_t byte_id[256]; /* the token of each single byte (-1: none) */
    int32_t space_id;     /* sentencepiece: the " " piece, prefixed to the text */
    sm_tok_work *work;    /* encode's scratch */
    /* ranked-merge BPE (gpt2 and huggingface kinds) */
    sm_tok_pre *pre;      /* normalizers and pre-tokenizer steps (owned) */
    bool byte_level;      /* words start as bytes (GPT-2's alphabet); else as characters,
                             with <0xNN> byte fallback or unk for those not in the vocabulary */
    bool ignore_merges;   /* a word that is a token is that token (Llama 3) */
    bool space_prefix;    /* sentencepiece: a space before the text (false: Gemma) */
    int32_t unk;          /* character-level: the unknown token, or -1 */
    char *shown;          /* pieces as decoding shows them where that differs from text */
    uint32_t *shown_off;  /* (n_vocab + 1), like off; NULL with shown */
    /* added tokens (control and user pieces), matched in text before anything else */
    int32_t *added_map;   /* open-addressed: text -> id */
    uint32_t added_mask;
    uint64_t added_len[256]; /* bit l - 1: some added token of l <= 64 bytes starts with this byte */
    int32_t *added_long;  /* the added tokens longer than 64 bytes */
    size_t n_added_long;
} sm_tokenizer;

/*
** Builds the tokenizer the config names, from GGUF file gguf's tables (dir
** then names it in messages) or else from the files cfg->tok_file names in
** `dir` (NULL for the byte tokenizer), and checks its vocabulary fits the
** model's. A model's tokenizer comes from its source: sm_source_tokenizer.
** Every file error names the file and the token or line at fault. On
** failure *t is free-safe.
*/
struct sm_gguf;
sm_status sm_tokenizer_init(sm_tokenizer *t, const sm_config *cfg, const char *dir,
                            const struct sm_gguf *gguf, sm_error *err);
void sm_tokenizer_free(sm_tokenizer *t);

/* What a token is: text, a byte (<0xNN> pieces), a control token never matched in text, a
   user-defined (added, not special) token matched in text as it is before merging, unused
   (an id no token has, as in cl100k and o200k, or a GGUF token of type unused: never made,
   never matched, no text), or unreachable: a byte-level vocabulary token spelled with a
   character outside GPT-2's 256-character alphabet (Command R's emoji), which merging never
   makes; it decodes to its own UTF-8, as Hugging Face's ByteLevel decoder has it. */
typedef enum {
    SM_TOK_NORMAL = 0,
    SM_TOK_BYTE,
    SM_TOK_CONTROL,
    SM_TOK_USER,
    SM_TOK_UNUSED,
    SM_TOK_UNREACHABLE
} sm_tok_kind;
sm_tok_kind sm_tokenizer_kind(const sm_tokenizer *t, int32_t id);

/*
** A ranked-merge tokenizer's merges (gpt2, huggingface) in rank order (best
** first) as (left, right) token ids into pairs (cap of them); returns how
** many it has.
*/
size_t sm_tokenizer_merges(const sm_tokenizer *t, int32_t (*pairs)[2], size_t cap);

/*
** How the tokenizer is written as a GGUF vocabulary, as llama.cpp reads
** one: model "gpt2" (byte-level BPE, merges) with the name of its
** pre-tokenizer, or "llama" (SentencePiece: pieces with U+2581 for spaces,
** scores that order the merges); SM_ERR_UNSUPPORTED, naming what llama.cpp
** has no way to say, for the rest. lossy_nfc: the tokenizer normalizes to
** NFC and llama.cpp's pre-tokenizers do not (texts NFC changes may
** tokenize differently from the GGUF file).
*/
typedef struct {
    const char *model;
    char pre[32];      /* tokenizer.ggml.pre */
    bool space_prefix; /* "llama": a space before the text (tokenizer.ggml.add_space_prefix) */
    bool lossy_nfc;
} sm_tokenizer_gguf;
sm_status sm_tokenizer_gguf_kind(const sm_tokenizer *t, sm_tokenizer_gguf *k, sm_error *err);

/* SentencePiece scores (n_vocab) that make a score-ordered merge do what the ranked merges
** do: a piece scores minus the rank of the first merge that makes it, else minus the count. */
void sm_tokenizer_rank_scores(const sm_tokenizer *t, float *scores);

/*
** n bytes in GPT-2's byte alphabet (each byte one printable code point:
** printable bytes stand for themselves, the others from U+0100 on) as UTF-8
** into out (room for 2 n bytes); returns the length.
*/
size_t sm_tokenizer_alphabet(const char *bytes, size_t n, char *out);

/*
** Writes t into directory dir as smallmind's tokenizer files (what a config
** names): sentencepiece as llama2.c's tokenizer.bin, gpt2 as vocab.json +
** merges.txt (merges in rank order); names gets the file names (empty: no
** file, the byte tokenizer). Loading them gives the same encodings.
*/
sm_status sm_tokenizer_save(const sm_tokenizer *t, const char *dir,
                            char names[2][SM_FILE_NAME_MAX], sm_error *err);

/*
** Encodes text into out (capacity cap) and returns the number of tokens the
** whole text needs, which may exceed cap (then only cap were written).
** Any length gives the tokens of the whole text at once, as the references
** do (a word is merged whole, however long). An empty text has no
** tokens, but for a tokenizer that adds BOS (SentencePiece), BOS alone.
*/
size_t sm_tokenizer_encode(sm_tokenizer *t, const char *text, size_t len, int32_t *out,
                           size_t cap);

/* What an encoding matches and adds besides the text's own tokens. */
enum { SM_ENCODE_SPECIAL = 1, SM_ENCODE_BOS = 2, SM_ENCODE_EOS = 4 };

/*
** As sm_tokenizer_encode, with how (SM_ENCODE_*) in place of the
** tokenizer's parse_special, add_bos and add_eos: a rendered chat template
** is read with its special tokens and without a BOS of the tokenizer's own.
*/
size_t sm_tokenizer_encode_as(sm_tokenizer *t, const char *text, size_t len, int32_t *out,
                              size_t cap, unsigned how);

/*
** The text that stands for token id where special tokens are matched
** (SM_ENCODE_SPECIAL): its piece, control tokens included, or "<s>" and
** "</s>" for the BOS and EOS of llama2.c's tokenizer.bin; NULL (*len 0)
** for the byte tokenizer and ids it lacks.
*/
const char *sm_tokenizer_special_text(const sm_tokenizer *t, int32_t id, size_t *len);

/* Whether generating id ends the text: eos, eot or one of stop. */
bool sm_tokenizer_is_end(const sm_tokenizer *t, int32_t id);

/* The bytes of token id (not NUL-terminated); length 0 for ids it lacks and control tokens. */
const char *sm_tokenizer_piece(const sm_tokenizer *t, int32_t id, size_t *len);

/*
** The bytes token id shows after token prev: as sm_tokenizer_piece, except
** that sentencepiece drops the leading space of the first piece after BOS
** (the space encode prefixed).
*/
const char *sm_tokenizer_piece_after(const sm_tokenizer *t, int32_t prev, int32_t id,
                                     size_t *len);

/*
** The text of ids[0..n) (valid ids): each piece as sm_tokenizer_piece_after
** shows it after the one before, prev before the first (the tokenizer's bos:
** a whole text, its prefixed space dropped; -1: kept). Writes at most cap
** bytes to out and returns the bytes the whole text needs, which may exceed
** cap. The bytes of a character may span pieces: write the text whole.
*/
size_t sm_tokenizer_decode(const sm_tokenizer *t, int32_t prev, const int32_t *ids, size_t n, char *out,
                           size_t cap);

/*
** Length of the longest prefix of s[0..n) that does not end inside a UTF-8
** character: a trailing lead byte with fewer continuation bytes than it
** announces is held back (at most 3 bytes). Invalid bytes count as complete.
*/
size_t sm_utf8_complete(const unsigned char *s, size_t n);

#endif
