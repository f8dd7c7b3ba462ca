/*
** gbnf.c -- llama.cpp's GBNF grammar text compiled into rules of elements
** (grammar_internal.h), with the checks that make matching terminate: every
** rule defined, no left recursion, no repetition of something that can
** match nothing.
**
** The syntax is llama.cpp's: `name ::= alternatives` (names of letters,
** digits, '-' and '_'), a rule ending at a line end unless inside ( ) or
** after '|' or '::='; literals "..." and classes [...] / [^...] with the
** escapes \x.. \u.... \U........ \t \r \n \\ \" \[ \] (and \- in classes);
** `.` any character; * + ? {m} {m,} {m,n} {,n}; # comments to the line end.
** Repetitions become rules as llama.cpp rewrites them (S{m,n}: S m times,
** then n - m nested optional ones).
*/
#include "grammar_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RULES 100000
#define MAX_ELEMS 4000000
#define MAX_REPEAT 10000 /* as llama.cpp: a repetition count above this is refused */

/* A rule while it is built: alternatives of elements (GE_END closes each). */
typedef struct {
    char *name;
    sm_gelem *e;
    size_t n, cap;
    bool defined;
    size_t line, col; /* where it was first referenced (undefined rules name it) */
} brule;

typedef struct {
    const char *src, *p, *end;
    brule *rules;
    size_t n_rules, cap_rules;
    sm_grange *ranges; /* all sets' ranges, as parsed (lo, hi, and a set marker) */
    size_t n_ranges, cap_ranges;
    sm_gset *sets;
    size_t n_sets, cap_sets;
    size_t n_elems;
    size_t synth;      /* synthesized rules so far */
    sm_error *err;
    bool failed;
} parser;

static void where(const parser *ps, const char *at, size_t *line, size_t *col) {
    *line = 1, *col = 1;
    for (const char *c = ps->src; c < at && c < ps->end; c++) {
        if (*c == '\n') ++*line, *col = 1;
        else ++*col;
    }
}

static sm_status fail_at(parser *ps, const char *at, const char *what) {
    if (ps->failed) return SM_ERR_INPUT;
    size_t line, col;
    where(ps, at, &line, &col);
    ps->failed = true;
    return sm_error_set(ps->err, SM_ERR_INPUT, "grammar line %zu, column %zu: %s", line, col, what);
}

static bool word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Spaces, tabs and comments; line ends too when nl. */
static void space(parser *ps, bool nl) {
    while (ps->p < ps->end) {
        char c = *ps->p;
        if (c == ' ' || c == '\t' || (nl && (c == '\r' || c == '\n'))) ps->p++;
        else if (c == '#')
            while (ps->p < ps->end && *ps->p != '\n' && *ps->p != '\r') ps->p++;
        else break;
    }
}

/* The rule named name[0..n), made (undefined) if new; SIZE_MAX when out of memory or too many. */
static size_t rule_id(parser *ps, const char *name, size_t n, const char *at) {
    for (size_t i = 0; i < ps->n_rules; i++)
        if (strlen(ps->rules[i].name) == n && memcmp(ps->rules[i].name, name, n) == 0) return i;
    if (ps->n_rules >= MAX_RULES) {
        fail_at(ps, at, "too many rules");
        return SIZE_MAX;
    }
    if (!sm_grow((void **)&ps->rules, &ps->cap_rules, ps->n_rules + 1, sizeof *ps->rules)) return SIZE_MAX;
    brule *r = &ps->rules[ps->n_rules];
    *r = (brule){0};
    if (!(r->name = malloc(n + 1))) return SIZE_MAX;
    memcpy(r->name, name, n);
    r->name[n] = '\0';
    where(ps, at, &r->line, &r->col);
    return ps->n_rules++;
}

/* A new rule for a group or repetition inside rule `parent`: "parent~N", a name no text can call. */
static size_t synth_rule(parser *ps, size_t parent, const char *at) {
    char name[160];
    snprintf(name, sizeof name, "%.120s~%zu", ps->rules[parent].name, ++ps->synth);
    size_t id = rule_id(ps, name, strlen(name), at);
    if (id != SIZE_MAX) ps->rules[id].defined = true;
    return id;
}

