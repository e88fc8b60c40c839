#!/usr/bin/env python3
"""tests/package/ops.py SLUICE - `sluice proxy` as a supervisor sees it.

The proxy is started the way sluice-proxy.socket starts it: its three
listeners are passed in as descriptors 3, 4 and 5 named http, socks and admin
(LISTEN_PID, LISTEN_FDS, LISTEN_FDNAMES). A real NOTIFY_SOCKET (an AF_UNIX
datagram socket) receives every message;
the test checks each one and their order: READY=1 once listening (with
STATUS=), WATCHDOG=1 repeatedly under WATCHDOG_USEC, RELOADING=1 with a
MONOTONIC_USEC close to now followed by READY=1 around a SIGHUP, around a
--watch reload of an edited file, around a ConfigMap-style ..data symlink
swap, and around a bad edit (which keeps the old policy and sets
sluice_config_last_reload_successful to 0), STOPPING=1 on SIGTERM. SIGUSR1,
SIGUSR2, SIGPIPE and SIGALRM do not kill it. /metrics passes promtool.
"""
import fcntl
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

BIN = sys.argv[1]
tmp = tempfile.mkdtemp(prefix="sluice-ops-")
fails = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        fails.append(what)


# ConfigMap layout: settings.json -> ..data/settings.json, ..data -> ..v1
cm = os.path.join(tmp, "cm")
os.makedirs(os.path.join(cm, "..v1"))
with open(os.path.join(cm, "..v1", "settings.json"), "w") as f:
    json.dump({"network": {"allowedDomains": ["one.example"],
                           "allowedDomainsFiles": ["allow.txt"]}}, f)
with open(os.path.join(cm, "..v1", "allow.txt"), "w") as f:
    f.write("list.example\n")
os.symlink("..v1", os.path.join(cm, "..data"))
os.symlink("..data/settings.json", os.path.join(cm, "settings.json"))
os.symlink("..data/allow.txt", os.path.join(cm, "allow.txt"))
settings = os.path.join(cm, "settings.json")

nsock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
npath = os.path.join(tmp, "notify.sock")
nsock.bind(npath)
nsock.settimeout(0.2)

log = os.path.join(tmp, "proxy.log")
env = dict(os.environ, NOTIFY_SOCKET=npath, WATCHDOG_USEC="400000", HOME=tmp,
           XDG_CONFIG_HOME=os.path.join(tmp, "xdg"), LISTEN_FDS="3",
           LISTEN_FDNAMES="http:socks:admin")
env.pop("SLUICE_SETTINGS", None)
# socket activation as systemd does it: listening sockets at 3, 4, 5
listeners = []
for _ in range(3):
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(64)
    listeners.append(ls)
# above 9, so that moving them to 3, 4 and 5 in the child cannot clobber one
fds = [fcntl.fcntl(ls.fileno(), fcntl.F_DUPFD, 10) for ls in listeners]
admin = str(listeners[2].getsockname()[1])
activate = ('exec 3<&%d 4<&%d 5<&%d %d<&- %d<&- %d<&-; LISTEN_PID=$$; export LISTEN_PID; '
            'exec "$0" "$@"' % tuple(fds + fds))
proc = subprocess.Popen(["bash", "-c", activate, BIN, "proxy", "--settings", settings, "--watch",
                         "--http", "fd:http", "--socks", "fd:socks", "--admin", "fd:admin",
                         "--log", log],
                        env=env, stderr=subprocess.PIPE, text=True, pass_fds=fds)
for ls in listeners:
    ls.close()
for fd in fds:
    os.close(fd)

msgs = []  # every datagram, in order


