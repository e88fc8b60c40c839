/* tests/bench/bench_policy.c - policy load time and decisions per second.
 *
 *   bench_policy [NRULES] [SECONDS]
 *
 * Writes a settings file with NRULES rules (default 100,000: 40% exact names,
 * 40% wildcards, 20% CIDRs, a tenth of them denied), then measures on one
 * core: settings load + compile time, and decisions/s for hits and misses
 * (names and IP literals), each including request normalisation. Prints the
 * figures and the ratio to the targets (load < 200 ms, >= 2,000,000
 * decisions/s). Exits 0 whatever the figures: timings are reported, never
 * asserted (shared, noisy machines).
 */
#include "policy/policy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Deterministic generator so runs are comparable. */
static uint64_t rng_state = 0x9e3779b97f4a7c15u;
static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void rule_name(size_t i, char *buf, size_t len)
{
    static const char *tlds[] = {"com", "net", "org", "io", "dev"};
    snprintf(buf, len, "svc%zu.example%zu.%s", i, i % 977, tlds[i % 5]);
}

static int write_settings(const char *path, size_t nrules)
{
    FILE *f = fopen(path, "w");
    size_t i, ndeny = nrules / 10;
    char name[128];

    if (f == NULL)
        return -errno;
    fputs("{\"network\":{\"deniedDomains\":[", f);
    for (i = 0; i < ndeny; i++) {
        rule_name(i + 1000000, name, sizeof(name));
        fprintf(f, "%s\"%s\"", i ? "," : "", name);
    }
    fputs("],\"allowedDomains\":[", f);
    for (i = 0; i < nrules - ndeny; i++) {
        unsigned kind = (unsigned)(i % 5);
        if (i)
            fputc(',', f);
        rule_name(i, name, sizeof(name));
        if (kind < 2)
            fprintf(f, "\"%s\"", name);
        else if (kind < 4)
            fprintf(f, "\"*.%s\"", name);
        else
            fprintf(f, "\"%u.%u.%u.0/24\"", (unsigned)(11 + (i >> 16) % 200),
                    (unsigned)((i >> 8) & 255), (unsigned)(i & 255));
    }
    fputs("]}}\n", f);
    return fclose(f) == 0 ? 0 : -errno;
}

struct sample {
    char text[POLICY_HOST_MAX + 1];
    size_t len;
};

/* Decisions only, on hosts normalised beforehand. */
static double run_decide(const struct policy *p, const struct policy_host *hs, size_t ns,
                         double seconds)
{
    size_t done = 0, ok = 0;
    double t0 = now(), t;

    do {
        size_t i;
        for (i = 0; i < 4096; i++) {
            struct policy_decision d;
            policy_decide(p, &hs[(done + i) % ns], 443, &d);
            ok += d.verdict == POLICY_ALLOW;
        }
        done += 4096;
        t = now() - t0;
    } while (t < seconds);
    if (ok == (size_t)-1)
        puts("");
    return (double)done / t;
}

static double run(const struct policy *p, const struct sample *s, size_t ns, double seconds,
                  size_t *allowed)
{
    size_t done = 0, ok = 0;
    double t0 = now(), t;

    do {
        size_t i;
        for (i = 0; i < 4096; i++) {
            const struct sample *x = &s[(done + i) % ns];
            struct policy_host h;
            struct policy_decision d;
            const char *why;
            if (policy_host_normalize(x->text, x->len, &h, &why) == 0) {
                policy_decide(p, &h, 443, &d);
                ok += d.verdict == POLICY_ALLOW;
            }
        }
        done += 4096;
        t = now() - t0;
    } while (t < seconds);
    *allowed = ok;
    return (double)done / t;
}

