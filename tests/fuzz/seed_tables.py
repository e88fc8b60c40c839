#!/usr/bin/env python3
"""seed_tables.py - corpus seeds from the unit tables, the e2e scripts and the
settings files of the repository (run by seed.sh).

usage: seed_tables.py REPO CORPUS_DIR

Writes descriptive file names (table-*, e2e-*, file-*) into
CORPUS_DIR/{http_head,socks5,rules,settings,endpoint}; running it again gives
the same files. The C string literals of the test tables are read with a small
tokenizer (adjacent literals and the tables' own macros H11/END/L63... are
joined), so a row added to a unit table becomes a seed on the next run.
"""
import glob
import hashlib
import json
import os
import re
import sys

REPO, OUT = sys.argv[1], sys.argv[2]

ESC = {"n": b"\n", "r": b"\r", "t": b"\t", "0": b"\0", "\\": b"\\", '"': b'"', "'": b"'",
       "a": b"\a", "b": b"\b", "f": b"\f", "v": b"\v", "?": b"?"}


def c_string(body):
    """Decodes the inside of one C string literal to bytes."""
    out, i = bytearray(), 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out += ch.encode("utf-8")
            i += 1
            continue
        nxt = body[i + 1]
        if nxt == "x":
            m = re.match(r"[0-9a-fA-F]+", body[i + 2:])
            out.append(int(m.group(0), 16) & 0xFF)
            i += 2 + len(m.group(0))
        elif nxt in "01234567":
            m = re.match(r"[0-7]{1,3}", body[i + 1:])
            out.append(int(m.group(0), 8) & 0xFF)
            i += 1 + len(m.group(0))
        else:
            out += ESC.get(nxt, nxt.encode())
            i += 2
    return bytes(out)


TOKEN = re.compile(r'"((?:[^"\\\n]|\\.)*)"|([A-Za-z_][A-Za-z_0-9]*)|(,|\{|\}|\(|\))|(\s+)|(.)',
                   re.S)


def table_rows(src, table, macros):
    """The first string argument (adjacent literals and macros joined) of each row of
    `table` in src, plus every other string argument of that row."""
    start = src.index(table)
    start = src.index("{", src.index("=", start)) + 1
    depth, i, rows, cur, strs, pending = 1, start, [], None, [], None
    for m in TOKEN.finditer(src, start):
        lit, ident, punct = m.group(1), m.group(2), m.group(3)
        if lit is not None or (ident is not None and ident in macros):
            piece = c_string(lit) if lit is not None else macros[ident]
            pending = (pending or b"") + piece
            continue
        if ident is None and punct is None:
            continue
        if pending is not None:
            strs.append(pending)
            pending = None
        if punct in ("{", "("):
            depth += 1
        elif punct in ("}", ")"):
            depth -= 1
            if depth == 1 and strs:
                rows.append(strs)
                strs = []
            if depth == 0:
                break
    return rows


def write(kind, name, data):
    d = os.path.join(OUT, kind)
    os.makedirs(d, exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:80]
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def short(data):
    return hashlib.sha1(data).hexdigest()[:10]


def read(rel):
    with open(os.path.join(REPO, rel), encoding="utf-8") as f:
        return f.read()


# --- http_head -------------------------------------------------------------
src = read("tests/proxy/test_http_head.c")
hm = {"H11": b" HTTP/1.1\r\n", "END": b"\r\n"}
for table in ("end_rows[]", "req_rows[]", "build_rows[]", "resp_rows[]"):
    for row in table_rows(src, table, hm):
        data = row[0]
        write("http_head", "table-%s-%s" % (table[:-2], short(data)), data)
# a request followed by the upstream's answer to it (build rows x response rows)
resp = [r[0] for r in table_rows(src, "resp_rows[]", hm)]
for i, row in enumerate(table_rows(src, "build_rows[]", hm)):
    data = row[0] + resp[i % len(resp)]
    write("http_head", "table-exchange-%s" % short(data), data)

# the byte strings of tests/e2e/http.sh's raw requests
sh = read("tests/e2e/http.sh")
var = {"A": "http://origin.test:8080", "H11": " HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n",
       "P": "POST http://origin.test:8080/echo?t=refused HTTP/1.1\\r\\n",
       "big": "X-Pad: " + "a" * 3000}