def recv_until(pred, timeout=10.0):
    """Collects datagrams until pred(msg) holds for one; returns it or None."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            data = nsock.recv(4096).decode()
        except socket.timeout:
            if proc.poll() is not None:
                return None
            continue
        msgs.append(data)
        if pred(data):
            return data
    return None


def fields(msg):
    return dict(line.split("=", 1) for line in msg.split("\n") if "=" in line)


def metric(name):
    with urllib.request.urlopen("http://127.0.0.1:%s/metrics" % admin, timeout=5) as r:
        text = r.read().decode()
    m = re.search(r"^%s (\S+)$" % re.escape(name), text, re.M)
    return text, (float(m.group(1)) if m else None)


ready = recv_until(lambda m: "READY=1" in m)
if ready is None:
    print("proxy stderr:", proc.stderr.read() if proc.poll() is not None else "(running)")
check(ready is not None, "READY=1 after start")
check(ready is not None and "STATUS=" in ready and "connections" in ready,
      "READY=1 carries STATUS= with live counts: %r" % ready)
with open(log) as f:
    start = f.read()
check("event=start" in start, "the start is logged before READY=1")
text, ok = metric("sluice_config_last_reload_successful")
check(ok == 1, "sluice_config_last_reload_successful 1 at start")
for name in ("process_open_fds", "process_resident_memory_bytes", "process_cpu_seconds_total",
             "process_max_fds"):
    check(re.search(r"^%s \d" % name, text, re.M) is not None, "/metrics has " + name)
if shutil.which("promtool"):
    pt = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                        text=True)
    check(pt.returncode == 0 and pt.stdout.strip() == "" and pt.stderr.strip() == "",
          "promtool check metrics: no complaint %r" % (pt.stdout + pt.stderr))
else:
    print("SKIP promtool part: no promtool (Debian package prometheus)")

wd = [recv_until(lambda m: "WATCHDOG=1" in m, 3.0) for _ in range(2)]
check(all(wd), "WATCHDOG=1 at half of WATCHDOG_USEC")


def reload_cycle(what, action):
    before = len(msgs)
    t0 = time.monotonic()
    action()
    r = recv_until(lambda m: "RELOADING=1" in m)
    check(r is not None, what + ": RELOADING=1")
    if r is not None:
        f = fields(r)
        usec = int(f.get("MONOTONIC_USEC", "0"))
        check(abs(usec / 1e6 - t0) < 5.0, what + ": MONOTONIC_USEC is CLOCK_MONOTONIC now")
    rd = recv_until(lambda m: "READY=1" in m)
    check(rd is not None, what + ": READY=1 after RELOADING=1")
    seen = [m for m in msgs[before:] if "WATCHDOG=1" not in m or "READY" in m]
    check(sum("RELOADING=1" in m for m in seen) == 1,
          what + ": exactly one reload (debounced): %r" % seen)


reload_cycle("SIGHUP", lambda: proc.send_signal(signal.SIGHUP))
_, n = metric("sluice_policy_rules")
check(n == 2, "two rules (one inline, one from the list file): %s" % n)


def edit():
    p = os.path.join(cm, "..v1", "allow.txt")
    with open(p, "a") as f:  # several writes: one reload
        f.write("two.example\n")
        f.flush()
        f.write("three.example\n")


reload_cycle("--watch, list file edited in place", edit)
_, n = metric("sluice_policy_rules")
check(n == 4, "the edited list file is in use: %s rules" % n)


def swap():
    os.makedirs(os.path.join(cm, "..v2"))
    with open(os.path.join(cm, "..v2", "settings.json"), "w") as f:
        json.dump({"network": {"allowedDomains": ["a.example", "b.example", "c.example"],
                               "allowedDomainsFiles": ["allow.txt"]}}, f)
    with open(os.path.join(cm, "..v2", "allow.txt"), "w") as f:
        f.write("d.example\ne.example\n")
    os.symlink("..v2", os.path.join(cm, "..data_tmp"))
    os.rename(os.path.join(cm, "..data_tmp"), os.path.join(cm, "..data"))
    shutil.rmtree(os.path.join(cm, "..v1"))


reload_cycle("--watch, ConfigMap ..data swap", swap)
_, n = metric("sluice_policy_rules")
check(n == 5, "the swapped ConfigMap is in use: %s rules" % n)


def bad():
    with open(os.path.join(cm, "..v2", "settings.json"), "w") as f:
        f.write('{"network": {"allowedDomains": ["*.com"]}}')


reload_cycle("--watch, bad edit", bad)
text, ok = metric("sluice_config_last_reload_successful")
_, n = metric("sluice_policy_rules")
check(ok == 0 and n == 5, "a bad file keeps the old policy (%s rules) and is counted (%s)" % (n, ok))
check(re.search(r'^sluice_reloads_total\{result="error"\} 1$', text, re.M) is not None,
      "sluice_reloads_total{result=\"error\"} 1")

for sig in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGPIPE, signal.SIGALRM):
    proc.send_signal(sig)
    time.sleep(0.3)
    check(proc.poll() is None, "alive after %s" % sig.name)

before = len(msgs)
proc.send_signal(signal.SIGTERM)
st = recv_until(lambda m: "STOPPING=1" in m)
check(st is not None, "STOPPING=1 on SIGTERM")
try:
    rc = proc.wait(timeout=20)
except subprocess.TimeoutExpired:
    proc.kill()
    rc = None
check(rc == 0, "exit 0 after the drain (got %s)" % rc)
err = proc.stderr.read()

# the order of every state message, watchdog pings left out
states = [m.split("\n")[0] for m in msgs if not m.startswith("WATCHDOG=1")]
want = ["READY=1"] + ["RELOADING=1", "READY=1"] * 4 + ["STOPPING=1"]
states = [s for s in states if not s.startswith("STATUS=")]
check(states == want, "message order %r" % states)
check(all("\n" not in fields(m).get("STATUS", "") for m in msgs), "STATUS= is one line")
if err.strip():
    print("stderr:", err)

# --watch needs a file to watch: refused, not ignored
env2 = dict(env)
for k in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "LISTEN_FDS", "LISTEN_FDNAMES"):
    env2.pop(k, None)
r = subprocess.run([BIN, "proxy", "--watch", "--http", "tcp:127.0.0.1:0", "--socks", "off"],
                   env=env2, capture_output=True, text=True, timeout=30)
check(r.returncode == 2 and "--watch needs" in r.stderr,
      "--watch without --settings or $SLUICE_SETTINGS: exit 2 with why (%d %r)"
      % (r.returncode, r.stderr.strip()[-120:]))
shutil.rmtree(tmp, ignore_errors=True)
print("FAIL: %d checks" % len(fails) if fails else "PASS")
sys.exit(1 if fails else 0)
