"""Two ranks send each other (or one sends the other) BYTES in messages of MSG bytes, WINDOW in
flight each way, over whatever transport mpirun gives them; prints the rate per direction,
best of 3. What a 2-rank ring step does, without the engine: benchmarks/tcp_put.sh runs it
over a shaped link with Open MPI's TCP settings side by side.

    mpirun -np 2 python benchmarks/tcp_exchange.py MiB MSG_KiB WINDOW both|one
"""

import sys
import time

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, peer = comm.rank, 1 - comm.rank
total, msg = int(sys.argv[1]) << 20, int(sys.argv[2]) << 10
window, both = int(sys.argv[3]), sys.argv[4] == "both"
send, recv = np.ones(total, np.uint8), np.ones(total, np.uint8)
count = total // msg
sends = both or rank == 0
recvs = both or rank == 1
best = float("inf")
for _ in range(3):
    comm.Barrier()
    t0 = time.perf_counter()
    next_send = next_recv = 0
    reqs = []
    while next_send < count * sends or next_recv < count * recvs or reqs:
        # Receives first, as the engine's ring posts them: which side's answer waits behind
        # which message depends on it.
        while recvs and next_recv < count and sum(r[0] == "r" for r in reqs) < window:
            i = next_recv * msg
            reqs.append(("r", comm.Irecv(recv[i : i + msg], peer, 0)))
            next_recv += 1
        while sends and next_send < count and sum(r[0] == "s" for r in reqs) < window:
            i = next_send * msg
            reqs.append(("s", comm.Isend(send[i : i + msg], peer, 0)))
            next_send += 1
        done = MPI.Request.Waitany([r[1] for r in reqs])
        reqs.pop(done)
    comm.Barrier()
    best = min(best, time.perf_counter() - t0)
if rank == 0:
    how = "both ways at once" if both else "one way"
    print(
        f"{total >> 20} MiB in {msg >> 10} KiB messages, {window} in flight, {how}: "
        f"{total / best / 1e9:.4f} GB/s per direction",
        flush=True,
    )
