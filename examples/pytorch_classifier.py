"""Data-parallel PyTorch training of a small classifier, in the shape of upstream's
pytorch_mnist.py. The Horovod changes are marked "Horovod:".

    horovodrun -np 2 python examples/pytorch_classifier.py

The data are made here, the same on every rank from a fixed seed (the torch images carry no data
set and nothing is downloaded): 10 classes of 64 features, each class a Gaussian cloud around
its own centre, overlapping enough that the test accuracy is well below 1. Each rank trains on
its own equal shard with the learning rate scaled by the number of ranks; the test accuracy is
about the same on 1 and on N ranks. The report lines are those of tensorflow2_keras_digits.py.
"""

import argparse
import hashlib
import socket
import time

import torch
import torch.nn.functional as F

import horovod.torch as hvd


def load_data(n=4000, classes=10, features=64, test_fraction=0.2, seed=0):
    """The same split on every rank: a fixed generator, the last 20% are the test set."""
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(classes, features, generator=g)
    y = torch.randint(classes, (n,), generator=g)
    x = centres[y] + 3.0 * torch.randn(n, features, generator=g)
    n_test = int(n * test_fraction)
    return (x[n_test:], y[n_test:]), (x[:n_test], y[:n_test])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--lr", type=float, default=0.01, help="learning rate on one rank")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch threads per rank (ranks share the cores)"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    # Horovod: initialize.
    hvd.init()
    # On GPUs: one per process, by local rank.
    device = torch.device("cpu")
    if torch.cuda.is_available():
        device = torch.device("cuda", hvd.local_rank() % torch.cuda.device_count())
        torch.cuda.set_device(device)
    torch.manual_seed(1234 + hvd.rank())

    (x_train, y_train), (x_test, y_test) = load_data()
    # Horovod: each rank takes its own equal-sized shard of the training data.
    per_rank = len(x_train) // hvd.size()
    shard = slice(hvd.rank() * per_rank, (hvd.rank() + 1) * per_rank)
    x_train, y_train = x_train[shard].to(device), y_train[shard].to(device)

    model = torch.nn.Sequential(
        torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Dropout(0.1), torch.nn.Linear(128, 10)
    ).to(device)
    # Horovod: scale the learning rate by the number of ranks (the global batch grows).
    opt = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=0.9)
    # Horovod: start every rank from rank 0's weights and optimizer state.
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    # Horovod: average the gradients across ranks, reduced while backward() runs.
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())

    start = time.perf_counter()
    for epoch in range(args.epochs):
        model.train()
        order = torch.randperm(per_rank)
        total = 0.0
        for i in range(0, per_rank - args.batch_size + 1, args.batch_size):
            batch = order[i : i + args.batch_size]
            opt.zero_grad()
            loss = F.cross_entropy(model(x_train[batch]), y_train[batch])
            loss.backward()
            opt.step()
            total += loss.item()
        # Horovod: the epoch's loss averaged over the ranks' shards; only rank 0 reports.
        mean = hvd.allreduce(torch.tensor(total / (per_rank // args.batch_size)), name="loss")
        if hvd.rank() == 0:
            print(f"Epoch {epoch + 1}/{args.epochs} - loss: {mean.item():.4f}", flush=True)
    seconds = time.perf_counter() - start

    # Every rank evaluates its (identical) weights on the whole test set; rank 0 prints one
    # line per rank: where it ran, its accuracy, its training throughput and a digest of its
    # weights (equal digests: the ranks stayed in sync).
    model.eval()
    with torch.no_grad():
        accuracy = (model(x_test.to(device)).argmax(1).cpu() == y_test).float().mean().item()
    digest = hashlib.sha256(
        b"".join(p.detach().cpu().numpy().tobytes() for p in model.parameters())
    )
    mine = (
        hvd.rank(),
        socket.gethostname(),
        accuracy,
        per_rank * args.epochs / seconds,
        digest.hexdigest()[:16],
    )
    rows = hvd.allgather_object(mine, name="demo.report")
    if hvd.rank() == 0:
        print(f"Ranks: {hvd.size()}  training samples per rank: {per_rank}")
        for rank, host, acc, rate, weights in rows:
            print(
                f"rank {rank} on {host}: test accuracy {acc:.4f}, {rate:,.0f} samples/s, "
                f"weights {weights}"
            )
        print(
            f"Test accuracy: {rows[0][2]:.4f}  (all ranks' weights "
            f"{'identical' if len({r[4] for r in rows}) == 1 else 'DIFFER'})"
        )


if __name__ == "__main__":
    main()
