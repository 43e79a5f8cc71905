"""Datasets, sharding and loaders. Put your own dataset in `build_datasets`."""

import itertools

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
    """A DistributedSampler that can start mid-epoch, after a resume.

    Padding to equal shard sizes (drop_last=False) gives every rank the same
    number of batches, so no rank waits alone in a collective at the epoch's end.
    """

    def __init__(self, dataset, placement, seed):
        super().__init__(
            dataset, placement.world_size, placement.rank, shuffle=True, seed=seed
        )
        self.skip = 0

    def start_epoch(self, epoch, skip=0):
        """Shuffle for this epoch (as set_epoch) and leave out the first `skip`."""
        self.set_epoch(epoch)
        self.skip = skip

    def __iter__(self):
        indices = itertools.islice(super().__iter__(), self.skip, None)
        return indices

    def __len__(self):
        return self.num_samples - self.skip


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
    sampler = ResumableDistributedSampler(train_set, placement, config.seed)
    if sampler.num_samples < config.batch_size:
        raise ConfigError(
            f"{len(train_set)} training samples give each of the "
            f"{processes(placement.world_size)} {sampler.num_samples} per epoch, "
            f"fewer than --batch-size {config.batch_size}: nothing would train"
        )
    # drop_last: a last batch of one breaks BatchNorm; every rank drops alike.
    train = DataLoader(train_set, sampler=sampler, drop_last=True, **common)
    evaluation = DataLoader(
        eval_set, sampler=EvalShardSampler(eval_set, placement), **common
    )
    return train, evaluation
