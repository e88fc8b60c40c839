#!/usr/bin/env python3
"""tests/soak/world.py - everything sluice talks to during the soak, on loopback.

One asyncio process (stdlib only) serves:
  svc        a TCP upstream whose behaviour the client picks with its first
             line (after the tunnel is up), or an HTTP/1.1 origin when the
             first line is a request line:
               "E\\n"    echo until EOF, then close
               "H n\\n"  read to EOF (the client half-closed), then send n bytes
                        and close
               "U n\\n"  send n bytes and half-close first, keep reading to EOF
               "R n\\n"  echo n bytes, then reset (SO_LINGER 0)
               "S\\n"    stall: read and discard, never write
               "X\\n"    close at once
             HTTP: "GET /rst" resets; any other GET gets 200 and a body of
             the size named by the path ("/n"), keep-alive.
  rstacc     accepts and resets at once
  refused    a bound socket that does not listen (connect -> RST)
  blackhole  listen(0), never accepted, its queue kept full: SYNs are dropped
             and a dial hangs until the dialer's timeout
  dns        UDP DNS for *.soak: A 127.0.0.1, AAAA empty; a name with label
             "drop" is never answered, "nx" gets NXDOMAIN, "slow" is answered
             after 0.05 s or after 3 s (by hash), i.e. before or after the
             proxy's DNS timeout
  ask        the --ask socket:PATH supervisor: host labels "allow"/"deny"
             answer after 0-100 ms, "never" is never answered, "late" answers
             allow after 0.05 s or 4 s (after the ask timeout)

Usage: world.py PORTS_JSON ASK_SOCKET_PATH. Writes the ports to PORTS_JSON
when every service listens; exits on SIGTERM, or when its parent goes away.
"""
import asyncio
import json
import os
import random
import signal
import socket
import struct
import sys
import zlib

LINGER0 = struct.pack("ii", 1, 0)
stats = {"svc": 0, "rstacc": 0, "dns_q": 0, "dns_drop": 0, "ask_q": 0}


def reset(transport):
    sock = transport.get_extra_info("socket")
    try:
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER0)
    except OSError:
        pass
    transport.abort()


class Svc(asyncio.Protocol):
    def connection_made(self, transport):
        stats["svc"] += 1
        self.t = transport
        self.buf = b""
        self.mode = None
        self.left = 0
        self.send_after = 0

    def data_received(self, data):
        if self.mode is None:
            self.buf += data
            if self.buf.startswith(b"GET ") or self.buf.startswith(b"HEAD"):
                self.mode = "http"
                self.http()
                return
            i = self.buf.find(b"\n")
            if i < 0:
                if len(self.buf) > 4096:
                    self.t.close()
                return
            line, rest = self.buf[:i].decode("ascii", "replace").split(), self.buf[i + 1:]
            self.buf = b""
            cmd = line[0] if line else "?"
            n = int(line[1]) if len(line) > 1 and line[1].isdigit() else 0
            if cmd == "E":
                self.mode = "echo"
            elif cmd == "H":
                self.mode = "half"
                self.send_after = n
            elif cmd == "U":
                self.mode = "sink"
                self.t.write(b"u" * n)
                if self.t.can_write_eof():
                    self.t.write_eof()
            elif cmd == "R":
                self.mode = "rst"
                self.left = n
            elif cmd == "S":
                self.mode = "sink"
            else:
                self.t.close()
                return
            if rest:
                self.data_received(rest)
            return
        if self.mode == "echo":
            self.t.write(data)
        elif self.mode == "rst":
            take = data[: self.left]
            self.t.write(take)
            self.left -= len(take)
            if self.left <= 0:
                # let the echoed bytes leave first, then reset
                asyncio.get_running_loop().call_later(0.02, reset, self.t)
                self.mode = "sink"
        elif self.mode == "http":
            self.buf += data
            self.http()

    def http(self):
        while True:
            i = self.buf.find(b"\r\n\r\n")
            if i < 0:
                if len(self.buf) > 65536:
                    self.t.close()
                return
            head, self.buf = self.buf[:i], self.buf[i + 4:]
            parts = head.split(b"\r\n", 1)[0].split()
            path = parts[1].decode("ascii", "replace") if len(parts) > 1 else "/"
            if path.startswith("/rst"):
                self.t.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\npartial")
                asyncio.get_running_loop().call_later(0.02, reset, self.t)
                self.mode = "sink"
                return
            try:
                n = int(path.strip("/") or "0")
            except ValueError:
                n = 0
            self.t.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % n + b"h" * n)

    def eof_received(self):
        if self.mode == "half":
            self.t.write(b"h" * self.send_after)
        # returning None closes the transport after the writes are flushed
        return None

    def connection_lost(self, exc):
        pass


