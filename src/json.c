/*
** json.c -- strict JSON: one value, no duplicate keys, nothing after it,
** errors with a line and column; numbers written as floats marked (cJSON
** forgets the difference); a \u0000 escape refused, or kept as C0 80 for the
** readers whose strings may hold a NUL (a tokenizer's vocabulary). cJSON
** (Debian's) does the parsing; this file checks what it lets through.
*/
#include "json_internal.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Line and column (1-based) of byte offset `at` in `text`. */
static void line_col(const char *text, size_t at, int *line, int *col) {
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < at; i++) {
        if (text[i] == '\n') {
            ++*line;
            *col = 1;
        } else {
            ++*col;
        }
    }
}

static int cmp_key(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A key that appears twice in object `node`, or NULL: pairwise when small, else sorted. */
static const char *object_duplicate(const cJSON *node) {
    size_t n = 0;
    for (const cJSON *a = node->child; a; a = a->next) n++;
    const char **keys = n > 16 ? malloc(n * sizeof *keys) : NULL;
    if (!keys) {
        for (const cJSON *a = node->child; a; a = a->next)
            for (const cJSON *b = a->next; b; b = b->next)
                if (a->string && b->string && strcmp(a->string, b->string) == 0) return a->string;
        return NULL;
    }
    size_t k = 0;
    for (const cJSON *a = node->child; a; a = a->next)
        if (a->string) keys[k++] = a->string;
    qsort(keys, k, sizeof *keys, cmp_key);
    const char *dup = NULL;
    for (size_t i = 1; i < k && !dup; i++)
        if (strcmp(keys[i - 1], keys[i]) == 0) dup = keys[i];
    free(keys);
    return dup;
}

/* A duplicate key anywhere in the document, or NULL. */
static const char *duplicate_key(const cJSON *node) {
    if (cJSON_IsObject(node)) {
        const char *d = object_duplicate(node);
        if (d) return d;
    }
    for (const cJSON *c = node->child; c; c = c->next) {
        const char *k = duplicate_key(c);
        if (k) return k;
    }
    return NULL;
}

static sm_status parse(const char *text, size_t len, const char *path, bool keep_nul, cJSON **out,
                       sm_error *err);

static sm_status read_file(const char *path, size_t max, bool keep_nul, cJSON **out, sm_error *err) {
    char *buf;
    size_t len;
    *out = NULL;
    sm_status st = sm_read_file(path, max, &buf, &len, err);
    if (st) return st;
    st = parse(buf, len, path, keep_nul, out, err);
    free(buf);
    return st;
}

sm_status sm_json_read_file(const char *path, size_t max, cJSON **out, sm_error *err) {
    return read_file(path, max, false, out, err);
}

sm_status sm_json_read_file_nul(const char *path, size_t max, cJSON **out, sm_error *err) {
    return read_file(path, max, true, out, err);
}

size_t sm_json_unnul(const char *s, size_t n, char *out) {
    size_t o = 0;
    for (size_t k = 0; k < n; k++) {
        if ((unsigned char)s[k] == 0xC0 && k + 1 < n && (unsigned char)s[k + 1] == 0x80) {
            out[o++] = '\0';
            k++;
        } else {
            out[o++] = s[k];
        }
    }
    return o;
}

/* The next number in text from *pos (outside strings): whether it has a fraction or exponent. */
static bool next_number_is_float(const char *text, size_t len, size_t *pos) {
    size_t i = *pos;
    while (i < len) {
        char c = text[i];
        if (c == '"') { /* a string: skip it, escapes and all */
            for (i++; i < len && text[i] != '"'; i++) i += text[i] == '\\';
            i++;
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            break;
        } else {
            i++;
        }
    }
    bool fl = false;
    for (; i < len && strchr("+-0123456789.eE", text[i]); i++) fl = fl || strchr(".eE", text[i]);
    *pos = i;
    return fl;
}

/* Marks the numbers of j (in the order of the text, as cJSON keeps it) written as floats. */
static void mark_floats(cJSON *j, const char *text, size_t len, size_t *pos) {
    for (; j; j = j->next) {
        if (cJSON_IsNumber(j) && next_number_is_float(text, len, pos)) j->type |= SM_JSON_FLOAT_TEXT;
        if (j->child) mark_floats(j->child, text, len, pos);
    }
}

sm_status sm_json_parse_strict(const char *text, size_t len, const char *path, cJSON **out,
                               sm_error *err) {
    return parse(text, len, path, false, out, err);
}

sm_status sm_json_parse_nul(const char *text, size_t len, const char *path, cJSON **out, sm_error *err) {
    return parse(text, len, path, true, out, err);
}

/* Whether text[k..] is a \u0000 escape (not an escaped backslash followed by "u0000"). */
static bool nul_escape_at(const char *text, size_t len, size_t k) {
    if (k + 6 > len || text[k] != '\\' || text[k + 1] != 'u' || memcmp(text + k + 2, "0000", 4) != 0)
        return false;
    size_t bs = 0;
    while (bs < k && text[k - 1 - bs] == '\\') bs++;
    return bs % 2 == 0;
}

/* text with each \u0000 escape as the bytes C0 80, into a new buffer (*out, *out_len). */
static sm_status keep_nuls(const char *text, size_t len, const char *pre, const char *sep, char **out,
                           size_t *out_len, sm_error *err) {
    char *b = malloc(len ? len : 1);
    if (!b) return sm_error_set(err, SM_ERR_NOMEM, "%s%sout of memory for the JSON text", pre, sep);
    size_t o = 0;
    for (size_t k = 0; k < len; k++) {
        if (nul_escape_at(text, len, k)) {
            b[o++] = (char)0xC0, b[o++] = (char)0x80;
            k += 5;
        } else {
            b[o++] = text[k];
        }
    }
    *out = b;
    *out_len = o;
    return SM_OK;
}

static sm_status parse(const char *text, size_t len, const char *path, bool keep_nul, cJSON **out,
                       sm_error *err) {
    *out = NULL;
    const char *pre = path ? path : "", *sep = path ? ": " : "";
    if (memchr(text, '\0', len))
        return sm_error_set(err, SM_ERR_FORMAT, "%s%scontains a NUL byte; expected JSON text",
                            pre, sep);
    int line, col;
    for (size_t k = 0; keep_nul && k < len; k++) { /* C0 80 will stand for NUL: no raw C0 or C1 */
        if ((unsigned char)text[k] != 0xC0 && (unsigned char)text[k] != 0xC1) continue;
        line_col(text, k, &line, &col);
        return sm_error_set(err, SM_ERR_FORMAT, "%s%sinvalid UTF-8 (byte 0x%02X) at line %d, column %d",
                            pre, sep, (unsigned char)text[k], line, col);
    }
    size_t k = 0;
    while (k < len && !nul_escape_at(text, len, k)) k++;
    if (k < len && keep_nul) { /* cJSON would end the string there: parse a copy with C0 80 */
        char *copy = NULL;
        size_t n = 0;
        sm_status st = keep_nuls(text, len, pre, sep, &copy, &n, err);
        if (!st) st = parse(copy, n, path, false, out, err);
        free(copy);
        return st;
    }
    if (k < len) { /* cJSON ends a string at an escaped NUL: refuse it rather than cut names or prompts short */
        line_col(text, k, &line, &col);
        return sm_error_set(err, SM_ERR_UNSUPPORTED,
                            "%s%sa \\u0000 (NUL) escape at line %d, column %d is not supported",
                            pre, sep, line, col);
    }
    const char *end = NULL;
    cJSON *root = len ? cJSON_ParseWithLengthOpts(text, len, &end, false) : NULL;
    if (!root) {
        size_t at = end && end >= text && end <= text + len ? (size_t)(end - text) : 0;
        line_col(text, at, &line, &col);
        return sm_error_set(err, SM_ERR_FORMAT, "%s%sinvalid JSON at line %d, column %d", pre, sep,
                            line, col);
    }
    /* cJSON stops at the end of the first value; anything but space after it is garbage. */
    size_t at = (size_t)(end - text);
    while (at < len && (text[at] == ' ' || text[at] == '\t' || text[at] == '\n' || text[at] == '\r'))
        at++;
    const char *dup = NULL;
    sm_status st = SM_OK;
    if (at < len) {
        line_col(text, at, &line, &col);
        st = sm_error_set(err, SM_ERR_FORMAT,
                          "%s%sunexpected text after the JSON value at line %d, column %d", pre,
                          sep, line, col);
    } else if ((dup = duplicate_key(root))) {
        st = sm_error_set(err, SM_ERR_FORMAT, "%s%sduplicate key \"%s\"", pre, sep, dup);
    }
    if (st) {
        cJSON_Delete(root);
        return st;
    }
    size_t pos = 0;
    mark_floats(root, text, len, &pos);
    *out = root;
    return SM_OK;
}
