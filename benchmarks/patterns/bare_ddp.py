"""The tightest 2-process DDP loop we know how to write on a CPU: each process
on cores // 2 threads, the data as in-memory tensors sliced per batch (no
DataLoader), DDP with gradient_as_bucket_view and static_graph. What a careful
engineer writes by hand; the generated project should come close to it.

    python bare_ddp.py WORKLOAD SAMPLES
"""

import gc
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import workloads
from torch import nn
from torch.nn.parallel import DistributedDataParallel

WORLD = 2


def worker(rank, port, workload, samples):
    torch.set_num_threads(max(1, len(os.sched_getaffinity(0)) // WORLD))
    store = dist.TCPStore("127.0.0.1", port, WORLD, rank == 0)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=WORLD)
    images, labels = workloads.tensors(samples)
    batch = workloads.BATCH_PER_PROCESS[workload]
    model = DistributedDataParallel(
        workloads.build_model(workload), gradient_as_bucket_view=True, static_graph=True
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    clock = workloads.clock_from_env(batch * WORLD)
    order = torch.randperm(samples, generator=torch.Generator().manual_seed(0))
    shard = order[rank::WORLD]
    for start in range(0, len(shard) - batch + 1, batch):
        index = shard[start : start + batch]
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model(images[index]), labels[index]).backward()
        optimizer.step()
        if rank == 0:
            clock.step_done()
    if rank == 0:
        clock.save()
    # DDP's reducer holds the group's threads: free it (it sits in reference
    # cycles) before the group goes, or the exit can abort with them alive.
    del model, optimizer
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    args = (workloads.free_port(), sys.argv[1], int(sys.argv[2]))
    mp.start_processes(worker, args, nprocs=WORLD, start_method="spawn")
