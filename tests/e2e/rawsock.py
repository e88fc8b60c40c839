#!/usr/bin/env python3
"""rawsock.py - send raw bytes to a loopback TCP service and print what comes back.

usage: rawsock.py PORT STEP...
  STEP is one of
    s:HEX      send these bytes (hex, spaces allowed via separate steps)
    r:N        read exactly N bytes (or until EOF) and print them as hex
    e          read until EOF (or 5 s) and print "EOF after N bytes: HEX"
    w:SECONDS  sleep
    shut       shut down the write side
Each printed line is one step's result, so tests can match them exactly.
Only 127.0.0.1 is ever contacted.
"""
import socket
import sys
import time


def read_n(s, n, timeout=10.0):
    s.settimeout(timeout)
    out = b""
    try:
        while len(out) < n:
            chunk = s.recv(n - len(out))
            if not chunk:
                break
            out += chunk
    except socket.timeout:
        return out, "timeout"
    except ConnectionResetError:
        return out, "reset"
    return out, None


def main():
    port = int(sys.argv[1])
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    for step in sys.argv[2:]:
        if step.startswith("s:"):
            try:
                s.sendall(bytes.fromhex(step[2:]))
            except (BrokenPipeError, ConnectionResetError):
                print("send failed")
        elif step.startswith("r:"):
            data, err = read_n(s, int(step[2:]))
            print(data.hex() + (" " + err if err else "") + ("" if data or err else "EOF"))
        elif step == "e":
            start = time.monotonic()
            data, err = read_n(s, 1 << 20, timeout=8.0)
            took = time.monotonic() - start
            print("EOF after %d bytes: %s%s" % (len(data), data.hex(),
                  " " + err if err else ""))
            sys.stderr.write("(%.1fs)\n" % took)
        elif step.startswith("w:"):
            time.sleep(float(step[2:]))
        elif step == "shut":
            s.shutdown(socket.SHUT_WR)
        else:
            sys.exit("bad step " + step)
    s.close()


if __name__ == "__main__":
    main()
