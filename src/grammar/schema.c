/*
** schema.c -- a JSON Schema as a GBNF grammar of the JSON texts it accepts.
**
** Keywords: type (one or a list), properties, required, additionalProperties
** (false, or absent beside properties: no other keys, as llama.cpp and
** OpenAI's strict mode have it; true, a schema, or absent with no
** properties: other keys, never one of the declared names),
** enum, const, items (a schema or false; a list: as prefixItems),
** prefixItems (all of them, in order), minItems, maxItems, anyOf, oneOf
** (as anyOf: its branches should not overlap), allOf (merged into one
** schema: allof.c), $ref to "#", "#/$defs/..." or "#/definitions/..."
** (recursion allowed; keywords beside it merged with it as allOf), minLength,
** maxLength, pattern (regex.c's subset), minimum, maximum, exclusiveMinimum,
** exclusiveMaximum (integers, and numbers as plain decimals: numrange.c),
** multipleOf (a whole number: the integers it divides within the bounds),
** and the string formats date, time, date-time, duration, uuid, ipv4, ipv6,
** hostname, email and uri (with an authority: scheme://host...); annotations (title, description, default,
** examples, $schema, $id, $comment, ...) are ignored. Any other keyword, a
** bad value or a schema nothing satisfies is refused naming the keyword and
** where it is (a JSON pointer).
**
** Properties come in the schema's order, each required one always, each
** optional one or not. Whitespace between tokens is optional and bounded;
** integers have at most 16 digits, exponents 2.
*/
#include "sm_grammar.h"

#include "json_internal.h"
#include "schema_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64
#define MAX_REFS 512
#define MAX_GBNF ((size_t)16 << 20)

typedef struct {
    sbuf out;          /* the rules */
    const cJSON *root;
    sm_error *err;
    bool failed;
    struct {
        char *ref;
        char name[96];
    } refs[MAX_REFS];
    size_t n_refs, n_names;
    int depth;
    unsigned prims;    /* the primitive rules written */
} sc;

enum { P_SPACE = 1, P_CHAR = 2, P_STRING = 4, P_INTEGER = 8, P_NUMBER = 16, P_BOOLEAN = 32, P_NULL = 64,
       P_VALUE = 128, P_KEYCHAR = 256, P_DATE = 512, P_TIME = 1024, P_UUID = 2048, P_IPV4 = 4096,
       P_HOST = 8192, P_EMAIL = 16384, P_IPV6 = 32768,
       P_URI = 65536, P_DURATION = 131072 };

