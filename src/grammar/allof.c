/*
** allof.c -- a schema's allOf as one schema (schema.c visits the result), and
** local $ref pointers.
**
** The branches (each $ref followed, nested allOf flattened, the keywords
** beside allOf taken as one more branch) are merged keyword by keyword:
** properties joined in the order met, required joined, and any other
** keyword taken from the one branch that has it, or from several when their
** values are equal. So an OpenAPI-style extension ({"allOf": [{"$ref":
** "#/$defs/base"}, {"properties": {...}, "required": [...]}]}) and a
** constraint split over branches ({"type": "string"} and {"maxLength": 8})
** become one schema. Refused, naming the keyword: a keyword two branches give
** different values (a property's schema included), and a branch whose
** additionalProperties is not true while another branch declares properties
** it does not (no object could satisfy both as written).
*/
#include "schema_internal.h"

#include <stdio.h>
#include <string.h>

#define MERGE_DEPTH 32
#define MERGE_BRANCHES 256

const cJSON *sm_schema_pointer(const cJSON *root, const char *ref, char *why, size_t cap) {
    if (ref[0] != '#') {
        snprintf(why, cap, "'$ref' \"%.80s\" is not local (only \"#...\" refs are supported)", ref);
        return NULL;
    }
    const cJSON *v = root;
    const char *p = ref + 1;
    while (*p == '/') {
        p++;
        char key[256];
        size_t n = 0;
        for (; *p && *p != '/' && n + 1 < sizeof key; p++) {
            if (p[0] == '~' && p[1] == '0') key[n++] = '~', p++;
            else if (p[0] == '~' && p[1] == '1') key[n++] = '/', p++;
            else key[n++] = *p;
        }
        key[n] = '\0';
        v = cJSON_IsObject(v) ? cJSON_GetObjectItemCaseSensitive(v, key) : NULL;
        if (!v) {
            snprintf(why, cap, "'$ref' \"%.80s\" names nothing in the schema", ref);
            return NULL;
        }
    }
    if (*p) {
        snprintf(why, cap, "'$ref' \"%.80s\" is not a JSON pointer", ref);
        return NULL;
    }
    return v;
}

typedef struct {
    const cJSON *root;
    cJSON *out;
    const cJSON *branch[MERGE_BRANCHES]; /* the branches merged, for the additionalProperties check */
    size_t n;
    char *why;
    size_t cap;
    bool oom;
} merger;

static bool add(merger *m, cJSON *to, const char *key, const cJSON *v) {
    cJSON *d = cJSON_Duplicate(v, true);
    if (!d || !cJSON_AddItemToObject(to, key, d)) {
        cJSON_Delete(d);
        m->oom = true;
        return false;
    }
    return true;
}

/* Branch b's keywords into m->out ($ref and allOf followed; `self`: the keywords beside allOf). */
static bool merge(merger *m, const cJSON *b, int depth) {
    if (depth > MERGE_DEPTH) {
        snprintf(m->why, m->cap, "'allOf' and '$ref' nested more than %d deep", MERGE_DEPTH);
        return false;
    }
    if (cJSON_IsTrue(b)) return true;
    if (!cJSON_IsObject(b)) {
        snprintf(m->why, m->cap, cJSON_IsFalse(b) ? "an 'allOf' schema is false: nothing is valid"
                                                  : "an 'allOf' schema must be an object or a boolean");
        return false;
    }
    if (m->n == MERGE_BRANCHES) {
        snprintf(m->why, m->cap, "'allOf' of more than %d schemas", MERGE_BRANCHES);
        return false;
    }
    m->branch[m->n++] = b;
    for (const cJSON *k = b->child; k; k = k->next) {
        if (sm_schema_inert(k->string)) continue;
        if (strcmp(k->string, "$ref") == 0 || strcmp(k->string, "allOf") == 0) {
            if (strcmp(k->string, "$ref") == 0) {
                if (!cJSON_IsString(k)) return snprintf(m->why, m->cap, "'$ref' must be a string"), false;
                const cJSON *t = sm_schema_pointer(m->root, k->valuestring, m->why, m->cap);
                if (!t || !merge(m, t, depth + 1)) return false;
                continue;
            }
            if (!cJSON_IsArray(k) || !k->child) return snprintf(m->why, m->cap, "'allOf' must be a non-empty array"), false;
            for (const cJSON *c = k->child; c; c = c->next)
                if (!merge(m, c, depth + 1)) return false;
            continue;
        }
        cJSON *have = cJSON_GetObjectItemCaseSensitive(m->out, k->string);
        if (strcmp(k->string, "properties") == 0 && cJSON_IsObject(k) && (!have || cJSON_IsObject(have))) {
            if (!have && !(have = cJSON_AddObjectToObject(m->out, "properties"))) return m->oom = true, false;
            for (const cJSON *p = k->child; p; p = p->next) {
                const cJSON *q = cJSON_GetObjectItemCaseSensitive(have, p->string);
                if (q && !cJSON_Compare(p, q, true)) {
                    snprintf(m->why, m->cap, "'allOf' gives the property \"%.60s\" two different schemas", p->string);
                    return false;
                }
                if (!q && !add(m, have, p->string, p)) return false;
            }
        } else if (strcmp(k->string, "required") == 0 && cJSON_IsArray(k) && (!have || cJSON_IsArray(have))) {
            if (!have && !(have = cJSON_AddArrayToObject(m->out, "required"))) return m->oom = true, false;
            for (const cJSON *r = k->child; r; r = r->next) {
                bool dup = false;
                for (const cJSON *q = have->child; q && !dup; q = q->next) dup = cJSON_Compare(q, r, true);
                if (!dup) {
                    cJSON *d = cJSON_Duplicate(r, true);
                    if (!d || !cJSON_AddItemToArray(have, d)) return cJSON_Delete(d), m->oom = true, false;
                }
            }
        } else if (have) {
            if (!cJSON_Compare(have, k, true)) {
                snprintf(m->why, m->cap, "'allOf' gives '%.60s' two different values", k->string);
                return false;
            }
        } else if (!add(m, m->out, k->string, k)) {
            return false;
        }
    }
    return true;
}

cJSON *sm_schema_merge_all(const cJSON *root, const cJSON *sch, char *why, size_t cap) {
    merger m = {.root = root, .why = why, .cap = cap};
    if (!(m.out = cJSON_CreateObject())) {
        snprintf(why, cap, "out of memory");
        return NULL;
    }
    bool ok = merge(&m, sch, 0);
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(m.out, "properties");
    for (size_t i = 0; ok && i < m.n; i++) { /* a branch closed to other keys sees every merged property */
        const cJSON *ap = cJSON_GetObjectItemCaseSensitive(m.branch[i], "additionalProperties");
        if (!ap || cJSON_IsTrue(ap)) continue;
        const cJSON *own = cJSON_GetObjectItemCaseSensitive(m.branch[i], "properties");
        for (const cJSON *p = props ? props->child : NULL; ok && p; p = p->next)
            if (!cJSON_GetObjectItemCaseSensitive(own, p->string)) {
                snprintf(why, cap, "'allOf': a schema with 'additionalProperties' does not declare \"%.60s\", "
                                   "which another one does", p->string);
                ok = false;
            }
    }
    if (m.oom) snprintf(why, cap, "out of memory");
    if (!ok || m.oom) {
        cJSON_Delete(m.out);
        return NULL;
    }
    return m.out;
}
