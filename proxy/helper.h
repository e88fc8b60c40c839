/* proxy/helper.h - a credential helper program run from a libuv loop
 * (issue 24 item 4: refreshable values): posix_spawn with no shell and no
 * PATH search, in "/", stdin and stderr /dev/null, stdout a pipe, no other
 * descriptor inherited (closefrom in the child), every signal at its
 * default and none blocked; its exit watched on a pidfd (without one, as on
 * Linux before 5.3 or under valgrind: waitpid every 20 ms), its output read
 * on the loop up to a limit, a timeout after which it is killed. Nothing
 * blocks the loop. The output is handed to the callback and wiped; it is
 * never logged (a failure says why in words of its own: "exit status 1",
 * "timed out after 200 ms", ...). */
#ifndef SLUICE_PROXY_HELPER_H
#define SLUICE_PROXY_HELPER_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

struct proxy_helper;

/* ok: it exited 0 with out (len bytes, valid during the call only); else
 * why it failed. */
typedef void (*proxy_helper_cb)(void *arg, int ok, const uint8_t *out, size_t len, const char *why);

/* Starts argv (argv[0] an absolute path) on loop; cb runs once, from the
 * loop, when it has exited and its output is read (or it timed out, or
 * wrote more than max_out bytes: it is killed). 0 with *out, or a negative
 * errno when it cannot start (cb never runs). */
int proxy_helper_start(uv_loop_t *loop, char *const argv[], unsigned timeout_ms, size_t max_out,
                       proxy_helper_cb cb, void *arg, struct proxy_helper **out);

/* Kills it and reaps it; cb never runs. Its handles close on the loop. */
void proxy_helper_cancel(struct proxy_helper *h);

/* The environment helpers start with from now on (env: NULL-terminated,
 * kept by the caller while helpers may start; NULL: the process's own).
 * `sluice run` leaves out the credentials' variables (rt-17: a helper is
 * dumpable, and its /proc/PID/environ would show the real values of the
 * other masked variables to whatever may read it). */
void proxy_helper_set_env(char **env);

#endif
