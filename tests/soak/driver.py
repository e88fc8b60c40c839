#!/usr/bin/env python3
"""tests/soak/driver.py - the soak's load: N tunnels through `sluice proxy`,
each with a scenario drawn from a seeded plan, at a fixed concurrency; the
proxy's descriptors and RSS sampled along the way; the proxy's JSON log
matched against every connection opened. Stdlib only (asyncio).

Phases: warm-up (W tunnels of the same mix), settle, baseline (fds, RSS);
the run (N tunnels, a sample every N/100); settle; checks:
  client   every tunnel saw an outcome its scenario allows (echo bytes
           verified, the status / SOCKS reply expected); hard failures
           (corrupt data, no answer within the client deadline, connect
           failures) fail at once, timing-dependent surprises beyond 0.1%
  fds      the proxy's open descriptors back to the baseline after settling
  rss      mean RSS of the last quarter's samples < 5% over the first's
  log      every connection opened has exactly one close record (matched by
           client port, as a multiset since ports are reused) whose code is
           the one the client saw; no record without a connection; every
           decision id has a close record; half-close byte counts logged
Prints PASS/FAIL per check, writes the samples to --csv, a summary JSON to
--summary; exit 1 when a check failed.
"""
import argparse
import asyncio
import collections
import errno
import json
import os
import random
import socket
import struct
import sys
import time

LINGER0 = struct.pack("ii", 1, 0)
DEADLINE = 15.0  # per tunnel; the proxy's own timeouts are 1-2 s

# scenario: (weight, protocols it runs on)
BOTH = ("connect", "socks")
SCENARIOS = {
    "echo": (20, BOTH),
    "echo_big": (3, BOTH),
    "abort_connect": (3, BOTH),
    "abort_head": (5, BOTH),
    "head_timeout": (1, BOTH),
    "bad_request": (2, BOTH),
    "denied": (4, BOTH),
    "loopback_denied": (2, BOTH),
    "ask_allow": (4, BOTH),
    "ask_deny": (3, BOTH),
    "ask_timeout": (1, BOTH),
    "ask_abort": (4, BOTH),
    "ask_late": (1, BOTH),
    "dns_timeout": (1, BOTH),
    "dns_abort": (4, BOTH),
    "dns_nx": (3, BOTH),
    "dns_slow": (2, BOTH),
    "dial_timeout": (1, BOTH),
    "dial_abort": (3, BOTH),
    "refused": (4, BOTH),
    "up_rst_accept": (3, BOTH),
    "up_stall_abort": (3, BOTH),
    "up_stall_idle": (1, BOTH),
    "relay_abort_client": (4, BOTH),
    "relay_abort_upstream": (4, BOTH),
    "half_client": (4, BOTH),
    "half_upstream": (4, BOTH),
    "http_get": (6, ("http",)),
    "http_denied": (1, ("http",)),
    "http_upstream_rst": (1, ("http",)),
}

# What the client may see. "ok": the exchange completed and verified;
# "aborted": the client walked away on purpose (nothing to verify);
# "code:N" an HTTP status, "rep:N" a SOCKS reply; "closed" the proxy closed
# with no reply; "upclosed" the tunnel came up and the upstream ended it.
EXPECT = {
    "echo": {"ok"}, "echo_big": {"ok"}, "ask_allow": {"ok"},
    "abort_connect": {"aborted"}, "abort_head": {"aborted"}, "ask_abort": {"aborted"},
    "dns_abort": {"aborted"}, "dial_abort": {"aborted"}, "up_stall_abort": {"aborted"},
    "relay_abort_client": {"aborted"},
    "head_timeout": {"code:408", "closed"},
    "bad_request": {"code:400", "closed", "rep:1", "rep:7"},
    "denied": {"code:403", "rep:2"}, "loopback_denied": {"code:403", "rep:2"},
    "ask_deny": {"code:403", "rep:2"}, "ask_timeout": {"code:403", "rep:2"},
    "ask_late": {"ok", "code:403", "rep:2"},
    "dns_timeout": {"code:504", "rep:6"}, "dns_nx": {"code:502", "rep:4"},
    "dns_slow": {"ok", "code:504", "rep:6"},
    "dial_timeout": {"code:504", "rep:6"}, "refused": {"code:502", "rep:5"},
    # the reset may beat the dialer's connect check: then it is a refusal
    "up_rst_accept": {"upclosed", "code:502", "rep:4"}, "up_stall_idle": {"upclosed"},
    "relay_abort_upstream": {"upclosed"},
    "half_client": {"ok"}, "half_upstream": {"ok"},
    "http_get": {"ok"}, "http_denied": {"code:403"},
    "http_upstream_rst": {"upclosed", "code:502"},
}
# outcomes that are never a timing accident
HARD = ("corrupt", "client-timeout", "connect-failed", "error:")


