/* common/common.h - small helpers every module uses, defined once: the
 * container_of macro, UTC timestamps, escaping of untrusted text for logs
 * and terminals, logfmt values, the text of a connected peer, hex digits
 * and a monotonic clock in milliseconds. Nothing
 * here knows about policy, relays or settings. */
#ifndef SLUICE_COMMON_H
#define SLUICE_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <uv.h>

/* The struct that embeds MEMBER at PTR (libuv's src/uv-common.h). */
#define container_of(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

/* Room for common_timestamp's text. */
#define COMMON_TIME_MAX 32

/* "2025-01-31T12:34:56.789Z" (UTC, milliseconds) into buf; "-" if the
 * clock cannot be read. Returns buf. */
const char *common_timestamp(char *buf, size_t len);

/* Copies in with control bytes, non-ASCII bytes and '\' written as \xNN, so
 * a hostile name cannot inject lines into logs or terminals; cut to fit
 * len. Returns buf. */
const char *common_escape(const char *in, char *buf, size_t len);

/* The most common_logfmt_value() writes for a value of LEN bytes. */
#define COMMON_LOGFMT_MAX(len) (2 + 4 * (len))

/* Writes a logfmt value into out, which has room for
 * COMMON_LOGFMT_MAX(strlen(value)) bytes, and returns its length (no NUL):
 * the value is quoted when empty or when it holds a space, '"', '=', '\' or
 * a control byte; inside quotes '"' and '\' are backslash-escaped and control
 * bytes written as \xNN. */
size_t common_logfmt_value(char *out, const char *value);

/* Writes the decimal digits of v into out (room for 20) and returns their
 * number (no NUL). */
size_t common_utoa(char *out, unsigned long long v);

/* Appends s to the string of `at` bytes in buf (cap bytes in all), cut to
 * fit, and NUL-terminates it; returns the new length. What
 * snprintf(buf, cap, "%s%s", buf, s) would make, without the formatter:
 * the hot paths (a verdict's rule and reason texts, peer names) build their
 * strings with it. cap must be at least 1 and at < cap. */
size_t common_cat(char *buf, size_t cap, size_t at, const char *s);

/* The same with the first n bytes of s (fewer at a NUL): "%.*s". */
size_t common_catn(char *buf, size_t cap, size_t at, const char *s, size_t n);

/* The same with the decimal digits of v. */
size_t common_cat_u(char *buf, size_t cap, size_t at, unsigned long long v);

/* Text of a connected stream's peer: "ip:port", "[v6]:port", "unix" for a
 * pipe, "-" when the kernel cannot tell. Returns buf. */
const char *common_peer_name(uv_stream_t *s, int is_pipe, char *buf, size_t len);

/* The value of the hexadecimal digit c (either case), or -1. */
int common_hex_digit(int c);

/* 1 when c is an RFC 9110 tchar (a character of a token: a method, a header
 * name): letters, digits and !#$%&'*+-.^_`|~. */
int common_is_tchar(int c);

/* Writes all LEN bytes of BUF to FD, again after EINTR and short writes:
 * 0, or a negative errno (UV_E* on Linux). For blocking descriptors. */
int common_write_all(int fd, const void *buf, size_t len);

/* Descriptors passed over a Unix socket (SCM_RIGHTS), at most
 * COMMON_FDS_MAX in one message. common_send_fds sends the LEN bytes of
 * DATA (LEN > 0) with the N descriptors FDS (none when N is 0), again after
 * EINTR, never raising SIGPIPE: 0, -EIO when fewer bytes went, or a
 * negative errno. common_recv_fds receives one message of at most LEN bytes
 * into DATA (MSG_CMSG_CLOEXEC | FLAGS, again after EINTR) and keeps the first
 * MAX descriptors that came with it in FDS (*N of them), closing any more:
 * the byte count, or a negative errno; *MSG_FLAGS (when not NULL) gets the
 * message's flags, MSG_TRUNC and MSG_CTRUNC among them. Only system calls:
 * both may run in a child between fork and exec. */
#define COMMON_FDS_MAX 16
int common_send_fds(int sock, const void *data, size_t len, const int *fds, size_t n);
ssize_t common_recv_fds(int sock, void *data, size_t len, int flags, int *fds, size_t max,
                        size_t *n, int *msg_flags);

/* CLOCK_MONOTONIC in milliseconds (for deadlines outside an event loop). */
int64_t common_mono_ms(void);
/* The same clock in microseconds (sluice run --debug's start-up phases). */
int64_t common_mono_us(void);

#endif