static bool push(parser *ps, brule *r, unsigned type, size_t v) {
    if (ps->n_elems >= MAX_ELEMS || !sm_grow((void **)&r->e, &r->cap, r->n + 1, sizeof *r->e)) return false;
    r->e[r->n++] = (sm_gelem){.type = type, .v = (uint32_t)v};
    ps->n_elems++;
    return true;
}

/* Decodes one UTF-8 character at p (valid or not: a bad byte is taken as itself). */
static uint32_t utf8_at(const char *p, const char *end, const char **next) {
    const unsigned char *s = (const unsigned char *)p;
    size_t need = s[0] < 0x80 ? 1 : (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3 : (s[0] & 0xF8) == 0xF0 ? 4 : 1;
    if ((size_t)(end - p) < need) need = 1;
    uint32_t c = need == 1 ? s[0] : need == 2 ? s[0] & 0x1Fu : need == 3 ? s[0] & 0x0Fu : s[0] & 0x07u;
    for (size_t k = 1; k < need; k++) {
        if ((s[k] & 0xC0) != 0x80) {
            *next = p + 1;
            return s[0];
        }
        c = c << 6 | (s[k] & 0x3Fu);
    }
    *next = p + need;
    return c;
}

/* One character of a literal or class (escapes included) into *c. */
static sm_status parse_char(parser *ps, uint32_t *c, bool in_class) {
    const char *at = ps->p;
    if (ps->p >= ps->end) return fail_at(ps, at, "unexpected end of the grammar");
    if (*ps->p != '\\') {
        *c = utf8_at(ps->p, ps->end, &ps->p);
        return SM_OK;
    }
    if (ps->p + 1 >= ps->end) return fail_at(ps, at, "unexpected end of the grammar after '\\'");
    char e = ps->p[1];
    ps->p += 2;
    int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
    if (digits) {
        uint32_t v = 0;
        for (int i = 0; i < digits; i++, ps->p++) {
            char h = ps->p < ps->end ? *ps->p : 0;
            int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
            if (d < 0) {
                char msg[64];
                snprintf(msg, sizeof msg, "expecting %d hex digits after \\%c", digits, e);
                return fail_at(ps, at, msg);
            }
            v = v << 4 | (uint32_t)d;
        }
        if (v > 0x10FFFF) return fail_at(ps, at, "a character past U+10FFFF");
        *c = v;
        return SM_OK;
    }
    switch (e) {
    case 't': *c = '\t'; return SM_OK;
    case 'r': *c = '\r'; return SM_OK;
    case 'n': *c = '\n'; return SM_OK;
    case '\\': case '"': case '[': case ']': *c = (uint32_t)e; return SM_OK;
    case '-': if (in_class) { *c = '-'; return SM_OK; } break;
    default: break;
    }
    char msg[48];
    snprintf(msg, sizeof msg, "unknown escape '\\%c'", e > 32 && e < 127 ? e : '?');
    return fail_at(ps, at, msg);
}

static int cmp_range(const void *a, const void *b) {
    const sm_grange *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* A set from ranges r[0..n) (negated if neg): sorted, merged, ASCII as bits. Its index, or SIZE_MAX. */
static size_t make_set(parser *ps, sm_grange *r, size_t n, bool neg) {
    qsort(r, n, sizeof *r, cmp_range);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) { /* merge overlapping and touching ranges */
        if (m && r[i].lo <= r[m - 1].hi + 1) {
            if (r[i].hi > r[m - 1].hi) r[m - 1].hi = r[i].hi;
        } else {
            r[m++] = r[i];
        }
    }
    if (neg) { /* the complement in [0, 0x10FFFF] */
        sm_grange *c = malloc((m + 1) * sizeof *c);
        if (!c) return SIZE_MAX;
        size_t k = 0;
        uint32_t next = 0;
        for (size_t i = 0; i < m; i++) {
            if (r[i].lo > next) c[k++] = (sm_grange){next, r[i].lo - 1};
            next = r[i].hi + 1;
        }
        if (next <= 0x10FFFF) c[k++] = (sm_grange){next, 0x10FFFF};
        memcpy(r, c, k * sizeof *c); /* k <= m + 1: the caller's buffer has room */
        free(c);
        m = k;
    }
    sm_gset s = {{0, 0}, (uint32_t)ps->n_ranges, 0};
    for (size_t i = 0; i < m; i++) {
        for (uint32_t c = r[i].lo; c <= r[i].hi && c < 128; c++) s.ascii[c >> 6] |= 1ull << (c & 63);
        if (r[i].hi < 128) continue;
        if (!sm_grow((void **)&ps->ranges, &ps->cap_ranges, ps->n_ranges + 1, sizeof *ps->ranges)) return SIZE_MAX;
        ps->ranges[ps->n_ranges++] = (sm_grange){r[i].lo < 128 ? 128 : r[i].lo, r[i].hi};
        s.n++;
    }
    if (!sm_grow((void **)&ps->sets, &ps->cap_sets, ps->n_sets + 1, sizeof *ps->sets)) return SIZE_MAX;
    ps->sets[ps->n_sets] = s;
    return ps->n_sets++;
}

static sm_status alternates(parser *ps, size_t rule, bool nested);

/* Rewrites the last item (elements [start, n) of r) as llama.cpp does: S{lo,hi} (hi SIZE_MAX: no limit). */
static sm_status repeat(parser *ps, size_t rule, size_t start, size_t lo, size_t hi, const char *at) {
    brule *r = &ps->rules[rule];
    size_t len = r->n - start;
    if (len == 0) return fail_at(ps, at, "a repetition with nothing before it");
    if (lo > MAX_REPEAT || (hi != SIZE_MAX && hi > MAX_REPEAT)) return fail_at(ps, at, "a repetition count above 10000");
    if (hi != SIZE_MAX && hi < lo) return fail_at(ps, at, "a repetition {m,n} with n < m");
    if (ps->n_elems + len * (lo + (hi == SIZE_MAX ? 1 : hi - lo) + 2) > MAX_ELEMS)
        return fail_at(ps, at, "the repetitions make the grammar too large");
    sm_gelem *item = malloc(len * sizeof *item);
    if (!item) return sm_error_set(ps->err, SM_ERR_NOMEM, "out of memory compiling the grammar");
    memcpy(item, r->e + start, len * sizeof *item);
    ps->n_elems -= len;
    r->n = start;
    bool ok = true;
    for (size_t k = 0; k < lo && ok; k++) /* S, lo times */
        for (size_t j = 0; j < len && ok; j++) ok = push(ps, &ps->rules[rule], item[j].type, item[j].v);
    /* then the optional ones: S'(x) ::= S S'(x - 1) | (innermost first), or S' ::= S S' | */
    size_t n_opt = hi == SIZE_MAX ? 1 : hi - lo, last = SIZE_MAX;
    for (size_t k = 0; k < n_opt && ok; k++) {
        size_t id = synth_rule(ps, rule, at);
        if (id == SIZE_MAX) { ok = false; break; }
        brule *s = &ps->rules[id];
        for (size_t j = 0; j < len && ok; j++) ok = push(ps, s, item[j].type, item[j].v);
        if (ok && hi == SIZE_MAX) ok = push(ps, s, GE_REF, id);
        else if (ok && k > 0) ok = push(ps, s, GE_REF, last);
        ok = ok && push(ps, s, GE_END, 0) && push(ps, s, GE_END, 0); /* "S S'" then the empty alternative */
        last = id;
    }
    if (ok && n_opt > 0) ok = push(ps, &ps->rules[rule], GE_REF, last);
    free(item);
    if (!ok && !ps->failed) return sm_error_set(ps->err, SM_ERR_NOMEM, "out of memory compiling the grammar");
    return ps->failed ? SM_ERR_INPUT : SM_OK;
}

static bool parse_int(parser *ps, size_t *v) {
    size_t n = 0, digits = 0;
    while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
        if (n < 100000000) n = n * 10 + (size_t)(*ps->p - '0');
        ps->p++, digits++;
    }
    *v = n;
    return digits > 0;
}

