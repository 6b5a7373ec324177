"""Data-parallel linear regression with horovod.numpy: each rank holds a shard of the data,
gradients are averaged with allreduce, initial weights come from rank 0 by broadcast.

    horovodrun -np 2 python examples/numpy_linear_regression.py
"""

import numpy as np

import horovod.numpy as hvd


def main(steps=200, lr=0.1, features=8, samples_per_rank=512):
    hvd.init()
    rng = np.random.default_rng(seed=1234 + hvd.rank())  # a different shard on every rank
    true_w = np.arange(1, features + 1, dtype=np.float32)  # same target everywhere
    x = rng.standard_normal((samples_per_rank, features)).astype(np.float32)
    y = x @ true_w + 0.01 * rng.standard_normal(samples_per_rank).astype(np.float32)

    w = np.random.default_rng().standard_normal(features).astype(np.float32)
    w = hvd.broadcast(w, root_rank=0, name="w0")  # every rank starts from rank 0's weights
    for step in range(steps):
        grad = 2.0 / samples_per_rank * x.T @ (x @ w - y)
        w -= lr * hvd.allreduce(grad.astype(np.float32), op=hvd.Average, name="grad")
        if step % 50 == 0:  # every rank takes part in the allreduce; rank 0 prints
            loss = hvd.allreduce(np.array([np.mean((x @ w - y) ** 2)], np.float32), name="loss")
            if hvd.rank() == 0:
                print(f"step {step:3d}  loss {loss[0]:.5f}")

    error = float(np.max(np.abs(w - true_w)))
    if hvd.rank() == 0:
        print(f"size {hvd.size()}  max |w - true_w| = {error:.4f}")
    hvd.shutdown()
    return 0 if error < 0.05 else 1


if __name__ == "__main__":
    raise SystemExit(main())
