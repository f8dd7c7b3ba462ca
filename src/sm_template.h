/*
** sm_template.h -- chat templates: the part of Jinja that models' chat
** templates are written in, parsed once and rendered once per turn.
**
** Rendering follows the Jinja engine of transformers.js (npm
** @huggingface/jinja), which the tests compare against byte for byte: its
** whitespace rules (lstrip_blocks and trim_blocks on, a final newline
** dropped, `-` trimming), Python-like values made from JSON (string, number,
** bool, none, list, dict; undefined for what is missing), and the
** statements, operators, filters, tests and methods templates use:
**   {{ expr }}  {% if/elif/else %}  {% for x in xs [if cond] %} (loop.index0,
**   index, first, last, length, revindex; else; break; continue)  {% set %}
**   (names, tuples, namespace attributes, blocks)  {% macro %} with calls
**   literals, attributes, indexes, slices (with steps), calls with keyword
**   arguments, not/and/or, comparisons, in, ~, + - * / // % **, a if b else c
**   filters: trim length count tojson upper lower default/d items join
**   replace first last selectattr rejectattr list string int float abs
**   capitalize title reverse map(attribute) safe unique indent
**   tests: defined undefined none string number integer float boolean true
**   false iterable mapping sequence callable odd even equalto/eq lower upper
**   string methods: startswith endswith strip lstrip rstrip split replace
**   upper lower title capitalize; dict methods items keys values get
**   globals: raise_exception (its message is the error), namespace, range,
**   strftime_now (local time)
** What it does not do (an error naming the construct and the line): call
** blocks, filter blocks, includes, imports, extends, recursive loops.
**
** Bounded: a template that runs more than max_steps evaluations (an endless
** or huge loop), writes more than max_output bytes or makes more than
** max_memory bytes of values stops with an error; parse depth and macro
** recursion are limited too. A render allocates (its values, its output)
** and frees everything but the text it returns.
*/
#ifndef SM_TEMPLATE_H
#define SM_TEMPLATE_H

#include <cJSON.h>

#include "sm_base.h"

typedef struct sm_template sm_template;

typedef struct sm_template_limits {
    size_t max_steps;  /* evaluations; 0: 10,000,000 */
    size_t max_output; /* bytes of rendered text; 0: 16 MiB */
    size_t max_memory; /* bytes of values made while rendering; 0: 256 MiB */
} sm_template_limits;

/*
** Parses len bytes of template text. name (a file name, "chat template of
** MODEL") starts every error message, which names the line. A syntax
** error, an unknown filter or test, or an unsupported statement is
** SM_ERR_FORMAT. Free *out with sm_template_free.
*/
sm_status sm_template_parse(sm_template **out, const char *src, size_t len, const char *name,
                            sm_error *err);
void sm_template_free(sm_template *t);

/*
** Renders t with the variables of the JSON object vars (messages,
** add_generation_prompt, bos_token, tools, ...; may be NULL). On success
** *out is a malloc'd, NUL-terminated text of *len bytes (free it). Errors
** (SM_ERR_INPUT) name the template and the line: raise_exception's
** message, a type error, a limit reached. lim may be NULL (defaults).
*/
sm_status sm_template_render(const sm_template *t, const cJSON *vars,
                             const sm_template_limits *lim, char **out, size_t *len,
                             sm_error *err);

#endif