/* A sequence of items, up to '|', ')' or the end of the rule. */
static sm_status sequence(parser *ps, size_t rule, bool nested) {
    size_t last = SIZE_MAX; /* where the last item starts */
    sm_grange *buf = NULL;
    size_t cap = 0;
    sm_status st = SM_OK;
    while (!st && ps->p < ps->end) {
        const char *at = ps->p;
        char c = *ps->p;
        if (c == '"') {
            ps->p++;
            last = ps->rules[rule].n;
            while (!st && (ps->p >= ps->end || *ps->p != '"')) {
                uint32_t ch;
                if ((st = parse_char(ps, &ch, false))) break;
                sm_grange one = {ch, ch};
                size_t set = make_set(ps, &one, 1, false);
                if (set == SIZE_MAX || !push(ps, &ps->rules[rule], GE_CHARS, set))
                    st = sm_error_set(ps->err, SM_ERR_NOMEM, "out of memory compiling the grammar");
            }
            if (st) break;
            ps->p++;
            space(ps, nested);
        } else if (c == '[' || c == '.') {
            bool neg = false;
            size_t n = 0;
            if (c == '.') {
                if (!sm_grow((void **)&buf, &cap, 2, sizeof *buf)) { st = SM_ERR_NOMEM; break; }
                buf[n++] = (sm_grange){0, 0x10FFFF};
                ps->p++;
            } else {
                ps->p++;
                if (ps->p < ps->end && *ps->p == '^') neg = true, ps->p++;
                while (!st && (ps->p >= ps->end || *ps->p != ']')) {
                    uint32_t lo, hi;
                    if ((st = parse_char(ps, &lo, true))) break;
                    hi = lo;
                    if (ps->p + 1 < ps->end && *ps->p == '-' && ps->p[1] != ']') {
                        ps->p++;
                        if ((st = parse_char(ps, &hi, true))) break;
                        if (hi < lo) { st = fail_at(ps, at, "a character range whose end is below its start"); break; }
                    }
                    if (!sm_grow((void **)&buf, &cap, n + 2, sizeof *buf)) { st = SM_ERR_NOMEM; break; }
                    buf[n++] = (sm_grange){lo, hi};
                }
                if (st) break;
                ps->p++;
                if (!n && !neg) { st = fail_at(ps, at, "an empty character class"); break; }
            }
            last = ps->rules[rule].n;
            if (!sm_grow((void **)&buf, &cap, n + 2, sizeof *buf)) { st = SM_ERR_NOMEM; break; } /* the complement's room */
            size_t set = make_set(ps, buf, n, neg);
            if (set == SIZE_MAX || !push(ps, &ps->rules[rule], GE_CHARS, set)) st = SM_ERR_NOMEM;
            space(ps, nested);
        } else if (word_char(c)) {
            const char *name = ps->p;
            while (ps->p < ps->end && word_char(*ps->p)) ps->p++;
            size_t id = rule_id(ps, name, (size_t)(ps->p - name), name);
            last = ps->rules[rule].n;
            if (id == SIZE_MAX || !push(ps, &ps->rules[rule], GE_REF, id)) st = ps->failed ? SM_ERR_INPUT : SM_ERR_NOMEM;
            space(ps, nested);
        } else if (c == '(') {
            ps->p++;
            space(ps, true);
            size_t id = synth_rule(ps, rule, at);
            if (id == SIZE_MAX) { st = ps->failed ? SM_ERR_INPUT : SM_ERR_NOMEM; break; }
            if ((st = alternates(ps, id, true))) break;
            if (ps->p >= ps->end || *ps->p != ')') { st = fail_at(ps, ps->p, "expecting ')'"); break; }
            ps->p++;
            last = ps->rules[rule].n;
            if (!push(ps, &ps->rules[rule], GE_REF, id)) st = SM_ERR_NOMEM;
            space(ps, nested);
        } else if (c == '*' || c == '+' || c == '?') {
            ps->p++;
            space(ps, nested);
            st = repeat(ps, rule, last == SIZE_MAX ? ps->rules[rule].n : last, c == '+', c == '?' ? 1 : SIZE_MAX, at);
        } else if (c == '{') {
            ps->p++;
            space(ps, nested);
            size_t lo = 0, hi;
            bool have_lo = parse_int(ps, &lo);
            space(ps, nested);
            if (ps->p < ps->end && *ps->p == '}') {
                if (!have_lo) { st = fail_at(ps, ps->p, "expecting a number in { }"); break; }
                hi = lo;
            } else if (ps->p < ps->end && *ps->p == ',') {
                ps->p++;
                space(ps, nested);
                if (!parse_int(ps, &hi)) hi = SIZE_MAX;
                space(ps, nested);
                if (ps->p >= ps->end || *ps->p != '}') { st = fail_at(ps, ps->p, "expecting '}'"); break; }
            } else {
                st = fail_at(ps, ps->p, "expecting ',' or '}' in a repetition");
                break;
            }
            ps->p++;
            space(ps, nested);
            st = repeat(ps, rule, last == SIZE_MAX ? ps->rules[rule].n : last, lo, hi, at);
        } else {
            break;
        }
        if (!st && ps->failed) st = SM_ERR_INPUT;
    }
    free(buf);
    if (st == SM_ERR_NOMEM && !ps->failed) sm_error_set(ps->err, SM_ERR_NOMEM, "out of memory compiling the grammar");
    return st;
}

