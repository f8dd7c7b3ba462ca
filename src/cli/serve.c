/*
** serve.c -- `smallmind serve`: the OpenAI API over HTTP on libmicrohttpd
** (a thread per connection), in front of the worker (serve_work.c).
**
** Endpoints: POST /v1/chat/completions and /v1/completions (streamed as
** server-sent events with "stream": true), GET /v1/models, GET /health,
** GET /metrics (Prometheus text), POST /tokenize and /detokenize
** (llama-server's shapes); the /v1 prefix is optional. Safe by default:
** 127.0.0.1 unless --host says otherwise; --api-key checked in constant
** time on every endpoint but /health; bodies (4 MB), headers (libmicrohttpd's
** connection memory, 64 KB), connections (256), idle connections (10 s:
** slow clients are cut) and messages (2048) bounded; every bad request gets
** a 4xx in OpenAI's error shape. A non-streamed completion waits in its
** connection's thread, watching the socket: a client that goes away frees
** its slot at once. SIGINT or SIGTERM stops accepting, cancels what is in
** flight and exits 0.
*/
#define _GNU_SOURCE /* POLLRDHUP, vasprintf */
#include "serve.h"

#include <errno.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "json_internal.h"
#include "sm_oai.h"

#define MAX_CONNECTIONS 256
#define IDLE_SECONDS 10

static server S;

/* The request being read on a connection. */
typedef struct {
    char *body;
    size_t len, cap;
    bool too_big;
    sreq *q;           /* a completion queued for the worker */
    int fd;            /* the client's socket, to notice it leave */
} conn;

static long n_in_flight; /* requests begun and not yet completed (their conn alive) */

/* A streamed response's state: bytes formatted and not yet given to libmicrohttpd. */
typedef struct {
    sreq *q;
    int fd;
    char *out;
    size_t n, off;
    bool end;
} stream;

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type, char *body, size_t len) {
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", type);
    enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result fail(struct MHD_Connection *c, unsigned status, const char *msg, const char *param,
                            const char *code) {
    size_t len = 0;
    const char *type = status == 401 ? "invalid_request_error" : status >= 500 ? "server_error"
                       : "invalid_request_error";
    char *b = serve_error_json(msg, type, param, code, &len);
    return b ? reply(c, status, "application/json", b, len) : MHD_NO;
}

static enum MHD_Result json_reply(struct MHD_Connection *c, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static enum MHD_Result json_reply(struct MHD_Connection *c, unsigned status, const char *fmt, ...) {
    char *b = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&b, fmt, ap);
    va_end(ap);
    if (n < 0) return MHD_NO;
    return reply(c, status, "application/json", b, (size_t)n);
}

/* Whether the client at fd has gone (closed or reset its end). */
static bool client_gone(int fd) {
    if (fd < 0) return false;
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
    char c;
    return (p.revents & POLLIN) && recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* Waits on q until ready(q) (q->mu held): every 50 ms the socket is looked at. false: the client left. */
static bool wait_for(sreq *q, int fd, bool (*ready)(const sreq *)) {
    while (!ready(q)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000000;
        if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&q->cv, &q->mu, &ts);
        if (!ready(q) && client_gone(fd)) return false;
    }
    return true;
}

static bool is_done(const sreq *q) {
    return q->done;
}


static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream *st = cls;
    while (st->off == st->n) {
        free(st->out);
        st->out = NULL, st->n = st->off = 0;
        if (st->end) return MHD_CONTENT_READER_END_OF_STREAM;
        sreq *q = st->q;
        pthread_mutex_lock(&q->mu);
        bool here = wait_for(q, st->fd, serve_has_more);
        if (here) st->out = serve_chunks(&S, q, &st->n, &st->end);
        pthread_mutex_unlock(&q->mu);
        if (!here) {
            serve_cancel(&S, q);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        if (!st->out) st->n = 0;
    }
    size_t k = st->n - st->off < max ? st->n - st->off : max;
    memcpy(buf, st->out + st->off, k);
    st->off += k;
    return (ssize_t)k;
}

static void stream_free(void *cls) {
    stream *st = cls;
    free(st->out);
    sreq_release(st->q);
    free(st);
}

/* Whether the request carries the API key (compared in constant time). */
static bool authorized(struct MHD_Connection *c) {
    const char *key = S.api_key;
    if (!key) return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncmp(h, "Bearer ", 7) != 0) return false;
    h += 7;
    size_t n = strlen(key), m = strlen(h);
    unsigned char diff = (unsigned char)(n != m);
    for (size_t i = 0; i < n; i++) diff |= (unsigned char)(key[i] ^ h[i < m ? i : 0]);
    return diff == 0;
}

