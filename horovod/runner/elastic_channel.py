"""The elastic driver's HTTP channel to the ranks (horovod/common/elastic_worker.py): rank 0
asks at each commit whether the hosts changed (GET ?generation=N), a rank asks for a relaunch
(POST), and a rank re-forming in process asks for its place in the next generation (GET
/place?worker=W&after=N, answered once the driver has one, or "wait" after a while:
elastic_pool.py). Every request carries the job's token (X-Horovod-Token) or is refused."""

import http.server
import json
import socket
import threading
import urllib.parse

from horovod.runner import hosts as hostlib


class Channel:
    """answer(generation the rank asks about, as text) -> the GET reply's body;
    record(body) keeps a POST's JSON body ({} when it is not JSON); place(worker, after) -> the
    reply to /place (None: no in-process re-forming, the request is refused)."""

    def __init__(self, token, answer, record, place=None):
        self.token = token
        self.answer = answer
        self.record = record
        self.place = place
        self.server = None

    def start(self):
        channel = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _reply(self, code, body):
                data = json.dumps(body).encode()
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the rank ended before reading the reply (it was leaving anyway)

            def _allowed(self):
                if self.headers.get("X-Horovod-Token") == channel.token:
                    return True
                self._reply(403, {"error": "bad token"})
                return False

            def do_GET(self):  # noqa: N802  (http.server's name)
                if not self._allowed():
                    return
                url = urllib.parse.urlparse(self.path)
                query = urllib.parse.parse_qs(url.query)
                if url.path == "/place":
                    try:
                        worker, after = int(query["worker"][0]), int(query["after"][0])
                    except (KeyError, ValueError):
                        self._reply(400, {"error": "/place takes worker= and after= integers"})
                        return
                    if channel.place is None:
                        self._reply(404, {"error": "this job relaunches its ranks"})
                        return
                    self._reply(200, channel.place(worker, after))
                    return
                self._reply(200, channel.answer(query.get("generation", [""])[0]))

            def do_POST(self):  # noqa: N802
                if not self._allowed():
                    return
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    body = {}
                channel.record(body)
                self._reply(200, {})

            def log_message(self, *a):  # quiet: the driver logs what matters
                pass

        self.server = http.server.ThreadingHTTPServer(("0.0.0.0", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def address_for(self, hosts):
        """host:port of the channel as the ranks on `hosts` reach it."""
        port = self.server.server_address[1]
        remote = [h for h, _ in hosts if not hostlib.is_local(h)]
        if not remote:
            return f"127.0.0.1:{port}"
        try:  # the address this machine sends from towards the first remote host
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.connect((socket.gethostbyname(remote[0]), 9))
                return f"{s.getsockname()[0]}:{port}"
        except OSError:
            return f"{socket.gethostname()}:{port}"

    def shutdown(self):
        self.server.shutdown()
