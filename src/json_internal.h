/*
** json_internal.h -- strict JSON parsing (json.c), for every reader of JSON
** (config, tokenizers, conversations, batch records, Hugging Face files).
** cJSON alone accepts trailing text and duplicate keys.
*/
#ifndef SM_JSON_INTERNAL_H
#define SM_JSON_INTERNAL_H

#include <cJSON.h>

#include "sm_base.h"

/*
** Parses exactly one JSON value from text[0..len): no NUL bytes, no \u0000
** escapes (cJSON would cut the string there: SM_ERR_UNSUPPORTED), nothing but
** white space after it, no duplicate key in any object. On failure *out is
** NULL and err says where (line and column); messages start with "PATH: "
** when path is not NULL. Numbers written with a fraction or exponent carry
** SM_JSON_FLOAT_TEXT. Free *out with cJSON_Delete.
*/
sm_status sm_json_parse_strict(const char *text, size_t len, const char *path, cJSON **out,
                               sm_error *err);

/* Set in a number's type when its text had a fraction or an exponent ("-40.0", "1e3"): a float to
   Python's json, though its value is whole. cJSON's own type tests mask the high bits. */
#define SM_JSON_FLOAT_TEXT (1 << 12)

/* Reads the file at path (at most max bytes) and parses it as above; errors name path. */
sm_status sm_json_read_file(const char *path, size_t max, cJSON **out, sm_error *err);

/*
** As sm_json_read_file, but a \u0000 escape is kept, as the two bytes C0 80
** ("modified UTF-8": never in UTF-8, so a file with a raw C0 or C1 byte is
** refused). For files whose strings may hold a NUL (a tokenizer.json's
** vocabulary); sm_json_unnul turns C0 80 back into NUL where lengths are kept.
*/
sm_status sm_json_read_file_nul(const char *path, size_t max, cJSON **out, sm_error *err);
sm_status sm_json_parse_nul(const char *text, size_t len, const char *path, cJSON **out, sm_error *err);

/* s[0..n) with each C0 80 as a NUL byte, into out (n bytes suffice); returns the bytes written. */
size_t sm_json_unnul(const char *s, size_t n, char *out);

#endif
