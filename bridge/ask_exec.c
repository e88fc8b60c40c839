/* bridge/ask_exec.c - the exec ask handler: one child per question, at most
 * ASK_EXEC_RUNNING at once (see ask_handler.c for the design). */
#include "bridge/ask_handler-int.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/common.h"

/* ------------------------------------------------------------------------ */
/* exec                                                                      */

static void exec_pump(struct ask_handler *h);

static void on_job_closed(uv_handle_t *hd)
{
    struct ask_job *job = hd->data;
    struct ask_handler *h = job->h;

    h->live--;
    if (++job->nclosed < 3)
        return;
    if (h->exec.jobs == job)
        h->exec.jobs = job->next;
    else
        job->prev->next = job->next;
    if (job->next != NULL)
        job->next->prev = job->prev;
    h->exec.running--;
    free(job->text);
    free(job);
    if (!h->closing)
        exec_pump(h);
    ask__handler_maybe_done(h);
}

static void job_close_handle(uv_handle_t *hd)
{
    if (!uv_is_closing(hd))
        uv_close(hd, on_job_closed);
}

/* Ends a job: a running child is killed first and its handles are closed
 * once it has been reaped (the exit callback calls back here). */
void ask__job_close(struct ask_job *job)
{
    if (!job->exited) {
        if (!job->killed) {
            job->killed = 1;
            (void)uv_process_kill(&job->proc, SIGKILL);
        }
        return;
    }
    job_close_handle((uv_handle_t *)&job->in);
    job_close_handle((uv_handle_t *)&job->out);
    job_close_handle((uv_handle_t *)&job->proc);
}

/* A first line (without its newline) from the child. */
static void job_parse_line(struct ask_job *job, size_t n)
{
    const char *s = job->buf, *sp;
    json_t *root = NULL;
    const char *reason = NULL;
    uint64_t id = 0;
    int has_id = 0;

    if (n > 0 && s[n - 1] == '\r')
        n--;
    job->line = JOB_LINE_MALFORMED;
    if (n == 0 || memchr(s, '\0', n) != NULL)
        return;
    if (s[0] == '{') {
        if (ask__answer_json(s, n, 0, &root, &id, &has_id, &job->d, &reason) < 0)
            return;
        if (!has_id || (job->item != NULL && id == job->item->id)) {
            job->line = JOB_LINE_ANSWER;
            if (reason != NULL) {
                ask__reason_copy(job->reason, reason, strlen(reason));
                job->has_reason = 1;
            }
        }
        json_decref(root);
        return;
    }
    sp = memchr(s, ' ', n);
    if (ask_decision_parse(s, sp != NULL ? (size_t)(sp - s) : n, &job->d) < 0)
        return;
    job->line = JOB_LINE_ANSWER;
    if (sp != NULL && (size_t)(sp + 1 - s) < n) {
        ask__reason_copy(job->reason, sp + 1, n - (size_t)(sp + 1 - s));
        job->has_reason = 1;
    }
}

/* Decides once the child has exited (and, for status 0, its line is known). */
static void job_check(struct ask_job *job)
{
    struct ask_handler *h = job->h;
    struct ask_item *it = job->item;
    char why[128];
    const char *reason = why;
    enum ask_decision d = ASK_DENY;

    if (it == NULL) { /* withdrawn, answered, or the handler is closing */
        if (job->exited)
            ask__job_close(job);
        return;
    }
    if (!job->exited || job->decided)
        return;
    if (job->term_signal != 0) {
        snprintf(why, sizeof(why), "ask program killed by signal %d", job->term_signal);
    } else if (job->status != 0) {
        snprintf(why, sizeof(why), "ask program exited with status %lld", (long long)job->status);
    } else {
        switch (job->line) {
        case JOB_LINE_READING:
            return; /* wait for the newline or EOF */
        case JOB_LINE_ANSWER:
            d = job->d;
            reason = job->has_reason ? job->reason : NULL;
            break;
        case JOB_LINE_NONE:
            reason = "ask program gave no answer";
            break;
        case JOB_LINE_MALFORMED:
            reason = "ask program gave a malformed answer";
            break;
        case JOB_LINE_TOOLONG:
            reason = "ask program's answer is too long";
            break;
        case JOB_LINE_ERROR:
            reason = "cannot read the ask program's answer";
            break;
        }
    }
    job->decided = 1;
    job->item = NULL;
    it->job = NULL;
    ask__job_close(job);
    ask__item_answer(h, it, d, reason); /* reason is in job or on this stack */
}

static void on_job_exit(uv_process_t *p, int64_t status, int term_signal)
{
    struct ask_job *job = container_of(p, struct ask_job, proc);

    job->exited = 1;
    job->status = status;
    job->term_signal = term_signal;
    job_check(job);
}

static void job_alloc(uv_handle_t *hd, size_t suggested, uv_buf_t *buf)
{
    struct ask_job *job = hd->data;

    (void)suggested;
    if (job->line == JOB_LINE_READING)
        *buf = uv_buf_init(job->buf + job->len, (unsigned)(sizeof(job->buf) - job->len));
    else /* the line is parsed: discard into the whole buffer */
        *buf = uv_buf_init(job->buf, sizeof(job->buf));
}

static void on_job_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct ask_job *job = container_of(s, struct ask_job, out);
    const char *nl;

    (void)buf;
    if (nread == 0)
        return;
    if (nread < 0) {
        if (job->line == JOB_LINE_READING) {
            if (nread != UV_EOF)
                job->line = JOB_LINE_ERROR;
            else if (job->len > 0)
                job_parse_line(job, job->len); /* a last line without newline */
            else
                job->line = JOB_LINE_NONE;
        }
        job_close_handle((uv_handle_t *)&job->out);
        job_check(job);
        return;
    }
    if (job->line != JOB_LINE_READING)
        return; /* output after the first line is ignored */
    nl = memchr(job->buf + job->len, '\n', (size_t)nread);
    job->len += (size_t)nread;
    if (nl != NULL)
        job_parse_line(job, (size_t)(nl - job->buf));
    else if (job->len == sizeof(job->buf))
        job->line = JOB_LINE_TOOLONG;
    else
        return;
    job_check(job);
}

