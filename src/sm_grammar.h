/*
** sm_grammar.h -- structured output: grammars that the sampled text cannot
** break, at almost no cost per token.
**
** A grammar is written in llama.cpp's GBNF (rules `name ::= ...` of
** literals "...", character classes [a-z] / [^...], `.`, rule names,
** groups ( ), alternatives |, and * + ? {m} {m,} {m,n} {,n}; # comments),
** made from a JSON Schema (sm_grammar_from_schema), or the grammar of any
** JSON value. It is compiled once (sm_grammar_*), then bound to a
** tokenizer (sm_gbind: every token's bytes in a trie, and per grammar
** position the tokens it takes), then each constrained sequence has a
** matcher (sm_gmatch): its state, the mask of the tokens that keep the text
** a valid prefix, and the step over a sampled token.
**
** The state is a set of stacks, as in llama.cpp's grammar, but interned:
** a stack is a node (position, parent) shared by all stacks that end the
** same way, and a state a sorted set of nodes with an id, so masks and
** transitions are cached by id. A mask is the union, over the stacks, of
** the tokens the stack's top position takes without leaving its rule
** (computed once per position when the grammar is bound) and of the few
** tokens that leave it, checked against the stack below. Text is matched
** as UTF-8 bytes: a token may end inside a character, and the next one
** continue it.
**
** Nothing here allocates per token: a matcher's tables are sized when it
** is made and compacted when they fill. Never prints.
*/
#ifndef SM_GRAMMAR_H
#define SM_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sm_base.h"
#include "sm_tokenizer.h"

typedef struct sm_grammar sm_grammar;
typedef struct sm_gbind sm_gbind;
typedef struct sm_gmatch sm_gmatch;
typedef struct sm_vtrie sm_vtrie;

/*
** Compiles GBNF text[0..len) (root rule "root"). SM_ERR_INPUT with one line
** naming the line and column, or the rule: a syntax error, an undefined
** rule, left recursion, a repetition of something that can match nothing.
*/
sm_status sm_grammar_parse(sm_grammar **out, const char *text, size_t len, sm_error *err);

/*
** Compiles a JSON Schema (JSON text[0..len)) into a grammar of the JSON
** texts it accepts (see schema.c for the keywords; an unsupported keyword,
** a bad value or an unsatisfiable schema is SM_ERR_INPUT naming the keyword
** and its JSON path). gbnf (may be NULL) gets the grammar's text (malloc'd).
*/
sm_status sm_grammar_from_schema(sm_grammar **out, const char *text, size_t len, char **gbnf,
                                 sm_error *err);

/* The JSON Schema as GBNF text only (malloc'd in *gbnf). */
sm_status sm_schema_to_gbnf(const char *text, size_t len, char **gbnf, sm_error *err);

/* Any JSON value (an object or array at the top when object_only: OpenAI's json_object). */
sm_status sm_grammar_json(sm_grammar **out, bool object_only, sm_error *err);

void sm_grammar_free(sm_grammar *g);

/* Rules and positions, for messages and tests. */
size_t sm_grammar_rules(const sm_grammar *g);

/*
** A tokenizer's tokens as a trie of their bytes (tok must outlive it), to
** share between the bindings of many grammars.
*/
sm_status sm_vtrie_new(sm_vtrie **out, const sm_tokenizer *tok, sm_error *err);
void sm_vtrie_free(sm_vtrie *t);

/*
** Binds g to tokenizer tok (both, and trie, must outlive it): per grammar
** position, the tokens it takes, walked over trie (tok's; NULL: a trie of
** its own). This is the costly part (milliseconds to a second for a large
** vocabulary and grammar); done once per grammar and tokenizer.
*/
sm_status sm_gbind_new(sm_gbind **out, const sm_grammar *g, const sm_tokenizer *tok, const sm_vtrie *trie,
                       sm_error *err);
void sm_gbind_free(sm_gbind *b);

/* A matcher for one sequence on binding b. */
sm_status sm_gmatch_new(sm_gmatch **out, sm_gbind *b, sm_error *err);
void sm_gmatch_free(sm_gmatch *m);
/* Back to the start of the grammar (a new sequence). */
void sm_gmatch_reset(sm_gmatch *m);

/*
** The tokens that keep the text a valid prefix of the grammar after token
** prev (whose piece decides a SentencePiece first piece's space), as a
** bitmap of n_vocab bits (bit i of word i / 64); the tokenizer's end tokens
** are in it only where the grammar accepts the text as it is. Valid until
** the next call on m.
*/
const uint64_t *sm_gmatch_mask(sm_gmatch *m, int32_t prev);

/* Advances over token id's text (as shown after prev). SM_ERR_INPUT if the grammar refuses it. */
sm_status sm_gmatch_accept(sm_gmatch *m, int32_t prev, int32_t id, sm_error *err);

/*
** Tokens the grammar forces next, after token prev (at most cap, into ids):
** the bytes that every continuation of the text starts with (while exactly
** one byte can follow and the text could not end), cut into the longest
** tokens that are prefixes of them, left to right. The last token must end
** before those bytes do (a longer one could run on past them) unless
** nothing can follow. The matcher is not advanced: the caller accepts
** them. Lets a caller feed them through one forward call instead of
** sampling each (the model could have chosen another way to spell the same
** bytes, which is never a different text).
*/
#define SM_FORCED_BYTES 256
size_t sm_gmatch_forced(sm_gmatch *m, int32_t prev, int32_t *ids, size_t cap);

/* Whether the text so far is a whole sentence of the grammar, and whether it may go on. */
bool sm_gmatch_complete(const sm_gmatch *m);
bool sm_gmatch_can_continue(const sm_gmatch *m);

/* What the masks of a matcher cost: their count, total and quantiles (from a histogram of 5%-wide
   bins, so a quantile is within 5% of the truth), in seconds; hits: masks a cache gave. */
typedef struct {
    size_t n, hits;
    double total, median, p99, max;
} sm_gmatch_stats;
sm_gmatch_stats sm_gmatch_timing(const sm_gmatch *m);

/* Whether bytes s[0..n) are a whole sentence of g (tests, and checking outputs). */
bool sm_grammar_accepts(const sm_grammar *g, const char *s, size_t n);

#endif