class RstAcc(asyncio.Protocol):
    def connection_made(self, transport):
        stats["rstacc"] += 1
        reset(transport)


def qname(data, off):
    labels = []
    while off < len(data):
        n = data[off]
        off += 1
        if n == 0:
            return ".".join(labels).lower(), off
        if n & 0xC0:
            return None, off
        labels.append(data[off:off + n].decode("ascii", "replace"))
        off += n
    return None, off


class Dns(asyncio.DatagramProtocol):
    def connection_made(self, transport):
        self.t = transport

    def datagram_received(self, data, addr):
        if len(data) < 12:
            return
        stats["dns_q"] += 1
        name, off = qname(data, 12)
        if name is None or off + 4 > len(data):
            return
        qtype = struct.unpack("!H", data[off:off + 2])[0]
        question = data[12:off + 4]
        labels = name.split(".")
        rid = data[:2]
        flags_rd = data[2] & 1
        if not name.endswith(".soak") or "nx" in labels:
            self.answer(rid, flags_rd, 3, question, None, addr)
            return
        if "drop" in labels:
            stats["dns_drop"] += 1
            return
        rr = None
        if qtype == 1:
            rr = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 60, 4) + socket.inet_aton("127.0.0.1")
        if "slow" in labels:
            delay = 0.05 if zlib.crc32(name.encode()) % 2 else 3.0
            asyncio.get_running_loop().call_later(
                delay, self.answer, rid, flags_rd, 0, question, rr, addr)
            return
        self.answer(rid, flags_rd, 0, question, rr, addr)

    def answer(self, rid, rd, rcode, question, rr, addr):
        hdr = rid + struct.pack("!BBHHHH", 0x80 | 0x04 | rd, 0x80 | rcode, 1,
                                1 if rr else 0, 0, 0)
        try:
            self.t.sendto(hdr + question + (rr or b""), addr)
        except OSError:
            pass


class Ask(asyncio.Protocol):
    def connection_made(self, transport):
        self.t = transport
        self.buf = b""

    def data_received(self, data):
        self.buf += data
        loop = asyncio.get_running_loop()
        while True:
            i = self.buf.find(b"\n")
            if i < 0:
                return
            line, self.buf = self.buf[:i], self.buf[i + 1:]
            if not line.strip():
                continue
            stats["ask_q"] += 1
            q = json.loads(line)
            labels = q["host"].split(".")
            qid = q["id"]
            if "never" in labels:
                continue
            if "allow" in labels:
                loop.call_later(random.random() * 0.1, self.say, qid, "allow")
            elif "late" in labels:
                delay = 0.05 if zlib.crc32(q["host"].encode()) % 2 else 4.0
                loop.call_later(delay, self.say, qid, "allow")
            else:
                loop.call_later(random.random() * 0.1, self.say, qid, "deny")

    def say(self, qid, decision):
        if not self.t.is_closing():
            self.t.write(b'{"id":%d,"decision":"%s"}\n' % (qid, decision.encode()))


async def main():
    ports_file, ask_path = sys.argv[1], sys.argv[2]
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for s in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(s, stop.set)

    svc = await loop.create_server(Svc, "127.0.0.1", 0, backlog=4096)
    rstacc = await loop.create_server(RstAcc, "127.0.0.1", 0, backlog=4096)
    refused = socket.socket()
    refused.bind(("127.0.0.1", 0))
    hole = socket.socket()
    hole.bind(("127.0.0.1", 0))
    hole.listen(0)
    fill = []
    for _ in range(3):  # fill the accept queue; later SYNs are dropped
        c = socket.socket()
        c.setblocking(False)
        try:
            c.connect(hole.getsockname())
        except BlockingIOError:
            pass
        fill.append(c)
    dns_t, _ = await loop.create_datagram_endpoint(Dns, local_addr=("127.0.0.1", 0))
    if os.path.exists(ask_path):
        os.unlink(ask_path)
    ask = await loop.create_unix_server(Ask, ask_path)

    ports = {
        "svc": svc.sockets[0].getsockname()[1],
        "rstacc": rstacc.sockets[0].getsockname()[1],
        "refused": refused.getsockname()[1],
        "blackhole": hole.getsockname()[1],
        "dns": dns_t.get_extra_info("sockname")[1],
        "pid": os.getpid(),
    }
    tmp = ports_file + ".tmp"
    with open(tmp, "w") as f:
        json.dump(ports, f)
    os.rename(tmp, ports_file)

    ppid = os.getppid()
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), 1.0)
        except asyncio.TimeoutError:
            pass
        if os.getppid() != ppid:
            break
    print("world: " + " ".join("%s=%d" % kv for kv in stats.items()), file=sys.stderr)


if __name__ == "__main__":
    asyncio.run(main())
