/*
** template_internal.h -- what the template files share: a chunked bump
** pool, the syntax tree parse.c builds and the values render.c and value.c
** compute with. Private to src/template/.
*/
#ifndef SM_TEMPLATE_INTERNAL_H
#define SM_TEMPLATE_INTERNAL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sm_template.h"

/* ---- pool: chunks freed all at once; a byte limit (0: none) */
typedef struct tpl_chunk tpl_chunk;
typedef struct tpl_pool {
    tpl_chunk *head;
    size_t used, cap; /* in head */
    size_t total, limit;
} tpl_pool;

/* NULL when out of memory or over the limit. */
void *tpl_pool_alloc(tpl_pool *p, size_t n);
void tpl_pool_free(tpl_pool *p);

/* ---- tokens (lex.c) */
enum { K_TEXT, K_SOPEN, K_SCLOSE, K_EOPEN, K_ECLOSE, K_NAME, K_NUM, K_STR, K_OP, K_EOF };
enum { /* K_OP codes beyond single characters */
    Q_EQ = 256, Q_NE, Q_LE, Q_GE, Q_POW, Q_FLOORDIV
};

typedef struct ltok {
    uint8_t k;
    uint16_t op;
    uint32_t line;
    const char *s;
    size_t n;
} ltok;

/*
** The tokens of len bytes of template source (*toks malloc'd, ending in
** K_EOF; their texts in t's pool). Errors name t and the line.
*/
sm_status tpl_lex(sm_template *t, const char *src, size_t len, ltok **toks, size_t *n_toks,
                  sm_error *err);

/* ---- syntax tree */
typedef enum {
    /* statements */
    N_TEXT, N_OUT, N_IF, N_FOR, N_SET, N_MACRO, N_CALLBLOCK, N_BREAK, N_CONTINUE, N_NOP, N_WITH,
    N_FILTERBLOCK,
    /* expressions */
    N_STR, N_INT, N_FLOAT, N_BOOL, N_NONE, N_NAME, N_LIST, N_TUPLE, N_DICT, N_ATTR, N_INDEX,
    N_SLICE, N_CALL, N_KW, N_SPLAT, N_FILTER, N_TEST, N_NOT, N_NEG, N_BIN, N_AND, N_OR, N_COND
} tpl_kind;

typedef enum {
    OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_CONCAT, OP_EQ, OP_NE, OP_LT,
    OP_GT, OP_LE, OP_GE, OP_IN, OP_NOTIN
} tpl_op;

typedef enum {
    F_TRIM, F_LENGTH, F_TOJSON, F_UPPER, F_LOWER, F_DEFAULT, F_ITEMS, F_JOIN, F_REPLACE, F_FIRST,
    F_LAST, F_SELECTATTR, F_REJECTATTR, F_LIST, F_STRING, F_INT, F_FLOAT, F_ABS, F_CAPITALIZE,
    F_TITLE, F_REVERSE, F_MAP, F_SAFE, F_UNIQUE, F_INDENT, F_SELECT, F_REJECT, F_SORT, F_SUM,
    F_MIN, F_MAX, F_GROUPBY, F_BATCH, F_SLICE, F_DICTSORT, F_WORDCOUNT, F_TRUNCATE, F_ROUND,
    F_CENTER, F_ATTR, F_ESCAPE, F_BOOL, F_FORMAT, F_COUNT_
} tpl_filter;
#define F_UNKNOWN 0xFF /* a name no filter has: an error when it runs (as Jinja decides it) */

typedef enum {
    T_DEFINED, T_UNDEFINED, T_NONE, T_STRING, T_NUMBER, T_INTEGER, T_FLOATT, T_BOOLEAN, T_TRUE,
    T_FALSE, T_ITERABLE, T_MAPPING, T_SEQUENCE, T_CALLABLE, T_ODD, T_EVEN, T_EQUALTO, T_LOWER,
    T_UPPER, T_IN, T_DIVISIBLEBY, T_NE, T_LT, T_LE, T_GT, T_GE, T_SAMEAS, T_ESCAPED, T_FILTER,
    T_TEST, T_COUNT_
} tpl_test;
#define T_UNKNOWN 0x7F /* as F_UNKNOWN (bit 7 of a test node's op is its negation) */

