# tests/e2e/gw-helpers/leak.py - gw_attack.sh's search for a secret (rt-15):
# prints each form of each VALUE found in FILE and exits 1 when one was, 0
# when none. Forms: the value itself, and the base64 characters it alone
# decides at each of the three alignments (so a base64 stream that holds it
# anywhere is found). With --forms, also the forms rt-12 found response
# masking cannot cover (percent-encoded, '+' for space, JSON's '\/', hex,
# upper case): "note" lines, not a failure. Usage:
#   leak.py [--forms] FILE VALUE...
import base64, json, sys, urllib.parse

args = sys.argv[1:]
forms = args[0] == "--forms"
if forms:
    args = args[1:]
data = open(args[0], "rb").read()


def b64_inner(v, a):
    e = base64.b64encode(b"\0" * a + v).rstrip(b"=")
    start = -(-a * 4 // 3) if a else 0
    end = (a + len(v)) * 8 // 6
    return e[start:end]


found = 0
for i, s in enumerate(args[1:]):
    v = s.encode("latin-1")
    for name, f in [("literal", v)] + [("base64@%d" % a, b64_inner(v, a)) for a in range(3)]:
        if len(f) >= 12 and f in data:
            print("value %d found as %s" % (i, name))
            found = 1
    if forms:
        for name, f in (("pct", urllib.parse.quote(s, safe="")), ("plus", s.replace(" ", "+")),
                        ("json", json.dumps(s).strip('"').replace("/", "\\/")), ("hex", v.hex()),
                        ("upper", s.upper())):
            if f != s and f.encode("latin-1") in data:
                print("note: value %d found as %s" % (i, name))
sys.exit(found)