int main(int argc, char **argv)
{
    size_t nrules = argc > 1 ? (size_t)strtoul(argv[1], NULL, 10) : 100000;
    double seconds = argc > 2 ? strtod(argv[2], NULL) : 1.0;
    char path[] = "/tmp/sluice-bench-XXXXXX";
    struct settings s;
    struct settings_error err;
    struct policy *p = NULL;
    struct sample *hits, *misses, *ips;
    size_t ns = 65536, i, ok;
    double t0, t_load, t_compile, r_hit, r_miss, r_nhit, r_nmiss, r_ip;
    struct policy_host *hhosts, *mhosts;
    int fd;

    if (nrules < 10)
        nrules = 10;
    fd = mkstemp(path);
    if (fd < 0 || close(fd) < 0 || write_settings(path, nrules) < 0) {
        perror("bench_policy: settings file");
        return 2;
    }

    settings_init(&s);
    t0 = now();
    if (settings_apply_file(&s, path, &err) < 0) {
        fprintf(stderr, "%s\n", err.msg);
        unlink(path);
        return 2;
    }
    t_load = now() - t0;
    t0 = now();
    if (policy_compile(&s, &p, &err) < 0) {
        fprintf(stderr, "%s\n", err.msg);
        unlink(path);
        return 2;
    }
    t_compile = now() - t0;
    unlink(path);

    hits = calloc(ns, sizeof(*hits));
    misses = calloc(ns, sizeof(*misses));
    ips = calloc(ns, sizeof(*ips));
    hhosts = calloc(ns, sizeof(*hhosts));
    mhosts = calloc(ns, sizeof(*mhosts));
    if (hits == NULL || misses == NULL || ips == NULL || hhosts == NULL || mhosts == NULL)
        return 2;
    for (i = 0; i < ns; i++) {
        size_t r = (size_t)(rng() % (nrules - nrules / 10));
        char name[128];
        rule_name(r, name, sizeof(name));
        if (r % 5 == 4) /* CIDR rule: hit an address inside it */
            snprintf(hits[i].text, sizeof(hits[i].text), "%u.%u.%u.%u",
                     (unsigned)(11 + (r >> 16) % 200), (unsigned)((r >> 8) & 255),
                     (unsigned)(r & 255), (unsigned)(rng() % 256));
        else if (r % 5 >= 2) /* wildcard: a subdomain */
            snprintf(hits[i].text, sizeof(hits[i].text), "api.eu.%s", name);
        else
            snprintf(hits[i].text, sizeof(hits[i].text), "%s", name);
        hits[i].len = strlen(hits[i].text);
        snprintf(misses[i].text, sizeof(misses[i].text), "www.host%llu.example.org",
                 (unsigned long long)(rng() % 1000000));
        misses[i].len = strlen(misses[i].text);
        snprintf(ips[i].text, sizeof(ips[i].text), "%u.%u.%u.%u", (unsigned)(rng() % 223 + 1),
                 (unsigned)(rng() % 256), (unsigned)(rng() % 256), (unsigned)(rng() % 256));
        ips[i].len = strlen(ips[i].text);
    }

    for (i = 0; i < ns; i++) {
        const char *why;
        if (policy_host_normalize(hits[i].text, hits[i].len, &hhosts[i], &why) < 0 ||
            policy_host_normalize(misses[i].text, misses[i].len, &mhosts[i], &why) < 0)
            return 2;
    }
    r_hit = run_decide(p, hhosts, ns, seconds);
    r_miss = run_decide(p, mhosts, ns, seconds);
    printf("decide only:           hits %.0f/s, misses %.0f/s\n", r_hit, r_miss);
    r_nhit = run(p, hits, ns, seconds, &ok);
    printf("normalise + decide:    hits %.0f/s (%zu allowed), ", r_nhit, ok);
    r_nmiss = run(p, misses, ns, seconds, &ok);
    printf("misses %.0f/s (%zu allowed)\n", r_nmiss, ok);
    r_ip = run(p, ips, ns, seconds, &ok);
    printf("ip literals (normalise + decide): %.0f/s\n", r_ip);
    printf("rules: %zu  load: %.1f ms (settings %.1f ms + compile %.1f ms)\n",
           policy_rule_count(p), (t_load + t_compile) * 1e3, t_load * 1e3, t_compile * 1e3);
    printf("vs targets: load %.2fx of the 200 ms budget; decide-only hits %.2fx, misses %.2fx, "
           "with normalisation hits %.2fx, misses %.2fx of 2,000,000/s\n",
           (t_load + t_compile) * 1e3 / 200.0, r_hit / 2e6, r_miss / 2e6, r_nhit / 2e6,
           r_nmiss / 2e6);

    free(hits);
    free(misses);
    free(ips);
    free(hhosts);
    free(mhosts);
    policy_free(p);
    settings_free(&s);
    return 0;
}
