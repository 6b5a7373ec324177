"""A stand-in for the Kubernetes API server, for tests/k8s/test_run_rendered.py only: the part
of it the chart's key hook talks to (core/v1 Secrets and ConfigMaps of one namespace: get,
create, update, delete), over HTTPS with a bearer token, as a pod sees the real one. It keeps
each object as a JSON file under the store directory, which the test reads to fill the Secret
and ConfigMap volumes of the other pods. No RBAC, no validation beyond what the hook needs.

    python apiserver.py CERT KEY TOKEN STORE_DIR [PORT]     (in a container of the test; 443)
"""

import json
import os
import re
import ssl
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CERT, KEY, TOKEN, STORE = sys.argv[1:5]
PATH = re.compile(r"^/api/v1/namespaces/([a-z0-9-]+)/(secrets|configmaps)(?:/([a-z0-9.-]+))?$")
KINDS = {"secrets": "Secret", "configmaps": "ConfigMap"}
LISTENING = "apiserver: listening on"


class Handler(BaseHTTPRequestHandler):
    def _reply(self, code, body=None):
        data = json.dumps(body if body is not None else {"code": code}).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _route(self):
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self._reply(401)
            return None
        m = PATH.match(self.path)
        if not m:
            self._reply(404)
            return None
        ns, plural, name = m.groups()
        return os.path.join(STORE, ns, plural), plural, name

    def _body(self):
        return json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))

    def do_GET(self):
        route = self._route()
        if route:
            folder, _, name = route
            path = os.path.join(folder, f"{name}.json")
            if name and os.path.exists(path):
                with open(path) as f:
                    self._reply(200, json.load(f))
            else:
                self._reply(404)

    def _write(self, create):
        route = self._route()
        if not route:
            return
        folder, plural, name = route
        obj = self._body()
        if obj.get("kind") != KINDS[plural] or (name and obj["metadata"]["name"] != name):
            self._reply(400)
            return
        path = os.path.join(folder, f"{obj['metadata']['name']}.json")
        if create and os.path.exists(path):
            self._reply(409)
            return
        if not create and not os.path.exists(path):
            self._reply(404)
            return
        os.makedirs(folder, exist_ok=True)
        with open(path, "w") as f:
            json.dump(obj, f)
        self._reply(201 if create else 200, obj)

    def do_POST(self):
        self._write(create=True)

    def do_PUT(self):
        self._write(create=False)

    def do_DELETE(self):
        route = self._route()
        if route:
            folder, _, name = route
            path = os.path.join(folder, f"{name}.json")
            if name and os.path.exists(path):
                os.remove(path)
                self._reply(200)
            else:
                self._reply(404)

    def log_message(self, fmt, *args):
        print("apiserver:", fmt % args, file=sys.stderr, flush=True)


PORT = int(sys.argv[5]) if len(sys.argv) > 5 else 443
server = ThreadingHTTPServer(("0.0.0.0", PORT), Handler)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(CERT, KEY)
server.socket = ctx.wrap_socket(server.socket, server_side=True)
# The test waits for this line before it starts a pod that talks to this server.
print(f"{LISTENING} :{PORT}", file=sys.stderr, flush=True)
server.serve_forever()
