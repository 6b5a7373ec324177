"""Elastic PyTorch training of the small classifier of pytorch_classifier.py: workers may be lost
or added while it runs, and the job goes on from its last commit (upstream's
pytorch_mnist_elastic.py in shape). The Horovod changes are marked "Horovod:".

    horovodrun -np 2 --min-np 1 --max-np 4 --host-discovery-script ./discover.sh \\
        python examples/pytorch_elastic.py --epochs 10
    # on the compose cluster: --host-discovery-script 'python -m horovod.runner.cluster --discover'

Each generation of ranks re-runs this file from the top (the driver relaunches the processes);
`hvd.elastic.run` then resumes the model, the optimizer, the sampler's progress and the epoch
and batch counters from the newest commit, on the new number of ranks. The report lines are
those of tensorflow2_keras_digits_elastic.py.
"""

import argparse
import hashlib
import time

import torch
import torch.nn.functional as F

import horovod.torch as hvd


def load_data(n=4000, classes=10, features=64, seed=0):
    """The same data on every rank: a fixed generator (as pytorch_classifier.py)."""
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(classes, features, generator=g)
    y = torch.randint(classes, (n,), generator=g)
    return centres[y] + 3.0 * torch.randn(n, features, generator=g), y


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--lr", type=float, default=0.01, help="learning rate on one rank")
    parser.add_argument("--batches-per-commit", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--batch-sleep-ms",
        type=float,
        default=0,
        help="sleep after every batch: lets a demo or test add or remove workers while it runs",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    # Horovod: initialize (in every generation: each is a new process).
    hvd.init()
    torch.manual_seed(1234)
    x, y = load_data()
    dataset = torch.utils.data.TensorDataset(x, y)

    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    # Horovod: scale the learning rate by the number of ranks, and wrap the optimizer.
    opt = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=0.9)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())

    # Horovod: the sampler shards what is left of the epoch among the ranks there are.
    sampler = hvd.elastic.ElasticSampler(dataset, shuffle=True, seed=7)
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)
    # Horovod: the state to keep across resets; epoch and batch say where training is.
    state = hvd.elastic.TorchState(model, opt, sampler=sampler, epoch=0, batch=0)

    def on_reset():
        # Horovod: the world's size changed: rescale the learning rate.
        for group in opt.param_groups:
            group["lr"] = args.lr * hvd.size()
        print(f"reset: {hvd.size()} rank(s), resuming at epoch {state.epoch}", flush=True)

    state.register_reset_callbacks([on_reset])

    @hvd.elastic.run
    def train(state):
        while state.epoch < args.epochs:
            start, total, batches = time.perf_counter(), 0.0, 0
            # The samples left of this epoch: the sampler skips those done before a reset.
            for xb, yb in loader:
                opt.zero_grad()
                loss = F.cross_entropy(model(xb), yb)
                loss.backward()
                opt.step()
                total, batches = total + loss.item(), batches + 1
                # Horovod: count the batch every rank did, and commit now and then.
                state.sampler.record_batch(state.batch, args.batch_size)
                state.batch += 1
                if args.batch_sleep_ms > 0:
                    time.sleep(args.batch_sleep_ms / 1000)
                if state.batch % args.batches_per_commit == 0:
                    state.commit()
            if hvd.rank() == 0:
                print(
                    f"Epoch {state.epoch + 1}/{args.epochs} - {hvd.size()} rank(s), "
                    f"loss {total / max(batches, 1):.4f}, {time.perf_counter() - start:.2f} s",
                    flush=True,
                )
            state.epoch, state.batch = state.epoch + 1, 0
            state.sampler.set_epoch(state.epoch)
            state.commit()

    train(state)
    with torch.no_grad():
        accuracy = (model(x).argmax(1) == y).float().mean().item()
    digest = hashlib.sha256(
        b"".join(p.detach().numpy().tobytes() for p in model.state_dict().values())
    ).hexdigest()[:16]
    print(
        f"ELASTIC DONE rank={hvd.rank()} size={hvd.size()} epoch={state.epoch} "
        f"accuracy={accuracy:.3f} weights={digest}",
        flush=True,
    )


if __name__ == "__main__":
    main()