for m in re.finditer(r's:"((?:[^"\\]|\\.)*)"((?:"(?:[^"\\]|\\.)*")*)', sh):
    text = m.group(1) + "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(2)))
    text = re.sub(r"\$\{?([A-Za-z_0-9]+)\}?", lambda v: var.get(v.group(1), "8080"), text)
    data = c_string(text)
    write("http_head", "e2e-http-%s" % short(data), data)

# --- socks5 ----------------------------------------------------------------
sh = read("tests/e2e/socks.sh")
svar = {"GREET": "050100", "OPORT": "1f90", "CLOSED": "0009", "PORT": "1f90"}
for m in re.finditer(r"s:([0-9a-fA-F\"$(){} %]+)", sh):
    text = re.sub(r"\$\(printf %04x \"?\$(\w+)\"?\)", lambda v: "1f90", m.group(1))
    text = re.sub(r"\$\(hexname ([^)]*)\)", lambda v: (lambda s: "%02x" % len(s) + s.encode().hex())(
        v.group(1).strip('"')), text)
    text = re.sub(r"\$(\w+)", lambda v: svar.get(v.group(1), ""), text).replace('"', "")
    text = re.sub(r"[^0-9a-fA-F]", "", text)
    if len(text) % 2 == 0 and text:
        data = bytes.fromhex(text)
        write("socks5", "e2e-socks-%s" % short(data), data)
# the parser unit test's conversations, written out by hand from its spec table
def sreq(atyp, addr, port=443, cmd=1):
    return bytes([5, cmd, 0, atyp]) + addr + port.to_bytes(2, "big")
dom = lambda s: bytes([len(s)]) + s
socks = {
    "noauth-domain": b"\x05\x01\x00" + sreq(3, dom(b"example.com")),
    "noauth-ipv4": b"\x05\x01\x00" + sreq(1, bytes([127, 0, 0, 1]), 80),
    "noauth-ipv6": b"\x05\x01\x00" + sreq(4, bytes(15) + b"\x01", 80),
    "ipv6-mapped": b"\x05\x01\x00" + sreq(4, bytes(10) + b"\xff\xff\xa9\xfe\xa9\xfe", 80),
    "userpass": b"\x05\x02\x00\x02\x01\x05alice\x06s3cret" + sreq(3, dom(b"a.test")),
    "userpass-255": b"\x05\x01\x02\x01\xff" + b"u" * 255 + b"\xff" + b"p" * 255 +
                    sreq(3, dom(b"d" * 255)),
    "early-data": b"\x05\x01\x00" + sreq(3, dom(b"a.test")) + b"\x16\x03\x01\x00\x05hello",
    "bind": b"\x05\x01\x00" + sreq(3, dom(b"a.test"), cmd=2),
    "udp": b"\x05\x01\x00" + sreq(1, bytes(4), 0, cmd=3),
    "bad-atyp": b"\x05\x01\x00\x05\x01\x00\x05",
    "empty-domain": b"\x05\x01\x00\x05\x01\x00\x03\x00\x01\xbb",
    "bad-rsv": b"\x05\x01\x00\x05\x01\x01\x01",
    "no-methods": b"\x05\x00",
    "socks4": b"\x04\x01\x00\x50\x7f\x00\x00\x01user\x00",
    "http": b"GET / HTTP/1.1\r\n\r\n",
    "auth-ver": b"\x05\x01\x02\x02\x01a\x01b",
    "auth-empty": b"\x05\x01\x02\x01\x00\x00",
    "nul-domain": b"\x05\x01\x00" + sreq(3, dom(b"a\x00b.test")),
    "port0": b"\x05\x01\x00" + sreq(3, dom(b"a.test"), 0),
    "255-methods": b"\x05\xff" + bytes(range(255)) + sreq(3, dom(b"x")),
}
for k, v in socks.items():
    write("socks5", "table-" + k, v)

