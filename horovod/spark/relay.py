"""The output relay between the ranks' tasks and the driver: one TCP connection per task.

Task -> driver, one line each: `HELLO <token> <rank> <host>` first (a connection without the
job's token is closed), then `O <text>` (a stdout line of the rank), `E <text>` (stderr), `FAIL`
(the rank failed), and `BYE` last, as the task ends with its record. Driver -> task: `STOP`
(another rank failed: stop yours). The driver prints each line as upstream does,
`[rank]<stdout>:text`, optionally after a timestamp.

A connection that ends without BYE is a lost task (its executor, worker or host died). Spark's
own error for it (ExecutorLostFailure, "Could not recover from a failed barrier ResultStage")
names neither rank nor host, and comes only once Spark has noticed the executor's loss (a
vanished host: its heartbeat timeout); so the driver's `on_lost` cancels the stage at once and
the error names the lost ranks and hosts. Keepalive probes end a connection to a host that
vanished without a word within about KEEPALIVE_SECONDS.

Bounded: a line longer than MAX_LINE is cut into pieces of that size, so a connection that has
not said HELLO within its first line (at most MAX_LINE bytes) is closed; the driver's thread ends
with close().
"""

import hmac
import selectors
import socket
import threading
import time

STDOUT, STDERR = b"O", b"E"
FAIL, STOP, BYE = b"FAIL", b"STOP", b"BYE"
MAX_LINE = 1 << 16
# TCP keepalive on the driver's end: idle 5 s, then 3 probes 2 s apart (Linux's knobs).
KEEPALIVE = {"TCP_KEEPIDLE": 5, "TCP_KEEPINTVL": 2, "TCP_KEEPCNT": 3}
KEEPALIVE_SECONDS = 11


class LineSplitter:
    """Cuts a byte stream into lines (a longer run than MAX_LINE is a line of its own) and
    hands each to `emit(tag, line)`; feed(b"") flushes the last, unterminated, line."""

    def __init__(self, tag, emit, limit=MAX_LINE):
        self.tag, self.emit, self.limit = tag, emit, limit
        self.pending = bytearray()

    def feed(self, chunk):
        if not chunk:
            if self.pending:
                self.emit(self.tag, bytes(self.pending))
                self.pending.clear()
            return
        self.pending += chunk
        *whole, rest = bytes(self.pending).split(b"\n")
        for line in whole:
            for i in range(0, max(len(line), 1), self.limit):
                self.emit(self.tag, line[i : i + self.limit])
        while len(rest) >= self.limit:
            self.emit(self.tag, rest[: self.limit])
            rest = rest[self.limit :]
        self.pending[:] = rest


class TaskLink:
    """A task's connection to the driver's relay."""

    def __init__(self, sock):
        self.sock = sock
        self.incoming = LineCollector()

    def send_line(self, tag, line):
        self._send(tag + b" " + line.replace(b"\n", b" ") + b"\n")

    def send_failure(self):
        self._send(FAIL + b"\n")

    def _send(self, data):
        try:
            self.sock.sendall(data)
        except OSError:
            pass  # the driver is gone: the task stops its rank on the EOF

    def receive(self):
        """The driver's words that arrived, or None at EOF (the driver is gone)."""
        try:
            chunk = self.sock.recv(4096)
        except (BlockingIOError, socket.timeout):
            return []
        except OSError:
            return None
        return self.incoming.feed(chunk) if chunk else None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._send(BYE + b"\n")  # the task ends with its record: not a lost task
        self.sock.close()


class LineCollector:
    def __init__(self):
        self.pending = b""

    def feed(self, chunk):
        *whole, self.pending = (self.pending + chunk).split(b"\n")
        self.pending = self.pending[-MAX_LINE:]
        return whole


