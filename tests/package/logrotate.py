#!/usr/bin/env python3
"""tests/package/logrotate.py SLUICE - rotating the log under load loses no
line. Clients keep making CONNECT requests that the policy denies (no DNS,
no traffic leaves the host) while the log is renamed away and the proxy is
sent SIGUSR1 (logrotate's postrotate) or SIGHUP, many times over. Then every
connection must have its decision and close records, each exactly once,
across all the rotated files, and every line must be whole.
"""
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

BIN = sys.argv[1]
CLIENTS, PER_CLIENT, ROTATIONS = 4, 300, 40
tmp = tempfile.mkdtemp(prefix="sluice-logrotate-")
log = os.path.join(tmp, "proxy.log")
settings = os.path.join(tmp, "settings.json")
with open(settings, "w") as f:
    f.write('{"network": {"allowedDomains": ["allowed.example"]}}\n')
env = dict(os.environ, HOME=tmp, XDG_CONFIG_HOME=os.path.join(tmp, "xdg"))
env.pop("NOTIFY_SOCKET", None)
proc = subprocess.Popen([BIN, "proxy", "--settings", settings, "--http", "tcp:127.0.0.1:0",
                         "--socks", "off", "--log", log], env=env)
port = None
for _ in range(100):
    try:
        m = re.search(r"listening: http tcp:127\.0\.0\.1:(\d+)", open(log).read())
    except FileNotFoundError:
        m = None
    if m:
        port = int(m.group(1))
        break
    time.sleep(0.05)
assert port, "proxy did not start"

done = [0] * CLIENTS
errors = []


def client(i):
    for j in range(PER_CLIENT):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(b"CONNECT denied-%d-%d.example:443 HTTP/1.1\r\n"
                      b"Host: denied.example:443\r\n\r\n" % (i, j))
            reply = s.recv(4096)
            s.close()
            if not reply.startswith(b"HTTP/1.1 403"):
                errors.append(reply[:60])
            done[i] += 1
        except OSError as e:
            errors.append(str(e))


threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
for t in threads:
    t.start()
rotated = []
for k in range(ROTATIONS):
    time.sleep(0.03)
    dst = "%s.%d" % (log, k)
    os.rename(log, dst)
    rotated.append(dst)
    proc.send_signal(signal.SIGUSR1 if k % 2 == 0 else signal.SIGHUP)
for t in threads:
    t.join()
proc.send_signal(signal.SIGTERM)
rc = proc.wait(timeout=30)

records = {}
bad = []
nlines = 0
for path in rotated + [log]:
    if not os.path.exists(path):
        continue
    data = open(path).read()
    if data and not data.endswith("\n"):
        bad.append("%s ends in a partial line" % path)
    for line in data.splitlines():
        nlines += 1
        # one logfmt record per line: a time, an event, and for connections an id
        ev = re.search(r"(?:^| )event=(\w+)(?: |$)", line)
        cid = re.search(r"(?:^| )id=(\d+)(?: |$)", line)
        if not re.search(r"\d{4}-\d\d-\d\dT[\d:.]+Z", line) or ev is None:
            bad.append("malformed line in %s: %r" % (path, line[:100]))
        elif ev.group(1) in ("decision", "close") and cid is not None:
            key = (int(cid.group(1)), ev.group(1))
            records[key] = records.get(key, 0) + 1

total = sum(done)
ids = {k[0] for k in records}
missing = [i for i in ids if records.get((i, "decision")) != 1 or records.get((i, "close")) != 1]
files_with_records = sum(1 for p in rotated if os.path.exists(p) and os.path.getsize(p) > 0)
print("requests %d, errors %d, connections logged %d, lines %d, files with lines %d, exit %d"
      % (total, len(errors), len(ids), nlines, files_with_records, rc))
ok = (rc == 0 and not errors and total == CLIENTS * PER_CLIENT and len(ids) == total
      and not missing and not bad and files_with_records >= ROTATIONS // 2)
for b in bad[:5]:
    print(b)
if missing:
    print("connections without exactly one decision and one close:", missing[:10])
if errors:
    print("client errors:", errors[:5])
subprocess.run(["rm", "-rf", tmp])
print("PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