# --- rules -----------------------------------------------------------------
src = read("tests/policy/test_policy.c")
pm = {"L63": b"abcdefghij" * 6 + b"abc", "L61": b"abcdefghij" * 6 + b"a"}
pm["NAME253"] = pm["L63"] + b"." + pm["L63"] + b"." + pm["L63"] + b"." + pm["L61"]
pm["NAME254"] = pm["NAME253"] + b"b"
lines = {}
for table in ("norm_rows[]", "target_rows[]", "pattern_rows[]", "addr_rows[]", "compile_rows[]",
              "decide_rows[]", "class_rows[]", "guard_rows[]"):
    try:
        rows = table_rows(src, table, pm)
    except ValueError:
        continue
    vals = [r[0] for r in rows if r and b"\n" not in r[0]]
    lines[table[:-2]] = vals
    for i in range(0, len(vals), 24):
        chunk = vals[i:i + 24]
        write("rules", "table-%s-%d" % (table[:-2], i // 24), b"\n".join(chunk))
# the hand-built policies of the unit test, each with the decided hosts
cfg_src = src[src.index("static const struct cfg cfgs"):]
cfg_src = cfg_src[:cfg_src.index("};")]
hosts = lines.get("decide_rows", [])
for m in re.finditer(r"\n    \[(C_\w+)\] = \{(.*?)\n    \},", cfg_src, re.S):
    body = m.group(2)
    out = []
    for key, prefix in (("allow", b""), ("deny", b"-"), ("rdeny", b"@")):
        mm = re.search(r"\." + key + r" = \{(.*?)\}", body, re.S)
        if mm:
            out += [prefix + c_string(s) for s in re.findall(r'"((?:[^"\\]|\\.)*)"', mm.group(1))]
    for flag, line in (("strict", b"!strict"), ("allow_all", b"!all"), ("deny_private", b"!private")):
        if re.search(r"\." + flag + r" = 1", body):
            out.append(line)
    out += hosts[: max(0, 46 - len(out))]
    write("rules", "table-cfg-" + m.group(1)[2:].lower(), b"\n".join(out))

# --- endpoint --------------------------------------------------------------
src = read("tests/bridge/test_endpoint.c")
for table in ("valid_cases[]", "invalid_cases[]"):
    vals = [r[0] for r in table_rows(src, table, {})]
    for v in vals:
        write("endpoint", "table-%s-%s" % (table[:-2], short(v)), v)
write("endpoint", "table-fd-names", b"fd:socks\nfd:http\nfd:admin\nfd:nope\nfd:3\nfd:004")

# --- settings --------------------------------------------------------------
src = read("tests/policy/test_settings.c")
for table in ("error_cases[]", "notice_cases[]"):
    for r in table_rows(src, table, {}):
        write("settings", "table-%s-%s" % (table[:-2], short(r[0])), r[0])
files = sorted(glob.glob(os.path.join(REPO, "tests/data/settings/*.json")) +
               glob.glob(os.path.join(REPO, "conf/*.json")) +
               glob.glob(os.path.join(REPO, "conf/profiles/*.json")))
for path in files:
    with open(path, "rb") as f:
        data = f.read()
    if b"DomainsFiles" in data and "/tests/data/" in path:  # the list text rides after a NUL (see fuzz_settings.c)
        for lp in sorted(glob.glob(os.path.join(REPO, "tests/data/settings/lists/*"))):
            with open(lp, "rb") as f:
                write("settings", "file-%s+%s" % (os.path.basename(path), os.path.basename(lp)),
                      data + b"\0" + f.read())
    write("settings", "file-" + os.path.relpath(path, REPO).replace("/", "-"), data)
# JSON settings examples in the reference documents
for path in sorted(glob.glob("/work/shared/reference/*.txt")):
    text = open(path, encoding="utf-8", errors="replace").read()
    dec = json.JSONDecoder()
    for m in re.finditer(r"\{", text):
        try:
            obj, end = dec.raw_decode(text, m.start())
        except ValueError:
            continue
        if isinstance(obj, dict) and ({"network", "filesystem"} & set(obj)):
            data = text[m.start():end].encode()
            write("settings", "ref-%s-%s" % (os.path.basename(path)[:3], short(data)), data)
print("seed_tables: done")
