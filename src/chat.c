/*
** chat.c -- a model's chat template applied to conversations, and
** conversations kept on a state's KV-cache from turn to turn.
*/
#include "sm_chat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sm_model.h"

/* ---- templates */

/* The text a template writes for token id (bos_token, eos_token), or NULL. */
static char *token_text(const sm_tokenizer *tok, int32_t id) {
    size_t n;
    const char *s = sm_tokenizer_special_text(tok, id, &n);
    return n ? strndup(s, n) : NULL;
}

cJSON *sm_chat_message(const char *role, const char *content, size_t len) {
    cJSON *m = cJSON_CreateObject();
    char *c = strndup(content, len);
    if (!m || !c || !cJSON_AddStringToObject(m, "role", role) ||
        !cJSON_AddStringToObject(m, "content", c)) {
        cJSON_Delete(m);
        m = NULL;
    }
    free(c);
    return m;
}

/*
** What the template writes after an assistant's message, up to the next
** message: rendered around a marker, trimmed. If it is one special token
** that ends generation the tokenizer stops there already; otherwise it is
** a stop string (a template whose turns end in plain text).
*/
static void find_stop(sm_chat *c, sm_tokenizer *tok) {
    static const char mark[] = "\x01sm-reply\x01";
    cJSON *msgs = cJSON_CreateArray();
    if (!msgs) return;
    cJSON_AddItemToArray(msgs, sm_chat_message("user", "Hi", 2));
    cJSON_AddItemToArray(msgs, sm_chat_message("assistant", mark, sizeof mark - 1));
    cJSON_AddItemToArray(msgs, sm_chat_message("user", "Bye", 3));
    char *text = NULL;
    size_t len;
    if (cJSON_GetArraySize(msgs) == 3 && !sm_chat_render(c, msgs, false, NULL, &text, &len, NULL)) {
        const char *at = strstr(text, mark), *next = at ? strstr(at, "Bye") : NULL;
        if (at && next) {
            const char *a = at + sizeof mark - 1, *b = next;
            /* the end of the reply's turn: up to the first line break after some text */
            while (a < b && (*a == ' ' || *a == '\n')) a++;
            const char *e = a;
            while (e < b && *e != '\n') e++;
            while (e > a && e[-1] == ' ') e--;
            size_t n = (size_t)(e - a);
            int32_t ids[4];
            size_t k = n ? sm_tokenizer_encode_as(tok, a, n, ids, 4, SM_ENCODE_SPECIAL) : 0;
            bool token = k == 1 && sm_tokenizer_is_end(tok, ids[0]);
            if (n && n <= SM_STOP_MAX_BYTES && !token) {
                memcpy(c->stop, a, n);
                c->stop[n] = 0;
            }
        }
    }
    free(text);
    cJSON_Delete(msgs);
}

sm_status sm_chat_init(sm_chat *c, const sm_config *cfg, sm_tokenizer *tok,
                       const char *text, size_t len, const char *name, const char *model,
                       sm_error *err) {
    memset(c, 0, sizeof *c);
    char nm[300];
    if (!text) {
        if (!cfg->chat_template)
            return sm_error_set(err, SM_ERR_UNSUPPORTED,
                                "%s has no chat template (tokenizer_config.json's chat_template, "
                                "GGUF tokenizer.chat_template or config.json's chat_template); "
                                "give one with --chat-template FILE",
                                model);
        text = cfg->chat_template;
        len = strlen(text);
        snprintf(nm, sizeof nm, "chat template of %s", model);
        name = nm;
    }
    sm_status st = sm_template_parse(&c->tpl, text, len, name, err);
    if (st) return st;
    c->bos = cfg->chat_bos ? strdup(cfg->chat_bos) : token_text(tok, tok->bos);
    c->eos = cfg->chat_eos ? strdup(cfg->chat_eos) : token_text(tok, tok->eos);
    find_stop(c, tok);
    return SM_OK;
}

void sm_chat_free(sm_chat *c) {
    sm_template_free(c->tpl);
    free(c->bos);
    free(c->eos);
    memset(c, 0, sizeof *c);
}

