"""Train until rank 1 dies (SIGKILL) or freezes (SIGSTOP) at step 3; the others must stop
with a DistributedError instead of waiting forever.

usage: failing_rank.py OUT kill|stop
"""

from __future__ import annotations

import os
import signal
import sys

import numpy as np

import engine as mx
from engine import autograd, gluon

mode = sys.argv[2]
kv = mx.kv.create("dist_sync")
net = gluon.nn.Dense(4, in_units=8)
net.initialize()
trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}, kvstore=kv)
x = mx.nd.array(np.ones((2, 8), dtype=np.float32))
for step in range(10_000):
    if step == 3 and kv.rank == 1:
        os.kill(os.getpid(), signal.SIGKILL if mode == "kill" else signal.SIGSTOP)
    with autograd.record():
        loss = net(x).sum()
    loss.backward()
    trainer.step(2)
    if step == 2:
        print(f"rank {kv.rank} reached step 3", flush=True)
raise SystemExit("trained on after rank 1 left: no error was raised")
