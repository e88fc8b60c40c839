# tests/e2e/aws-helpers/client.py - runs in the sandbox: signs one request
# with the AWS variables it sees (placeholders) and sends it through the
# proxy sluice run sets (HTTPS_PROXY), printing "STATUS <code>" and the
# response body. Usage:
#   client.py MODE URL [BODY]
# MODE: literal (x-amz-content-sha256 = the body's hash), unsigned
# (UNSIGNED-PAYLOAD), trailer (STREAMING-UNSIGNED-PAYLOAD-TRAILER), nohash (no x-amz-content-sha256: the signer hashes the
# body, as for STS and most services), botocore (botocore's SigV4Auth when
# it is importable, else nohash), badsecret (signed with another secret),
# tamper (a signed header changed after signing), streaming,
# presigned, sigv4a, bigcl (a Content-Length over 64 MiB, no body sent).
# BODY: a string, "@FILE" for a file's bytes.
import datetime, http.client, os, ssl, sys, urllib.parse, hashlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sigv4

mode, url = sys.argv[1], sys.argv[2]
body = sys.argv[3] if len(sys.argv) > 3 else ""
body = open(body[1:], "rb").read() if body.startswith("@") else body.encode()
u = urllib.parse.urlsplit(url)
host = u.hostname + ("" if u.port in (None, 443) else ":%d" % u.port)
service = "s3" if u.hostname.startswith("s3.") else "sts"
key = os.environ["AWS_ACCESS_KEY_ID"]
secret = os.environ["AWS_SECRET_ACCESS_KEY"]
token = os.environ.get("AWS_SESSION_TOKEN")
amzdate = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
method = "PUT" if body and service == "s3" else ("POST" if body else "GET")
headers, path, query = [], u.path or "/", u.query
if service == "sts":
    headers.append(("Content-Type", "application/x-www-form-urlencoded; charset=utf-8"))
if mode == "tamper":
    headers.append(("X-Custom", "signed-value"))

if mode == "botocore":
    try:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials
        req = AWSRequest(method=method, url=url, data=body, headers=dict(headers))
        SigV4Auth(Credentials(key, secret, token), service, "us-east-1").add_auth(req)
        hs = [("Host", host)] + list(req.headers.items())  # botocore signs the URL's host
        print("SIGNER botocore")
    except ImportError:
        mode = "nohash"
if mode != "botocore":
    payload = {"unsigned": "UNSIGNED-PAYLOAD", "trailer": "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
               "streaming": "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"}.get(mode, hashlib.sha256(body).hexdigest())
    hs = sigv4.sign(method, host, path, query, headers, payload, key,
                    "x" * len(secret) if mode == "badsecret" else secret, "us-east-1", service,
                    amzdate, token, payload_header=mode not in ("nohash", "presigned"))
    if mode == "tamper":
        hs = [(k, "changed-after-signing" if k == "X-Custom" else v) for k, v in hs]
    if mode == "sigv4a":
        hs = [(k, v.replace("AWS4-HMAC-SHA256", "AWS4-ECDSA-P256-SHA256")) if k == "Authorization" else (k, v)
              for k, v in hs]
    if mode == "presigned":
        cred = urllib.parse.quote("%s/%s/us-east-1/%s/aws4_request" % (key, amzdate[:8], service), safe="")
        query = "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=%s&X-Amz-Date=%s&X-Amz-Expires=60" \
                "&X-Amz-SignedHeaders=host&X-Amz-Signature=%s" % (cred, amzdate, "0" * 64)
        hs = [("Host", host)]
    print("SIGNER own")

proxy = urllib.parse.urlsplit(os.environ.get("HTTPS_PROXY") or os.environ["https_proxy"])
conn = http.client.HTTPConnection(proxy.hostname, proxy.port, timeout=20)
conn.set_tunnel(u.hostname, u.port or 443)
conn.connect()
conn.sock = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"]).wrap_socket(
    conn.sock, server_hostname=u.hostname)
target = path + ("?" + query if query else "")
conn.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
for k, v in hs:
    conn.putheader(k, v)
if mode == "bigcl":
    conn.putheader("Content-Length", str(64 * 1024 * 1024 + 1))
    conn.endheaders()
elif body or method != "GET":
    conn.putheader("Content-Length", str(len(body)))
    conn.endheaders(body)
else:
    conn.endheaders()
r = conn.getresponse()
print("STATUS %d" % r.status)
print(r.read().decode("latin-1"))