static const char *fail(sc *s, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static const char *fail(sc *s, const char *path, const char *fmt, ...) {
    if (!s->failed) {
        char msg[300];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        sm_error_set(s->err, SM_ERR_INPUT, "JSON schema at %.200s: %s", *path ? path : "#", msg);
    }
    s->failed = true;
    return NULL;
}

/* The primitive rules a rule uses, written once. */
static void prim(sc *s, unsigned p) {
    static const struct { unsigned bit, needs; const char *text; } rules[] = {
        {P_SPACE, 0, "space ::= | \" \" | \"\\n\" [ \\t]{0,20}\n"},
        {P_CHAR, 0, "char ::= [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" ([0-9a-cA-CefEF] "
                    "[0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}))\n"},
        {P_KEYCHAR, 0, "keychar ::= [^\"\\\\\\x7F\\x00-\\x1F]\n"},
        {P_STRING, P_CHAR | P_SPACE, "string ::= \"\\\"\" char* \"\\\"\" space\n"},
        {P_INTEGER, P_SPACE, "integral ::= \"0\" | [1-9] [0-9]{0,15}\ninteger ::= \"-\"? integral space\n"},
        {P_NUMBER, P_SPACE | P_INTEGER,
         "number ::= \"-\"? integral (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})? space\n"},
        {P_BOOLEAN, P_SPACE, "boolean ::= (\"true\" | \"false\") space\n"},
        {P_NULL, P_SPACE, "null ::= \"null\" space\n"},
        {P_VALUE, P_STRING | P_NUMBER | P_BOOLEAN | P_NULL,
         "value ::= object | array | string | number | boolean | null\n"
         "object ::= \"{\" space (string \":\" space value (\",\" space string \":\" space value)*)? \"}\" space\n"
         "array ::= \"[\" space (value (\",\" space value)*)? \"]\" space\n"},
        {P_DATE, 0, "date ::= [1-9] [0-9]{3} \"-\" ((\"01\" | \"03\" | \"05\" | \"07\" | \"08\" | \"10\" | \"12\") \"-\" "
                    "(\"0\" [1-9] | [12] [0-9] | \"3\" [01]) | (\"04\" | \"06\" | \"09\" | \"11\") \"-\" (\"0\" [1-9] | "
                    "[12] [0-9] | \"30\") | \"02\" \"-\" (\"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8]))\n"},
        {P_TIME, 0, "time ::= ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{1,6})? "
                    "(\"Z\" | [+-] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])\n"},
        {P_UUID, 0, "uuid ::= [0-9a-f]{8} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{12}\n"},
        {P_IPV4, 0, "octet ::= \"25\" [0-5] | \"2\" [0-4] [0-9] | \"1\" [0-9] [0-9] | [1-9] [0-9] | [0-9]\n"
                    "ipv4 ::= octet \".\" octet \".\" octet \".\" octet\n"},
        /* RFC 1123 labels; the name at most 252 bytes (a first label of up to 63, then up to 7 of up to 26) */
        {P_HOST, 0, "hlabel ::= [a-zA-Z0-9] ([a-zA-Z0-9-]{0,61} [a-zA-Z0-9])?\n"
                    "hshort ::= [a-zA-Z0-9] ([a-zA-Z0-9-]{0,24} [a-zA-Z0-9])?\n"
                    "hostname ::= hlabel (\".\" hshort){0,7}\n"},
        /* RFC 5322's dot-atom at most 64 bytes "@" a domain of up to 168: 233 in all */
        {P_EMAIL, 0, "atext ::= [a-zA-Z0-9!#$%&'*+/=?^_`{|}~-]\n"
                     "email ::= atext{1,32} (\".\" atext{1,15}){0,2} \"@\" hlabel (\".\" [a-zA-Z0-9] "
                     "([a-zA-Z0-9-]{0,18} [a-zA-Z0-9])?){0,5}\n"},
        /* eight groups, or "::" standing for at least one, with i groups before it and at most 7 - i after */
        {P_IPV6, 0, "h16 ::= [0-9a-fA-F]{1,4}\n"
                    "ipv6 ::= h16 (\":\" h16){7} | \"::\" (h16 (\":\" h16){0,6})? | h16 \"::\" (h16 (\":\" h16){0,5})? | "
                    "h16 (\":\" h16){1} \"::\" (h16 (\":\" h16){0,4})? | h16 (\":\" h16){2} \"::\" (h16 (\":\" h16){0,3})? | "
                    "h16 (\":\" h16){3} \"::\" (h16 (\":\" h16){0,2})? | h16 (\":\" h16){4} \"::\" (h16 (\":\" h16){0,1})? | "
                    "h16 (\":\" h16){5} \"::\" h16? | h16 (\":\" h16){6} \"::\"\n"},
        /* RFC 3986 with an authority: scheme "://" host [":" port] then path, query and fragment characters */
        {P_URI, P_HOST, "upchar ::= [a-zA-Z0-9._~!$&'()*+,;=:@-] | \"%\" [0-9a-fA-F]{2}\n"
                        "uri ::= [a-zA-Z] [a-zA-Z0-9+.-]{0,15} \"://\" hostname (\":\" [0-9]{1,5})? (\"/\" upchar*)* "
                        "(\"?\" (upchar | [/?])*)? (\"#\" (upchar | [/?])*)?\n"},
        /* RFC 3339 appendix A: P then a date part (with a time part or not), a time part, or weeks */
        {P_DURATION, 0, "dnum ::= [0-9]{1,9}\n"
                        "dtime ::= \"T\" (dnum \"H\" (dnum \"M\" (dnum \"S\")?)? | dnum \"M\" (dnum \"S\")? | dnum \"S\")\n"
                        "duration ::= \"P\" ((dnum \"Y\" (dnum \"M\" (dnum \"D\")?)? | dnum \"M\" (dnum \"D\")? | dnum \"D\") "
                        "dtime? | dtime | dnum \"W\")\n"},
    };
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
        if (!(p & rules[i].bit) || (s->prims & rules[i].bit)) continue;
        s->prims |= rules[i].bit;
        prim(s, rules[i].needs);
        sb_puts(&s->out, rules[i].text);
    }
}

/* A fresh rule name from path (letters, digits and '-'), made unique. */
static void rule_name(sc *s, const char *path, char *out, size_t cap) {
    char base[64];
    size_t n = 0;
    for (const char *p = path; *p && n + 1 < 40; p++) {
        char c = *p;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) base[n++] = c;
        else if (n && base[n - 1] != '-') base[n++] = '-';
    }
    while (n && base[n - 1] == '-') n--;
    base[n] = '\0';
    snprintf(out, cap, "r%zu-%s", ++s->n_names, n ? base : "root");
}

/* A JSON value written compactly, as a GBNF literal. */
static void json_literal(sc *s, const cJSON *v) {
    char *t = cJSON_PrintUnformatted(v);
    if (!t) {
        s->out.oom = true;
        return;
    }
    sb_literal(&s->out, t, strlen(t));
    free(t);
}

static const char *visit(sc *s, const cJSON *sch, const char *path, char *name, size_t cap);

/* A keyword's number, or fail. */
static bool num(sc *s, const cJSON *v, const char *path, const char *key, double *out) {
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) {
        fail(s, path, "'%s' must be a number", key);
        return false;
    }
    *out = v->valuedouble;
    return true;
}

static bool count(sc *s, const cJSON *v, const char *path, const char *key, long *out) {
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 10000 || v->valuedouble != floor(v->valuedouble)) {
        fail(s, path, "'%s' must be a whole number from 0 to 10000", key);
        return false;
    }
    *out = (long)v->valuedouble;
    return true;
}

/* A pair of counts such as minLength/maxLength into *lo (default 0) and *hi (default -1: none). */
static bool count_pair(sc *s, const cJSON *sch, const char *path, const char *min, const char *max, long *lo,
                       long *hi) {
    const cJSON *mn = cJSON_GetObjectItemCaseSensitive(sch, min), *mx = cJSON_GetObjectItemCaseSensitive(sch, max);
    *lo = 0, *hi = -1;
    if (mn && !count(s, mn, path, min, lo)) return false;
    if (mx && !count(s, mx, path, max, hi)) return false;
    if (mx && *hi < *lo) return fail(s, path, "'%s' %ld is below '%s' %ld: nothing is valid", max, *hi, min, *lo), false;
    return true;
}

