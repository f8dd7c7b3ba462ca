/*
** json_internal.h -- strict JSON parsing, shared by config.c (which owns it)
** and batch.c. cJSON alone accepts trailing text and duplicate keys.
*/
#ifndef SM_JSON_INTERNAL_H
#define SM_JSON_INTERNAL_H

#include <cJSON.h>

#include "sm_base.h"

/*
** Parses exactly one JSON value from text[0..len): no NUL bytes, nothing but
** white space after it, no duplicate key in any object. On failure returns
** NULL and sets err (SM_ERR_FORMAT) with the line and column; messages start
** with "PATH: " when path is not NULL. Free the result with cJSON_Delete.
*/
cJSON *sm_json_parse_strict(const char *text, size_t len, const char *path, sm_error *err);

#endif
