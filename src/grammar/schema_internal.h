/*
** schema_internal.h -- what schema.c (JSON Schema -> GBNF) and regex.c
** (a pattern -> GBNF) share: a growing text buffer and the rule writer.
*/
#ifndef SM_SCHEMA_INTERNAL_H
#define SM_SCHEMA_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

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

#endif
