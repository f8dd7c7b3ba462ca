/*
** schema_internal.h -- what schema.c (JSON Schema -> GBNF) and regex.c
** (a pattern -> GBNF) share: a growing text buffer and the rule writer.
*/
#ifndef SM_SCHEMA_INTERNAL_H
#define SM_SCHEMA_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "json_internal.h"
#include "sm_base.h"

typedef struct {
    char *s;
    size_t n, cap;
    bool oom;
} sbuf;

void sb_add(sbuf *b, const char *s, size_t n);
void sb_puts(sbuf *b, const char *s);
void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A GBNF literal "..." of s[0..n) (bytes as they are, quotes, backslashes and controls escaped). */
void sb_literal(sbuf *b, const char *s, size_t n);

/*
** The GBNF of JSON string contents whose decoded value matches `pattern`
** (ECMA-262 subset: literals, . \d \w \s \D \W \S, escapes, classes with
** ranges and negation, groups (?: ) ( ), |, * + ? {m} {m,} {m,n}; ^ and $ at
** its ends; without them the match may be anywhere in the value). Appended
** to out as one alternation expression in parentheses; SM_ERR_INPUT with
** why (err) on an unsupported construct.
*/
sm_status sm_regex_gbnf(const char *pattern, sbuf *out, sm_error *err);

/* GBNF of one JSON string character (escaped as JSON needs) from the set of code points ranges[n][2]. */
void sm_json_char_set(sbuf *out, const unsigned (*ranges)[2], size_t n);

/* Whether schema keyword k constrains nothing where it stands: an annotation (title,
   description, ...) or $defs / definitions (schema.c). */
bool sm_schema_inert(const char *k);

/* The value a local $ref ("#", "#/$defs/a", JSON pointer escapes ~0 ~1) names in root, or NULL
   with why (allof.c). */
const cJSON *sm_schema_pointer(const cJSON *root, const char *ref, char *why, size_t cap);

/* sch (which has allOf) as one schema: its allOf schemas, the keywords beside it, each $ref and
   nested allOf followed, merged (allof.c); a new cJSON the caller deletes, or NULL with why. */
cJSON *sm_schema_merge_all(const cJSON *root, const cJSON *sch, char *why, size_t cap);

/* Integral parts of at most 16 digits; fractions of at most 16 (schema.c's number rule). */
#define SM_NUM_LIMIT 9999999999999999LL
#define SM_NUM_FRAC 16

/* The GBNF of the integers in [lo, hi] (has_lo / has_hi: bounded on that side; beyond 16
   digits clipped), as one parenthesized alternation appended to out (numrange.c). */
void sm_int_range_gbnf(sbuf *out, bool has_lo, long long lo, bool has_hi, long long hi);

/* The GBNF of the JSON numbers without an exponent (integral part and fraction of at most 16
   digits each) within the bounds (lo, hi finite; *_excl: exclusive), every one of them within
   as a validator reads it: appended to out as one parenthesized alternation; false (out
   unchanged) when no such number is. */
bool sm_num_range_gbnf(sbuf *out, bool has_lo, double lo, bool lo_excl, bool has_hi, double hi, bool hi_excl);

/* The GBNF of the multiples of m (1 <= m <= SM_MUL_LIMIT) in [lo, hi] (as sm_int_range_gbnf)
   appended to out, its rules ("m<tag>-...") to rules: 1; 0 (nothing written) when no multiple
   is within; -1 (nothing written) when out of memory (out->oom) or more than 4,096 rules. */
#define SM_MUL_LIMIT 1000000000LL
int sm_int_multiple_gbnf(sbuf *out, sbuf *rules, size_t tag, bool has_lo, long long lo, bool has_hi,
                         long long hi, long long m);

#endif
