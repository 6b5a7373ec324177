import time

import numpy as np

import horovod.numpy as hvd

hvd.init()
import keras

net = keras.applications.MobileNetV2(weights=None, input_shape=(32, 32, 3), classes=1000)
sizes = [int(np.prod(v.shape)) for v in net.trainable_variables]
parts = [np.ones(s, np.float32) for s in sizes]
ts = []
for i in range(40):
    t0 = time.perf_counter()
    hvd.grouped_allreduce(parts, op=hvd.Sum, name="m")
    ts.append(time.perf_counter() - t0)
if hvd.rank() == 0:
    print("median us", sorted(ts)[20] * 1e6)
hvd.shutdown()