static sm_status alternates(parser *ps, size_t rule, bool nested) {
    sm_status st = sequence(ps, rule, nested);
    while (!st && ps->p < ps->end && *ps->p == '|') {
        if (!push(ps, &ps->rules[rule], GE_END, 0)) return SM_ERR_NOMEM;
        ps->p++;
        space(ps, true);
        st = sequence(ps, rule, nested);
    }
    if (!st && !push(ps, &ps->rules[rule], GE_END, 0)) return SM_ERR_NOMEM;
    return st;
}

static sm_status parse_rule(parser *ps) {
    const char *name = ps->p;
    while (ps->p < ps->end && word_char(*ps->p)) ps->p++;
    if (ps->p == name) return fail_at(ps, name, "expecting a rule name");
    size_t n = (size_t)(ps->p - name);
    space(ps, false);
    if (ps->end - ps->p < 3 || memcmp(ps->p, "::=", 3) != 0) return fail_at(ps, ps->p, "expecting '::='");
    ps->p += 3;
    space(ps, true);
    size_t id = rule_id(ps, name, n, name);
    if (id == SIZE_MAX) return ps->failed ? SM_ERR_INPUT : sm_error_set(ps->err, SM_ERR_NOMEM, "out of memory");
    if (ps->rules[id].defined) {
        char msg[200];
        snprintf(msg, sizeof msg, "rule '%.100s' is defined twice", ps->rules[id].name);
        return fail_at(ps, name, msg);
    }
    ps->rules[id].defined = true;
    sm_status st = alternates(ps, id, false);
    if (st) return st;
    if (ps->p < ps->end && *ps->p != '\n' && *ps->p != '\r') return fail_at(ps, ps->p, "expecting the end of the line");
    space(ps, true);
    return SM_OK;
}

