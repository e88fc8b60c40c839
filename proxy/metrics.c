/* proxy/metrics.c - the counters of `sluice proxy` (from the connection log
 * records, the accept path and reloads) and their Prometheus text for the
 * admin listener's /metrics. Everything runs on the server's loop: nothing
 * is locked. */
#include "proxy/server-int.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const mproto_names[MPROTO_N] = {"http", "connect", "socks5"};
static const char *const mdec_names[MDEC_N] = {"allow", "deny", "would_deny", "other"};

void proxy_metrics_init(struct proxy_metrics *m)
{
    struct timespec ts;

    memset(m, 0, sizeof(*m));
    clock_gettime(CLOCK_REALTIME, &ts);
    m->start_time = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
    m->last_reload_ok = 1;
    m->last_reload_ok_time = m->start_time;
}

void proxy_metrics_reload(struct proxy_metrics *m, int ok)
{
    struct timespec ts;

    if (ok)
        m->reloads_ok++;
    else
        m->reloads_failed++;
    m->last_reload_ok = ok;
    if (ok) {
        clock_gettime(CLOCK_REALTIME, &ts);
        m->last_reload_ok_time = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
    }
}

void proxy_metrics_outcome(void *ctx, const struct egress_outcome *o)
{
    struct proxy_metrics *m = ctx;

    if (o->timed & EGRESS_TIMED_DNS)
        histogram_observe(&m->h_dns, (double)o->dns_ns / 1e9);
    if (o->timed & EGRESS_TIMED_DIAL)
        histogram_observe(&m->h_dial, (double)o->dial_ns / 1e9);
    if (o->timed & EGRESS_TIMED_ASK)
        histogram_observe(&m->h_ask, (double)o->ask_ns / 1e9);
    histogram_observe(&m->h_decision, (double)o->total_ns / 1e9);
}

