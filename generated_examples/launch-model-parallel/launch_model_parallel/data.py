"""Datasets, sharding and loaders. Put your own dataset in `build_datasets`."""

import torch
from torch.utils.data import DataLoader, DistributedSampler, Sampler, TensorDataset

from .config import ConfigError
from .distributed import processes

FEATURES = 10
TARGETS = 5


def synthetic_regression(size, seed):
    """Deterministic noisy linear targets: the same on every rank, no download."""
    generator = torch.Generator().manual_seed(seed)
    true_weight = torch.randn(
        FEATURES, TARGETS, generator=torch.Generator().manual_seed(1234)
    )
    inputs = torch.randn(size, FEATURES, generator=generator)
    noise = 0.1 * torch.randn(size, TARGETS, generator=generator)
    return TensorDataset(inputs, inputs @ true_weight + noise)


def build_datasets(config, placement):
    return (
        synthetic_regression(config.train_size, seed=0),
        synthetic_regression(config.eval_size, seed=1),
    )


def output_size(train_set):
    return TARGETS


class ResumableDistributedSampler(DistributedSampler):
    """DistributedSampler's order in whole global batches, able to start part
    way through an epoch at any number of processes.

    An epoch is one permutation, and rank r takes its positions r, r+W, r+2W...
    (as DistributedSampler does), so an epoch's first k optimizer steps consume
    exactly its first k x global-batch positions, whatever the layout. A resume
    skips those and shards the rest over this run's processes. The last,
    incomplete global batch is left out (other samples each epoch): every rank
    takes as many batches, so no rank waits alone in a collective.
    """

    def __init__(self, dataset, placement, seed, global_batch):
        super().__init__(
            dataset, placement.world_size, placement.rank, shuffle=True, seed=seed
        )
        self.global_batch = global_batch
        self.start = 0

    def start_epoch(self, epoch, consumed=0):
        """Shuffle for this epoch (as set_epoch), after `consumed` positions."""
        self.set_epoch(epoch)
        self.start = consumed

    @property
    def end(self):
        """The position after this epoch's last whole global batch."""
        whole_batches = (len(self.dataset) - self.start) // self.global_batch
        return self.start + whole_batches * self.global_batch

    def __iter__(self):
        order = torch.randperm(
            len(self.dataset),
            generator=torch.Generator().manual_seed(self.seed + self.epoch),
        )
        positions = range(self.start + self.rank, self.end, self.num_replicas)
        indices = order[positions].tolist()
        return iter(indices)

    def __len__(self):
        return (self.end - self.start) // self.num_replicas


class EvalShardSampler(Sampler):
    """Every world_size-th sample, without padding: each sample is seen once."""

    def __init__(self, dataset, placement):
        self.indices = range(placement.rank, len(dataset), placement.world_size)

    def __iter__(self):
        return iter(self.indices)

    def __len__(self):
        return len(self.indices)


def build_loaders(config, placement, device, train_set, eval_set):
    workers = config.num_workers
    common = {
        "batch_size": config.batch_size,
        "num_workers": workers,
        "pin_memory": device.type == "cuda",
        "persistent_workers": workers > 0,
        # Worker seeds come from here, not from the training RNG stream.
        "generator": torch.Generator().manual_seed(config.seed),
    }
    sampler = ResumableDistributedSampler(
        train_set, placement, config.seed, config.global_batch_size
    )
    if len(train_set) < config.global_batch_size:
        micro_steps = f" x {config.grad_accum} micro-steps" * (config.grad_accum > 1)
        raise ConfigError(
            f"{len(train_set)} training samples are fewer than one global batch of "
            f"{config.global_batch_size} (--batch-size {config.batch_size} x "
            f"{processes(placement.world_size)}{micro_steps}): nothing would train"
        )
    # drop_last: a last batch of one breaks BatchNorm; every rank drops alike.
    train = DataLoader(train_set, sampler=sampler, drop_last=True, **common)
    evaluation = DataLoader(
        eval_set, sampler=EvalShardSampler(eval_set, placement), **common
    )
    return train, evaluation