/* ---- checks that make matching terminate */

/* nullable[r]: rule r can match the empty text. */
static void nullable_rules(const sm_grammar *g, bool *nullable) {
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t r = 0; r < g->n_rules; r++) {
            if (nullable[r]) continue;
            for (uint32_t a = g->rule_alt[r]; a < g->rule_alt[r + 1] && !nullable[r]; a++) {
                uint32_t p = g->alts[a];
                while (g->elems[p].type == GE_REF && nullable[g->elems[p].v]) p++;
                if (g->elems[p].type == GE_END) nullable[r] = changed = true;
            }
        }
    }
}

/*
** A rule that can call itself before taking a character: a depth-first
** search over "r starts with a call of t" (after nullable calls), a rule on
** the current path reached again being the cycle.
*/
static sm_status left_recursion(const sm_grammar *g, const bool *nullable, sm_error *err) {
    size_t n = g->n_rules;
    uint8_t *mark = calloc(n, 1); /* 0 new, 1 on the path, 2 done */
    uint32_t *rule = malloc(n * sizeof *rule), *alt = malloc(n * sizeof *alt), *pos = malloc(n * sizeof *pos);
    if (!mark || !rule || !alt || !pos) {
        free(mark), free(rule), free(alt), free(pos);
        return sm_error_set(err, SM_ERR_NOMEM, "out of memory checking the grammar");
    }
    sm_status st = SM_OK;
    for (size_t s = 0; s < n && !st; s++) {
        if (mark[s]) continue;
        size_t d = 0; /* path depth: rule[d] is explored at alternative alt[d], position pos[d] */
        rule[0] = (uint32_t)s, alt[0] = g->rule_alt[s], pos[0] = UINT32_MAX, mark[s] = 1;
        for (;;) {
            uint32_t r = rule[d];
            uint32_t next = UINT32_MAX; /* the next rule r starts with */
            while (alt[d] < g->rule_alt[r + 1] && next == UINT32_MAX) {
                /* pos[d]: the call just explored in this alternative (UINT32_MAX: none yet) */
                uint32_t p = pos[d] == UINT32_MAX ? g->alts[alt[d]] : pos[d] + 1;
                if (pos[d] != UINT32_MAX && !nullable[g->elems[pos[d]].v]) p = UINT32_MAX;
                if (p != UINT32_MAX && g->elems[p].type == GE_REF) {
                    pos[d] = p;
                    next = g->elems[p].v;
                } else {
                    alt[d]++, pos[d] = UINT32_MAX;
                }
            }
            if (next != UINT32_MAX && mark[next] == 1) {
                st = sm_error_set(err, SM_ERR_INPUT,
                                  "grammar: rule '%.100s' is left-recursive (it can reach itself before "
                                  "matching a character; repeating something that can match nothing "
                                  "does this too)", g->names[next]);
                break;
            }
            if (next != UINT32_MAX && !mark[next]) {
                mark[next] = 1;
                d++;
                rule[d] = next, alt[d] = g->rule_alt[next], pos[d] = UINT32_MAX;
                continue;
            }
            if (next != UINT32_MAX) continue; /* done already: its own calls were searched */
            mark[r] = 2;
            if (d == 0) break;
            d--;
        }
    }
    free(mark), free(rule), free(alt), free(pos);
    return st;
}