static bool utf8_ok(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        size_t need = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : (c & 0xF0) == 0xE0 ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        if (!need || i + need > n) return false;
        for (size_t k = 1; k < need; k++)
            if (((unsigned char)s[i + k] & 0xC0) != 0x80) return false;
        unsigned char d = (unsigned char)s[i + 1];
        if (need > 1 && ((c == 0xE0 && d < 0xA0) || (c == 0xED && d > 0x9F) || (c == 0xF0 && d < 0x90) || (c == 0xF4 && d > 0x8F)))
            return false;
        i += need;
    }
    return true;
}

static uint64_t fresh_seed(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    static uint64_t n;
    return ((uint64_t)ts.tv_nsec * 6364136223846793005ull) ^ (uint64_t)ts.tv_sec ^ (__atomic_add_fetch(&n, 1, __ATOMIC_RELAXED) << 40);
}

/* POST /v1/chat/completions or /v1/completions. */
static enum MHD_Result completion(struct MHD_Connection *c, conn *k, bool chat) {
    if (!utf8_ok(k->body, k->len)) return fail(c, 400, "the request body is not valid UTF-8", NULL, NULL);
    cJSON *root = NULL;
    sm_error err = {{0}};
    if (sm_json_parse_strict(k->body, k->len, NULL, &root, &err))
        return fail(c, 400, err.msg, NULL, "invalid_json");
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return fail(c, 400, "the request body must be a JSON object", NULL, "invalid_json");
    }
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(root, "messages");
    if (cJSON_IsArray(msgs) && cJSON_GetArraySize(msgs) > SERVE_MAX_MESSAGES) {
        cJSON_Delete(root);
        return fail(c, 400, "too many messages (at most 2048)", "messages", NULL);
    }
    sreq *q = sreq_new();
    if (!q || !(q->prompt_buf = malloc(k->len + 1))) {
        cJSON_Delete(root);
        sreq_release(q);
        return fail(c, 500, "out of memory", NULL, NULL);
    }
    q->rec.sampling = S.defaults;
    if (S.random_seed) q->rec.sampling.seed = fresh_seed();
    q->rec.top_logprobs = -1;
    sm_status st = sm_oai_parse_body(root, chat ? SM_REC_OAI_CHAT : SM_REC_OAI_COMPLETION, q->prompt_buf, k->len,
                                     &q->rec, &err);
    cJSON_Delete(root);
    if (st) {
        enum MHD_Result r = fail(c, 400, err.msg, q->rec.param[0] ? q->rec.param : NULL, NULL);
        sreq_release(q);
        return r;
    }
    if (S.o->alias && q->rec.model[0] && strcmp(q->rec.model, S.o->alias) != 0) {
        char msg[400];
        snprintf(msg, sizeof msg, "The model '%s' does not exist (this server serves '%s')", q->rec.model, S.o->alias);
        sreq_release(q);
        return fail(c, 404, msg, "model", "model_not_found");
    }
    q->stream = q->rec.stream, q->include_usage = q->rec.include_usage;
    q->logprobs = q->rec.top_logprobs >= 0, q->top_logprobs = q->rec.top_logprobs < 0 ? 0 : q->rec.top_logprobs;
    static unsigned long long serial;
    snprintf(q->id, sizeof q->id, "%s-%llx%llx", chat ? "chatcmpl" : "cmpl", (unsigned long long)time(NULL),
             __atomic_add_fetch(&serial, 1, __ATOMIC_RELAXED));
    q->created = (long long)time(NULL);
    char msg[400];
    int bad = serve_choices(&S, q, msg, sizeof msg);
    if (bad) {
        enum MHD_Result r = fail(c, (unsigned)bad, msg, q->param[0] ? q->param : NULL, NULL);
        sreq_release(q);
        return r;
    }
    if (!serve_submit(&S, q)) {
        sreq_release(q);
        return fail(c, 503, "the server is busy: too many requests are waiting (try again later)", NULL,
                    "server_overloaded");
    }
    k->q = q;
    q->refs++; /* the connection's, until the response is done */
    pthread_mutex_lock(&q->mu);
    bool here = wait_for(q, k->fd, q->stream ? serve_has_more : is_done);
    bool failed = q->done && q->error[0] && !serve_has_sent(q);
    pthread_mutex_unlock(&q->mu);
    if (!here) {
        serve_cancel(&S, q);
        sreq_release(q);
        return MHD_NO; /* the client left: close */
    }
    if (!q->stream || failed) {
        size_t len = 0;
        pthread_mutex_lock(&q->mu);
        char *body = serve_body(&S, q, &len);
        int status = q->error[0] ? (q->status == 499 ? 400 : q->status) : 200;
        pthread_mutex_unlock(&q->mu);
        sreq_release(q);
        return body ? reply(c, (unsigned)status, "application/json", body, len) : MHD_NO;
    }
    stream *sp = calloc(1, sizeof *sp);
    if (!sp) {
        sreq_release(q);
        return MHD_NO;
    }
    sp->q = q, sp->fd = k->fd;
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, sp, stream_free);
    if (!r) {
        stream_free(sp);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    enum MHD_Result ok = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result models(struct MHD_Connection *c) {
    char name[2 * SM_REC_MODEL_MAX];
    FILE *f = fmemopen(name, sizeof name, "w");
    if (!f) return MHD_NO;
    cli_json_string(f, (const unsigned char *)S.model_name, strlen(S.model_name));
    fputc('\0', f);
    fclose(f);
    return json_reply(c, 200, "{\"object\": \"list\", \"data\": [{\"id\": \"%s\", \"object\": \"model\", "
                              "\"created\": %lld, \"owned_by\": \"smallmind\"}]}\n",
                      name, (long long)time(NULL));
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                               const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)cls, (void)version;
    conn *k = *con_cls;
    if (!k) { /* the headers are in: the body follows */
        if (!(k = calloc(1, sizeof *k))) return MHD_NO;
        __atomic_add_fetch(&n_in_flight, 1, __ATOMIC_SEQ_CST);
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        k->fd = ci ? ci->connect_fd : -1;
        *con_cls = k;
        return MHD_YES;
    }
    if (*upload_size) {
        if (!k->too_big && k->len + *upload_size > SERVE_MAX_BODY) k->too_big = true;
        if (!k->too_big) {
            if (k->len + *upload_size + 1 > k->cap) {
                size_t cap = k->cap ? k->cap : 4096;
                while (cap < k->len + *upload_size + 1) cap *= 2;
                char *b = realloc(k->body, cap);
                if (!b) return MHD_NO;
                k->body = b, k->cap = cap;
            }
            memcpy(k->body + k->len, upload, *upload_size);
            k->len += *upload_size;
            k->body[k->len] = '\0';
        }
        *upload_size = 0;
        return MHD_YES;
    }
    const char *path = strncmp(url, "/v1/", 4) == 0 ? url + 3 : url;
    bool post = strcmp(method, "POST") == 0, get = strcmp(method, "GET") == 0;
    if (strcmp(path, "/health") == 0) {
        if (!get) return fail(c, 405, "use GET", NULL, NULL);
        return json_reply(c, 200, "{\"status\": \"ok\"}\n");
    }
    if (!authorized(c)) return fail(c, 401, "Incorrect API key provided", NULL, "invalid_api_key");
    if (k->too_big) return fail(c, 413, "the request body is larger than 4 MB", NULL, NULL);
    bool chat = strcmp(path, "/chat/completions") == 0;
    if (chat || strcmp(path, "/completions") == 0) {
        if (!post) return fail(c, 405, "use POST", NULL, NULL);
        if (!k->body) return fail(c, 400, "a JSON body is required", NULL, "invalid_json");
        return completion(c, k, chat);
    }
    if (strcmp(path, "/models") == 0) {
        if (!get) return fail(c, 405, "use GET", NULL, NULL);
        return models(c);
    }
    if (strcmp(path, "/metrics") == 0) {
        if (!get) return fail(c, 405, "use GET", NULL, NULL);
        size_t len = 0;
        char *m = serve_metrics(&S, &len);
        return m ? reply(c, 200, "text/plain; version=0.0.4", m, len) : MHD_NO;
    }
    bool detok = strcmp(path, "/detokenize") == 0;
    if (detok || strcmp(path, "/tokenize") == 0) {
        if (!post) return fail(c, 405, "use POST", NULL, NULL);
        if (!k->body || !utf8_ok(k->body, k->len)) return fail(c, 400, "a UTF-8 JSON body is required", NULL, NULL);
        size_t len = 0;
        int status = 400;
        char msg[400];
        char *b = serve_tokenize(&S, k->body, k->len, detok, &len, &status, msg, sizeof msg);
        return b ? reply(c, 200, "application/json", b, len) : fail(c, (unsigned)status, msg, NULL, NULL);
    }
    return fail(c, 404, "no such endpoint", NULL, "not_found");
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)cls, (void)c;
    conn *k = *con_cls;
    if (!k) return;
    if (k->q) {
        if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK) serve_cancel(&S, k->q);
        sreq_release(k->q);
    }
    free(k->body);
    free(k);
    *con_cls = NULL;
    __atomic_sub_fetch(&n_in_flight, 1, __ATOMIC_SEQ_CST);
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
    (void)cls, (void)fmt, (void)ap; /* its messages are about single connections: not ours to print */
}

