/* proxy/procmetrics.c - process metrics from /proc/self, named as the
 * Prometheus client libraries name them, and fixed-bucket latency
 * histograms, both in the text exposition format 0.0.4.
 */
#include "proxy/ops.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Upper bounds in seconds: 1 ms to 30 s, for DNS, dial, ask and decision. */
static const double hist_bounds[HIST_BUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                 0.25,  0.5,    1,     2.5,  5,     10,  30};

void histogram_observe(struct histogram *h, double seconds)
{
    size_t i = 0;

    if (seconds < 0)
        seconds = 0;
    while (i < HIST_BUCKETS && seconds > hist_bounds[i])
        i++;
    __atomic_fetch_add(&h->count[i], 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&h->n, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&h->sum_ns, (uint64_t)(seconds * 1e9), __ATOMIC_RELAXED);
}

void histogram_add(struct histogram *dst, const struct histogram *src)
{
    for (size_t i = 0; i <= HIST_BUCKETS; i++)
        dst->count[i] += __atomic_load_n(&src->count[i], __ATOMIC_RELAXED);
    dst->n += __atomic_load_n(&src->n, __ATOMIC_RELAXED);
    dst->sum_ns += __atomic_load_n(&src->sum_ns, __ATOMIC_RELAXED);
}

void histogram_write(FILE *m, const char *name, const char *help, const struct histogram *h)
{
    uint64_t cum = 0;

    fprintf(m, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    for (size_t i = 0; i < HIST_BUCKETS; i++) {
        cum += h->count[i];
        fprintf(m, "%s_bucket{le=\"%g\"} %llu\n", name, hist_bounds[i], (unsigned long long)cum);
    }
    cum += h->count[HIST_BUCKETS];
    fprintf(m, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)cum);
    fprintf(m, "%s_sum %.6f\n%s_count %llu\n", name, (double)h->sum_ns / 1e9, name,
            (unsigned long long)h->n);
}

static size_t open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    size_t n = 0;

    if (d == NULL)
        return 0;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n > 0 ? n - 1 : 0; /* not the directory's own descriptor */
}

/* utime+stime (clock ticks), starttime (ticks after boot), vsize, rss
 * (pages) from /proc/self/stat; 0 when unreadable. */
static int read_stat(unsigned long long *ticks, unsigned long long *start,
                     unsigned long long *vsize, long long *rss)
{
    char buf[1024];
    FILE *f = fopen("/proc/self/stat", "re");
    size_t n;
    char *p;
    unsigned long long utime, stime;

    if (f == NULL)
        return -1;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    p = strrchr(buf, ')'); /* the command name may hold spaces */
    if (p == NULL)
        return -1;
    /* fields 3.. after ") ": state ppid pgrp session tty tpgid flags minflt
     * cminflt majflt cmajflt utime stime cutime cstime priority nice
     * num_threads itrealvalue starttime vsize rss */
    if (sscanf(p + 2,
               "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d "
               "%llu %llu %lld",
               &utime, &stime, start, vsize, rss) != 5)
        return -1;
    *ticks = utime + stime;
    return 0;
}

void procmetrics_write(FILE *m)
{
    unsigned long long ticks = 0, start = 0, vsize = 0; /* start: unused, see admin metrics */
    long long rss = 0;
    long hz = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);

    if (hz <= 0)
        hz = 100;
    if (page <= 0)
        page = 4096;
    (void)read_stat(&ticks, &start, &vsize, &rss);
    fprintf(m, "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n"
               "# TYPE process_cpu_seconds_total counter\n"
               "process_cpu_seconds_total %.2f\n",
            (double)ticks / (double)hz);
    fprintf(m, "# HELP process_open_fds Number of open file descriptors.\n"
               "# TYPE process_open_fds gauge\n"
               "process_open_fds %zu\n",
            open_fds());
    fprintf(m, "# HELP process_virtual_memory_bytes Virtual memory size in bytes.\n"
               "# TYPE process_virtual_memory_bytes gauge\n"
               "process_virtual_memory_bytes %llu\n",
            vsize);
    fprintf(m, "# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
               "# TYPE process_resident_memory_bytes gauge\n"
               "process_resident_memory_bytes %lld\n",
            rss * (long long)page);
}