def connect(addr, port, token, rank, timeout, host="?"):
    """A TaskLink to the driver's relay, retried until `timeout` seconds (raises OSError)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            sock = socket.create_connection((addr, port), timeout=min(10.0, timeout))
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(b"HELLO %s %d %s\n" % (token.encode(), rank, host.encode()))
    # Reads happen when the selector says readable; a send to a driver that stopped reading
    # fails after this long instead of blocking the rank's output for ever.
    sock.settimeout(30.0)
    return TaskLink(sock)


class _Peer:
    def __init__(self, sock, on_line):
        self.sock = sock
        self.rank = None  # set by HELLO
        self.host = None
        self.said_bye = False
        # A wire line is a rank's line (at most MAX_LINE) with its tag.
        self.lines = LineSplitter(None, lambda _tag, line: on_line(self, line), MAX_LINE + 16)


class DriverRelay:
    """The driver's end: a thread that accepts the tasks' connections, prints their lines to
    `stdout`/`stderr` (text files) and, on the first FAIL, sends STOP to every other task.
    `failures` lists the ranks that reported FAIL, first first; `lost` the (rank, host) of the
    tasks whose connection ended without BYE, first first, and `on_lost` (if set) is called at
    the first."""

    def __init__(self, addr, token, stdout, stderr, timestamps=False):
        self.token = token.encode()
        self.out = {STDOUT: (stdout, "stdout"), STDERR: (stderr, "stderr")}
        self.timestamps = timestamps
        self.failures = []
        self.lost = []
        self.on_lost = None
        self.finished = set()  # ranks whose connection ended
        self.listener = socket.create_server((addr, 0))
        self.port = self.listener.getsockname()[1]
        self.selector = selectors.DefaultSelector()
        self.peers = {}
        self.closing = threading.Event()
        self.thread = threading.Thread(target=self._serve, name="horovod.spark relay", daemon=True)

    def start(self):
        self.listener.setblocking(False)
        self.selector.register(self.listener, selectors.EVENT_READ, None)
        self.thread.start()
        return self.port

    def close(self, expected=0, drain_seconds=5.0):
        """Waits up to drain_seconds for `expected` tasks to have said HELLO and closed their
        connections (after their last lines), then ends the thread and closes every socket."""
        deadline = time.monotonic() + drain_seconds
        while len(self.finished) < expected and time.monotonic() < deadline:
            time.sleep(0.05)
        self.closing.set()
        if self.thread.ident is None:  # never started: only the listener to close
            self.listener.close()
            return
        self.thread.join(timeout=5.0)

    def _serve(self):
        try:
            while not self.closing.is_set():
                for key, _ in self.selector.select(0.1):
                    if key.data is None:
                        self._accept()
                    else:
                        self._read(key.data)
        finally:
            for peer in list(self.peers.values()):
                self._drop(peer)
            self.selector.unregister(self.listener)
            self.listener.close()
            self.selector.close()

    def _accept(self):
        try:
            sock, _ = self.listener.accept()
        except OSError:
            return
        sock.setblocking(False)
        _keepalive(sock)
        peer = _Peer(sock, self._line)
        self.peers[sock.fileno()] = peer
        self.selector.register(sock, selectors.EVENT_READ, peer)

    def _read(self, peer):
        try:
            chunk = peer.sock.recv(1 << 16)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        peer.lines.feed(chunk)
        if not chunk:
            if peer.rank is not None and not peer.said_bye:
                self._lost(peer)
            self._drop(peer)

    def _lost(self, peer):
        self.lost.append((peer.rank, peer.host))
        if len(self.lost) > 1:
            return
        self._stop_others(peer)
        if self.on_lost is not None:
            try:
                self.on_lost()
            except Exception:
                pass  # the driver's own error path still ends the stage

    def _drop(self, peer):
        if peer.rank is not None:
            self.finished.add(peer.rank)
        if self.peers.pop(peer.sock.fileno(), None) is not None:
            self.selector.unregister(peer.sock)
            peer.sock.close()

    def _line(self, peer, line):
        if peer.rank is None:
            self._hello(peer, line)
            return
        tag, _, text = line.partition(b" ")
        if tag == BYE:
            peer.said_bye = True
        elif tag == FAIL:
            if not self.failures:
                self._stop_others(peer)
            self.failures.append(peer.rank)
        elif tag in self.out:
            self._print(peer.rank, tag, text)

    def _hello(self, peer, line):
        words = line.split(b" ")
        if len(words) == 4 and words[0] == b"HELLO" and hmac.compare_digest(words[1], self.token):
            try:
                peer.rank = int(words[2])
                peer.host = words[3].decode(errors="replace")
                if self.failures or self.lost:  # late: the others were told already
                    self._send_stop(peer)
                return
            except ValueError:
                pass
        self._drop(peer)  # not one of this job's tasks

    def _stop_others(self, failed):
        for peer in list(self.peers.values()):
            if peer is not failed and peer.rank is not None:
                self._send_stop(peer)

    @staticmethod
    def _send_stop(peer):
        try:
            peer.sock.send(STOP + b"\n")
        except OSError:
            pass

    def _print(self, rank, tag, text):
        dst, name = self.out[tag]
        prefix = f"[{rank}]<{name}>:"
        if self.timestamps:
            prefix = time.strftime("%a %b %d %H:%M:%S %Y") + " " + prefix
        try:
            dst.write(prefix + text.decode(errors="replace") + "\n")
            dst.flush()
        except (OSError, ValueError):
            pass  # the driver's own output is gone: keep serving the tasks


def _keepalive(sock):
    """Probes an idle connection, so one to a host that vanished (no FIN) ends in seconds."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in KEEPALIVE.items():
        if hasattr(socket, name):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)


def lost_error(lost, size):
    """RankFailedError naming the first lost rank and its host, and the others lost."""
    from horovod.spark.errors import RankFailedError

    (rank, host), others = lost[0], lost[1:]
    text = (
        f"horovod.spark.run: rank {rank} of {size} (host {host}) was lost: its Spark task ended "
        "without a word to the driver (its executor, worker or host died?)"
    )
    if others:
        text += "; lost too: " + ", ".join(f"rank {r} (host {h})" for r, h in others)
    text += ". The stage was cancelled: the other ranks cannot go on without it."
    return RankFailedError(text, rank, host)