/* A filter's or test's id by name (aliases too: d, count, e, eq, ==, lessthan ...), or -1. */
int tpl_filter_id(const char *s, size_t n);
int tpl_test_id(const char *s, size_t n);

typedef struct tpl_node tpl_node;
struct tpl_node {
    uint8_t kind;  /* tpl_kind */
    uint8_t op;    /* tpl_op, tpl_filter or tpl_test; N_TEST: bit 7 = negated */
    uint32_t line;
    const char *s; /* N_TEXT, N_STR, N_NAME, N_ATTR, N_KW, N_MACRO, N_FILTER, N_TEST */
    size_t sn;
    int64_t i;     /* N_INT, N_BOOL */
    double f;      /* N_FLOAT */
    tpl_node *a, *b, *c;
    tpl_node **list; /* bodies, items, arguments */
    size_t n;
    tpl_node **list2; /* N_IF / N_FOR: the else body; N_MACRO: parameter defaults (n entries) */
    size_t n2;
};

struct sm_template {
    tpl_pool pool;     /* the tree and its strings */
    tpl_node **body;
    size_t n;
    char name[160];
};

/* ---- values */
typedef enum { V_UNDEF, V_NONE, V_BOOL, V_INT, V_FLOAT, V_STR, V_LIST, V_DICT, V_NS, V_FUNC,
               V_MACRO } tpl_vtype;

typedef struct tpl_dict tpl_dict;
typedef struct tpl_val tpl_val;
struct tpl_val {
    uint8_t t;  /* tpl_vtype */
    uint8_t fn; /* V_FUNC: which global; V_LIST: TPL_GROUP for groupby's (grouper, list) pairs;
                   V_DICT: TPL_LOOP for a for loop's `loop` (its cycle() method) */
    uint32_t n; /* V_STR: bytes; V_LIST: items */
    union {
        bool b;
        int64_t i;
        double f;
        const char *s;
        tpl_val *items;
        tpl_dict *d;     /* V_DICT, V_NS */
        const void *mac; /* V_MACRO: render.c's closure */
    } u;
};

#define TPL_GROUP 1 /* a V_LIST's fn: .grouper and .list name its two items */
#define TPL_LOOP 2  /* a V_DICT's fn: a loop's variables, index0 second (render.c's exec_for) */
#define TPL_TUPLE 3 /* a V_LIST's fn: a tuple (a literal, items()' or dictsort's pairs), printed so */

typedef struct tpl_entry {
    const char *k;
    uint32_t kn;
    tpl_val v;
} tpl_entry;

struct tpl_dict {
    tpl_entry *e;
    uint32_t n, cap;
};

/* What render.c keeps while running; value.c reports through it. */
typedef struct tpl_run {
    tpl_pool pool;
    jmp_buf fail;
    sm_error *err;
    const char *name;
    uint32_t line; /* of the node being evaluated */
    size_t steps, max_steps, max_output;
    char *out;
    size_t out_n, out_cap;
    unsigned depth;
} tpl_run;