static void on_job_written(uv_write_t *req, int status)
{
    struct ask_job *job = container_of(req, struct ask_job, wreq);

    /* EPIPE: the child did not read its stdin; its exit decides. */
    (void)status;
    job_close_handle((uv_handle_t *)&job->in); /* EOF on the child's stdin */
}

/* Spawns the child for it. On failure the item is answered (deny). */
static void exec_start(struct ask_handler *h, struct ask_item *it)
{
    uv_process_options_t opts;
    uv_stdio_container_t stdio[3];
    char *args[2];
    struct ask_job *job;
    uv_buf_t buf;
    char why[160];
    int rc;

    job = calloc(1, sizeof(*job));
    if (job == NULL) {
        ask__item_answer(h, it, ASK_DENY, "out of memory");
        return;
    }
    job->h = h;
    job->item = it;
    it->job = job;
    job->text = it->text; /* the write may outlive the item */
    it->text = NULL;
    uv_pipe_init(h->loop, &job->in, 0); /* cannot fail on Unix */
    uv_pipe_init(h->loop, &job->out, 0);
    job->in.data = job;
    job->out.data = job;
    job->next = h->exec.jobs;
    if (h->exec.jobs != NULL)
        h->exec.jobs->prev = job;
    h->exec.jobs = job;
    h->exec.running++;
    h->live += 3;

    memset(&opts, 0, sizeof(opts));
    memset(stdio, 0, sizeof(stdio));
    stdio[0].flags = UV_CREATE_PIPE | UV_READABLE_PIPE;
    stdio[0].data.stream = (uv_stream_t *)&job->in;
    stdio[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
    stdio[1].data.stream = (uv_stream_t *)&job->out;
    stdio[2].flags = UV_INHERIT_FD;
    stdio[2].data.fd = STDERR_FILENO;
    args[0] = h->target;
    args[1] = NULL;
    opts.file = h->target; /* execvp: names without '/' are looked up in PATH */
    opts.args = args;
    opts.exit_cb = on_job_exit;
    opts.stdio = stdio;
    opts.stdio_count = 3;
    rc = uv_spawn(h->loop, &job->proc, &opts); /* initialises proc even on failure */
    job->proc.data = job;
    if (rc < 0) {
        job->exited = 1; /* nothing to reap */
        job->decided = 1;
        job->item = NULL;
        it->job = NULL;
        ask__job_close(job);
        snprintf(why, sizeof(why), "cannot run the ask program: %s", uv_strerror(rc));
        ask__item_answer(h, it, ASK_DENY, why);
        return;
    }
    buf = uv_buf_init(job->text, (unsigned)it->len);
    rc = uv_write(&job->wreq, (uv_stream_t *)&job->in, &buf, 1, on_job_written);
    if (rc < 0)
        job_close_handle((uv_handle_t *)&job->in);
    rc = uv_read_start((uv_stream_t *)&job->out, job_alloc, on_job_read);
    if (rc < 0) {
        job->line = JOB_LINE_ERROR;
        job_close_handle((uv_handle_t *)&job->out);
    }
}

/* Starts queued questions while there is room. */
static void exec_pump(struct ask_handler *h)
{
    while (!h->closing && h->exec.running < ASK_EXEC_RUNNING) {
        struct ask_item *it;

        for (it = h->head; it != NULL && it->job != NULL; it = it->next)
            ;
        if (it == NULL)
            return;
        exec_start(h, it); /* may answer it, and re-enter */
    }
}

void ask__exec_ask(struct ask_handler *h, const struct ask_question *q)
{
    struct ask_item *it = calloc(1, sizeof(*it));

    if (it == NULL || (it->text = ask__question_json(q, &it->len)) == NULL) {
        free(it);
        (void)ask_broker_answer(h->broker, q->id, ASK_DENY, "cannot encode the question");
        return;
    }
    it->id = q->id;
    ask__item_link(h, it);
    exec_pump(h);
}

void ask__exec_withdraw(struct ask_handler *h, struct ask_item *it)
{
    struct ask_job *job = it->job;

    ask__item_unlink(h, it);
    ask__item_free(it);
    if (job != NULL) {
        job->item = NULL;
        ask__job_close(job); /* SIGKILL; handles close once it is reaped */
    }
}

/* Is PROGRAM something execvp could run? */
int ask__exec_findable(const char *prog)
{
    struct stat st;
    const char *path, *p;
    char buf[ASK_TARGET_MAX + 256];

    if (strchr(prog, '/') != NULL)
        return access(prog, X_OK) == 0 && stat(prog, &st) == 0 && S_ISREG(st.st_mode);
    path = getenv("PATH");
    if (path == NULL)
        path = "/bin:/usr/bin"; /* glibc execvp's default */
    for (p = path;; p++) {
        const char *end = strchr(p, ':');
        size_t dlen = end != NULL ? (size_t)(end - p) : strlen(p);
        int n;

        if (dlen == 0)
            n = snprintf(buf, sizeof(buf), "%s", prog);
        else
            n = snprintf(buf, sizeof(buf), "%.*s/%s", (int)dlen, p, prog);
        if (n > 0 && (size_t)n < sizeof(buf) && access(buf, X_OK) == 0 && stat(buf, &st) == 0 &&
            S_ISREG(st.st_mode))
            return 1;
        if (end == NULL)
            return 0;
        p = end;
    }
}
