"""What one message per tensor costs on this MPI (issue 20, part 2), pure mpi4py, no engine.

One ring step's exchange at np 2 of a group of 50 x 40 KiB tensors (each rank sends its 50 to its
right and receives 50 from its left, as the engine's fused allreduce does without a fusion
buffer), four ways, median microseconds of rank 0:
  pieces  one message per tensor (what the engine does for tensors of 16 KiB and up)
  packed  copy into one buffer, one message, copy out (a fusion buffer)
  dtype   one message described by an MPI hindexed datatype on both ends
  one     one message of the same bytes from one buffer (what a single tensor costs)
Usage: mpirun -np 2 python benchmarks/messages.py [--pieces K] [--kib P]
"""

import argparse

import numpy as np
from mpi4py import MPI
from runner import per_op_us

ap = argparse.ArgumentParser()
ap.add_argument("--pieces", type=int, default=50)
ap.add_argument("--kib", type=int, default=40)
ap.add_argument("--rounds", type=int, default=3)
args = ap.parse_args()

comm = MPI.COMM_WORLD
right, left = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
P, K = args.kib * 1024, args.pieces
srcs = [np.ones(P, np.uint8) for _ in range(K)]
dsts = [np.empty(P, np.uint8) for _ in range(K)]
send_buf, recv_buf = np.ones(P * K, np.uint8), np.empty(P * K, np.uint8)


def address(a):
    return a.__array_interface__["data"][0]


def hindexed(arrays):
    t = MPI.BYTE.Create_hindexed([P] * K, [address(a) - address(arrays[0]) for a in arrays])
    t.Commit()
    return t


src_type, dst_type = hindexed(srcs), hindexed(dsts)


def pieces():
    reqs = [comm.Irecv([d, MPI.BYTE], source=left, tag=1) for d in dsts]
    reqs += [comm.Isend([s, MPI.BYTE], dest=right, tag=1) for s in srcs]
    MPI.Request.Waitall(reqs)


def packed():
    recv = comm.Irecv([recv_buf, MPI.BYTE], source=left, tag=2)
    np.concatenate(srcs, out=send_buf)
    send = comm.Isend([send_buf, MPI.BYTE], dest=right, tag=2)
    recv.Wait()
    for i, d in enumerate(dsts):
        d[:] = recv_buf[i * P : (i + 1) * P]
    send.Wait()


def dtype():
    recv = comm.Irecv([MPI.memory.fromaddress(address(dsts[0]), 1), 1, dst_type], left, tag=3)
    send = comm.Isend([MPI.memory.fromaddress(address(srcs[0]), 1), 1, src_type], right, tag=3)
    MPI.Request.Waitall([recv, send])


def one():
    recv = comm.Irecv([recv_buf, MPI.BYTE], source=left, tag=4)
    MPI.Request.Waitall([recv, comm.Isend([send_buf, MPI.BYTE], dest=right, tag=4)])


for _ in range(args.rounds):
    res = {
        f.__name__: per_op_us(f, n=200, warm=10, sync=True) for f in (pieces, packed, dtype, one)
    }
    if comm.rank == 0:
        print(
            f"{K} x {args.kib} KiB each way: "
            + "  ".join(f"{k} {v:.0f} us" for k, v in res.items())
            + f"  (pieces / one {res['pieces'] / res['one']:.2f}x)",
            flush=True,
        )
