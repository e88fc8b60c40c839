#!/usr/bin/env python3
"""tests/package/fake_apiserver.py PORTFILE - just enough of the Kubernetes
API discovery (on 127.0.0.1, an ephemeral port written to PORTFILE) for
`kubectl create --dry-run=client` to map the kinds of conf/k8s/ to their
resources with no cluster. Nothing is created: client dry-run never sends
objects. Any other request gets 404."""
import json
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

GROUPS = {
    "v1": [("configmaps", "ConfigMap", True), ("services", "Service", True),
           ("namespaces", "Namespace", False)],
    "apps/v1": [("deployments", "Deployment", True), ("daemonsets", "DaemonSet", True)],
    "networking.k8s.io/v1": [("networkpolicies", "NetworkPolicy", True)],
}


def resources(gv):
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
            "resources": [{"name": n, "singularName": "", "namespaced": ns, "kind": k,
                           "verbs": ["create", "get", "list"]} for n, k, ns in GROUPS[gv]]}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        path = self.path.split("?")[0]
        body = None
        if path == "/api":
            body = {"kind": "APIVersions", "versions": ["v1"],
                    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0",
                                                    "serverAddress": "127.0.0.1"}]}
        elif path == "/apis":
            body = {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                {"name": g.split("/")[0], "versions": [{"groupVersion": g, "version": "v1"}],
                 "preferredVersion": {"groupVersion": g, "version": "v1"}}
                for g in GROUPS if "/" in g]}
        elif path == "/api/v1":
            body = resources("v1")
        elif path.startswith("/apis/") and path[6:] in GROUPS:
            body = resources(path[6:])
        if body is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


srv = HTTPServer(("127.0.0.1", 0), Handler)
with open(sys.argv[1], "w") as f:
    f.write(str(srv.server_address[1]))
srv.serve_forever()