/* What no template can use, named; anything else passes through to the template as it is. */
static sm_status check_message(const cJSON *m, const char *where, int i, sm_error *err) {
    if (!cJSON_IsObject(m))
        return sm_error_set(err, SM_ERR_INPUT, "%s: messages[%d] is not an object", where, i);
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "role");
    if (!cJSON_IsString(r) || !r->valuestring[0]) /* any role: the template decides (ipython, functions) */
        return sm_error_set(err, SM_ERR_INPUT, "%s: messages[%d].role must be a non-empty string, got %s",
                            where, i, !r ? "nothing" : cJSON_IsString(r) ? "\"\"" : "a non-string");
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(m, "content");
    if (ct && !cJSON_IsString(ct) && !cJSON_IsNull(ct) && !cJSON_IsArray(ct))
        return sm_error_set(err, SM_ERR_INPUT, "%s: messages[%d].content must be a string, a list of "
                            "parts ([{\"type\": \"text\", \"text\": ...}]) or null", where, i);
    int k = 0;
    for (const cJSON *p = cJSON_IsArray(ct) ? ct->child : NULL; p; p = p->next, k++) {
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(p, "type");
        if (!cJSON_IsObject(p) || !cJSON_IsString(ty))
            return sm_error_set(err, SM_ERR_INPUT, "%s: messages[%d].content[%d] must be an object with a "
                                "string \"type\" (\"text\", \"image\", ...)", where, i, k);
        const cJSON *tx = cJSON_GetObjectItemCaseSensitive(p, "text");
        if (!strcmp(ty->valuestring, "text") && !cJSON_IsString(tx))
            return sm_error_set(err, SM_ERR_INPUT, "%s: messages[%d].content[%d].text must be a string",
                                where, i, k);
    }
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
    if (tc && !cJSON_IsArray(tc) && !cJSON_IsNull(tc))
        return sm_error_set(err, SM_ERR_INPUT, "%s: messages[%d].tool_calls must be a list", where, i);
    k = 0;
    for (const cJSON *c = tc ? tc->child : NULL; c; c = c->next, k++) {
        if (!cJSON_IsObject(c))
            return sm_error_set(err, SM_ERR_INPUT, "%s: messages[%d].tool_calls[%d] is not an object", where, i, k);
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(c, "function");
        if (f && !cJSON_IsObject(f))
            return sm_error_set(err, SM_ERR_INPUT, "%s: messages[%d].tool_calls[%d].function is not an object",
                                where, i, k);
        const cJSON *a = f ? cJSON_GetObjectItemCaseSensitive(f, "arguments") : NULL;
        if (a && !cJSON_IsString(a) && !cJSON_IsObject(a))
            return sm_error_set(err, SM_ERR_INPUT, "%s: messages[%d].tool_calls[%d].function.arguments must be "
                                "an object or a string of JSON", where, i, k);
    }
    return SM_OK;
}

sm_status sm_chat_check_messages(const cJSON *messages, const char *where, sm_error *err) {
    if (!cJSON_IsArray(messages))
        return sm_error_set(err, SM_ERR_INPUT, "%s: \"messages\" must be a list of {role, content}", where);
    int count = cJSON_GetArraySize(messages);
    if (count > SM_CHAT_MAX_MESSAGES)
        return sm_error_set(err, SM_ERR_INPUT, "%s: %d messages, more than a conversation may hold (%d)",
                            where, count, SM_CHAT_MAX_MESSAGES);
    int i = 0;
    sm_status st = SM_OK;
    for (const cJSON *m = messages->child; m && !st; m = m->next, i++) st = check_message(m, where, i, err);
    return st;
}

sm_status sm_chat_render(const sm_chat *c, const cJSON *messages, bool add_generation_prompt,
                         const cJSON *vars, char **out, size_t *len, sm_error *err) {
    /* the caller's JSON is referred to, not copied: rendering only reads it */
    cJSON *v = cJSON_CreateObject();
    bool ok = v != NULL;
    for (cJSON *e = vars ? vars->child : NULL; ok && e; e = e->next)
        ok = cJSON_AddItemReferenceToObject(v, e->string, e);
    if (ok && !cJSON_GetObjectItemCaseSensitive(v, "messages"))
        ok = cJSON_AddItemReferenceToObject(v, "messages", (cJSON *)messages);
    if (ok && !cJSON_GetObjectItemCaseSensitive(v, "add_generation_prompt"))
        ok = cJSON_AddBoolToObject(v, "add_generation_prompt", add_generation_prompt) != NULL;
    if (ok && c->bos && !cJSON_GetObjectItemCaseSensitive(v, "bos_token"))
        ok = cJSON_AddStringToObject(v, "bos_token", c->bos) != NULL;
    if (ok && c->eos && !cJSON_GetObjectItemCaseSensitive(v, "eos_token"))
        ok = cJSON_AddStringToObject(v, "eos_token", c->eos) != NULL;
    sm_status st = ok ? sm_template_render(c->tpl, v, NULL, out, len, err)
                      : sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    cJSON_Delete(v);
    return st;
}

