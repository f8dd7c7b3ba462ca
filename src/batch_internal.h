/*
** batch_internal.h -- the field readers that batch.c (our records) and
** oai.c (OpenAI bodies) share. Each returns SM_ERR_INPUT with a message
** naming key on a bad value.
*/
#ifndef SM_BATCH_INTERNAL_H
#define SM_BATCH_INTERNAL_H

#include <cJSON.h>

#include "sm_batch.h"

/* "KEY" what: the message every reader gives. */
sm_status sm_rec_bad(sm_error *err, const char *key, const char *what);
/* A number in [lo, hi], or (lo, hi] if open, into *out. */
sm_status sm_rec_number(const cJSON *v, const char *key, double lo, double hi, bool open, float *out,
                        sm_error *err);
/* A whole number in [lo, hi]. */
sm_status sm_rec_whole(const cJSON *v, const char *key, double lo, double hi, long long *out,
                       sm_error *err);
/* A grammar (kind SM_GK_GBNF: a string) or schema (SM_GK_SCHEMA: an object) from v into rec. */
sm_status sm_rec_grammar(sm_batch_record *rec, sm_grammar_kind kind, const cJSON *v, const char *key, sm_error *err);
/*
** The sampling fields our records and OpenAI bodies read alike: temperature,
** top_k, min_p, repeat_penalty, repeat_last_n, presence_penalty,
** frequency_penalty, logit_bias, stop. false if k is none of them; else *st says how it went.
*/
bool sm_rec_sampling(sm_batch_record *rec, const char *k, const cJSON *v, sm_status *st, sm_error *err);
/* "stop": a string or a list of strings (null: none), into rec (SM_REC_STOP set). */
sm_status sm_rec_stops(sm_batch_record *rec, const cJSON *v, sm_error *err);

#endif
