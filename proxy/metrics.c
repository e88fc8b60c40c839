/* proxy/metrics.c - the counters of `sluice proxy` (from the connection log
 * records, the accept path and reloads) and their Prometheus text for the
 * admin listener's /metrics. Each worker counts in its own struct with
 * relaxed atomic adds; /metrics (main thread) sums them with atomic loads. */
#include "proxy/server-int.h"

#include "proxy/gw.h"
#include "proxy/tlsterm.h"
#include "socks/socks.h"
#include "tls/tls.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* "https": a request inside a terminated tunnel */
static const char *const mproto_names[MPROTO_N] = {"http", "connect", "socks5", "https"};
static const char *const mdec_names[MDEC_N] = {"allow", "deny", "would_deny", "other"};

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
            __atomic_fetch_add(&m->decisions[p][d], 1, __ATOMIC_RELAXED);
    } else {
        __atomic_fetch_add(&m->bytes_up, r->bytes_up, __ATOMIC_RELAXED);
        __atomic_fetch_add(&m->bytes_down, r->bytes_down, __ATOMIC_RELAXED);
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

void proxy_metrics_reload(struct proxy_srv *srv, int ok)
{
    struct timespec ts;

    if (ok)
        srv->reloads_ok++;
    else
        srv->reloads_failed++;
    srv->last_reload_ok = ok;
    if (ok) {
        clock_gettime(CLOCK_REALTIME, &ts);
        srv->last_reload_ok_time = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
    }
}

static void metric_head(FILE *m, const char *name, const char *type, const char *help)
{
    fprintf(m, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

/* Counters summed over the workers (each written by its own thread). */
struct metric_sums {
    uint64_t accepted[2], overloaded, decisions[MPROTO_N][MDEC_N], bytes_up, bytes_down;
    size_t active[2], inflight, dns;
    int paused;
    struct histogram h_dns, h_dial, h_ask, h_decision;
};

static void sum_workers(const struct proxy_srv *srv, struct metric_sums *t)
{
    memset(t, 0, sizeof(*t));
    for (unsigned i = 0; i < srv->nworkers; i++) {
        const struct proxy_worker *w = srv->workers[i];
        const struct service *svcs[2] = {&w->http, &w->socks};
        for (int k = 0; k < 2; k++) {
            t->accepted[k] += LOAD(svcs[k]->accepted);
            t->overloaded += LOAD(svcs[k]->overloaded);
            t->active[k] += LOAD(svcs[k]->live);
        }
        for (int p = 0; p < MPROTO_N; p++)
            for (int d = 0; d < MDEC_N; d++)
                t->decisions[p][d] += LOAD(w->m.decisions[p][d]);
        /* closed connections, plus what the open ones moved so far */
        t->bytes_up += LOAD(w->m.bytes_up) + LOAD(w->m.open_up);
        t->bytes_down += LOAD(w->m.bytes_down) + LOAD(w->m.open_down);
        histogram_add(&t->h_dns, &w->m.h_dns);
        histogram_add(&t->h_dial, &w->m.h_dial);
        histogram_add(&t->h_ask, &w->m.h_ask);
        histogram_add(&t->h_decision, &w->m.h_decision);
        t->inflight += LOAD(w->inflight);
        t->dns += LOAD(w->dns);
        t->paused |= LOAD(w->paused);
    }
}

static void connections(FILE *m, const struct proxy_srv *srv, const struct metric_sums *t)
{
    static const char *const names[2] = {"http", "socks5"};

    metric_head(m, "sluice_connections_total", "counter",
                "Client connections accepted, by front end.");
    for (int i = 0; i < 2; i++)
        fprintf(m, "sluice_connections_total{protocol=\"%s\"} %llu\n", names[i],
                (unsigned long long)t->accepted[i]);
    metric_head(m, "sluice_connections_active", "gauge", "Client connections open now.");
    for (int i = 0; i < 2; i++)
        fprintf(m, "sluice_connections_active{protocol=\"%s\"} %zu\n", names[i], t->active[i]);
    metric_head(m, "sluice_connections_max", "gauge",
                "Client connections served at once (proxy.limits.maxConnections, or from the "
                "descriptor limit).");
    fprintf(m, "sluice_connections_max %zu\n", srv->max_conns);
    metric_head(m, "process_max_fds", "gauge", "Maximum number of open file descriptors.");
    fprintf(m, "process_max_fds %lu\n", srv->nofile);
    metric_head(m, "sluice_accept_paused", "gauge",
                "1 while accepting is paused at the connection limit.");
    fprintf(m, "sluice_accept_paused %d\n", t->paused ? 1 : 0);
    metric_head(m, "sluice_overloaded_total", "counter",
                "Connections refused over proxy.limits.maxConnections (HTTP 503, SOCKS 0x01).");
    fprintf(m, "sluice_overloaded_total %llu\n", (unsigned long long)t->overloaded);
    metric_head(m, "sluice_workers", "gauge", "Event loops serving the proxy (--workers).");
    fprintf(m, "sluice_workers %u\n", srv->nworkers);
    metric_head(m, "sluice_worker_connections_total", "counter",
                "Client connections accepted, by worker (event loop).");
    for (unsigned i = 0; i < srv->nworkers; i++)
        fprintf(m, "sluice_worker_connections_total{worker=\"%u\"} %llu\n", i,
                (unsigned long long)(LOAD(srv->workers[i]->http.accepted) +
                                     LOAD(srv->workers[i]->socks.accepted)));
}

static void decisions(FILE *m, const struct metric_sums *t)
{
    metric_head(m, "sluice_decisions_total", "counter",
                "Egress decisions (one per request), by protocol and decision.");
    for (int p = 0; p < MPROTO_N; p++)
        for (int d = 0; d < MDEC_N; d++)
            if (d != MDEC_OTHER || t->decisions[p][d] > 0)
                fprintf(m, "sluice_decisions_total{protocol=\"%s\",decision=\"%s\"} %llu\n",
                        mproto_names[p], mdec_names[d], (unsigned long long)t->decisions[p][d]);
    metric_head(m, "sluice_bytes_total", "counter",
                "Bytes relayed, counted while connections are open: up is client to upstream.");
    fprintf(m, "sluice_bytes_total{direction=\"up\"} %llu\n", (unsigned long long)t->bytes_up);
    fprintf(m, "sluice_bytes_total{direction=\"down\"} %llu\n",
            (unsigned long long)t->bytes_down);
}

/* network.tlsTerminate: terminated tunnels open and the leaf cache. */
static void tls_metrics(FILE *m, const struct proxy_srv *srv)
{
    struct tls_leaves_stats st;

    if (srv->tls == NULL)
        return;
    tls_leaves_stats(srv->tls->leaves, &st);
    metric_head(m, "sluice_tls_tunnels_open", "gauge",
                "Terminated tunnels open now (network.tlsTerminate.maxTunnels bounds them).");
    fprintf(m, "sluice_tls_tunnels_open %zu\n", __atomic_load_n(&srv->tls->open, __ATOMIC_RELAXED));
    metric_head(m, "sluice_tls_leaves_total", "counter",
                "Leaf certificates: handshakes that found theirs cached (hit) or not (miss), "
                "leaves minted and mints that failed.");
    fprintf(m, "sluice_tls_leaves_total{result=\"hit\"} %llu\n", (unsigned long long)st.hits);
    fprintf(m, "sluice_tls_leaves_total{result=\"miss\"} %llu\n", (unsigned long long)st.misses);
    fprintf(m, "sluice_tls_leaves_total{result=\"minted\"} %llu\n", (unsigned long long)st.mints);
    fprintf(m, "sluice_tls_leaves_total{result=\"mint_failed\"} %llu\n",
            (unsigned long long)st.mint_failures);
    metric_head(m, "sluice_tls_leaves_cached", "gauge", "Leaf certificates in the cache.");
    fprintf(m, "sluice_tls_leaves_cached %u\n", st.cached);
    metric_head(m, "sluice_tls_handshakes_total", "counter",
                "TLS handshakes completed in terminated tunnels: with the client (sluice's "
                "leaf) and with the origin (verified).");
    for (int sd = 0; sd < PROXY_TLS_SIDES; sd++)
        fprintf(m, "sluice_tls_handshakes_total{side=\"%s\"} %llu\n", proxy_tls_side_names[sd],
                (unsigned long long)__atomic_load_n(&srv->tls->handshakes[sd], __ATOMIC_RELAXED));
    metric_head(m, "sluice_tls_handshake_failures_total", "counter",
                "TLS handshakes in terminated tunnels that failed, by side and reason.");
    for (int sd = 0; sd < PROXY_TLS_SIDES; sd++)
        for (int f = 0; f < PROXY_TLS_F_N; f++)
            fprintf(m, "sluice_tls_handshake_failures_total{side=\"%s\",reason=\"%s\"} %llu\n",
                    proxy_tls_side_names[sd], proxy_tls_fail_names[f],
                    (unsigned long long)__atomic_load_n(&srv->tls->failures[sd][f],
                                                        __ATOMIC_RELAXED));
}

/* SOCKS5 UDP ASSOCIATE (socks/udp.c): process-wide counters. */
static void udp_metrics(FILE *m)
{
    struct socks_udp_stats u;

    socks_udp_stats(&u);
    metric_head(m, "sluice_udp_associations_total", "counter",
                "SOCKS5 UDP associations opened (refused: requests refused).");
    fprintf(m, "sluice_udp_associations_total{result=\"ok\"} %llu\n",
            (unsigned long long)u.associations);
    fprintf(m, "sluice_udp_associations_total{result=\"refused\"} %llu\n",
            (unsigned long long)u.refused);
    metric_head(m, "sluice_udp_associations_active", "gauge", "SOCKS5 UDP associations open now.");
    fprintf(m, "sluice_udp_associations_active %llu\n", (unsigned long long)u.active);
    metric_head(m, "sluice_udp_datagrams_total", "counter",
                "Datagrams relayed by SOCKS5 UDP associations, by direction.");
    fprintf(m, "sluice_udp_datagrams_total{direction=\"up\"} %llu\n",
            (unsigned long long)u.dgrams_up);
    fprintf(m, "sluice_udp_datagrams_total{direction=\"down\"} %llu\n",
            (unsigned long long)u.dgrams_down);
    metric_head(m, "sluice_udp_bytes_total", "counter",
                "Payload bytes relayed by SOCKS5 UDP associations, by direction.");
    fprintf(m, "sluice_udp_bytes_total{direction=\"up\"} %llu\n", (unsigned long long)u.bytes_up);
    fprintf(m, "sluice_udp_bytes_total{direction=\"down\"} %llu\n",
            (unsigned long long)u.bytes_down);
    metric_head(m, "sluice_udp_dropped_total", "counter",
                "Datagrams SOCKS5 UDP associations did not relay, by reason.");
    fprintf(m, "sluice_udp_dropped_total{reason=\"denied\"} %llu\n", (unsigned long long)u.denied);
    fprintf(m, "sluice_udp_dropped_total{reason=\"fragment\"} %llu\n",
            (unsigned long long)u.fragments);
    fprintf(m, "sluice_udp_dropped_total{reason=\"spoofed\"} %llu\n",
            (unsigned long long)u.spoofed);
    fprintf(m, "sluice_udp_dropped_total{reason=\"malformed\"} %llu\n",
            (unsigned long long)u.malformed);
    fprintf(m, "sluice_udp_dropped_total{reason=\"no_room\"} %llu\n",
            (unsigned long long)u.dropped);
    fprintf(m, "sluice_udp_dropped_total{reason=\"unsolicited\"} %llu\n",
            (unsigned long long)u.unsolicited);
}

/* credentials.headers: counts only, never a value or an entry's source. */
static void gw_metrics(FILE *m, const struct proxy_srv *srv)
{
    const struct proxy_gw_stats *s = &proxy_gw_stats;

    metric_head(m, "sluice_credential_headers_total", "counter",
                "Requests given credentials.headers (injected), or refused for want of a value, "
                "of TLS termination or for an Upgrade (refused).");
    fprintf(m, "sluice_credential_headers_total{result=\"injected\"} %llu\n",
            (unsigned long long)__atomic_load_n(&s->injected, __ATOMIC_RELAXED));
    fprintf(m, "sluice_credential_headers_total{result=\"refused\"} %llu\n",
            (unsigned long long)__atomic_load_n(&s->refused, __ATOMIC_RELAXED));
    metric_head(m, "sluice_credential_helper_runs_total", "counter",
                "credentials.headers helper runs, by result (ok: a new value).");
    fprintf(m, "sluice_credential_helper_runs_total{result=\"ok\"} %llu\n",
            (unsigned long long)__atomic_load_n(&s->helper_ok, __ATOMIC_RELAXED));
    fprintf(m, "sluice_credential_helper_runs_total{result=\"failed\"} %llu\n",
            (unsigned long long)__atomic_load_n(&s->helper_failed, __ATOMIC_RELAXED));
    metric_head(m, "sluice_credential_headers_unready", "gauge",
                "1 while some credentials.headers entry has no value (its requests are refused).");
    fprintf(m, "sluice_credential_headers_unready %d\n",
            proxy_gw_unready(srv->gw, proxy_gw_now()) != NULL);
}

/* Prometheus text exposition format 0.0.4. Main thread. */
char *proxy_metrics_text(const struct proxy_srv *srv, size_t *len)
{
    struct metric_sums t;
    char *text = NULL;
    FILE *m = open_memstream(&text, len);

    if (m == NULL)
        return NULL;
    sum_workers(srv, &t);
    metric_head(m, "sluice_build_info", "gauge", "Build information; the value is always 1.");
    fprintf(m, "sluice_build_info{version=\"%s\"} 1\n", SLUICE_VERSION);
    metric_head(m, "process_start_time_seconds", "gauge",
                "Start time of the process since the Unix epoch in seconds.");
    fprintf(m, "process_start_time_seconds %.3f\n", srv->start_time);
    connections(m, srv, &t);
    tls_metrics(m, srv);
    decisions(m, &t);
    udp_metrics(m);
    gw_metrics(m, srv);
    metric_head(m, "sluice_reloads_total", "counter", "Settings reloads (SIGHUP), by result.");
    fprintf(m, "sluice_reloads_total{result=\"ok\"} %llu\n", (unsigned long long)srv->reloads_ok);
    fprintf(m, "sluice_reloads_total{result=\"error\"} %llu\n",
            (unsigned long long)srv->reloads_failed);
    metric_head(m, "sluice_policy_rules", "gauge", "Rules in the policy in use.");
    fprintf(m, "sluice_policy_rules %zu\n", srv->policy != NULL ? policy_rule_count(srv->policy) : 0);
    metric_head(m, "sluice_asks_pending", "gauge", "Questions waiting for the ask handler.");
    fprintf(m, "sluice_asks_pending %zu\n", srv->broker != NULL ? ask_broker_pending(srv->broker) : 0);
    metric_head(m, "sluice_egress_inflight", "gauge",
                "Requests deciding, resolving or dialing now.");
    fprintf(m, "sluice_egress_inflight %zu\n", t.inflight);
    metric_head(m, "sluice_dns_outstanding", "gauge", "DNS lookups in progress.");
    fprintf(m, "sluice_dns_outstanding %zu\n", t.dns);
    metric_head(m, "sluice_draining", "gauge", "1 while draining after SIGTERM/SIGINT.");
    fprintf(m, "sluice_draining %d\n", srv->stopping ? 1 : 0);
    metric_head(m, "sluice_config_last_reload_successful", "gauge",
                "1 when the last load of the settings (start, SIGHUP, --watch) succeeded.");
    fprintf(m, "sluice_config_last_reload_successful %d\n", srv->last_reload_ok);
    metric_head(m, "sluice_config_last_reload_success_timestamp_seconds", "gauge",
                "Wall-clock time of the last successful load of the settings.");
    fprintf(m, "sluice_config_last_reload_success_timestamp_seconds %.3f\n",
            srv->last_reload_ok_time);
    histogram_write(m, "sluice_dns_seconds", "DNS lookups of allowed names.", &t.h_dns);
    histogram_write(m, "sluice_dial_seconds", "Connecting to vetted addresses (all attempts).",
                    &t.h_dial);
    histogram_write(m, "sluice_ask_seconds", "Waiting for the ask handler's answer.", &t.h_ask);
    histogram_write(m, "sluice_decision_seconds",
                    "From a parsed request to its outcome: rules, ask, DNS, guard and dial.",
                    &t.h_decision);
    procmetrics_write(m);
    if (fclose(m) != 0) {
        free(text);
        return NULL;
    }
    return text;
}