/* ---- the keywords */

static const char *const annotations[] = {"title", "description", "default", "examples", "$schema", "$id",
                                          "$comment", "deprecated", "readOnly", "writeOnly", "$anchor",
                                          "contentMediaType", "contentEncoding", "strict", NULL};
static const char *const keywords[] = {"type", "properties", "required", "additionalProperties", "enum", "const",
                                       "items", "prefixItems", "minItems", "maxItems", "anyOf", "oneOf", "allOf",
                                       "$ref", "$defs", "definitions", "minLength", "maxLength", "pattern",
                                       "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "format",
                                       NULL};

static bool in_list(const char *const *l, const char *k) {
    for (; *l; l++)
        if (strcmp(*l, k) == 0) return true;
    return false;
}

bool sm_schema_inert(const char *k) {
    return in_list(annotations, k) || strcmp(k, "$defs") == 0 || strcmp(k, "definitions") == 0;
}

/* Resolves a local $ref ("#", "#/$defs/a", JSON pointer escapes ~0 ~1) in the root. */
static const cJSON *resolve(sc *s, const char *ref, const char *path) {
    char why[200];
    const cJSON *v = sm_schema_pointer(s->root, ref, why, sizeof why);
    if (!v) fail(s, path, "%s", why);
    return v;
}

/* The string rule for a string schema (format, pattern or lengths), into the rule being written. */
static bool string_expr(sc *s, const cJSON *sch, const char *path, sbuf *e) {
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(sch, "format");
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(sch, "pattern");
    bool mn = cJSON_GetObjectItemCaseSensitive(sch, "minLength"), mx = cJSON_GetObjectItemCaseSensitive(sch, "maxLength");
    long lo, hi;
    if (!count_pair(s, sch, path, "minLength", "maxLength", &lo, &hi)) return false;
    if ((fmt ? 1 : 0) + (pat ? 1 : 0) > 1 || ((fmt || pat) && (mn || mx)))
        return fail(s, path, "'%s' with '%s' is not supported", fmt ? "format" : "pattern",
                    fmt && pat ? "pattern" : mn ? "minLength" : "maxLength"), false;
    if (fmt) {
        if (!cJSON_IsString(fmt)) return fail(s, path, "'format' must be a string"), false;
        const char *f = fmt->valuestring;
        if (strcmp(f, "date") == 0) prim(s, P_DATE), sb_puts(e, "\"\\\"\" date \"\\\"\"");
        else if (strcmp(f, "time") == 0) prim(s, P_TIME), sb_puts(e, "\"\\\"\" time \"\\\"\"");
        else if (strcmp(f, "date-time") == 0) prim(s, P_DATE | P_TIME), sb_puts(e, "\"\\\"\" date \"T\" time \"\\\"\"");
        else if (strcmp(f, "uuid") == 0) prim(s, P_UUID), sb_puts(e, "\"\\\"\" uuid \"\\\"\"");
        else if (strcmp(f, "ipv4") == 0) prim(s, P_IPV4), sb_puts(e, "\"\\\"\" ipv4 \"\\\"\"");
        else if (strcmp(f, "ipv6") == 0) prim(s, P_IPV6), sb_puts(e, "\"\\\"\" ipv6 \"\\\"\"");
        else if (strcmp(f, "hostname") == 0) prim(s, P_HOST), sb_puts(e, "\"\\\"\" hostname \"\\\"\"");
        else if (strcmp(f, "email") == 0) prim(s, P_EMAIL | P_HOST), sb_puts(e, "\"\\\"\" email \"\\\"\"");
        else if (strcmp(f, "uri") == 0) prim(s, P_URI), sb_puts(e, "\"\\\"\" uri \"\\\"\"");
        else if (strcmp(f, "duration") == 0) prim(s, P_DURATION), sb_puts(e, "\"\\\"\" duration \"\\\"\"");
        else return fail(s, path, "'format' \"%.60s\" is not supported (date, time, date-time, duration, uuid, ipv4, ipv6, hostname, email, uri)", f), false;
        return true;
    }
    prim(s, P_CHAR);
    if (pat) {
        if (!cJSON_IsString(pat)) return fail(s, path, "'pattern' must be a string"), false;
        sm_error rerr = {{0}};
        sb_puts(e, "\"\\\"\" ");
        if (sm_regex_gbnf(pat->valuestring, e, &rerr)) return fail(s, path, "'pattern': %s", rerr.msg), false;
        sb_puts(e, " \"\\\"\"");
        return true;
    }
    if (hi >= 0) sb_printf(e, "\"\\\"\" char{%ld,%ld} \"\\\"\"", lo, hi);
    else if (lo > 0) sb_printf(e, "\"\\\"\" char{%ld,} \"\\\"\"", lo);
    else sb_puts(e, "\"\\\"\" char* \"\\\"\"");
    return true;
}

/* The bounds of a number schema: minimum / exclusiveMinimum and maximum / exclusiveMaximum,
   the tighter of each pair (draft 4's boolean exclusive* read with its bound). */
