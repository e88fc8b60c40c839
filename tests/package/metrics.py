#!/usr/bin/env python3
"""tests/package/metrics.py SLUICE - /metrics of `sluice proxy`: bytes are
counted while a tunnel is open (not only when it closes), the dial, ask and
decision latency histograms count what happened, the process metrics are
there, and promtool finds nothing to complain about. Traffic stays on
127.0.0.1: an echo server allowed by an IP rule, and a name the exec: ask
handler denies (so it is never resolved).
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

BIN = sys.argv[1]
tmp = tempfile.mkdtemp(prefix="sluice-metrics-")
fails = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        fails.append(what)


echo = socket.socket()
echo.bind(("127.0.0.1", 0))
echo.listen(8)
echo_port = echo.getsockname()[1]


def serve():
    while True:
        try:
            c, _ = echo.accept()
        except OSError:
            return

        def pump(c=c):
            while True:
                d = c.recv(65536)
                if not d:
                    c.close()
                    return
                c.sendall(d)
        threading.Thread(target=pump, daemon=True).start()


threading.Thread(target=serve, daemon=True).start()

ask = os.path.join(tmp, "ask.sh")
with open(ask, "w") as f:
    f.write("#!/bin/sh\ncat >/dev/null\necho 'deny not today'\n")
os.chmod(ask, 0o755)
settings = os.path.join(tmp, "settings.json")
with open(settings, "w") as f:
    f.write('{"network": {"allowedDomains": ["127.0.0.1:%d"]}}\n' % echo_port)
log = os.path.join(tmp, "proxy.log")
env = dict(os.environ, HOME=tmp, XDG_CONFIG_HOME=os.path.join(tmp, "xdg"))
env.pop("NOTIFY_SOCKET", None)
proc = subprocess.Popen([BIN, "proxy", "--settings", settings, "--ask", "exec:" + ask,
                         "--http", "tcp:127.0.0.1:0", "--socks", "off",
                         "--admin", "tcp:127.0.0.1:0", "--log", log], env=env)
http = admin = None
for _ in range(100):
    if os.path.exists(log):
        m = re.search(r"http tcp:127\.0\.0\.1:(\d+).*admin tcp:127\.0\.0\.1:(\d+)", open(log).read())
        if m:
            http, admin = int(m.group(1)), int(m.group(2))
            break
    time.sleep(0.05)
assert http, "proxy did not start"


def metrics():
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % admin, timeout=5) as r:
        return r.read().decode()


def value(text, name):
    m = re.search(r"^%s (\S+)$" % re.escape(name), text, re.M)
    return float(m.group(1)) if m else None


def connect(target):
    s = socket.create_connection(("127.0.0.1", http), timeout=10)
    s.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target))
    head = b""
    while b"\r\n\r\n" not in head:
        d = s.recv(1)
        if not d:
            break
        head += d
    return s, head


s, head = connect(b"127.0.0.1:%d" % echo_port)
check(head.startswith(b"HTTP/1.1 200"), "CONNECT to the allowed echo server: %r" % head[:40])
payload = os.urandom(5000)
s.sendall(payload)
got = b""
while len(got) < len(payload):
    d = s.recv(65536)
    if not d:
        break
    got += d
check(got == payload, "5000 bytes echoed through the tunnel")
text = metrics()  # the tunnel is still open
up = value(text, 'sluice_bytes_total{direction="up"}')
down = value(text, 'sluice_bytes_total{direction="down"}')
check(up is not None and up >= 5000 and down is not None and down >= 5000,
      "bytes counted while the tunnel is open: up %s, down %s" % (up, down))
check((value(text, "sluice_dial_seconds_count") or 0) >= 1, "sluice_dial_seconds counts the dial")
check((value(text, "sluice_decision_seconds_count") or 0) >= 1,
      "sluice_decision_seconds counts the request")
check(value(text, 'sluice_dial_seconds_bucket{le="+Inf"}') == value(text, "sluice_dial_seconds_count"),
      "the +Inf bucket equals the count")
s.close()

a, head = connect(b"asked.example:443")
check(head.startswith(b"HTTP/1.1 403"), "the ask handler denies asked.example: %r" % head[:40])
a.close()
time.sleep(0.2)
text = metrics()
check(value(text, "sluice_ask_seconds_count") == 1, "sluice_ask_seconds counts the question")
check(value(text, "sluice_dns_seconds_count") == 0, "no DNS lookup happened (none counted)")
check((value(text, 'sluice_bytes_total{direction="up"}') or 0) >= 5000,
      "the bytes stay counted after the tunnel closed")
for name in ("process_open_fds", "process_max_fds", "process_resident_memory_bytes",
             "process_cpu_seconds_total", "sluice_config_last_reload_successful",
             "sluice_config_last_reload_success_timestamp_seconds"):
    check(value(text, name) is not None, "/metrics has " + name)
if shutil.which("promtool"):
    pt = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                        text=True)
    check(pt.returncode == 0 and (pt.stdout + pt.stderr).strip() == "",
          "promtool check metrics: no complaint %r" % (pt.stdout + pt.stderr))
else:
    print("SKIP promtool part: no promtool (Debian package prometheus)")
proc.send_signal(signal.SIGTERM)
rc = proc.wait(timeout=30)
check(rc == 0, "exit 0")
echo.close()
shutil.rmtree(tmp, ignore_errors=True)
print("FAIL: %d checks" % len(fails) if fails else "PASS")
sys.exit(1 if fails else 0)
