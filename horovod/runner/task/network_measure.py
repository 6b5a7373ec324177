"""The measurements of `horovodrun --check-network` between two ranks (network_check.py runs
them in order): latency and bandwidth over MPI, a ring's streams all at once, raw TCP on one
subnet. Each is bounded by the step's timeout (network_steps.py)."""

import socket
import statistics
import time

from horovod.runner.task.network_report import MESSAGE
from horovod.runner.task.network_steps import (
    TAG_CTRL,
    TAG_DATA,
    TAG_RING,
    TAG_STOP,
    NoAnswer,
    Steps,
)

IN_FLIGHT = 8


class Measures(Steps):
    def latency(self, a, b, iters=200):
        import numpy as np

        buf = np.zeros(8, np.uint8)
        peer = b if self.rank == a else a
        deadline = time.monotonic() + self.step_timeout
        samples = []
        for _ in range(iters):
            t0 = time.perf_counter()
            if self.rank == a:
                self.wait(self.comm.Isend(buf, dest=peer, tag=TAG_DATA), peer, deadline)
                self.wait(self.comm.Irecv(buf, source=peer, tag=TAG_DATA), peer, deadline)
                samples.append((time.perf_counter() - t0) / 2)
            else:
                self.wait(self.comm.Irecv(buf, source=peer, tag=TAG_DATA), peer, deadline)
                self.wait(self.comm.Isend(buf, dest=peer, tag=TAG_DATA), peer, deadline)
        return statistics.median(samples[iters // 10 :]) if samples else None

    def bandwidth(self, src, dst):
        """src streams 4 MiB messages to dst for self.seconds; bytes/s as seen by src (after
        dst's acknowledgement of the last byte)."""
        import numpy as np

        deadline = time.monotonic() + self.step_timeout + self.seconds
        if self.rank == src:
            data = np.ones(MESSAGE, np.uint8)
            t0 = time.perf_counter()
            sent, pending = 0, []
            while time.perf_counter() - t0 < self.seconds or sent == 0:
                pending.append(self.comm.Isend(data, dest=dst, tag=TAG_DATA))
                sent += MESSAGE
                if len(pending) >= IN_FLIGHT:  # several in flight keep the link busy
                    self.wait(pending.pop(0), dst, deadline)
            for req in pending:
                self.wait(req, dst, deadline)
            self.wait(self.comm.Isend(np.zeros(1, np.uint8), dest=dst, tag=TAG_STOP), dst, deadline)
            ack = np.zeros(1, np.uint8)
            self.wait(self.comm.Irecv(ack, source=dst, tag=TAG_STOP), dst, deadline)
            return sent / (time.perf_counter() - t0)
        from mpi4py import MPI

        buf = np.empty(MESSAGE, np.uint8)
        status = MPI.Status()
        while True:
            req = self.comm.Irecv(buf, source=src, tag=MPI.ANY_TAG)
            while not req.Test(status):
                if time.monotonic() > deadline:
                    raise NoAnswer(
                        f"{self.who(src)} stopped sending within {self.step_timeout:.0f} s "
                        f"(step: {self.step})"
                    )
                time.sleep(0)
            if status.Get_tag() == TAG_STOP:
                break
        self.wait(self.comm.Isend(np.zeros(1, np.uint8), dest=src, tag=TAG_STOP), src, deadline)
        return None

    def stream_ring(self, dst, src):
        """Streams 4 MiB messages to dst for self.seconds while receiving src's stream, as a
        ring step does; bytes/s sent, as seen by this rank after dst acknowledged the end. A
        message shorter than 4 MiB ends a stream; the acknowledgements travel on TAG_STOP and
        the streams on TAG_RING, so they stay apart when dst and src are one rank (2 hosts)."""
        import numpy as np
        from mpi4py import MPI

        deadline = time.monotonic() + self.step_timeout + self.seconds
        data, buf = np.ones(MESSAGE, np.uint8), np.empty(MESSAGE, np.uint8)
        end, ack, ack_out = np.zeros(1, np.uint8), np.zeros(1, np.uint8), np.zeros(1, np.uint8)
        status = MPI.Status()
        pending, sent, rate = [], 0, None
        end_req = ack_req = ack_back = None
        recv = self.comm.Irecv(buf, source=src, tag=TAG_RING)
        t0 = time.perf_counter()
        while rate is None or recv is not None or not ack_back.Test():
            if end_req is None and (time.perf_counter() - t0 < self.seconds or sent == 0):
                while len(pending) < IN_FLIGHT:  # several in flight keep the link busy
                    pending.append(self.comm.Isend(data, dest=dst, tag=TAG_RING))
                    sent += MESSAGE
            while pending and pending[0].Test():
                pending.pop(0)
            if end_req is None and not pending and time.perf_counter() - t0 >= self.seconds:
                end_req = self.comm.Isend(end, dest=dst, tag=TAG_RING)
                ack_req = self.comm.Irecv(ack, source=dst, tag=TAG_STOP)
            if rate is None and ack_req is not None and ack_req.Test():
                rate = sent / (time.perf_counter() - t0)
            if recv is not None and recv.Test(status):
                if status.Get_count(MPI.BYTE) < MESSAGE:  # src's stream ended
                    recv = None
                    ack_back = self.comm.Isend(ack_out, dest=src, tag=TAG_STOP)
                else:
                    recv = self.comm.Irecv(buf, source=src, tag=TAG_RING)
            if time.monotonic() > deadline:
                peer = src if recv is not None else dst
                raise NoAnswer(
                    f"{self.who(peer)} did not answer within {self.step_timeout:.0f} s "
                    f"(step: {self.step})"
                )
            time.sleep(0)
        if end_req is not None:
            self.wait(end_req, dst, deadline)
        return rate

    # -- raw TCP on one subnet -----------------------------------------------------------
    def tcp(self, src, dst, address):
        """Raw TCP from src to dst's address; GB/s as seen by dst, or an error string."""
        deadline = time.monotonic() + self.step_timeout
        if self.rank == dst:
            # The port goes to src in one message either way (None: nothing to connect to).
            srv = socket.socket()
            try:
                srv.bind((address, 0))
                srv.listen(1)
            except OSError as e:
                srv.close()
                self.comm.send(None, dest=src, tag=TAG_CTRL)
                return f"cannot listen on {address}: {e}"
            self.comm.send(srv.getsockname()[1], dest=src, tag=TAG_CTRL)
            srv.settimeout(self.step_timeout)
            try:
                conn, _ = srv.accept()
            except OSError as e:
                return f"no connection from {self.host_of[src]} on {address}: {e}"
            finally:
                srv.close()
            with conn:
                conn.settimeout(self.step_timeout)
                buf = bytearray(MESSAGE)
                got, t0 = 0, None
                try:
                    while True:
                        n = conn.recv_into(buf)
                        if not n:
                            break
                        t0 = t0 or time.perf_counter()
                        got += n
                except OSError as e:
                    return f"receive from {self.host_of[src]} failed: {e}"
                return got / (time.perf_counter() - t0) if got and t0 else "no data"
        port = self.recv_obj(dst, deadline)
        if port is None:
            return None
        data = memoryview(bytearray(MESSAGE))
        try:
            with socket.create_connection(
                (address, port), timeout=min(5.0, self.step_timeout)
            ) as s:
                t0 = time.perf_counter()
                while time.perf_counter() - t0 < self.seconds:
                    s.sendall(data)
        except OSError as e:
            return f"cannot send to {self.host_of[dst]} at {address}: {e}"
        return None