typedef struct {
    bool has_lo, has_hi, lo_excl, hi_excl;
    double lo, hi;
} bounds;

static bool bounds_of(sc *s, const cJSON *sch, const char *path, bounds *b) {
    const char *names[4] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
    double x;
    *b = (bounds){0};
    for (int k = 0; k < 4; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(sch, names[k]);
        if (!v) continue;
        if (cJSON_IsBool(v) && k % 2) continue; /* draft 4's boolean form: read with the bound below */
        if (!num(s, v, path, names[k], &x)) return false;
        /* beyond 2^53 the double may be the literal rounded either way (9876543210987659 reads as
           ...660): one double inward, so no text the grammar writes is outside the literal */
        if (fabs(x) >= 9007199254740992.0) x = nextafter(x, k < 2 ? INFINITY : -INFINITY);
        bool excl = k % 2 == 1 || cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(sch, k < 2 ? "exclusiveMinimum" : "exclusiveMaximum"));
        if (k < 2 && (!b->has_lo || x > b->lo || (x == b->lo && excl)))
            b->has_lo = true, b->lo = x, b->lo_excl = excl;
        if (k >= 2 && (!b->has_hi || x < b->hi || (x == b->hi && excl)))
            b->has_hi = true, b->hi = x, b->hi_excl = excl;
    }
    return true;
}

/* multipleOf into m: 0 when absent; a whole number from 1 to SM_MUL_LIMIT, else refused. A
   fraction (0.01) is refused: validators divide in binary floating point (0.07 / 0.01 is
   7.000000000000001 to them), so the multiples a grammar could write are not all valid to them. */
static bool multiple_of(sc *s, const cJSON *sch, const char *path, long long *m) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(sch, "multipleOf");
    *m = 0;
    if (!v) return true;
    if (!cJSON_IsNumber(v) || !(v->valuedouble > 0)) return fail(s, path, "'multipleOf' must be a number above 0"), false;
    if (v->valuedouble != floor(v->valuedouble))
        return fail(s, path, "'multipleOf' %g is not supported: only whole numbers (validators divide by a fraction in "
                             "binary floating point, so its multiples are not all valid to them)", v->valuedouble), false;
    if (v->valuedouble > (double)SM_MUL_LIMIT)
        return fail(s, path, "'multipleOf' above %lld is not supported", SM_MUL_LIMIT), false;
    *m = (long long)v->valuedouble;
    return true;
}

/* The integers within the bounds (multiples of multipleOf when it is above 1): for integer, and
   for number with multipleOf (whose multiples of a whole number are integers). */
static bool integer_expr(sc *s, const cJSON *sch, const char *path, sbuf *e) {
    bounds b;
    long long m;
    if (!multiple_of(s, sch, path, &m) || !bounds_of(s, sch, path, &b)) return false;
    const double lo = b.lo_excl ? floor(b.lo) + 1 : ceil(b.lo), hi = b.hi_excl ? ceil(b.hi) - 1 : floor(b.hi);
    if (b.has_lo && b.has_hi && lo > hi) return fail(s, path, "no integer is within 'minimum'/'maximum'"), false;
    if ((b.has_lo && lo > (double)SM_NUM_LIMIT) || (b.has_hi && hi < -(double)SM_NUM_LIMIT))
        return fail(s, path, "a bound beyond 16 digits is not supported"), false;
    prim(s, P_SPACE);
    /* clipped to 16 digits before the conversion (a bound such as -1e300 has no long long) */
    const long long ilo = (long long)fmax(lo, -(double)SM_NUM_LIMIT), ihi = (long long)fmin(hi, (double)SM_NUM_LIMIT);
    if (m > 1) {
        int r = sm_int_multiple_gbnf(e, &s->out, ++s->n_names, b.has_lo, ilo, b.has_hi, ihi, m);
        if (r == 0) return fail(s, path, "no multiple of %lld is within 'minimum'/'maximum'", m), false;
        if (r < 0 && !e->oom) return fail(s, path, "'multipleOf' %lld makes too large a grammar", m), false;
        return true; /* (out of memory: e->oom, reported by visit) */
    }
    if (!b.has_lo && !b.has_hi) {
        prim(s, P_INTEGER);
        sb_puts(e, "\"-\"? integral");
        return true;
    }
    sm_int_range_gbnf(e, b.has_lo, ilo, b.has_hi, ihi);
    return true;
}

/* A number that may have a fraction: with bounds, plain decimals within them (numrange.c). */
static bool number_expr(sc *s, const cJSON *sch, const char *path, sbuf *e) {
    if (cJSON_GetObjectItemCaseSensitive(sch, "multipleOf")) return integer_expr(s, sch, path, e);
    bounds b;
    if (!bounds_of(s, sch, path, &b)) return false;
    if (!b.has_lo && !b.has_hi) {
        prim(s, P_NUMBER);
        sb_puts(e, "\"-\"? integral (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})?");
        return true;
    }
    if (sm_num_range_gbnf(e, b.has_lo, b.lo, b.lo_excl, b.has_hi, b.hi, b.hi_excl)) return true;
    return fail(s, path, "no number of at most 16 integral and 16 fraction digits is within 'minimum'/'maximum'"), false;
}

