/*
** batch_io.c -- what `generate --batch` reads and writes, apart from the
** model: input lines as they arrive (a file, a pipe, a FIFO or stdin), the
** keys that name records (for duplicates and --resume), result files that
** take whole lines only, and reading a results file back for --resume.
**
** Input is read in chunks straight from the descriptor and cut into lines;
** a caller that has other work asks with a zero timeout and gets a line only
** if one is complete, so a worker answers each line as soon as it arrives.
** A result line is written with one write() (looped on short writes) to a
** descriptor opened with O_APPEND, so a kill leaves whole lines, and at most
** one torn last line after a crash of the machine: --resume cuts it off.
*/
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json_internal.h"

#define MAX_LINE_BYTES ((size_t)256 << 20)
#define CHUNK ((size_t)1 << 16)

/* ---- input lines */

int cli_reader_open(cli_reader *r, const char *path) {
    *r = (cli_reader){.fd = -1, .name = path};
    if (strcmp(path, "-") == 0) {
        r->fd = STDIN_FILENO;
        r->name = "stdin";
    } else if ((r->fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
        fprintf(stderr, "smallmind: cannot open '%s': %s\n", path, strerror(errno));
        return EXIT_DATA;
    } else {
        r->own = true;
    }
    struct stat sb;
    if (fstat(r->fd, &sb) == 0) {
        r->regular = S_ISREG(sb.st_mode);
        r->dev = sb.st_dev, r->ino = sb.st_ino;
        if (S_ISDIR(sb.st_mode)) {
            fprintf(stderr, "smallmind: cannot read '%s': it is a directory\n", path);
            cli_reader_close(r);
            return EXIT_DATA;
        }
    }
    return 0;
}

void cli_reader_close(cli_reader *r) {
    if (r->own && r->fd >= 0) close(r->fd);
    free(r->buf);
    r->buf = NULL;
    r->fd = -1;
}

/* Reads once into the buffer (room made first). 1 read something or hit the end, 0 nothing now,
   -1 error (printed). */
static int fill(cli_reader *r, int timeout_ms) {
    if (!r->regular) {
        struct pollfd p = {.fd = r->fd, .events = POLLIN};
        int k = poll(&p, 1, timeout_ms);
        if (k < 0 && errno != EINTR) {
            fprintf(stderr, "smallmind: cannot read '%s': %s\n", r->name, strerror(errno));
            return -1;
        }
        if (k <= 0) return 0; /* nothing yet, or a signal: the caller looks at cli_interrupted */
    }
    if (r->lo > 0) { /* keep the unread bytes at the start */
        memmove(r->buf, r->buf + r->lo, r->hi - r->lo);
        r->hi -= r->lo, r->scan -= r->lo, r->lo = 0;
    }
    if (r->cap - r->hi < CHUNK) {
        size_t cap = r->cap ? r->cap * 2 : 4 * CHUNK;
        if (r->hi >= MAX_LINE_BYTES) {
            fprintf(stderr, "smallmind: '%s' line %zu is longer than %zu MB\n", r->name, r->lineno + 1,
                    MAX_LINE_BYTES >> 20);
            return -1;
        }
        char *nb = realloc(r->buf, cap);
        if (!nb) {
            fprintf(stderr, "smallmind: out of memory reading '%s'\n", r->name);
            return -1;
        }
        r->buf = nb, r->cap = cap;
    }
    ssize_t got = read(r->fd, r->buf + r->hi, r->cap - r->hi);
    if (got < 0) {
        if (errno == EINTR || errno == EAGAIN) return 0;
        fprintf(stderr, "smallmind: cannot read '%s': %s\n", r->name, strerror(errno));
        return -1;
    }
    if (got == 0) r->eof = true;
    r->hi += (size_t)got;
    return 1;
}

int cli_reader_next(cli_reader *r, int timeout_ms, const char **line, size_t *n) {
    for (;;) {
        char *nl = r->hi > r->scan ? memchr(r->buf + r->scan, '\n', r->hi - r->scan) : NULL;
        if (nl || (r->eof && r->hi > r->lo)) {
            size_t end = nl ? (size_t)(nl - r->buf) : r->hi;
            *line = r->buf + r->lo;
            *n = end - r->lo;
            if (*n && (*line)[*n - 1] == '\r') --*n;
            size_t next = nl ? end + 1 : end;
            r->pos += (off_t)(next - r->lo);
            r->lo = r->scan = next;
            r->had_newline = nl != NULL;
            r->lineno++;
            return 1;
        }
        r->scan = r->hi;
        if (r->eof) return 0;
        int k = fill(r, timeout_ms);
        if (k < 0) return -1;
        if (k == 0 && (timeout_ms >= 0 || cli_interrupted)) return 0;
    }
}

/* ---- keys: a multiset of strings, with the line each was first seen on */

static uint64_t hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static cli_key *find(cli_keys *k, const char *key, bool add) {
    if (add && (k->n + 1) * 4 > k->cap * 3) { /* grow to keep the table under 3/4 full */
        size_t cap = k->cap ? k->cap * 2 : 1024;
        cli_key *t = calloc(cap, sizeof *t);
        if (!t) return NULL;
        for (size_t i = 0; i < k->cap; i++) {
            if (!k->t[i].key) continue;
            size_t j = hash(k->t[i].key) & (cap - 1);
            while (t[j].key) j = (j + 1) & (cap - 1);
            t[j] = k->t[i];
        }
        free(k->t);
        k->t = t, k->cap = cap;
    }
    if (!k->cap) return NULL;
    size_t j = hash(key) & (k->cap - 1);
    while (k->t[j].key && strcmp(k->t[j].key, key) != 0) j = (j + 1) & (k->cap - 1);
    if (k->t[j].key || !add) return k->t[j].key ? &k->t[j] : NULL;
    if (!(k->t[j].key = strdup(key))) return NULL;
    k->n++;
    return &k->t[j];
}

cli_key *cli_keys_add(cli_keys *k, const char *key, size_t line) {
    cli_key *e = find(k, key, true);
    if (e && e->count++ == 0) e->line = line;
    return e;
}

size_t cli_keys_count(cli_keys *k, const char *key) {
    cli_key *e = find(k, key, false);
    return e ? e->count : 0;
}

bool cli_keys_take(cli_keys *k, const char *key) {
    cli_key *e = find(k, key, false);
    if (!e || e->count == 0) return false;
    e->count--;
    return true;
}

void cli_keys_free(cli_keys *k) {
    for (size_t i = 0; i < k->cap; i++) free(k->t[i].key);
    free(k->t);
    *k = (cli_keys){0};
}

void cli_record_key(char *out, size_t cap, sm_rec_kind kind, const char *id, size_t line) {
    if (kind == SM_REC_TEXT || kind == SM_REC_JSON) {
        if (kind == SM_REC_JSON && *id) snprintf(out, cap, "i:%s", id);
        else snprintf(out, cap, "i:%zu", line);
    } else if (*id) {
        snprintf(out, cap, "c:%s", id);
    } else {
        snprintf(out, cap, "l:%zu", line);
    }
}

/* ---- result files */

int cli_sink_open(cli_sink *s, const char *path, bool append) {
    *s = (cli_sink){.fd = -1, .path = path};
    if (!path) {
        s->fd = STDOUT_FILENO;
        return 0;
    }
    s->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (append ? 0 : O_TRUNC), 0644);
    if (s->fd < 0) {
        fprintf(stderr, "smallmind: cannot write '%s': %s\n", path, strerror(errno));
        return EXIT_DATA;
    }
    return 0;
}

