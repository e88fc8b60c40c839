/* proxy/log.c - the connection log of the proxy service: one line per
 * decision and per closed connection, and server events (start, reload,
 * drain), as logfmt text or JSON. Lines are buffered and written out once
 * per loop iteration (a terminal is line-buffered). Single-threaded: the
 * loop that owns the log writes it. */
#include "proxy/server.h"

#include "common/common.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROXY_LOG_BUF (64 * 1024) /* the log is flushed once per loop iteration */

static const char *event_name(const struct connlog *r)
{
    return r->event == CONNLOG_DECISION ? "decision" : "close";
}

static void log_text(struct proxy_log *lg, const struct connlog *r)
{
    char t[COMMON_TIME_MAX], n[32];
    FILE *f = lg->f;

    common_timestamp(t, sizeof(t));
    fprintf(f, "%s id=%llu event=%s", t, (unsigned long long)r->id, event_name(r));
    common_logfmt(f, "client", r->client);
    common_logfmt(f, "proto", r->protocol);
    if (r->host != NULL) {
        common_logfmt(f, "host", r->host);
        snprintf(n, sizeof(n), "%u", (unsigned)r->port);
        common_logfmt(f, "port", n);
    }
    common_logfmt(f, "verdict", r->verdict);
    if (r->rule != NULL && r->rule[0] != '\0')
        common_logfmt(f, "rule", r->rule);
    if (r->reason != NULL && r->reason[0] != '\0')
        common_logfmt(f, "reason", r->reason);
    if (r->addr != NULL && r->addr[0] != '\0')
        common_logfmt(f, "addr", r->addr);
    if (r->code >= 0) {
        snprintf(n, sizeof(n), "%d", r->code);
        common_logfmt(f, "code", n);
    }
    if (r->event == CONNLOG_CLOSE) {
        fprintf(f, " up=%llu down=%llu ms=%llu", (unsigned long long)r->bytes_up,
                (unsigned long long)r->bytes_down, (unsigned long long)r->duration_ms);
        common_logfmt(f, "end", r->end);
    }
    fputc('\n', f);
}

static void log_json(struct proxy_log *lg, const struct connlog *r)
{
    json_t *o = json_object();
    char t[COMMON_TIME_MAX];
    char *text;

    if (o == NULL)
        return;
    json_object_set_new(o, "time", json_string(common_timestamp(t, sizeof(t))));
    json_object_set_new(o, "id", json_integer((json_int_t)r->id));
    json_object_set_new(o, "event", json_string(event_name(r)));
    json_object_set_new(o, "client", json_string(r->client));
    json_object_set_new(o, "protocol", json_string(r->protocol));
    if (r->host != NULL) {
        json_object_set_new(o, "host", json_string(r->host));
        json_object_set_new(o, "port", json_integer(r->port));
    }
    if (r->verdict != NULL)
        json_object_set_new(o, "decision", json_string(r->verdict));
    if (r->rule != NULL && r->rule[0] != '\0')
        json_object_set_new(o, "rule", json_string(r->rule));
    if (r->reason != NULL && r->reason[0] != '\0')
        json_object_set_new(o, "reason", json_string(r->reason));
    if (r->addr != NULL && r->addr[0] != '\0')
        json_object_set_new(o, "addr", json_string(r->addr));
    if (r->code >= 0)
        json_object_set_new(o, "code", json_integer(r->code));
    if (r->event == CONNLOG_CLOSE) {
        json_object_set_new(o, "bytes_up", json_integer((json_int_t)r->bytes_up));
        json_object_set_new(o, "bytes_down", json_integer((json_int_t)r->bytes_down));
        json_object_set_new(o, "duration_ms", json_integer((json_int_t)r->duration_ms));
        json_object_set_new(o, "end", json_string(r->end));
    }
    text = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
    if (text != NULL) {
        fprintf(lg->f, "%s\n", text);
        free(text);
    }
    json_decref(o);
}

void proxy_log_record(struct proxy_log *lg, const struct connlog *r)
{
    if (lg->json)
        log_json(lg, r);
    else
        log_text(lg, r);
    lg->dirty = 1;
}

void proxy_log_event(struct proxy_log *lg, const char *event, const char *msg)
{
    char t[COMMON_TIME_MAX];

    common_timestamp(t, sizeof(t));
    if (lg->json) {
        json_t *o = json_pack("{s:s, s:s, s:s}", "time", t, "event", event, "message", msg);
        char *text = o != NULL ? json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
        if (text != NULL)
            fprintf(lg->f, "%s\n", text);
        free(text);
        json_decref(o);
    } else {
        fprintf(lg->f, "%s event=%s", t, event);
        common_logfmt(lg->f, "message", msg);
        fputc('\n', lg->f);
    }
    lg->dirty = 1;
}

/* Before the loop waits: what was logged during this iteration goes out in
 * one write (a file or a pipe is fully buffered; a terminal line-buffered). */
static void on_log_flush(uv_prepare_t *h)
{
    struct proxy_log *lg = h->data;

    if (lg->dirty) {
        lg->dirty = 0;
        fflush(lg->f);
    }
}

int proxy_log_open(struct proxy_log *lg, const char *path, int json)
{
    static char buf[PROXY_LOG_BUF];

    memset(lg, 0, sizeof(*lg));
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
    if (isatty(fileno(lg->f)))
        (void)setvbuf(lg->f, NULL, _IOLBF, BUFSIZ);
    else
        (void)setvbuf(lg->f, buf, _IOFBF, sizeof(buf));
    return 0;
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
}
