# tests/e2e/aws-helpers/sigv4.py - a small AWS Signature Version 4 signer and
# verifier for credentials_aws.sh, written from AWS's documentation of the
# signing process (canonical request, string to sign, signing key). The
# sandbox signs with it (or with botocore when it is importable); the origin
# verifies with it, using the real secret.
import hashlib, hmac, urllib.parse

EMPTY = hashlib.sha256(b"").hexdigest()


def _h(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def signing_key(secret, date, region, service):
    k = _h(("AWS4" + secret).encode(), date)
    k = _h(k, region)
    k = _h(k, service)
    return _h(k, "aws4_request")


def canonical_query(q):
    parts = []
    for p in q.split("&") if q else []:
        if not p:
            continue
        k, _, v = p.partition("=")
        enc = lambda s: urllib.parse.quote(urllib.parse.unquote(s), safe="-_.~")
        parts.append((enc(k), enc(v)))
    return "&".join("%s=%s" % kv for kv in sorted(parts))


def canonical_request(method, path, query, headers, signed, payload, service):
    """headers: list of (name, value) as sent; signed: sorted lower-case names."""
    uri = path or "/"
    if service != "s3":
        uri = urllib.parse.quote(uri, safe="/~")  # encoded twice (the path is already)
    lines = []
    for n in signed:
        vals = [" ".join(v.split()) for k, v in headers if k.lower() == n]
        lines.append("%s:%s\n" % (n, ",".join(vals)))
    return "\n".join([method, uri, canonical_query(query), "".join(lines), ";".join(signed), payload])


def signature(secret, amzdate, scope, creq):
    date, region, service, _ = scope.split("/")
    sts = "\n".join(["AWS4-HMAC-SHA256", amzdate, scope, hashlib.sha256(creq.encode()).hexdigest()])
    return hmac.new(signing_key(secret, date, region, service), sts.encode(), hashlib.sha256).hexdigest()


def sign(method, host, path, query, headers, payload, key, secret, region, service, amzdate,
         token=None, payload_header=True):
    """Returns the headers to send: headers + host, x-amz-date, token,
    x-amz-content-sha256 (when payload_header) and Authorization."""
    hs = [("Host", host), ("X-Amz-Date", amzdate)] + list(headers)
    if token:
        hs.append(("X-Amz-Security-Token", token))
    if payload_header:
        hs.append(("x-amz-content-sha256", payload))
    signed = sorted({k.lower() for k, _ in hs})
    scope = "%s/%s/%s/aws4_request" % (amzdate[:8], region, service)
    creq = canonical_request(method, path, query, hs, signed, payload, service)
    sig = signature(secret, amzdate, scope, creq)
    hs.append(("Authorization", "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s"
               % (key, scope, ";".join(signed), sig)))
    return hs


def parse_auth(v):
    if not v.startswith("AWS4-HMAC-SHA256 "):
        return None
    out = {}
    for part in v[len("AWS4-HMAC-SHA256 "):].split(","):
        k, _, val = part.strip().partition("=")
        out[k] = val
    return out


def verify(method, path, query, headers, body, secret):
    """(ok, key id, why): the request's signature under secret."""
    auth = [v for k, v in headers if k.lower() == "authorization"]
    if len(auth) != 1:
        return False, "", "no single Authorization"
    a = parse_auth(auth[0])
    if a is None or not {"Credential", "SignedHeaders", "Signature"} <= a.keys():
        return False, "", "not AWS4-HMAC-SHA256"
    key, _, scope = a["Credential"].partition("/")
    service = scope.split("/")[2]
    amzdate = [v for k, v in headers if k.lower() == "x-amz-date"]
    if len(amzdate) != 1 or amzdate[0][:8] != scope[:8]:
        return False, key, "x-amz-date"
    declared = [v for k, v in headers if k.lower() == "x-amz-content-sha256"]
    digest = hashlib.sha256(body).hexdigest()
    if declared and declared[0] not in ("UNSIGNED-PAYLOAD", "STREAMING-UNSIGNED-PAYLOAD-TRAILER") \
            and declared[0] != digest:
        return False, key, "x-amz-content-sha256 is not the body's hash"
    payload = declared[0] if declared else digest
    signed = a["SignedHeaders"].split(";")
    if "host" not in signed:
        return False, key, "host not signed"
    creq = canonical_request(method, path, query, headers, signed, payload, service)
    if not hmac.compare_digest(signature(secret, amzdate[0], scope, creq), a["Signature"]):
        return False, key, "SignatureDoesNotMatch"
    return True, key, "ok"
