"""The seed blog's mp.spawn pattern (../shared/reference/), adapted only as far
as a CPU and a benchmark need: the model stays on the CPU and DDP gets no
device_ids (no torch.cuda.set_device); MASTER_PORT comes from the environment
instead of a fixed 12355, so rounds cannot collide; zero_grad runs every step
(the blog calls it once before the loop, which sums gradients forever; every
pattern here trains the same thing). The rest is the blog's: gloo, its
DataLoader (DistributedSampler, num_workers=2), no thread settings.

    python seed.py WORKLOAD SAMPLES   (BENCH_OUT: where rank 0's timing goes)
"""

import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.optim as optim
import workloads
from torch.nn.parallel import DistributedDataParallel as DDP


def setup(rank, world_size):
    os.environ["MASTER_ADDR"] = "localhost"
    dist.init_process_group("gloo", rank=rank, world_size=world_size)


def cleanup():
    dist.destroy_process_group()


def demo_basic(rank, world_size, workload, samples):
    setup(rank, world_size)
    trainset = workloads.dataset(samples)
    bs = workloads.BATCH_PER_PROCESS[workload]
    # The blog never calls set_epoch (its known defect); one epoch here.
    train_sampler = torch.utils.data.distributed.DistributedSampler(  # noqa: DDP001
        trainset
    )
    trainloader = torch.utils.data.DataLoader(
        trainset, batch_size=bs, num_workers=2, sampler=train_sampler
    )
    model = workloads.build_model(workload)
    ddp_model = DDP(model)
    loss_fn = nn.CrossEntropyLoss()
    optimizer = optim.SGD(ddp_model.parameters(), lr=0.001)
    clock = workloads.clock_from_env(bs * world_size)
    for inputs, labels in trainloader:
        optimizer.zero_grad()
        outputs = ddp_model(inputs)
        loss_fn(outputs, labels).backward()
        optimizer.step()
        if rank == 0:
            clock.step_done()
    if rank == 0:
        clock.save()
    cleanup()


def run_demo(demo_fn, world_size, *args):
    mp.spawn(demo_fn, args=(world_size, *args), nprocs=world_size, join=True)


if __name__ == "__main__":
    run_demo(demo_basic, 2, sys.argv[1], int(sys.argv[2]))
