/* proxy/log.c - the connection log of the proxy service: one line per
 * decision and per closed connection, and server events (start, reload,
 * drain), as logfmt text or JSON. Lines are buffered and written out once
 * per loop iteration (a terminal is line-buffered). Several loops (the
 * proxy's workers) may write one log: a line is rendered and written under
 * the log's mutex, and each loop flushes it before it waits. */
#include "proxy/server.h"

#include "common/common.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROXY_LOG_BUF (64 * 1024) /* the log is flushed once per loop iteration */

/* The one log record: the same keys, in the same order, in both renderings
 * (README "Connection log"). A field is a key with a string or a number;
 * absent fields are left out of both. */
#define LOG_MAX_FIELDS 24

struct log_field {
    const char *key;
    const char *str; /* NULL: num */
    unsigned long long num;
    size_t klen, len; /* strlen of key and str */
};

struct log_line {
    struct log_field f[LOG_MAX_FIELDS];
    size_t n;
    char time[COMMON_TIME_MAX];
};

static void put_str(struct log_line *l, const char *key, const char *v)
{
    if (v != NULL && v[0] != '\0' && l->n < LOG_MAX_FIELDS)
        l->f[l->n++] = (struct log_field){key, v, 0, strlen(key), strlen(v)};
}

static void put_num(struct log_line *l, const char *key, unsigned long long v)
{
    if (l->n < LOG_MAX_FIELDS)
        l->f[l->n++] = (struct log_field){key, NULL, v, strlen(key), 0};
}

static void line_begin(struct log_line *l, const char *level, const char *event)
{
    l->n = 0;
    put_str(l, "time", common_timestamp(l->time, sizeof(l->time)));
    put_str(l, "level", level);
    put_str(l, "event", event);
}

/* Room render_text() needs for l: the worst case (every byte of every value
 * escaped), counted before, so the writer never checks bounds. */
static size_t text_need(const struct log_line *l)
{
    size_t need = 1; /* the newline */

    for (size_t i = 0; i < l->n; i++) {
        const struct log_field *x = &l->f[i];
        need += 2 + x->klen + (x->str != NULL ? COMMON_LOGFMT_MAX(x->len) : 20);
    }
    return need;
}

/* The logfmt line of l (with its newline) into out, which has
 * text_need(l) bytes; returns its length. In memory, not with stdio: a
 * line is written with one fwrite(), and formatting it field by field with
 * fprintf() was half of the proxy's user-space instructions per tunnel. */
static size_t render_text(char *out, const struct log_line *l)
{
    size_t o = 0;

    for (size_t i = 0; i < l->n; i++) {
        const struct log_field *x = &l->f[i];
        if (i > 0)
            out[o++] = ' ';
        memcpy(out + o, x->key, x->klen);
        o += x->klen;
        out[o++] = '=';
        if (x->str != NULL)
            o += common_logfmt_value(out + o, x->str);
        else
            o += common_utoa(out + o, x->num);
    }
    out[o++] = '\n';
    return o;
}

/* a line on the stack when it fits (nearly always) */
#define LOG_LINE_STACK 2048

static void render_json(FILE *f, const struct log_line *l)
{
    json_t *o = json_object();
    char *text;

    if (o == NULL)
        return;
    for (size_t i = 0; i < l->n; i++) {
        const struct log_field *x = &l->f[i];
        json_object_set_new(o, x->key, x->str != NULL ? json_string(x->str)
                                                     : json_integer((json_int_t)x->num));
    }
    text = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER);
    if (text != NULL) {
        fprintf(f, "%s\n", text);
        free(text);
    }
    json_decref(o);
}

/* The line is rendered before the log's mutex is taken (workers share it)
 * and written under it. */
static void emit(struct proxy_log *lg, const struct log_line *l)
{
    char stack[LOG_LINE_STACK], *out = NULL;
    size_t n = 0, need;

    if (!lg->json) {
        need = text_need(l);
        out = need <= sizeof(stack) ? stack : malloc(need);
        if (out == NULL)
            return;
        n = render_text(out, l);
    }
    uv_mutex_lock(&lg->mu);
    if (lg->json)
        render_json(lg->f, l);
    else
        (void)fwrite(out, 1, n, lg->f);
    /* a log with no loop flushing it (sluice bridge's stderr, run --log)
     * writes each line through */
    if (lg->flush_on)
        lg->dirty = 1;
    else
        fflush(lg->f);
    uv_mutex_unlock(&lg->mu);
    if (out != stack)
        free(out);
}

/* warn for a refusal, info for the rest */
static const char *record_level(const struct connlog *r)
{
    if (r->verdict != NULL && strcmp(r->verdict, "allow") != 0)
        return "warn";
    return "info";
}