/* The code point at s (UTF-8) and its length. */
static unsigned utf8_cp(const char *s, size_t *len) {
    const unsigned char *u = (const unsigned char *)s;
    size_t n = u[0] < 0x80 ? 1 : (u[0] & 0xE0) == 0xC0 ? 2 : (u[0] & 0xF0) == 0xE0 ? 3 : 4;
    unsigned c = n == 1 ? u[0] : n == 2 ? u[0] & 0x1Fu : n == 3 ? u[0] & 0x0Fu : u[0] & 0x07u;
    for (size_t k = 1; k < n; k++) {
        if (!u[k]) { n = k; break; }
        c = c << 6 | (u[k] & 0x3Fu);
    }
    *len = n;
    return c;
}

/*
** BASE-key: a JSON string of raw characters (keychar: no escape can spell a
** name) that is none of the declared names. A key that is not a name either
** is a prefix w of some name (and not a name itself), or leaves the names
** after such a prefix w with a character no name continues w with: one
** alternative per distinct prefix.
*/
static void additional_key(sc *s, const char *base, const cJSON *props) {
    sb_printf(&s->out, "%s-key ::= \"\\\"\" (", base);
    size_t n_alt = 0;
    for (const cJSON *p = props ? props->child : NULL; p; p = p->next) {
        size_t len = strlen(p->string);
        for (size_t j = 0; j <= len;) {
            bool earlier = false, ends = false;
            for (const cJSON *q = props->child; q != p && !earlier; q = q->next)
                earlier = strlen(q->string) >= j && memcmp(q->string, p->string, j) == 0;
            if (!earlier) {
                sb_puts(&s->out, n_alt++ ? " | " : "");
                sb_literal(&s->out, p->string, j);
                sb_puts(&s->out, " [^\"\\\\\\x7F\\x00-\\x1F");
                for (const cJSON *q = props->child; q; q = q->next) {
                    size_t lq = strlen(q->string), cl;
                    if (lq < j || memcmp(q->string, p->string, j) != 0) continue;
                    if (lq == j) {
                        ends = true;
                        continue;
                    }
                    unsigned c = utf8_cp(q->string + j, &cl);
                    if (c >= 0x20 && c < 0x7F && !strchr("]\\^-\"[", (int)c)) sb_printf(&s->out, "%c", (char)c);
                    else if (c <= 0xFFFF) sb_printf(&s->out, "\\u%04X", c);
                    else sb_printf(&s->out, "\\U%08X", c);
                }
                sb_puts(&s->out, "] keychar*");
                if (!ends) { /* the key may be w itself */
                    sb_puts(&s->out, " | ");
                    sb_literal(&s->out, p->string, j);
                }
            }
            if (j == len) break;
            size_t cl;
            utf8_cp(p->string + j, &cl);
            j += cl;
        }
    }
    if (!n_alt) sb_puts(&s->out, "keychar*");
    sb_puts(&s->out, ") \"\\\"\" space\n");
}

