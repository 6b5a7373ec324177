"""horovod.torch under horovodrun --gloo's elastic mode (test_elastic_gloo.py): a linear model
trained with hvd.DistributedOptimizer and hvd.elastic.TorchState for --steps steps, committing
every 5. Every rank uses the same batch for a step (a function of the step), so the averaged
gradient is the batch's whatever the world's size, and the final weights are those of plain
SGD on one process: the test compares them. Writes a pid file per generation it joins (at start
and at each reset) and ends with "DONE rank=<r> size=<n> step=<s> pid=<p> weights=<w,...>"."""

import argparse
import os
import pathlib
import time

import torch

import horovod.torch as hvd

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=40)
p.add_argument("--pid-dir", required=True)
args = p.parse_args()

hvd.init()
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
optimizer = hvd.DistributedOptimizer(
    torch.optim.SGD(model.parameters(), lr=0.05), named_parameters=model.named_parameters()
)


def note_pid():
    gen = os.environ["HOROVOD_ELASTIC_GENERATION"]
    pathlib.Path(args.pid_dir, f"g{gen}-r{hvd.rank()}.pid").write_text(str(os.getpid()))


def batch(step):
    """The batch of `step`, the same on every rank."""
    g = torch.Generator().manual_seed(step)
    x = torch.randn(8, 4, generator=g)
    return x, x.sum(dim=1, keepdim=True) * 0.5 + 1.0


note_pid()
state = hvd.elastic.TorchState(model, optimizer, step=0)
state.register_reset_callbacks([note_pid])


@hvd.elastic.run
def train(state):
    while state.step < args.steps:
        x, y = batch(state.step)
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
        state.step += 1
        print(f"STEP gen={os.environ['HOROVOD_ELASTIC_GENERATION']} step={state.step}", flush=True)
        if state.step % 5 == 0:
            state.commit()
        time.sleep(0.05)


train(state)
weights = ",".join(
    f"{v:.6f}" for v in torch.cat([q.detach().flatten() for q in model.parameters()])
)
print(
    f"DONE rank={hvd.rank()} size={hvd.size()} step={state.step} pid={os.getpid()} "
    f"weights={weights}",
    flush=True,
)