/* Records the error (template name and line first) and jumps to r->fail. */
_Noreturn void tpl_fail(tpl_run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* s[0..n) on one line into out (cap bytes, NUL-terminated): control characters escaped (\n, \t,
   \xHH), so an error message never spans lines; cut at a character if it does not fit. */
void tpl_one_line(char *out, size_t cap, const char *s, size_t n);
/* Sets err to code and "NAME line L: message", the message (fmt, ap) on one line; returns code. */
sm_status tpl_error(sm_error *err, sm_status code, const char *name, unsigned line, const char *fmt,
                    va_list ap) __attribute__((format(printf, 5, 0)));
void *tpl_alloc(tpl_run *r, size_t n);

/* value.c */
static inline tpl_val tpl_str(const char *s, size_t n) {
    return (tpl_val){.t = V_STR, .n = (uint32_t)n, .u.s = s};
}
tpl_val tpl_str_copy(tpl_run *r, const char *s, size_t n);
tpl_val tpl_from_json(tpl_run *r, const cJSON *j);
tpl_dict *tpl_dict_new(tpl_run *r, size_t cap);
tpl_val *tpl_dict_get(const tpl_dict *d, const char *k, size_t kn);
void tpl_dict_set(tpl_run *r, tpl_dict *d, const char *k, size_t kn, tpl_val v);
bool tpl_truthy(tpl_val v);
bool tpl_loose_eq(tpl_val a, tpl_val b);
bool tpl_strict_eq(tpl_val a, tpl_val b);
const char *tpl_type_name(tpl_val v);
/* Appends v as the template prints it: Python's str() (strings as they are, the rest as repr). */
void tpl_print(tpl_run *r, tpl_val v);
/* Appends Python's repr(v) (%r, !r): strings quoted and escaped, containers as print has them. */
void tpl_repr(tpl_run *r, tpl_val v);
/* v as a string value (what print writes). */
tpl_val tpl_to_str(tpl_run *r, tpl_val v);
/* Appends v as JSON: indent < 0 for none; sort_keys; ensure_ascii. */
/* How tojson writes: indent < 0 on one line; sep[0] between items, sep[1] after keys (NULL: Python's
   defaults, ", " or "," with an indent, and ": "). */
typedef struct {
    int indent;
    bool ascii, sort_keys;
    tpl_val sep[2];
} tpl_json_opts;
void tpl_json(tpl_run *r, tpl_val v, const tpl_json_opts *o, int depth);
void tpl_emit(tpl_run *r, const char *s, size_t n);
/* The text emitted since out_n was mark, as a string value; the output goes back to mark
   (filters and captures build their strings in the output buffer). */
tpl_val tpl_take(tpl_run *r, size_t mark);
/* JavaScript's white space (String.prototype.trim): bytes of it at s[0..n)'s start or end. */
size_t tpl_space_front(const char *s, size_t n);
size_t tpl_space_back(const char *s, size_t n);
/* Code points in s[0..n) (invalid bytes count one each). */
size_t tpl_utf8_count(const char *s, size_t n);

/* render.c: a binary operator (tpl_op) on two values, as the template's expressions apply it */
tpl_val tpl_binary(tpl_run *r, int op, tpl_val a, tpl_val b);

/* Evaluated call arguments: positional in a, keyword in kw with their nodes in kwn. */
typedef struct tpl_args {
    tpl_val *a, *kw;
    const tpl_node **kwn;
    size_t na, nkw;
} tpl_args;
#define TPL_KW_ONLY ((size_t)-1) /* tpl_arg: a keyword-only parameter */
/* Parameter number pos (0-based) as Jinja binds it: positional argument pos, else the keyword
   argument name; NULL when the call gives neither. */
const tpl_val *tpl_arg(const tpl_args *g, size_t pos, const char *name);

/* filters.c */
tpl_val tpl_apply_filter(tpl_run *r, int f, tpl_val v, const tpl_args *g);
tpl_val tpl_list_of(tpl_run *r, size_t n);
/* v as a list: a list, a string's characters, a dict's keys; else fails naming filter */
tpl_val tpl_need_list(tpl_run *r, tpl_val v, const char *filter);
/* item.name, name a dotted path ("function.name") or an integer index; undefined if absent */
tpl_val tpl_attr_of(tpl_val item, tpl_val name);
tpl_val tpl_lower(tpl_run *r, tpl_val s);

/* seqfilters.c: the filters over sequences (select, map, sort, sum, groupby, ...) */
tpl_val tpl_seq_filter(tpl_run *r, int f, tpl_val v, const tpl_args *g);
bool tpl_apply_test(tpl_run *r, int t, tpl_val v, const tpl_val *args, size_t nargs);
tpl_val tpl_call_method(tpl_run *r, tpl_val obj, const char *name, size_t nn,
                        const tpl_val *args, size_t nargs);

/* strmethods.c: the other str methods (join, find, count, is*, partition, rsplit, zfill, format,
   ...) and list.index / list.count into *out; false when obj has no method name */
bool tpl_more_method(tpl_run *r, tpl_val obj, const char *name, size_t nn, const tpl_args *g, tpl_val *out);
/* Python's fmt % args: a tuple's items in turn, a dict's by %(key)s, else args itself */
tpl_val tpl_percent(tpl_run *r, tpl_val fmt, tpl_val args);

extern const char *const tpl_filter_names[F_COUNT_];
extern const char *const tpl_test_names[T_COUNT_];

#endif