int cli_sink_write(cli_sink *s, cli_out *os, const char *p, size_t n) {
    if (!s->path) return cli_out_write(os, p, n);
    if (s->err) return 1;
    while (n > 0) {
        ssize_t w = write(s->fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) {
            s->err = errno;
            fprintf(stderr, "smallmind: cannot write '%s': %s\n", s->path, strerror(errno));
            return 1;
        }
        p += w, n -= (size_t)w;
    }
    return 0;
}

int cli_sink_close(cli_sink *s) {
    int rc = s->err ? EXIT_DATA : 0;
    if (s->path && s->fd >= 0) {
        if (!s->err && fsync(s->fd) != 0 && errno != EINVAL) rc = EXIT_DATA;
        if (close(s->fd) != 0 && !rc) rc = EXIT_DATA;
        if (rc && !s->err) fprintf(stderr, "smallmind: cannot write '%s': %s\n", s->path, strerror(errno));
    }
    s->fd = -1;
    return rc;
}

/* The key of one result line (JSON), or why it is not one of ours; *failed: an error result. */
static const char *result_key(const char *line, size_t n, char *key, size_t cap, bool *failed) {
    static char why[160];
    cJSON *root = NULL;
    sm_error err = {{0}};
    if (sm_json_parse_strict(line, n, NULL, &root, &err) || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        snprintf(why, sizeof why, "not a JSON object");
        return why;
    }
    const cJSON *custom = cJSON_GetObjectItemCaseSensitive(root, "custom_id");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(root, "id");
    const cJSON *error = cJSON_GetObjectItemCaseSensitive(root, "error");
    const cJSON *resp = cJSON_GetObjectItemCaseSensitive(root, "response");
    const cJSON *code = cJSON_IsObject(resp) ? cJSON_GetObjectItemCaseSensitive(resp, "status_code") : NULL;
    *failed = (error && !cJSON_IsNull(error)) || (code && !(cJSON_IsNumber(code) && code->valuedouble == 200));
    char text[SM_REC_ID_MAX];
    const char *bad = NULL;
    size_t ln;
    if (custom && !cJSON_IsNull(custom)) {
        if (!cJSON_PrintPreallocated((cJSON *)custom, text, (int)sizeof text - 8, false)) bad = "a custom_id too long";
        else snprintf(key, cap, "c:%s", text);
    } else if (custom) { /* a line without a custom_id: keyed by its line, in "batch_req_<line>" */
        if (!cJSON_IsString(id) || sscanf(id->valuestring, "batch_req_%zu", &ln) != 1) bad = "no custom_id and no batch_req_ id";
        else snprintf(key, cap, "l:%zu", ln);
    } else if (id && (cJSON_IsString(id) || cJSON_IsNumber(id))) {
        if (!cJSON_PrintPreallocated((cJSON *)id, text, (int)sizeof text - 8, false)) bad = "an id too long";
        else snprintf(key, cap, "i:%s", text);
    } else {
        bad = "no \"id\" or \"custom_id\"";
    }
    cJSON_Delete(root);
    if (bad) snprintf(why, sizeof why, "%s", bad);
    return bad ? why : NULL;
}