size_t sm_chat_add_stop(const sm_chat *c, const char **stops, size_t n) {
    if (c->stop[0] && n < SM_STOP_MAX) stops[n++] = c->stop;
    return n;
}

size_t sm_chat_encode(sm_tokenizer *tok, const char *text, size_t len, int32_t *out, size_t cap) {
    size_t n = sm_tokenizer_encode_as(tok, text, len, out, cap, SM_ENCODE_SPECIAL);
    if (tok->add_bos && tok->bos >= 0 && cap > 0 && (n == 0 || out[0] != tok->bos)) {
        /* a template that does not write the BOS its tokenizer always starts with */
        if (n + 1 <= cap) {
            memmove(out + 1, out, n * sizeof *out);
            out[0] = tok->bos;
        }
        n++;
    }
    return n;
}

sm_status sm_chat_tokens(const sm_chat *c, sm_tokenizer *tok, const cJSON *messages, int32_t *out,
                         size_t cap, size_t *n, char **text, size_t *text_len, sm_error *err) {
    char *r;
    size_t rl;
    sm_status st = sm_chat_render(c, messages, true, NULL, &r, &rl, err);
    if (st) return st;
    *n = sm_chat_encode(tok, r, rl, out, cap);
    if (text) *text = r, *text_len = rl;
    else free(r);
    return SM_OK;
}

/* ---- sessions */

struct sm_chat_session {
    const sm_chat *c;
    sm_state *s;
    sm_tokenizer *tok;
    sm_sampler *smp;
    cJSON *msgs;
    size_t n_ctx, max_batch;
    bool window; /* a sliding-window model: its ring cache cannot go back far */
    int32_t *cache; /* (n_ctx) the ids in the cache, positions 0..n_cache-1 */
    size_t n_cache;
    int32_t *ids, *gen; /* (n_ctx + 1) an encoding; (n_ctx) generated ids */
    char *reply;
    size_t reply_len, reply_cap;
    bool reply_nomem;
    sm_emit_fn emit;
    void *user;
};

sm_status sm_chat_session_new(sm_chat_session **out, const sm_chat *c, sm_state *s,
                              sm_tokenizer *tok, sm_sampler *smp, const char *system,
                              sm_error *err) {
    *out = NULL;
    sm_chat_session *cs = calloc(1, sizeof *cs);
    const sm_state_params *sp = sm_state_params_of(s);
    if (!cs) return sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    cs->c = c, cs->s = s, cs->tok = tok, cs->smp = smp;
    cs->n_ctx = sp->n_ctx, cs->max_batch = sp->max_batch;
    cs->window = sm_model_config(sm_state_model(s))->sliding_window > 0;
    cs->cache = malloc(cs->n_ctx * sizeof *cs->cache);
    cs->ids = malloc((cs->n_ctx + 1) * sizeof *cs->ids);
    cs->gen = malloc(cs->n_ctx * sizeof *cs->gen);
    cs->msgs = cJSON_CreateArray();
    if (!cs->cache || !cs->ids || !cs->gen || !cs->msgs ||
        (system && !cJSON_AddItemToArray(cs->msgs, sm_chat_message("system", system, strlen(system))))) {
        sm_chat_session_free(cs);
        return sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    }
    *out = cs;
    return SM_OK;
}

void sm_chat_session_free(sm_chat_session *cs) {
    if (!cs) return;
    cJSON_Delete(cs->msgs);
    free(cs->cache);
    free(cs->ids);
    free(cs->gen);
    free(cs->reply);
    free(cs);
}

const cJSON *sm_chat_session_messages(const sm_chat_session *cs) { return cs->msgs; }

static bool is_role(const cJSON *m, const char *role) {
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "role");
    return cJSON_IsString(r) && !strcmp(r->valuestring, role);
}

