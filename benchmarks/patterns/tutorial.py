"""The PyTorch ddp-tutorial-series pattern (pytorch/examples,
distributed/ddp-tutorial-series/multigpu_torchrun.py): a Trainer class started
by torchrun, reading LOCAL_RANK, a DataLoader with a DistributedSampler and no
workers. Adapted for a CPU only: gloo instead of nccl, no device ids, no
pin_memory; the snapshot save is left out (it is not timed).

    torchrun --nproc_per_node 2 tutorial.py WORKLOAD SAMPLES
"""

import os
import sys

import torch
import workloads
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler


class Trainer:
    def __init__(self, model, train_data, optimizer, clock):
        self.rank = int(os.environ["LOCAL_RANK"])
        self.model = DDP(model)
        self.train_data = train_data
        self.optimizer = optimizer
        self.clock = clock

    def _run_batch(self, source, targets):
        self.optimizer.zero_grad()
        output = self.model(source)
        loss = torch.nn.CrossEntropyLoss()(output, targets)
        loss.backward()
        self.optimizer.step()

    def _run_epoch(self, epoch):
        self.train_data.sampler.set_epoch(epoch)
        for source, targets in self.train_data:
            self._run_batch(source, targets)
            if self.rank == 0:
                self.clock.step_done()

    def train(self, max_epochs):
        for epoch in range(max_epochs):
            self._run_epoch(epoch)
        if self.rank == 0:
            self.clock.save()


def main(workload, samples):
    init_process_group(backend="gloo")
    batch_size = workloads.BATCH_PER_PROCESS[workload]
    dataset = workloads.dataset(samples)
    model = workloads.build_model(workload)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    train_data = DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=False,
        sampler=DistributedSampler(dataset),
    )
    clock = workloads.clock_from_env(batch_size * int(os.environ["WORLD_SIZE"]))
    Trainer(model, train_data, optimizer, clock).train(1)
    destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
