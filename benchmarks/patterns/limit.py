"""The limit proxy: one process on every core, no DDP, the global batch (2 x the
per-process batch) per step over in-memory tensors. Two DDP processes on the
same cores cannot beat it by much, so its samples/s is what the others are
measured against.

    python limit.py WORKLOAD SAMPLES
"""

import os
import sys

import torch
import workloads
from torch import nn

WORLD = 2  # the processes the others use: the global batch is WORLD batches


def main(workload, samples):
    torch.set_num_threads(len(os.sched_getaffinity(0)))
    images, labels = workloads.tensors(samples)
    batch = workloads.BATCH_PER_PROCESS[workload] * WORLD
    model = workloads.build_model(workload)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    clock = workloads.clock_from_env(batch)
    order = torch.randperm(samples, generator=torch.Generator().manual_seed(0))
    for start in range(0, samples - batch + 1, batch):
        index = order[start : start + batch]
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model(images[index]), labels[index]).backward()
        optimizer.step()
        clock.step_done()
    clock.save()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