sm_status sm_chat_session_set(sm_chat_session *cs, const cJSON *messages, const char *where,
                              const char *system, sm_error *err) {
    cJSON *m;
    if (messages) {
        sm_status st = sm_chat_check_messages(messages, where ? where : "conversation", err);
        if (st) return st;
        if (!(m = cJSON_Duplicate(messages, 1))) return sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    } else if (system) {
        m = cJSON_Duplicate(cs->msgs, 1);
    } else { /* reset: the system message alone */
        m = cJSON_CreateArray();
        if (m && cs->msgs->child && is_role(cs->msgs->child, "system"))
            cJSON_AddItemToArray(m, cJSON_Duplicate(cs->msgs->child, 1));
    }
    if (!m) return sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    if (system) {
        if (m->child && is_role(m->child, "system")) cJSON_DeleteItemFromArray(m, 0);
        cJSON *sys = *system ? sm_chat_message("system", system, strlen(system)) : NULL;
        if (*system && (!sys || !cJSON_InsertItemInArray(m, 0, sys))) {
            cJSON_Delete(sys);
            cJSON_Delete(m);
            return sm_error_set(err, SM_ERR_NOMEM, "out of memory");
        }
    }
    cJSON_Delete(cs->msgs);
    cs->msgs = m;
    return SM_OK;
}

static int collect(void *user, const char *text, size_t len) {
    sm_chat_session *cs = user;
    if (cs->reply_len + len + 1 > cs->reply_cap) {
        size_t cap = cs->reply_cap ? cs->reply_cap : 1024;
        while (cap < cs->reply_len + len + 1) cap *= 2;
        char *r = realloc(cs->reply, cap);
        if (!r) {
            cs->reply_nomem = true;
            return 1;
        }
        cs->reply = r;
        cs->reply_cap = cap;
    }
    memcpy(cs->reply + cs->reply_len, text, len);
    cs->reply_len += len;
    cs->reply[cs->reply_len] = 0;
    return cs->emit ? cs->emit(cs->user, text, len) : 0;
}

/*
** The conversation without its oldest turns: the system message (if first)
** and messages[from..], as references to the session's items (the caller
** deletes only the array).
*/
static cJSON *suffix(cJSON *const *items, int first, int from, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++)
        if ((i < first || i >= from) && !cJSON_AddItemReferenceToArray(a, items[i])) {
            cJSON_Delete(a);
            return NULL;
        }
    return a;
}

/* Tokens of messages rendered for a reply into cs->ids (at most n_ctx + 1 counted). */
static sm_status measure(sm_chat_session *cs, const cJSON *msgs, size_t *n, sm_error *err) {
    return sm_chat_tokens(cs->c, cs->tok, msgs, cs->ids, cs->n_ctx + 1, n, NULL, NULL, err);
}

/*
** Fits the conversation to the context, leaving `reserve` tokens for the
** reply, by dropping its oldest turns after the system message (a turn: a
** message and what follows up to the next user message; the newest message
** stays). The number of turns to drop is found by bisection, in O(log turns)
** renderings of the conversation: fewer messages never render longer. The
** tokens of what is kept are left in cs->ids, their count in *n.
*/
static sm_status fit_context(sm_chat_session *cs, size_t reserve, size_t *n, size_t *dropped,
                             sm_error *err) {
    sm_status st = measure(cs, cs->msgs, n, err);
    if (st || *n + reserve <= cs->n_ctx) return st;
    int total = cJSON_GetArraySize(cs->msgs), first = is_role(cs->msgs->child, "system") ? 1 : 0;
    cJSON **items = malloc((size_t)total * sizeof *items);
    int *starts = malloc((size_t)total * sizeof *starts), k = 0; /* where each shorter conversation starts */
    if (!items || !starts) st = sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    int i = 0;
    for (cJSON *m = cs->msgs->child; !st && m; m = m->next, i++) {
        items[i] = m;
        if (i > first && (is_role(m, "user") || i == total - 1)) starts[k++] = i;
    }
    int lo = 0, hi = k - 1, best = -1; /* the fewest turns dropped that fit: starts[best] */
    while (!st && lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        cJSON *a = suffix(items, first, starts[mid], total);
        size_t m = 0;
        st = a ? measure(cs, a, &m, err) : sm_error_set(err, SM_ERR_NOMEM, "out of memory");
        cJSON_Delete(a);
        if (!st && m + reserve <= cs->n_ctx) best = mid, hi = mid - 1;
        else lo = mid + 1;
    }
    if (!st && best < 0) {
        st = sm_error_set(err, SM_ERR_INPUT,
                          "the conversation with this message is %zu tokens; the context (%zu) "
                          "must hold it and %zu tokens of reply", *n, cs->n_ctx, reserve);
    } else if (!st) {
        for (int d = first; d < starts[best]; d++) cJSON_DeleteItemFromArray(cs->msgs, first);
        *dropped = (size_t)(starts[best] - first);
        st = measure(cs, cs->msgs, n, err); /* the kept conversation's tokens into cs->ids */
    }
    free(items);
    free(starts);
    return st;
}