void sm_grammar_free(sm_grammar *g) {
    if (!g) return;
    for (size_t i = 0; g->names && i < g->n_rules; i++) free(g->names[i]);
    free(g->names), free(g->elems), free(g->alts), free(g->rule_alt), free(g->sets), free(g->ranges);
    free(g);
}

size_t sm_grammar_rules(const sm_grammar *g) {
    return g->n_rules;
}

/* The parser's rules laid out as the compiled grammar. */
static sm_status finish(parser *ps, sm_grammar **out) {
    sm_error *err = ps->err;
    for (size_t i = 0; i < ps->n_rules; i++)
        if (!ps->rules[i].defined)
            return sm_error_set(err, SM_ERR_INPUT, "grammar line %zu, column %zu: rule '%.100s' is not defined",
                                ps->rules[i].line, ps->rules[i].col, ps->rules[i].name);
    size_t root = SIZE_MAX;
    for (size_t i = 0; i < ps->n_rules; i++)
        if (strcmp(ps->rules[i].name, "root") == 0) root = i;
    if (root == SIZE_MAX) return sm_error_set(err, SM_ERR_INPUT, "grammar: no rule named 'root'");
    sm_grammar *g = calloc(1, sizeof *g);
    if (!g) return sm_error_set(err, SM_ERR_NOMEM, "out of memory compiling the grammar");
    size_t n_alts = 0;
    for (size_t i = 0; i < ps->n_rules; i++)
        for (size_t k = 0; k < ps->rules[i].n; k++) n_alts += ps->rules[i].e[k].type == GE_END;
    g->n_rules = ps->n_rules, g->n_elems = ps->n_elems, g->n_alts = n_alts;
    g->elems = malloc((ps->n_elems + 1) * sizeof *g->elems);
    g->alts = malloc((n_alts + 1) * sizeof *g->alts);
    g->rule_alt = malloc((ps->n_rules + 1) * sizeof *g->rule_alt);
    g->names = calloc(ps->n_rules, sizeof *g->names);
    if (!g->elems || !g->alts || !g->rule_alt || !g->names) {
        sm_grammar_free(g);
        return sm_error_set(err, SM_ERR_NOMEM, "out of memory compiling the grammar");
    }
    size_t e = 0, a = 0;
    for (size_t i = 0; i < ps->n_rules; i++) {
        g->rule_alt[i] = (uint32_t)a;
        g->names[i] = ps->rules[i].name;
        ps->rules[i].name = NULL;
        bool start = true;
        for (size_t k = 0; k < ps->rules[i].n; k++) {
            if (start) g->alts[a++] = (uint32_t)e, start = false;
            g->elems[e++] = ps->rules[i].e[k];
            if (ps->rules[i].e[k].type == GE_END) start = true;
        }
    }
    g->rule_alt[ps->n_rules] = (uint32_t)a;
    g->sets = ps->sets, g->ranges = ps->ranges;
    g->n_sets = ps->n_sets, g->n_ranges = ps->n_ranges;
    ps->sets = NULL, ps->ranges = NULL;
    g->root = (uint32_t)root;
    bool *nullable = calloc(g->n_rules, 1);
    if (!nullable) {
        sm_grammar_free(g);
        return sm_error_set(err, SM_ERR_NOMEM, "out of memory checking the grammar");
    }
    nullable_rules(g, nullable);
    sm_status st = left_recursion(g, nullable, err);
    free(nullable);
    if (st) {
        sm_grammar_free(g);
        return st;
    }
    *out = g;
    return SM_OK;
}