static int metric_index(const char *s, const char *const *names, int n, int other)
{
    for (int i = 0; s != NULL && i < n; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return other;
}

void proxy_metrics_note(struct proxy_metrics *m, const struct connlog *r)
{
    if (r->event == CONNLOG_DECISION) {
        int p = metric_index(r->protocol, mproto_names, MPROTO_N, -1);
        int d = metric_index(r->verdict, mdec_names, MDEC_OTHER, MDEC_OTHER);
        if (p >= 0)
            m->decisions[p][d]++;
    } else {
        m->bytes_up += r->bytes_up;
        m->bytes_down += r->bytes_down;
    }
}

static void metric_head(FILE *m, const char *name, const char *type, const char *help)
{
    fprintf(m, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Prometheus text exposition format 0.0.4. */
char *proxy_metrics_text(const struct proxy_srv *srv, size_t *len)
{
    const struct service *svcs[2] = {&srv->http, &srv->socks};
    char *text = NULL;
    FILE *m = open_memstream(&text, len);

    if (m == NULL)
        return NULL;
    metric_head(m, "sluice_build_info", "gauge", "Build information; the value is always 1.");
    fprintf(m, "sluice_build_info{version=\"%s\"} 1\n", SLUICE_VERSION);
    metric_head(m, "process_start_time_seconds", "gauge",
                "Start time of the process since the Unix epoch in seconds.");
    fprintf(m, "process_start_time_seconds %.3f\n", srv->m.start_time);

    metric_head(m, "sluice_connections_total", "counter",
                "Client connections accepted, by front end.");
    for (int i = 0; i < 2; i++)
        fprintf(m, "sluice_connections_total{protocol=\"%s\"} %llu\n", svcs[i]->name,
                (unsigned long long)svcs[i]->accepted);
    metric_head(m, "sluice_connections_active", "gauge", "Client connections open now.");
    for (int i = 0; i < 2; i++)
        fprintf(m, "sluice_connections_active{protocol=\"%s\"} %zu\n", svcs[i]->name,
                svcs[i]->fe.nconns);
    metric_head(m, "sluice_connections_max", "gauge",
                "Client connections served at once (proxy.limits.maxConnections, or from the "
                "descriptor limit).");
    fprintf(m, "sluice_connections_max %zu\n", srv->max_conns);
    metric_head(m, "process_max_fds", "gauge", "Maximum number of open file descriptors.");
    fprintf(m, "process_max_fds %lu\n", srv->nofile);
    metric_head(m, "sluice_accept_paused", "gauge",
                "1 while accepting is paused at the connection limit.");
    fprintf(m, "sluice_accept_paused %d\n", conn_limit_paused(&srv->limit));
    metric_head(m, "sluice_overloaded_total", "counter",
                "Connections refused over proxy.limits.maxConnections (HTTP 503, SOCKS 0x01).");
    fprintf(m, "sluice_overloaded_total %llu\n",
            (unsigned long long)(srv->http.overloaded + srv->socks.overloaded));

    metric_head(m, "sluice_decisions_total", "counter",
                "Egress decisions (one per request), by protocol and decision.");
    for (int p = 0; p < MPROTO_N; p++)
        for (int d = 0; d < MDEC_N; d++)
            if (d != MDEC_OTHER || srv->m.decisions[p][d] > 0)
                fprintf(m, "sluice_decisions_total{protocol=\"%s\",decision=\"%s\"} %llu\n",
                        mproto_names[p], mdec_names[d],
                        (unsigned long long)srv->m.decisions[p][d]);
    {
        uint64_t up = srv->m.bytes_up, down = srv->m.bytes_down; /* closed, + open so far */
        frontend_bytes(&srv->http.fe, &up, &down);
        frontend_bytes(&srv->socks.fe, &up, &down);
        metric_head(m, "sluice_bytes_total", "counter",
                    "Bytes relayed, counted while connections are open: up is client to upstream.");
        fprintf(m, "sluice_bytes_total{direction=\"up\"} %llu\n", (unsigned long long)up);
        fprintf(m, "sluice_bytes_total{direction=\"down\"} %llu\n", (unsigned long long)down);
    }

    metric_head(m, "sluice_reloads_total", "counter", "Settings reloads (SIGHUP), by result.");
    fprintf(m, "sluice_reloads_total{result=\"ok\"} %llu\n", (unsigned long long)srv->m.reloads_ok);
    fprintf(m, "sluice_reloads_total{result=\"error\"} %llu\n",
            (unsigned long long)srv->m.reloads_failed);
    metric_head(m, "sluice_policy_rules", "gauge", "Rules in the policy in use.");
    fprintf(m, "sluice_policy_rules %zu\n",
            srv->core.egress != NULL ? policy_rule_count(egress_env_policy(srv->core.egress)) : 0);
    metric_head(m, "sluice_asks_pending", "gauge", "Questions waiting for the ask handler.");
    fprintf(m, "sluice_asks_pending %zu\n",
            srv->core.broker != NULL ? ask_broker_pending(srv->core.broker) : 0);
    metric_head(m, "sluice_egress_inflight", "gauge",
                "Requests deciding, resolving or dialing now.");
    fprintf(m, "sluice_egress_inflight %zu\n",
            srv->core.egress != NULL ? egress_inflight(srv->core.egress) : 0);
    metric_head(m, "sluice_dns_outstanding", "gauge", "DNS lookups in progress.");
    fprintf(m, "sluice_dns_outstanding %zu\n",
            srv->core.resolver != NULL ? resolver_outstanding(srv->core.resolver) : 0);
    metric_head(m, "sluice_draining", "gauge", "1 while draining after SIGTERM/SIGINT.");
    fprintf(m, "sluice_draining %d\n", srv->stopping ? 1 : 0);
    metric_head(m, "sluice_config_last_reload_successful", "gauge",
                "1 when the last load of the settings (start, SIGHUP, --watch) succeeded.");
    fprintf(m, "sluice_config_last_reload_successful %d\n", srv->m.last_reload_ok);
    metric_head(m, "sluice_config_last_reload_success_timestamp_seconds", "gauge",
                "Wall-clock time of the last successful load of the settings.");
    fprintf(m, "sluice_config_last_reload_success_timestamp_seconds %.3f\n",
            srv->m.last_reload_ok_time);
    histogram_write(m, "sluice_dns_seconds", "DNS lookups of allowed names.", &srv->m.h_dns);
    histogram_write(m, "sluice_dial_seconds", "Connecting to vetted addresses (all attempts).",
                    &srv->m.h_dial);
    histogram_write(m, "sluice_ask_seconds", "Waiting for the ask handler's answer.",
                    &srv->m.h_ask);
    histogram_write(m, "sluice_decision_seconds",
                    "From a parsed request to its outcome: rules, ask, DNS, guard and dial.",
                    &srv->m.h_decision);
    procmetrics_write(m);
    if (fclose(m) != 0) {
        free(text);
        return NULL;
    }
    return text;
}
