"""Datasets, sharding and loaders. Put your own dataset in `build_datasets`."""

from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset, DistributedSampler, Sampler

from .config import ConfigError
from .distributed import processes
from .tokens import corpus_files, load, prepare


def build_datasets(config, placement):
    """Windows of --data-dir's tokens (tokens.py prepares them once)."""
    corpus_files(config.data_dir)  # every rank checks, so every rank exits 2
    folder = Path(config.run_dir) / "tokens"
    if placement.is_main:
        prepare(config.data_dir, folder, config.tokenizer)
    dist.barrier()  # the other ranks wait for rank 0's files; no rank skips it
    train_tokens, val_tokens, vocabulary = load(folder)
    train = TrainingWindows(train_tokens, config.block_size, vocabulary, config.seed)
    evaluation = ValidationWindows(val_tokens, config.block_size)
    if not len(evaluation):
        raise ConfigError(
            f"the validation tenth of {config.data_dir} holds {len(val_tokens)} "
            f"tokens, fewer than --block-size {config.block_size} + 1"
        )
    return train, evaluation


def output_size(train_set):
    """The vocabulary's size: the model's output width."""
    return len(train_set.vocabulary)


def window(tokens, start, block_size):
    """(inputs, targets): block_size tokens and the same shifted by one."""
    chunk = torch.from_numpy(tokens[start : start + block_size + 1].astype(np.int64))
    return chunk[:-1], chunk[1:]


class TrainingWindows(Dataset):
    """Windows block_size apart, from an offset drawn per epoch (from the run
    seed and the epoch alone): every epoch sees other windows, and a resume
    sees the ones the uninterrupted run would have seen."""

    def __init__(self, tokens, block_size, vocabulary, seed):
        self.tokens = tokens
        self.block_size = block_size
        self.vocabulary = vocabulary
        self.seed = seed
        # Room for the largest offset, so every epoch has as many windows.
        self.count = max(0, len(tokens) - 2 * block_size) // block_size

    def __len__(self):
        return self.count

    def __getitem__(self, key):
        epoch, index = key
        seeds = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
        offset = int(torch.randint(self.block_size, (), generator=seeds))
        return window(self.tokens, offset + index * self.block_size, self.block_size)


class ValidationWindows(Dataset):
    """Non-overlapping windows covering the validation tokens once."""

    def __init__(self, tokens, block_size):
        self.tokens = tokens
        self.block_size = block_size

    def __len__(self):
        return (len(self.tokens) - 1) // self.block_size

    def __getitem__(self, index):
        return window(self.tokens, index * self.block_size, self.block_size)


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
        # TrainingWindows places each window from its epoch and index.
        return iter([(self.epoch, index) for index in indices])

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