int cli_resume_scan(const char *path, cli_keys *done, size_t *n_lines, size_t *n_failed, bool quiet) {
    *n_lines = *n_failed = 0;
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) return 0; /* nothing done yet */
    if (fd < 0) {
        fprintf(stderr, "smallmind: cannot open '%s' to resume: %s\n", path, strerror(errno));
        return EXIT_DATA;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fprintf(stderr, "smallmind: --resume needs '%s' to be a regular file\n", path);
        close(fd);
        return EXIT_DATA;
    }
    cli_reader r = {.fd = fd, .name = path, .regular = true};
    const char *line;
    size_t n;
    off_t good = 0; /* bytes up to the end of the last whole line */
    int rc = 0, k;
    char key[SM_REC_ID_MAX + 8];
    while (!rc && (k = cli_reader_next(&r, -1, &line, &n)) == 1) {
        if (!r.had_newline) break; /* the torn last line */
        good = r.pos;
        if (n == 0) continue;
        bool failed = false;
        const char *why = result_key(line, n, key, sizeof key, &failed);
        if (why) {
            fprintf(stderr, "smallmind: '%s' line %zu is not a result line (%s); not resuming into it\n",
                    path, r.lineno, why);
            rc = EXIT_DATA;
        } else if (!cli_keys_add(done, key, r.lineno)) {
            rc = cli_data_error("out of memory reading the results to resume");
        } else {
            ++*n_lines;
            *n_failed += failed;
        }
    }
    if (k < 0) rc = EXIT_DATA;
    if (!rc && good < sb.st_size) { /* cut the torn line off: its record runs again */
        if (ftruncate(fd, good) != 0) {
            fprintf(stderr, "smallmind: cannot cut the torn last line of '%s': %s\n", path, strerror(errno));
            rc = EXIT_DATA;
        } else if (!quiet) {
            fprintf(stderr, "smallmind: '%s' ended in a torn line (%lld bytes), dropped; its record runs again\n",
                    path, (long long)sb.st_size - (long long)good);
        }
    }
    free(r.buf);
    close(fd);
    return rc;
}
