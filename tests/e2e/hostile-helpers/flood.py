#!/usr/bin/env python3
"""flood.py - many CONNECTs to distinct names nobody will answer about.

usage: flood.py HTTP_PORT ADMIN_PORT PROXY_PID COUNT CONCURRENCY HOLD DEADLINE [STARTED_FILE]

COUNT CONNECTs to n0.unknown.test:443 ... n{COUNT-1}.unknown.test:443
through the HTTP proxy, CONCURRENCY at a time. Each waits for the status
line up to HOLD seconds after its request was sent; one that gets none is
"held" (its ask is pending) and is then closed with a reset. No new CONNECT starts after
DEADLINE seconds. Meanwhile every 0.1 s the proxy's descriptors
(/proc/PID/fd) and sluice_asks_pending (/metrics on the admin port) are
sampled. When the flood is running, "started" is written to STARTED_FILE.

Prints key=value lines:
  sent answered held errors status_403 status_503 status_other
  lat_max lat_p50 lat_p99 (seconds from request sent to status line, answered only)
  pending_max pending_samples fd_max fd_samples duration
"""
import asyncio
import os
import socket
import struct
import sys
import time


async def one(i, port, hold, res):
    try:
        r, w = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 10)
    except (OSError, asyncio.TimeoutError):
        res["errors"] += 1
        return
    try:
        host = "n%d.unknown.test:443" % i
        w.write(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (host, host)).encode())
        await w.drain()
        t0 = time.monotonic()
        try:
            line = await asyncio.wait_for(r.readline(), hold)
        except asyncio.TimeoutError:
            res["held"] += 1
            # gone for sure (a reset, not a half-close that may still want
            # its answer): the proxy lets the connection go at once
            sock = w.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return
        if not line:
            res["errors"] += 1
            return
        res["lat"].append(time.monotonic() - t0)
        parts = line.split()
        code = parts[1].decode() if len(parts) > 1 else "?"
        key = "status_" + code if code in ("403", "503") else "status_other"
        res[key] += 1
        if key == "status_other" and len(res["other"]) < 5:
            res["other"].append(line)
        res["answered"] += 1
    except OSError:
        res["errors"] += 1
    finally:
        w.close()


async def metric(aport):
    r, w = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", aport), 5)
    w.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    body = await asyncio.wait_for(r.read(), 5)
    w.close()
    for ln in body.decode().splitlines():
        if ln.startswith("sluice_asks_pending "):
            return int(float(ln.split()[1]))
    return None


async def sampler(aport, pid, res, stop):
    while not stop.is_set():
        try:
            res["fd"].append(len(os.listdir("/proc/%d/fd" % pid)))
        except OSError:
            pass
        try:
            p = await metric(aport)
            if p is not None:
                res["pending"].append(p)
        except (OSError, asyncio.TimeoutError, ValueError):
            res["sample_errors"] += 1
        try:
            await asyncio.wait_for(stop.wait(), 0.1)
        except asyncio.TimeoutError:
            pass


async def main():
    port, aport, pid = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    count, conc = int(sys.argv[4]), int(sys.argv[5])
    hold, deadline = float(sys.argv[6]), float(sys.argv[7])
    started = sys.argv[8] if len(sys.argv) > 8 else None
    res = {"answered": 0, "held": 0, "errors": 0, "status_403": 0, "status_503": 0,
           "status_other": 0, "lat": [], "fd": [], "pending": [], "other": [],
           "sample_errors": 0, "sent": 0}
    stop = asyncio.Event()
    samp = asyncio.ensure_future(sampler(aport, pid, res, stop))
    t_start = time.monotonic()
    it = iter(range(count))

    async def worker():
        for i in it:
            if time.monotonic() - t_start > deadline:
                return
            res["sent"] += 1
            await one(i, port, hold, res)

    workers = [asyncio.ensure_future(worker()) for _ in range(conc)]
    if started:
        await asyncio.sleep(0.5)
        with open(started, "w") as f:
            f.write("started\n")
    await asyncio.gather(*workers)
    stop.set()
    await samp
    lat = sorted(res["lat"]) or [-1.0]
    out = {k: res[k] for k in ("sent", "answered", "held", "errors", "status_403", "status_503",
                               "status_other", "sample_errors")}
    out["lat_max"] = "%.3f" % lat[-1]
    out["lat_p50"] = "%.3f" % lat[len(lat) // 2]
    out["lat_p99"] = "%.3f" % lat[min(len(lat) - 1, len(lat) * 99 // 100)]
    out["pending_max"] = max(res["pending"]) if res["pending"] else -1
    out["pending_samples"] = len(res["pending"])
    out["fd_max"] = max(res["fd"]) if res["fd"] else -1
    out["fd_samples"] = len(res["fd"])
    out["duration"] = "%.1f" % (time.monotonic() - t_start)
    for k, v in out.items():
        print("%s=%s" % (k, v))
    for ln in res["other"]:
        print("other=%r" % ln)


if __name__ == "__main__":
    asyncio.run(main())
