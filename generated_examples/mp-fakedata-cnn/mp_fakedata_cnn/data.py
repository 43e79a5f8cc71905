"""Datasets, sharding and loaders. Put your own dataset in `build_datasets`."""

import itertools

import torch
from torch.utils.data import DataLoader, DistributedSampler, Sampler
from torchvision import datasets, transforms

from .config import ConfigError
from .distributed import processes

CHANNELS = 3


def output_size(train_set):
    """Number of classes: the model's output width."""
    return train_set.num_classes


def build_datasets(config, placement):
    """torchvision FakeData: random images, deterministic per index."""
    to_tensor = transforms.ToTensor()
    shape = (CHANNELS, config.image_size, config.image_size)
    train = datasets.FakeData(config.train_size, shape, 10, transform=to_tensor)
    evaluation = datasets.FakeData(
        config.eval_size,
        shape,
        10,
        transform=to_tensor,
        random_offset=config.train_size,  # other images than the training ones
    )
    return train, evaluation


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