static void record_line(struct log_line *l, const struct connlog *r)
{
    line_begin(l, record_level(r), r->event == CONNLOG_DECISION ? "decision" : "close");
    put_num(l, "id", r->id);
    put_str(l, "client", r->client);
    put_str(l, "protocol", r->protocol);
    if (r->host != NULL) {
        put_str(l, "host", r->host);
        if (r->port != 0)
            put_num(l, "port", r->port);
    }
    if (r->terminated)
        put_num(l, "terminated", 1);
    put_str(l, "method", r->method);
    put_str(l, "url", r->url);
    put_str(l, "decision", r->verdict);
    put_str(l, "rule", r->rule);
    put_str(l, "source", r->source);
    put_str(l, "reason", r->reason);
    put_str(l, "hint", r->hint);
    put_str(l, "secret_placeholder", r->secret_placeholder);
    put_str(l, "credential_header", r->credential_header);
    put_str(l, "addr", r->addr);
    if (r->code >= 0)
        put_num(l, "code", (unsigned long long)r->code);
    if (r->event == CONNLOG_CLOSE) {
        put_num(l, "bytes_up", r->bytes_up);
        put_num(l, "bytes_down", r->bytes_down);
        put_num(l, "duration_ms", r->duration_ms);
        put_str(l, "end", r->end);
    }
}

void proxy_log_record(struct proxy_log *lg, const struct connlog *r)
{
    struct log_line l;

    record_line(&l, r);
    emit(lg, &l);
}

long proxy_log_render(const struct connlog *r, char *buf, size_t cap)
{
    struct log_line l;
    char *out;
    size_t n;

    record_line(&l, r);
    out = malloc(text_need(&l));
    if (out == NULL)
        return -1;
    n = render_text(out, &l);
    /* the line without its newline, and its NUL */
    if (n + 1 >= cap) {
        free(out);
        return -1;
    }
    memcpy(buf, out, n - 1);
    buf[n - 1] = '\0';
    free(out);
    return (long)(n - 1);
}

void proxy_log_event(struct proxy_log *lg, const char *level, const char *event, const char *msg)
{
    struct log_line l;

    line_begin(&l, level, event);
    put_str(&l, "message", msg);
    emit(lg, &l);
}

/* Before the loop waits: what was logged during this iteration goes out in
 * one write (a file or a pipe is fully buffered; a terminal line-buffered). */
void proxy_log_flush(struct proxy_log *lg)
{
    uv_mutex_lock(&lg->mu);
    if (lg->dirty) {
        lg->dirty = 0;
        fflush(lg->f);
    }
    uv_mutex_unlock(&lg->mu);
}

static void on_log_flush(uv_prepare_t *h)
{
    proxy_log_flush(h->data);
}

int proxy_log_open(struct proxy_log *lg, const char *path, int json)
{
    memset(lg, 0, sizeof(*lg));
    if (uv_mutex_init(&lg->mu) != 0)
        return -1;
    lg->mu_ok = 1;
    lg->json = json;
    lg->f = stderr;
    if (path != NULL) {
        lg->f = fopen(path, "ae");
        if (lg->f == NULL) {
            lg->f = stderr;
            return -1;
        }
        lg->owned = 1;
    }
    return 0;
}

int proxy_log_reopen(struct proxy_log *lg, const char *path)
{
    FILE *f;
    char msg[600];

    if (path == NULL || !lg->owned)
        return 0;
    f = fopen(path, "ae");
    if (f == NULL) {
        snprintf(msg, sizeof(msg), "cannot reopen the log file, still writing the old one: %s",
                 strerror(errno));
        proxy_log_event(lg, "error", "log_reopen_failed", msg);
        return -1;
    }
    uv_mutex_lock(&lg->mu); /* workers may be writing */
    fflush(lg->f);
    fclose(lg->f);
    lg->f = f;
    proxy_log_buffer(lg);
    lg->dirty = 0;
    uv_mutex_unlock(&lg->mu);
    proxy_log_event(lg, "info", "log_reopened", path);
    return 0;
}

void proxy_log_buffer(struct proxy_log *lg)
{
    static char buf[PROXY_LOG_BUF];

    if (isatty(fileno(lg->f)))
        (void)setvbuf(lg->f, NULL, _IOLBF, BUFSIZ);
    else
        (void)setvbuf(lg->f, buf, _IOFBF, sizeof(buf));
}

static void on_flush_closed(uv_handle_t *h)
{
    (void)h;
}

void proxy_log_start(struct proxy_log *lg, uv_loop_t *loop)
{
    uv_prepare_init(loop, &lg->flush);
    lg->flush.data = lg;
    uv_prepare_start(&lg->flush, on_log_flush);
    uv_unref((uv_handle_t *)&lg->flush);
    lg->flush_on = 1;
}

void proxy_log_buffered(struct proxy_log *lg)
{
    lg->flush_on = 1;
}

void proxy_log_stop(struct proxy_log *lg)
{
    if (!lg->flush_on)
        return;
    lg->flush_on = 0;
    uv_close((uv_handle_t *)&lg->flush, on_flush_closed);
}

void proxy_log_close(struct proxy_log *lg)
{
    if (lg->f == NULL)
        return;
    if (lg->owned)
        fclose(lg->f);
    else
        fflush(lg->f);
    lg->f = NULL;
    if (lg->mu_ok)
        uv_mutex_destroy(&lg->mu);
    lg->mu_ok = 0;
}