int cli_serve(const cli_opts *o) {
    memset(&S, 0, sizeof S);
    S.o = o;
    pthread_mutex_init(&S.mu, NULL);
    pthread_mutex_init(&S.tok_mu, NULL);
    pthread_cond_init(&S.cv, NULL);
    const char *host = o->host ? o->host : "127.0.0.1";
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1)
        return cli_usage_error(o, "--host expects an IPv4 address such as 127.0.0.1, got '%s'", host);
    size_t P = o->parallel ? (size_t)o->parallel : 8;
    S.queue_max = o->queue ? (size_t)o->queue : 256; /* as many as the connections */
    S.defaults = cli_sampling(o, cli_seed(o->seed));
    S.random_seed = !CLI_GIVEN(o, O_SEED);
    S.api_key = o->api_key;
    if (!S.api_key && getenv("SMALLMIND_API_KEY") && *getenv("SMALLMIND_API_KEY")) S.api_key = getenv("SMALLMIND_API_KEY");
    sm_sched_params sched = {.done = serve_on_done, .piece = serve_on_piece, .token = serve_on_token, .user = &S};
    cli_run_spec spec = {.max_batch = 512, .n_seq = P, .sampling = &S.defaults, .sched = &sched,
                         .cache_bytes = (size_t)o->cache_mib << 20, .build_state = true};
    int rc = cli_runner_init(&S.r, o, &spec);
    if (rc) return rc;
    const char *slash = strrchr(o->model, '/');
    snprintf(S.model_name, sizeof S.model_name, "%s", o->alias ? o->alias : slash && slash[1] ? slash + 1 : o->model);
    if ((rc = serve_work_start(&S))) {
        cli_runner_free(&S.r);
        return rc;
    }
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC | MHD_USE_ERROR_LOG,
        (uint16_t)o->port, NULL, NULL, handler, NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)MAX_CONNECTIONS, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)IDLE_SECONDS, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)65536, MHD_OPTION_NOTIFY_COMPLETED,
        completed, NULL, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_LISTENING_ADDRESS_REUSE,
        (unsigned)1, MHD_OPTION_END);
    if (!d) {
        int e = errno;
        serve_work_stop(&S);
        cli_runner_free(&S.r);
        fprintf(stderr, "smallmind: cannot listen on %s:%ld: %s\n", host, o->port, strerror(e ? e : EADDRINUSE));
        return EXIT_DATA;
    }
    if (!o->quiet)
        fprintf(stderr, "smallmind: serving %s on http://%s:%ld/v1 (%zu in parallel, %s)\n", S.model_name, host,
                o->port, P, S.api_key ? "an API key required" : "no API key");
    cli_exit_now = 0; /* a signal stops the server (below), a second one exits at once */
    /* any thread may take the signal (the handler only sets the flag): look at it every 0.1 s */
    while (!cli_interrupted) usleep(100000);
    MHD_quiesce_daemon(d); /* no new connections */
    serve_work_stop(&S);   /* in-flight requests cancelled: their connections finish */
    /* let their last bytes (a stream's final chunk) go out, for a second at most */
    for (int i = 0; i < 100 && __atomic_load_n(&n_in_flight, __ATOMIC_SEQ_CST) > 0; i++) usleep(10000);
    MHD_stop_daemon(d);
    cli_runner_free(&S.r);
    if (!o->quiet) fprintf(stderr, "smallmind: stopped\n");
    return 0;
}