class Conn:
    """A non-blocking client socket with a read buffer."""

    def __init__(self, loop, sock):
        self.loop, self.s, self.buf = loop, sock, bytearray()

    async def more(self):
        d = await self.loop.sock_recv(self.s, 65536)
        if not d:
            raise EOFError
        self.buf += d

    async def exact(self, n):
        while len(self.buf) < n:
            await self.more()
        d = bytes(self.buf[:n])
        del self.buf[:n]
        return d

    async def until(self, sep, limit=65536):
        while True:
            i = self.buf.find(sep)
            if i >= 0:
                d = bytes(self.buf[:i + len(sep)])
                del self.buf[:i + len(sep)]
                return d
            if len(self.buf) > limit:
                raise ValueError("head too long")
            await self.more()

    async def drain(self):
        """Reads to EOF or reset; the byte count (buffer included)."""
        n = len(self.buf)
        self.buf.clear()
        try:
            while True:
                d = await self.loop.sock_recv(self.s, 65536)
                if not d:
                    return n
                n += len(d)
        except (ConnectionError, OSError):
            return n

    async def send(self, data):
        await self.loop.sock_sendall(self.s, data)

    def shut(self):
        try:
            self.s.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def close(self, rst=False):
        if self.s is None:
            return
        if rst:
            try:
                self.s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER0)
            except OSError:
                pass
        self.s.close()
        self.s = None


