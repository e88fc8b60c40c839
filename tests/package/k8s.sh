#!/usr/bin/env bash
# tests/package/k8s.sh SLUICE - conf/k8s/: yamllint clean; the ConfigMap's
# settings pass the config test (sluice check --settings); every manifest
# parses with kubectl --dry-run=client against a fake discovery endpoint on
# 127.0.0.1 (no cluster); the pods probe /healthz and /readyz on the admin
# port, are annotated for scraping, have resources, and run what the image
# can run.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
bin=$1
k8s=$top/conf/k8s
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT

command -v yamllint >/dev/null || { echo "SKIP: yamllint missing (scripts/deps.sh installs it)"; exit 77; }
yamllint -s -c "$k8s/yamllint.yaml" "$k8s" || fail yamllint

# the ConfigMap's settings.json, through the config test (item 7 of issue 16)
/usr/bin/python3 - "$k8s/configmap.yaml" "$tmp/settings.json" <<'PY'
import sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
open(sys.argv[2], "w").write(doc["data"]["settings.json"])
PY
"$bin" check --settings "$tmp/settings.json" || fail "the ConfigMap's settings fail sluice check"

# structure kubectl does not check without a server
/usr/bin/python3 - "$k8s" <<'PY' || exit 1
import glob, sys, yaml
docs = [d for f in sorted(glob.glob(sys.argv[1] + "/*.yaml")) if not f.endswith("yamllint.yaml")
        for d in yaml.safe_load_all(open(f)) if d]
kinds = sorted(d["kind"] for d in docs)
need = ["ConfigMap", "DaemonSet", "Deployment", "Namespace", "NetworkPolicy", "Service"]
missing = [k for k in need if k not in kinds]
assert not missing, "missing kinds: %s" % missing
for d in docs:
    if d["kind"] not in ("Deployment", "DaemonSet"):
        continue
    name = d["kind"] + "/" + d["metadata"]["name"]
    pod = d["spec"]["template"]
    assert pod["metadata"]["annotations"]["prometheus.io/scrape"] == "true", name
    c = pod["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz", name
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz", name
    assert c["readinessProbe"]["httpGet"]["port"] == "admin", name
    assert str(ports["admin"]) == pod["metadata"]["annotations"]["prometheus.io/port"], name
    assert c["resources"]["requests"] and c["resources"]["limits"], name
    args = c["args"]
    assert args[0] == "proxy" and "--watch" in args, name
    assert args[args.index("--admin") + 1].endswith(":%d" % ports["admin"]), name
    assert d["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items(), name
print("structure ok: " + ", ".join(kinds))
PY

# kubectl, client-side dry run, no cluster
if ! command -v kubectl >/dev/null; then
    echo "SKIP (kubectl part): no kubectl; Debian's is in package kubernetes-client"
    exit 0
fi
python3 "$(dirname "$0")/fake_apiserver.py" "$tmp/port" & pid=$!
for _ in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.1; done
[ -s "$tmp/port" ] || fail "fake API server did not start"
cat >"$tmp/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters: [{name: fake, cluster: {server: "http://127.0.0.1:$(cat "$tmp/port")"}}]
contexts: [{name: fake, context: {cluster: fake, user: nobody}}]
users: [{name: nobody, user: {}}]
current-context: fake
KC
for f in "$k8s"/*.yaml; do
    case $f in */yamllint.yaml) continue ;; esac
    out=$(KUBECONFIG=$tmp/kubeconfig HOME=$tmp kubectl create --dry-run=client --validate=false \
          -o name -f "$f" 2>&1) || { echo "$out"; fail "kubectl: $f"; }
    echo "$out"
done
echo PASS