sm_status sm_grammar_parse(sm_grammar **out, const char *text, size_t len, sm_error *err) {
    *out = NULL;
    parser ps = {.src = text, .p = text, .end = text + len, .err = err};
    sm_status st = SM_OK;
    if (memchr(text, '\0', len)) st = sm_error_set(err, SM_ERR_INPUT, "grammar: a NUL byte in the text");
    space(&ps, true);
    while (!st && ps.p < ps.end) st = parse_rule(&ps);
    if (!st && ps.n_rules == 0) st = sm_error_set(err, SM_ERR_INPUT, "grammar: no rules");
    if (st == SM_ERR_NOMEM && !err->msg[0]) sm_error_set(err, SM_ERR_NOMEM, "out of memory compiling the grammar");
    if (!st) st = finish(&ps, out);
    for (size_t i = 0; i < ps.n_rules; i++) free(ps.rules[i].name), free(ps.rules[i].e);
    free(ps.rules), free(ps.sets), free(ps.ranges);
    return st;
}

bool sm_gset_meets(const sm_grammar *g, const sm_gset *s, uint32_t lo, uint32_t hi) {
    for (uint32_t c = lo; c <= hi && c < 128; c++)
        if ((s->ascii[c >> 6] >> (c & 63)) & 1) return true;
    if (hi < 128) return false;
    if (lo < 128) lo = 128;
    for (size_t i = s->start; i < s->start + s->n; i++) /* (g->ranges is NULL when no set has ranges) */
        if (g->ranges[i].lo <= hi && g->ranges[i].hi >= lo) return true;
    return false;
}