/* An object: "{" properties in order (optional ones may be left out) and additional ones "}". */
static bool object_expr(sc *s, const cJSON *sch, const char *path, sbuf *e) {
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(sch, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(sch, "required");
    const cJSON *add = cJSON_GetObjectItemCaseSensitive(sch, "additionalProperties");
    char sub[600];
    if (props && !cJSON_IsObject(props)) return fail(s, path, "'properties' must be an object"), false;
    if (req && !cJSON_IsArray(req)) return fail(s, path, "'required' must be an array of strings"), false;
    for (const cJSON *r = req ? req->child : NULL; r; r = r->next) {
        if (!cJSON_IsString(r)) return fail(s, path, "'required' must be an array of strings"), false;
        if (!props || !cJSON_GetObjectItemCaseSensitive(props, r->valuestring))
            return fail(s, path, "'required' names \"%.60s\", which 'properties' does not declare", r->valuestring), false;
    }
    size_t n = 0;
    for (const cJSON *p = props ? props->child : NULL; p; p = p->next) n++;
    char (*val)[96] = calloc(n + 1, sizeof *val);
    bool *optional = calloc(n + 1, sizeof *optional);
    if (!val || !optional) {
        free(val), free(optional);
        s->out.oom = true;
        return false;
    }
    size_t i = 0;
    bool ok = true;
    for (const cJSON *p = props ? props->child : NULL; p && ok; p = p->next, i++) {
        bool required = false;
        for (const cJSON *r = req ? req->child : NULL; r; r = r->next) required = required || strcmp(r->valuestring, p->string) == 0;
        optional[i] = !required;
        snprintf(sub, sizeof sub, "%.400s/properties/%.100s", path, p->string);
        if (cJSON_IsFalse(p)) {
            if (required) ok = fail(s, sub, "a required property whose schema is false: nothing is valid") != NULL;
            val[i][0] = '\0';
            continue;
        }
        ok = visit(s, p, sub, val[i], sizeof val[i]) != NULL;
    }
    char addv[96] = "";
    if (ok && !add && !props) { /* {"type": "object"} and nothing else: any object, as llama.cpp has it */
        prim(s, P_VALUE);
        snprintf(addv, sizeof addv, "value");
    } else if (ok && add && !cJSON_IsFalse(add)) {
        snprintf(sub, sizeof sub, "%.400s/additionalProperties", path);
        if (!cJSON_IsTrue(add) && !cJSON_IsObject(add)) ok = fail(s, sub, "must be a boolean or a schema") != NULL;
        else ok = visit(s, add, sub, addv, sizeof addv) != NULL;
    }
    char base[96];
    rule_name(s, path, base, sizeof base);
    if (ok && *addv) { /* an additional key: never one of the declared names */
        prim(s, P_KEYCHAR | P_SPACE);
        additional_key(s, base, props);
        sb_printf(&s->out, "%s-add ::= %s-key \":\" space %s\n", base, base, addv);
    }
    /* base-i-f / base-i-r: properties from i on, with no comma before (f) or with one (r) */
    prim(s, P_SPACE);
    for (size_t j = n + 1; ok && j-- > 0;) {
        for (int r = 0; r < 2; r++) {
            sb_printf(&s->out, "%s-%zu-%c ::= ", base, j, r ? 'r' : 'f');
            const char *comma = r ? "\",\" space " : "";
            if (j == n) {
                if (*addv) sb_printf(&s->out, "(%s%s-add (\",\" space %s-add)*)?\n", comma, base, base);
                else sb_puts(&s->out, "\"\"\n");
                continue;
            }
            const cJSON *p = props->child;
            for (size_t t = 0; t < j; t++) p = p->next;
            bool any = false;
            if (val[j][0]) {
                sb_puts(&s->out, comma);
                cJSON *ks = cJSON_CreateString(p->string);
                char *kt = ks ? cJSON_PrintUnformatted(ks) : NULL;
                if (!kt) s->out.oom = true;
                else sb_literal(&s->out, kt, strlen(kt));
                free(kt);
                cJSON_Delete(ks);
                sb_printf(&s->out, " space \":\" space %s %s-%zu-r", val[j], base, j + 1);
                any = true;
            }
            if (optional[j]) sb_printf(&s->out, "%s%s-%zu-%c", any ? " | " : "", base, j + 1, r ? 'r' : 'f');
            sb_puts(&s->out, "\n");
        }
    }
    if (ok) sb_printf(e, "\"{\" space %s-0-f \"}\"", base);
    free(val), free(optional);
    return ok;
}

static bool array_expr(sc *s, const cJSON *sch, const char *path, sbuf *e) {
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(sch, "items");
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(sch, "prefixItems");
    long lo, hi;
    char sub[600];
    if (!count_pair(s, sch, path, "minItems", "maxItems", &lo, &hi)) return false;
    if (cJSON_IsArray(items)) { /* draft 4's tuple form */
        if (pre) return fail(s, path, "'items' as a list with 'prefixItems'"), false;
        pre = items, items = NULL;
    }
    if (pre && !cJSON_IsArray(pre)) return fail(s, path, "'prefixItems' must be an array of schemas"), false;
    size_t n_pre = 0;
    for (const cJSON *p = pre ? pre->child : NULL; p; p = p->next) n_pre++;
    if (hi >= 0 && (long)n_pre > hi) n_pre = (size_t)hi;
    char (*rules)[96] = calloc(n_pre + 1, sizeof *rules);
    if (!rules) return s->out.oom = true, false;
    size_t i = 0;
    bool ok = true;
    for (const cJSON *p = pre ? pre->child : NULL; p && i < n_pre && ok; p = p->next, i++) {
        snprintf(sub, sizeof sub, "%.400s/prefixItems/%zu", path, i);
        if (cJSON_IsFalse(p)) ok = fail(s, sub, "an item whose schema is false: nothing is valid") != NULL;
        else ok = visit(s, p, sub, rules[i], sizeof rules[i]) != NULL;
    }
    char item[96] = "";
    bool more = !items || !cJSON_IsFalse(items);
    if (pre && !items) more = false; /* prefixItems alone: exactly those */
    if (ok && more) {
        snprintf(sub, sizeof sub, "%.400s/items", path);
        if (items) ok = visit(s, items, sub, item, sizeof item) != NULL;
        else prim(s, P_VALUE), snprintf(item, sizeof item, "value");
    }
    long xlo = lo > (long)n_pre ? lo - (long)n_pre : 0, xhi = hi < 0 ? -1 : hi - (long)n_pre;
    if (ok && !more && xlo > 0) ok = fail(s, path, "'minItems' %ld needs more items than the schema allows", lo) != NULL;
    prim(s, P_SPACE);
    if (ok) {
        sb_puts(e, "\"[\" space ");
        for (size_t k = 0; k < n_pre; k++) sb_printf(e, "%s%s", k ? "\",\" space " : "", rules[k]), sb_puts(e, " ");
        if (more && xhi != 0) {
            const char *c = n_pre ? "\",\" space " : "";
            if (n_pre) { /* each extra item after a comma */
                if (xhi < 0) sb_printf(e, "(%s%s){%ld,} ", c, item, xlo);
                else sb_printf(e, "(%s%s){%ld,%ld} ", c, item, xlo, xhi);
            } else if (xlo == 0) {
                if (xhi < 0) sb_printf(e, "(%s (\",\" space %s)*)? ", item, item);
                else sb_printf(e, "(%s (\",\" space %s){0,%ld})? ", item, item, xhi - 1);
            } else {
                if (xhi < 0) sb_printf(e, "%s (\",\" space %s){%ld,} ", item, item, xlo - 1);
                else sb_printf(e, "%s (\",\" space %s){%ld,%ld} ", item, item, xlo - 1, xhi - 1);
            }
        }
        sb_puts(e, "\"]\"");
    }
    free(rules);
    return ok;
}

/* The schema's types as bits: 1 string, 2 number, 4 integer, 8 boolean, 16 null, 32 object, 64 array. */
static int types_of(sc *s, const cJSON *sch, const char *path) {
    static const char *const names[] = {"string", "number", "integer", "boolean", "null", "object", "array"};
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(sch, "type");
    int bits = 0;
    if (!t) { /* what the keywords imply, else anything */
        static const char *const obj[] = {"properties", "required", "additionalProperties", NULL};
        static const char *const arr[] = {"items", "prefixItems", "minItems", "maxItems", NULL};
        static const char *const str[] = {"minLength", "maxLength", "pattern", "format", NULL};
        static const char *const numk[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
                                           NULL};
        for (const cJSON *k = sch->child; k; k = k->next) {
            if (in_list(obj, k->string)) bits |= 32;
            if (in_list(arr, k->string)) bits |= 64;
            if (in_list(str, k->string)) bits |= 1;
            if (in_list(numk, k->string)) bits |= 4;
        }
        return bits ? bits : 127;
    }
    for (const cJSON *v = cJSON_IsArray(t) ? t->child : t; v; v = cJSON_IsArray(t) ? v->next : NULL) {
        int b = 0;
        for (int k = 0; k < 7 && cJSON_IsString(v); k++)
            if (strcmp(v->valuestring, names[k]) == 0) b = 1 << k;
        if (!b) {
            fail(s, path, "'type' must be string, number, integer, boolean, null, object or array (or a list)");
            return 0;
        }
        bits |= b;
    }
    if (!bits) fail(s, path, "'type' is an empty list: nothing is valid");
    return bits;
}

/*
** Writes the rule for schema sch (at path) and puts its name in name; NULL
** on failure (s->err says why).
*/
static const char *visit(sc *s, const cJSON *sch, const char *path, char *name, size_t cap) {
    if (s->failed) return NULL;
    if (cJSON_IsTrue(sch)) {
        prim(s, P_VALUE);
        snprintf(name, cap, "value");
        return name;
    }
    if (cJSON_IsFalse(sch)) return fail(s, path, "the schema is false: nothing is valid");
    if (!cJSON_IsObject(sch)) return fail(s, path, "a schema must be an object or a boolean");
    if (s->depth >= MAX_DEPTH) return fail(s, path, "schemas nested more than %d deep", MAX_DEPTH);
    for (const cJSON *k = sch->child; k; k = k->next)
        if (!in_list(keywords, k->string) && !in_list(annotations, k->string))
            return fail(s, path, "the keyword '%.60s' is not supported", k->string);
    char sub[600];
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(sch, "$ref");
    bool ref_alone = true; /* else the keywords beside it apply too: merged with its target, as allOf */
    for (const cJSON *k = sch->child; ref && k; k = k->next)
        if (!sm_schema_inert(k->string) && strcmp(k->string, "$ref")) ref_alone = false;
    if (ref && ref_alone) {
        if (!cJSON_IsString(ref)) return fail(s, path, "'$ref' must be a string");
        for (size_t i = 0; i < s->n_refs; i++)
            if (strcmp(s->refs[i].ref, ref->valuestring) == 0) {
                snprintf(name, cap, "%s", s->refs[i].name);
                return name;
            }
        const cJSON *target = resolve(s, ref->valuestring, path);
        if (!target) return NULL;
        if (s->n_refs == MAX_REFS) return fail(s, path, "more than %d '$ref' targets", MAX_REFS);
        size_t r = s->n_refs++;
        if (!(s->refs[r].ref = strdup(ref->valuestring))) return s->out.oom = true, NULL;
        /* the target's rule is named now, so a recursive reference finds it */
        rule_name(s, ref->valuestring, s->refs[r].name, sizeof s->refs[r].name);
        char inner[96];
        s->depth++;
        const char *v = visit(s, target, ref->valuestring, inner, sizeof inner);
        s->depth--;
        if (!v) return NULL;
        sb_printf(&s->out, "%s ::= %s\n", s->refs[r].name, inner);
        snprintf(name, cap, "%s", s->refs[r].name);
        return name;
    }
    sbuf e = {0}; /* the rule's right-hand side */
    bool ok = true;
    const cJSON *cst = cJSON_GetObjectItemCaseSensitive(sch, "const");
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(sch, "enum");
    const cJSON *any = cJSON_GetObjectItemCaseSensitive(sch, "anyOf");
    const cJSON *one = cJSON_GetObjectItemCaseSensitive(sch, "oneOf");
    const cJSON *all = cJSON_GetObjectItemCaseSensitive(sch, "allOf");
    prim(s, P_SPACE);
    s->depth++;
    if (cst) {
        sbuf save = s->out;
        s->out = e;
        json_literal(s, cst);
        e = s->out, s->out = save;
        sb_puts(&e, " space");
    } else if (en) {
        if (!cJSON_IsArray(en) || !en->child) ok = fail(s, path, "'enum' must be a non-empty array") != NULL;
        sb_puts(&e, "(");
        for (const cJSON *v = en->child; ok && v; v = v->next) {
            if (v != en->child) sb_puts(&e, " | ");
            sbuf save = s->out;
            s->out = e;
            json_literal(s, v);
            e = s->out, s->out = save;
        }
        sb_puts(&e, ") space");
    } else if (all || ref) { /* its schemas (or $ref's) and the keywords beside it merged into one (allof.c) */
        char why[200];
        cJSON *merged = sm_schema_merge_all(s->root, sch, why, sizeof why);
        char one_name[96];
        ok = merged ? visit(s, merged, path, one_name, sizeof one_name) != NULL : fail(s, path, "%s", why) != NULL;
        if (ok) sb_puts(&e, one_name);
        cJSON_Delete(merged);
    } else if (any || one) {
        const cJSON *list = any ? any : one;
        const char *kw = any ? "anyOf" : "oneOf";
        if (any && one) ok = fail(s, path, "'%s' beside another of anyOf, oneOf is not supported", kw) != NULL;
        else if (!cJSON_IsArray(list) || !list->child) ok = fail(s, path, "'%s' must be a non-empty array", kw) != NULL;
        for (const cJSON *k = sch->child; ok && k; k = k->next)
            if (!sm_schema_inert(k->string) && strcmp(k->string, kw))
                ok = fail(s, path, "'%s' beside '%.60s' is not supported", kw, k->string) != NULL;
        size_t i = 0;
        sb_puts(&e, "(");
        for (const cJSON *v = list->child; ok && v; v = v->next, i++) {
            char alt[96];
            snprintf(sub, sizeof sub, "%.400s/%s/%zu", path, kw, i);
            ok = visit(s, v, sub, alt, sizeof alt) != NULL;
            if (ok) sb_printf(&e, "%s%s", i ? " | " : "", alt);
        }
        sb_puts(&e, ")");
    } else {
        int types = types_of(s, sch, path);
        ok = types != 0;
        size_t n = 0;
        sb_puts(&e, "(");
        for (int k = 0; ok && k < 7; k++) {
            if (!(types & (1 << k))) continue;
            if ((1 << k) == 4 && (types & 2)) continue; /* number and integer: number covers both */
            sb_puts(&e, n++ ? " | " : "");
            switch (1 << k) {
            case 1: ok = string_expr(s, sch, path, &e); break;
            case 2: ok = number_expr(s, sch, path, &e); break;
            case 4: ok = integer_expr(s, sch, path, &e); break;
            case 8: sb_puts(&e, "(\"true\" | \"false\")"); break;
            case 16: sb_puts(&e, "\"null\""); break;
            case 32: ok = object_expr(s, sch, path, &e); break;
            case 64: ok = array_expr(s, sch, path, &e); break;
            }
        }
        sb_puts(&e, ") space");
    }
    s->depth--;
    if (ok && !s->failed && !e.oom) {
        rule_name(s, path, name, cap);
        sb_printf(&s->out, "%s ::= ", name);
        sb_add(&s->out, e.s, e.n);
        sb_puts(&s->out, "\n");
    }
    if (e.oom) s->out.oom = true;
    free(e.s);
    return ok && !s->failed ? name : NULL;
}

sm_status sm_schema_to_gbnf(const char *text, size_t len, char **gbnf, sm_error *err) {
    *gbnf = NULL;
    cJSON *root;
    sm_status st = sm_json_parse_strict(text, len, "JSON schema", &root, err);
    if (st) return st;
    sc *s = calloc(1, sizeof *s);
    if (!s) {
        cJSON_Delete(root);
        return sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    }
    s->root = root, s->err = err;
    char top[96];
    const char *r = visit(s, root, "#", top, sizeof top);
    if (r && !s->out.oom) sb_printf(&s->out, "root ::= %s\n", top);
    if (!r) st = SM_ERR_INPUT;
    else if (s->out.oom) st = sm_error_set(err, SM_ERR_NOMEM, "out of memory compiling the schema");
    else if (s->out.n > MAX_GBNF) st = sm_error_set(err, SM_ERR_INPUT, "JSON schema: its grammar is larger than 16 MB");
    for (size_t i = 0; i < s->n_refs; i++) free(s->refs[i].ref);
    if (!st) *gbnf = s->out.s;
    else free(s->out.s);
    free(s);
    cJSON_Delete(root);
    return st;
}

sm_status sm_grammar_from_schema(sm_grammar **out, const char *text, size_t len, char **gbnf, sm_error *err) {
    *out = NULL;
    if (gbnf) *gbnf = NULL;
    char *g;
    sm_status st = sm_schema_to_gbnf(text, len, &g, err);
    if (st) return st;
    sm_error gerr = {{0}};
    st = sm_grammar_parse(out, g, strlen(g), &gerr);
    if (st) sm_error_set(err, st, "JSON schema: %s", gerr.msg); /* a schema nothing satisfies, or a bug */
    if (gbnf && !st) *gbnf = g;
    else free(g);
    return st;
}

sm_status sm_grammar_json(sm_grammar **out, bool object_only, sm_error *err) {
    const char *text = object_only ? "{\"type\": \"object\", \"additionalProperties\": true}" : "true";
    return sm_grammar_from_schema(out, text, strlen(text), NULL, err);
}
