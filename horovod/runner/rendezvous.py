"""The rendezvous of a TCP-transport job, served by a launcher that is not one of its ranks
(horovodrun --gloo; the Spark and Ray launchers). The server is the engine's own
(csrc/transport/tcp/rendezvous.h): each rank registers its data address, and once all `size`
have, every rank gets the table and connects to its peers. The ranks find it through
HOROVOD_GLOO_RENDEZVOUS_ADDR/PORT with HOROVOD_RENDEZVOUS_SERVER=external."""

import importlib


def core():
    """The engine's bindings, loaded when a server starts (horovodrun imports this early)."""
    return importlib.import_module("horovod._core")


class RendezvousServer:
    """One job's rendezvous, in a thread of the engine. start() returns the port it listens on;
    stop() ends it (idempotent; it also ends by itself once every rank met, or at the timeout,
    when the ranks get the error naming who is missing)."""

    def __init__(self):
        self._handle = None

    def start(self, addr, size, secret, timeout_s, port=0):
        """Listens on addr ("" or "0.0.0.0": every interface) and `port` (0: any free one)."""
        if self._handle is not None:
            raise RuntimeError("this rendezvous server is already running")
        if addr == "0.0.0.0":
            addr = ""
        self._handle, bound = core().start_rendezvous(addr, int(port), int(size), secret, timeout_s)
        return bound

    def stop(self):
        if self._handle is not None:
            core().stop_rendezvous(self._handle)
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