sm_status sm_chat_session_turn(sm_chat_session *cs, const char *text, size_t len,
                               const sm_gen_params *gp, sm_emit_fn emit, void *user,
                               sm_chat_turn *turn, sm_error *err) {
    memset(turn, 0, sizeof *turn);
    cJSON *um = sm_chat_message("user", text, len);
    if (!um || !cJSON_AddItemToArray(cs->msgs, um)) {
        cJSON_Delete(um);
        return sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    }
    size_t reserve = gp->max_tokens < cs->n_ctx / 4 ? gp->max_tokens : cs->n_ctx / 4;
    if (!reserve) reserve = 1;
    size_t n = 0;
    sm_status st = fit_context(cs, reserve, &n, &turn->n_dropped, err);
    if (st) { /* the message goes (and only it) */
        int last = cJSON_GetArraySize(cs->msgs) - 1;
        if (last >= 0 && cJSON_GetArrayItem(cs->msgs, last) == um) cJSON_DeleteItemFromArray(cs->msgs, last);
        return st;
    }
    turn->n_tokens = n;
    size_t p = 0, lim = cs->n_cache < n ? cs->n_cache : n;
    while (p < lim && cs->cache[p] == cs->ids[p]) p++;
    if (p == n) p = n - 1; /* the last token runs again for its logits */
    if (cs->window && cs->n_cache > p && cs->n_cache - p >= cs->max_batch) p = 0;
    /* the template's end of turn as a stop string, beside the caller's */
    const char *stops[SM_STOP_MAX];
    sm_gen_params g = *gp;
    size_t ns = gp->n_stop < SM_STOP_MAX ? gp->n_stop : SM_STOP_MAX;
    for (size_t i = 0; i < ns; i++) stops[i] = gp->stop[i];
    g.stop = stops, g.n_stop = sm_chat_add_stop(cs->c, stops, ns);
    g.ids = cs->gen, g.ids_cap = cs->n_ctx;
    cs->reply_len = 0;
    cs->reply_nomem = false;
    if (cs->reply) cs->reply[0] = 0;
    cs->emit = emit, cs->user = user;
    cs->n_cache = p; /* until the prefill is known to be done */
    st = sm_generate_from(cs->s, cs->tok, cs->smp, cs->ids, n, p, &g, collect, cs, &turn->gen, err);
    cs->emit = NULL;
    if (st) return st;
    if (cs->reply_nomem) return sm_error_set(err, SM_ERR_NOMEM, "out of memory for the reply");
    size_t k = turn->gen.n_generated;
    if (k || turn->gen.finish != SM_FINISH_INTERRUPTED) { /* the prompt is in the cache */
        memcpy(cs->cache, cs->ids, n * sizeof *cs->ids);
        size_t unfed = turn->gen.n_unfed > 1 ? turn->gen.n_unfed : 1; /* the newest may not have run */
        k = k > unfed ? k - unfed : 0;
        if (n + k > cs->n_ctx) k = cs->n_ctx - n;
        memcpy(cs->cache + n, cs->gen, k * sizeof *cs->gen);
        cs->n_cache = n + k;
    }
    cJSON *am = sm_chat_message("assistant", cs->reply ? cs->reply : "", cs->reply_len);
    if (!am || !cJSON_AddItemToArray(cs->msgs, am)) {
        cJSON_Delete(am);
        return sm_error_set(err, SM_ERR_NOMEM, "out of memory");
    }
    turn->reply = cs->reply ? cs->reply : "";
    turn->reply_len = cs->reply_len;
    return SM_OK;
}

const int32_t *sm_chat_session_cached(const sm_chat_session *cs, size_t *n) {
    *n = cs->n_cache;
    return cs->cache;
}

void sm_chat_session_seed(sm_chat_session *cs, const int32_t *tokens, size_t n) {
    if (n > cs->n_ctx) n = cs->n_ctx;
    memcpy(cs->cache, tokens, n * sizeof *tokens);
    cs->n_cache = n;
}