class Soak:
    def __init__(self, a, ports):
        self.a, self.p = a, ports
        self.loop = asyncio.get_running_loop()
        self.conns = []  # (client port, tunnel index, expected log code or None, bytes_up or None)
        self.obs = {}    # tunnel index -> outcome
        self.done = 0
        self.samples = []
        self.port_waits = 0
        self.t0 = time.monotonic()

    # --- the plan ------------------------------------------------------------
    def plan(self, n, seed):
        rng = random.Random(seed)
        names = list(SCENARIOS)
        weights = [SCENARIOS[s][0] for s in names]
        out = []
        for i in range(n):
            sc = rng.choices(names, weights)[0]
            proto = rng.choice(SCENARIOS[sc][1])
            out.append({
                "i": i, "sc": sc, "proto": proto, "rst": rng.random() < 0.5,
                "ip": rng.random() < 0.3, "r": rng.random(), "r2": rng.random(),
                "size": rng.randint(1, 4096), "seed": rng.getrandbits(32),
            })
        return out

    def target(self, t, tag):
        sc, i, p = t["sc"], t["i"], self.p
        svc = p["svc"]
        byname = {
            "denied": ("x%s.denied.soak" % tag, svc), "http_denied": ("x%s.denied.soak" % tag, svc),
            "ask_allow": ("q%s.allow.ask.soak" % tag, svc),
            "ask_deny": ("q%s.deny.ask.soak" % tag, svc),
            "ask_timeout": ("q%s.never.ask.soak" % tag, svc),
            "ask_abort": ("q%s.never.ask.soak" % tag, svc),
            "ask_late": ("q%s.late.ask.soak" % tag, svc),
            "dns_timeout": ("d%s.drop.soak" % tag, svc), "dns_abort": ("d%s.drop.soak" % tag, svc),
            "dns_nx": ("d%s.nx.soak" % tag, svc), "dns_slow": ("d%s.slow.soak" % tag, svc),
        }
        if sc in byname:
            return byname[sc]
        if sc == "loopback_denied":
            return ("127.0.0.1", 9)  # not allow-listed: the guard denies it, no dial
        port = {"dial_timeout": p["blackhole"], "dial_abort": p["blackhole"],
                "refused": p["refused"], "up_rst_accept": p["rstacc"]}.get(sc, svc)
        host = "127.0.0.1" if t["ip"] else "t%s.ok.soak" % tag
        return (host, port)

    # --- the proxy side of a tunnel -------------------------------------------
    def request(self, t, host, port):
        if t["proto"] == "connect":
            hp = "%s:%d" % (host, port)
            return b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (hp.encode(), hp.encode())
        greet = b"\x05\x01\x00"
        if host == "127.0.0.1":
            return greet + b"\x05\x01\x00\x01" + socket.inet_aton(host) + struct.pack("!H", port)
        h = host.encode()
        return greet + b"\x05\x01\x00\x03" + bytes([len(h)]) + h + struct.pack("!H", port)

    async def answer(self, t, c):
        """The proxy's reply: 'code:N' / 'rep:N' ('code:200', 'rep:0' = up)."""
        if t["proto"] == "socks":
            g = await c.exact(2)
            if g != b"\x05\x00":
                return "error:greeting %r" % g
            r = await c.exact(10)
            return "rep:%d" % r[1]
        head = await c.until(b"\r\n\r\n")
        line = head.split(b"\r\n", 1)[0].split()
        return "code:%s" % line[1].decode() if len(line) > 1 else "error:status"

    # --- scenarios ------------------------------------------------------------
    async def tunnel(self, t, tag):
        sc, proto = t["sc"], t["proto"]
        port = self.a.http if proto in ("connect", "http") else self.a.socks
        for attempt in range(100):
            s = socket.socket()
            s.setblocking(False)
            try:
                await self.loop.sock_connect(s, ("127.0.0.1", port))
                lport = s.getsockname()[1]
                break
            except OSError as e:
                s.close()
                # out of local ports (TIME_WAIT without tcp_tw_reuse): back off
                if e.errno == errno.EADDRNOTAVAIL and attempt < 99:
                    self.port_waits += 1
                    await asyncio.sleep(0.1)
                    continue
                return "connect-failed:%s" % e.__class__.__name__, None
        c = Conn(self.loop, s)
        try:
            async with asyncio.timeout(DEADLINE):
                obs = await self.scenario(t, c, tag)
        except TimeoutError:
            obs = "client-timeout"
        except EOFError:
            obs = "closed"
        except (ConnectionError, OSError):
            obs = "closed"
        except ValueError as e:
            obs = "error:%s" % e
        finally:
            c.close(rst=t["rst"] and EXPECT[sc] == {"aborted"})
        return obs, lport

    async def echo(self, c, size, rng, abort_at=None):
        data = rng.randbytes(size)
        sender = self.loop.create_task(c.send(b"E\n" + data))
        try:
            got = 0
            while got < size:
                if abort_at is not None and got >= abort_at:
                    return "aborted"
                n = len(c.buf)
                if n == 0:
                    await c.more()
                    continue
                chunk = bytes(c.buf[:size - got])
                del c.buf[:len(chunk)]
                if chunk != data[got:got + len(chunk)]:
                    return "corrupt"
                got += len(chunk)
            await sender
        finally:
            if not sender.done():
                sender.cancel()
                try:
                    await sender
                except (asyncio.CancelledError, OSError):
                    pass
        if abort_at is not None:
            return "aborted"
        c.shut()
        rest = await c.drain()
        return "ok" if rest == 0 else "corrupt"

    async def scenario(self, t, c, tag):
        sc, proto = t["sc"], t["proto"]
        rng = random.Random(t["seed"])
        host, port = self.target(t, tag)
        if sc == "abort_connect":
            return "aborted"
        if proto == "http":
            return await self.http(t, c, host, port, rng)
        req = self.request(t, host, port)
        if sc == "abort_head":
            await c.send(req[:max(1, int(len(req) * t["r"]))])
            await asyncio.sleep(t["r2"] * 0.05)
            return "aborted"
        if sc == "head_timeout":
            await c.send(req[:max(1, int(len(req) * t["r"]))])
            if proto == "connect":
                return await self.answer(t, c)  # 408, then the proxy closes
            await c.drain()
            return "closed"
        if sc == "bad_request":
            await c.send(b"\x04\x01\x00\x50\x7f\x00\x00\x01\x00" if proto == "socks"
                         else b"HELLO there\r\n\r\n")
            if proto == "socks":
                await c.drain()
                return "closed"
            return await self.answer(t, c)
        await c.send(req)
        if sc in ("ask_abort", "dns_abort", "dial_abort"):
            await asyncio.sleep(0.02 + t["r2"] * 0.4)
            return "aborted"
        a = await self.answer(t, c)
        if a not in ("code:200", "rep:0"):
            return a
        if sc in ("echo", "ask_allow", "ask_late", "dns_slow"):
            return await self.echo(c, t["size"], rng)
        if sc == "echo_big":
            return await self.echo(c, 65536 + t["size"] * 64, rng)
        if sc == "relay_abort_client":
            size = 65536 + t["size"] * 64
            return await self.echo(c, size, rng, abort_at=int(size * t["r2"]))
        if sc == "relay_abort_upstream":
            n = t["size"]
            await c.send(b"R %d\n" % n + b"r" * (2 * n))
            got = await c.drain()
            return "upclosed" if got <= n else "corrupt"
        if sc == "half_client":
            n = t["size"]
            await c.send(b"H %d\n" % n + b"c" * (t["size"] // 2 + 1))
            c.shut()
            got = await c.drain()
            return "ok" if got == n else "corrupt"
        if sc == "half_upstream":
            n, k = t["size"], t["size"] // 3 + 1
            await c.send(b"U %d\n" % n)
            got = 0
            while got < n:
                if not c.buf:
                    await c.more()
                got += len(c.buf)
                c.buf.clear()
            if got != n:
                return "corrupt"
            # the upstream has half-closed: EOF next, and our direction still open
            try:
                await c.more()
                return "corrupt"
            except EOFError:
                pass
            await c.send(b"k" * k)
            c.shut()
            await c.drain()
            return "ok"
        if sc == "up_rst_accept":
            await c.drain()
            return "upclosed"
        if sc == "up_stall_abort":
            await c.send(b"S\nhello")
            await asyncio.sleep(0.02 + t["r2"] * 0.3)
            return "aborted"
        if sc == "up_stall_idle":
            await c.send(b"S\nhello")
            await c.drain()  # the proxy's idle timeout ends it
            return "upclosed"
        return "error:unknown scenario"

    async def http(self, t, c, host, port, rng):
        sc = t["sc"]
        if sc == "http_denied":
            await c.send(b"GET http://%s:%d/ HTTP/1.1\r\nHost: %s\r\n\r\n"
                         % (host.encode(), port, host.encode()))
            return await self.answer(t, c)
        if sc == "http_upstream_rst":
            await c.send(b"GET http://%s:%d/rst HTTP/1.1\r\nHost: %s\r\n\r\n"
                         % (host.encode(), port, host.encode()))
            a = await self.answer(t, c)
            if a != "code:200":
                return a
            await c.drain()
            return "upclosed"
        for _ in range(1 + int(t["r"] * 3)):
            n = rng.randint(0, 8192)
            await c.send(b"GET http://%s:%d/%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n"
                         % (host.encode(), port, n, host.encode(), port))
            head = await c.until(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 200"):
                return "code:%s" % head.split()[1].decode()
            body = await c.exact(n)
            if body != b"h" * n:
                return "corrupt"
        return "ok"

    # --- running ----------------------------------------------------------------
    def log_code(self, t, obs):
        """The code the close record must carry, or None when not known."""
        if obs.startswith("code:") or obs.startswith("rep:"):
            return int(obs.split(":")[1])
        if obs in ("ok", "upclosed") and t["proto"] != "http":
            return 200 if t["proto"] == "connect" else 0
        return None

    def sample(self, phase):
        fds, rss = proc_stats(self.a.pid)
        self.samples.append({"phase": phase, "done": self.done,
                             "t": round(time.monotonic() - self.t0, 2),
                             "fds": fds, "rss_kb": rss})

    async def run(self, plan, tag_prefix, phase, every):
        it = iter(plan)
        nxt = [every]

        async def worker():
            for t in it:
                obs, lport = await self.tunnel(t, "%s%d" % (tag_prefix, t["i"]))
                self.obs[(phase, t["i"])] = (t, obs)
                if lport is not None:
                    up = None
                    if t["sc"] == "half_upstream" and obs == "ok":
                        up = len(b"U %d\n" % t["size"]) + t["size"] // 3 + 1
                    self.conns.append((lport, self.log_code(t, obs), up, t["sc"] + "/" + t["proto"]))
                self.done += 1
                if every and self.done >= nxt[0]:
                    nxt[0] += every
                    self.sample(phase)

        self.done = 0
        await asyncio.gather(*(worker() for _ in range(self.a.concurrency)))


def proc_stats(pid):
    try:
        fds = len(os.listdir("/proc/%d/fd" % pid))
        rss = 0
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
        return fds, rss
    except OSError:
        return -1, -1


def fd_table(pid):
    """The proxy's descriptors: target, and for sockets the TCP/UDP state."""
    socks = {}
    for proto in ("tcp", "tcp6", "udp", "udp6"):
        try:
            with open("/proc/%d/net/%s" % (pid, proto)) as f:
                next(f)
                for line in f:
                    x = line.split()
                    socks[x[9]] = "%s %s -> %s st=%s" % (proto, x[1], x[2], x[3])
        except OSError:
            pass
    out = {}
    try:
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                tgt = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            except OSError:
                continue
            if tgt.startswith("socket:["):
                tgt += " " + socks.get(tgt[8:-1], "")
            out[int(fd)] = tgt
    except OSError:
        pass
    return out


def read_log(path):
    closes, decisions = [], set()
    with open(path, "rb") as f:
        for line in f:
            try:
                r = json.loads(line)
            except ValueError:
                continue
            ev = r.get("event")
            if ev == "close":
                closes.append(r)
            elif ev == "decision":
                decisions.add(r["id"])
    return closes, decisions


async def settle(a, base_fds, want_closes, seconds):
    """Waits (bounded) until the log has want_closes close records and the
    count of descriptors other than pooled pipes is back at base_fds (when
    given)."""
    end = time.monotonic() + seconds
    n = -1
    while time.monotonic() < end:
        n = 0
        with open(a.log, "rb") as f:
            for line in f:
                if b'"event":"close"' in line:
                    n += 1
        tb = fd_table(a.pid)
        fds = sum(1 for v in tb.values() if not v.startswith("pipe:"))
        if n >= want_closes and (base_fds is None or fds == base_fds):
            break
        await asyncio.sleep(0.5)
    await asyncio.sleep(0.3)
    return n


def curve(samples, k=16):
    if not samples:
        return ""
    step = max(1, len(samples) // k)
    pts = samples[::step]
    if pts[-1] is not samples[-1]:
        pts.append(samples[-1])
    return "\n".join("  %7d tunnels %7.1fs  fds=%-5d rss=%d kB" % (s["done"], s["t"], s["fds"], s["rss_kb"])
                     for s in pts)


async def amain(a):
    with open(a.ports) as f:
        ports = json.load(f)
    soak = Soak(a, ports)
    results = {}
    fails = []

    def check(name, ok, detail):
        print("%s %s: %s" % ("PASS" if ok else "FAIL", name, detail), flush=True)
        results[name] = {"ok": ok, "detail": detail}
        if not ok:
            fails.append(name)

    plan = soak.plan(a.tunnels, a.seed)
    warm = soak.plan(a.warmup, a.seed + 1)
    counts = collections.Counter("%s/%s" % (t["sc"], t["proto"]) for t in plan)
    sc_counts = collections.Counter(t["sc"] for t in plan)
    print("plan: %d tunnels, seed %d, concurrency %d; by scenario:" % (a.tunnels, a.seed, a.concurrency))
    print("  " + "  ".join("%s=%d" % kv for kv in sorted(sc_counts.items())))

    # warm-up, then the baseline with nothing in flight
    start_table = fd_table(a.pid)
    t0 = time.monotonic()
    await soak.run(warm, "w", "warm", 0)
    await settle(a, None, len(soak.conns), 20)
    # descriptors must be stable for a moment (lingering closes done)
    prev = None
    for _ in range(20):
        fds, rss = proc_stats(a.pid)
        if fds == prev:
            break
        prev = fds
        await asyncio.sleep(0.5)
    base_fds, base_rss = proc_stats(a.pid)
    base_table = fd_table(a.pid)
    print("warm-up: %d tunnels in %.1fs; baseline fds=%d rss=%d kB"
          % (a.warmup, time.monotonic() - t0, base_fds, base_rss), flush=True)
    soak.sample("base")

    t1 = time.monotonic()
    await soak.run(plan, "", "run", max(1, a.tunnels // 100))
    run_s = time.monotonic() - t1
    print("run: %d tunnels in %.1fs (%.0f/s); %d waits for a free local port"
          % (a.tunnels, run_s, a.tunnels / run_s, soak.port_waits), flush=True)
    nclose = await settle(a, sum(1 for v in base_table.values() if not v.startswith("pipe:")),
                          len(soak.conns), 30)
    end_fds, end_rss = proc_stats(a.pid)
    soak.sample("end")

    with open(a.csv, "w") as f:
        f.write("phase,tunnels,seconds,fds,rss_kb\n")
        for s in soak.samples:
            f.write("%s,%d,%.2f,%d,%d\n" % (s["phase"], s["done"], s["t"], s["fds"], s["rss_kb"]))
    print("curve (csv: %s):\n%s" % (a.csv, curve([s for s in soak.samples if s["phase"] == "run"])))

    # --- client outcomes -----------------------------------------------------------------
    obs_by = collections.defaultdict(collections.Counter)
    hard, soft = [], []
    for (phase, i), (t, obs) in soak.obs.items():
        obs_by[t["sc"]][obs] += 1
        if obs in EXPECT[t["sc"]]:
            continue
        (hard if obs.startswith(HARD) else soft).append((phase, i, t["sc"], t["proto"], obs))
    print("client outcomes by scenario:")
    for sc in sorted(obs_by):
        print("  %-20s %s" % (sc, " ".join("%s=%d" % kv for kv in sorted(obs_by[sc].items()))))
    total = len(soak.obs)
    check("client", not hard and len(soft) <= max(2, total // 1000),
          "%d tunnels, %d hard failures, %d unexpected outcomes (timing, limit 0.1%%)%s"
          % (total, len(hard), len(soft),
             "".join("\n    %s" % (x,) for x in (hard + soft)[:10])))

    # --- descriptors and memory ----------------------------------------------------------
    diff = ""
    now = fd_table(a.pid)
    if len(now) - sum(1 for v in now.values() if v.startswith("pipe:")) != \
            len(base_table) - sum(1 for v in base_table.values() if v.startswith("pipe:")):
        diff = "".join("\n    new fd %d: %s" % (k, v) for k, v in sorted(now.items())
                       if base_table.get(k) != v)
        diff += "".join("\n    gone fd %d: %s" % (k, v) for k, v in sorted(base_table.items())
                        if k not in now)
    # The relay keeps up to RELAY_PIPE_POOL_MAX (8) empty splice pipes per
    # worker thread for reuse: those may differ from the baseline, nothing
    # else may.
    end_table = fd_table(a.pid)
    pipes = lambda tb: sum(1 for v in tb.values() if v.startswith("pipe:"))
    other = lambda tb: len(tb) - pipes(tb)
    check("fds", other(end_table) == other(base_table) and pipes(end_table) <= pipes(start_table) + 16 * a.workers,
          "baseline %d, end %d; other than pipes: %d -> %d; pipe ends: %d at start (libuv's), "
          "%d at baseline, %d at end (at most %d more: the relay's pool in %d workers)%s"
          % (base_fds, end_fds, other(base_table), other(end_table), pipes(start_table),
             pipes(base_table), pipes(end_table), 16 * a.workers, a.workers, diff))
    run = [s for s in soak.samples if s["phase"] == "run"]
    q = max(1, len(run) // 4)
    first = sum(s["rss_kb"] for s in run[:q]) / q if run else 0
    last = sum(s["rss_kb"] for s in run[-q:]) / q if run else 0
    growth = (last - first) / first * 100 if first else 0.0
    check("rss", first > 0 and growth < 5.0,
          "first quarter %.0f kB, last quarter %.0f kB, growth %+.2f%% (limit 5%%); baseline %d kB, end %d kB"
          % (first, last, growth, base_rss, end_rss))

    # --- the log ---------------------------------------------------------------------------
    closes, decisions = read_log(a.log)
    by_port = collections.defaultdict(list)
    anon = []
    for r in closes:
        cl = r.get("client", "-")
        if cl.startswith("127.0.0.1:"):
            by_port[int(cl.rsplit(":", 1)[1])].append(r)
        else:
            anon.append(r)
    mine = collections.defaultdict(list)
    for lport, code, up, sc in soak.conns:
        mine[lport].append((code, up, sc))
    # what the log says per scenario (ports used once: an exact match)
    per_sc = collections.defaultdict(collections.Counter)
    for lport, want in mine.items():
        recs = by_port.get(lport, [])
        if len(want) == 1 and len(recs) == 1:
            r = recs[0]
            per_sc[want[0][2]]["%s/%s" % (r.get("decision", "none"), r.get("end", "?").split(":")[0])] += 1
    unaccounted, wrong_code, extra, bad_up = 0, [], 0, 0
    for lport, want in mine.items():
        recs = by_port.pop(lport, [])
        codes = collections.Counter(r.get("code") for r in recs)
        rest = len(recs)
        for code, up, _ in sorted(want, key=lambda x: x[0] is None):
            if rest == 0:
                unaccounted += 1
                continue
            rest -= 1
            if code is None:
                continue
            if codes[code] > 0:
                codes[code] -= 1
            else:
                wrong_code.append((lport, code, [r.get("code") for r in recs]))
            if up is not None and not any(r.get("bytes_up") == up for r in recs):
                bad_up += 1
        extra += rest
    for recs in by_port.values():
        extra += len(recs)
    # records without a peer name (reset before accept) stand for unmatched ones
    covered = min(len(anon), unaccounted)
    unaccounted -= covered
    extra += len(anon) - covered
    close_ids = collections.Counter(r["id"] for r in closes)
    dup = sum(1 for v in close_ids.values() if v > 1)
    orphan = len(decisions - set(close_ids))
    ends = collections.Counter(r.get("end", "?").split(":")[0] for r in closes)
    verdicts = collections.Counter(r.get("decision", "none") for r in closes)
    print("log: %d close records for %d connections; by verdict: %s" % (
        len(closes), len(soak.conns), " ".join("%s=%d" % kv for kv in sorted(verdicts.items()))))
    print("  by end: " + "  ".join("%s=%d" % kv for kv in ends.most_common()))
    print("  by scenario (verdict/end, connections whose port was used once):")
    for sc in sorted(per_sc):
        print("    %-28s %s" % (sc, "  ".join("%s=%d" % kv for kv in per_sc[sc].most_common())))
    check("log", unaccounted == 0 and extra == 0 and not wrong_code and dup == 0 and orphan == 0
          and bad_up == 0 and nclose == len(closes),
          "%d connections, %d close records: %d unaccounted, %d extra, %d without peer name, "
          "%d code mismatches, %d duplicate ids, %d decisions without close, %d half-close byte "
          "mismatches%s" % (len(soak.conns), len(closes), unaccounted, extra, len(anon),
                            len(wrong_code), dup, orphan, bad_up,
                            "".join("\n    port %d want %s got %s" % w for w in wrong_code[:5])))

    summary = {"tunnels": a.tunnels, "seed": a.seed, "concurrency": a.concurrency,
               "run_seconds": round(run_s, 1), "scenarios": dict(sc_counts),
               "by_protocol": dict(counts), "baseline_fds": base_fds, "end_fds": end_fds,
               "baseline_rss_kb": base_rss, "end_rss_kb": end_rss,
               "rss_first_quarter_kb": round(first), "rss_last_quarter_kb": round(last),
               "rss_growth_pct": round(growth, 2), "close_records": len(closes),
               "connections": len(soak.conns), "ends": dict(ends), "verdicts": dict(verdicts),
               "checks": results, "samples": soak.samples}
    with open(a.summary, "w") as f:
        json.dump(summary, f, indent=1)
    return 1 if fails else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--http", type=int, required=True)
    ap.add_argument("--socks", type=int, required=True)
    ap.add_argument("--ports", required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--log", required=True)
    ap.add_argument("--tunnels", type=int, default=200000)
    ap.add_argument("--warmup", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--concurrency", type=int, default=128)
    ap.add_argument("--csv", required=True)
    ap.add_argument("--summary", required=True)
    a = ap.parse_args()
    sys.exit(asyncio.run(amain(a)))


if __name__ == "__main__":
    main()
