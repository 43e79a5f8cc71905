{%- set augmented = cookiecutter.data in ["cifar10", "imagefolder"] -%}
{%- set epoch_keyed = augmented or cookiecutter.data == "text" -%}
"""Datasets, sharding and loaders. Put your own dataset in `build_datasets`."""
{%- if augmented %}

import random
from pathlib import Path
{%- elif cookiecutter.data == "text" %}

from pathlib import Path
{%- endif %}
{%- if cookiecutter.data == "text" %}

import numpy as np
import torch
{%- else %}

import torch
{%- endif %}
{%- if cookiecutter.data in ["cifar10", "text"] %}
import torch.distributed as dist
{%- endif %}
{%- if cookiecutter.data == "synthetic" %}
from torch.utils.data import DataLoader, DistributedSampler, Sampler, TensorDataset
{%- elif cookiecutter.data == "text" %}
from torch.utils.data import DataLoader, Dataset, DistributedSampler, Sampler
{%- elif augmented %}
from torch.utils.data import DataLoader, Dataset, DistributedSampler, Sampler
from torchvision import datasets, transforms
{%- else %}
from torch.utils.data import DataLoader, DistributedSampler, Sampler
from torchvision import datasets, transforms
{%- endif %}

from .config import ConfigError
from .distributed import processes
{%- if cookiecutter.data == "text" %}
from .tokens import corpus_files, load, prepare
{%- endif %}
{%- if cookiecutter.data == "synthetic" %}

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
{%- elif cookiecutter.data == "text" %}


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
{%- else %}

CHANNELS = 3


def output_size(train_set):
    """Number of classes: the model's output width."""
    return {{ "train_set.num_classes" if cookiecutter.data == "fakedata" else "len(train_set.classes)" }}
{%- endif %}
{%- if cookiecutter.data == "fakedata" %}


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
{%- elif cookiecutter.data == "cifar10" %}


MEAN, STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
IMAGE_SIZE = 32


def build_datasets(config, placement):
    root = Path(config.data_dir)
    if config.download and placement.is_main:
        for train in (True, False):
            datasets.CIFAR10(root, train=train, download=True)
    dist.barrier()  # everyone waits for rank 0's download; no rank skips it
    normalize = [transforms.ToTensor(), transforms.Normalize(MEAN, STD)]
    augment = augmentation(config.augment, IMAGE_SIZE)
    try:
        return (
            datasets.CIFAR10(
                root, train=True, transform=transforms.Compose(augment + normalize)
            ),
            datasets.CIFAR10(
                root, train=False, transform=transforms.Compose(normalize)
            ),
        )
    except RuntimeError as error:  # torchvision: "Dataset not found or corrupted"
        raise ConfigError(
            f"CIFAR-10 is not in {root}: pass --download to fetch it (170 MB)"
        ) from error
{%- elif cookiecutter.data == "imagefolder" %}


MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def image_folder(path, transform):
    if not path.is_dir():
        raise ConfigError(f"no image folder at {path}: expected {path}/<class>/<image>")
    try:
        return datasets.ImageFolder(path, transform=transform)
    except FileNotFoundError as error:  # class folders without images
        raise ConfigError(f"{path}: {error}") from None


def build_datasets(config, placement):
    """Images in <data-dir>/train/<class>/ and <data-dir>/val/<class>/."""
    root, size = Path(config.data_dir), config.image_size
    normalize = [transforms.ToTensor(), transforms.Normalize(MEAN, STD)]
    train_transform = transforms.Compose(augmentation(config.augment, size) + normalize)
    eval_transform = transforms.Compose(augmentation("none", size) + normalize)
    train = image_folder(root / "train", train_transform)
    evaluation = image_folder(root / "val", eval_transform)
    if evaluation.classes != train.classes:
        raise ConfigError(f"{root}/val must hold the same class folders as train/")
    return train, evaluation
{%- endif %}

{%- if augmented %}


# The share of the image a random crop keeps (at least, at most), and whether
# images are flipped. ImageNet's 0.08 would leave a small image unrecognisable,
# and a flip is wrong for digits, text and many medical or satellite images.
AUGMENTATIONS = {
    "light": ((0.6, 1.0), False),
    "standard": ((0.25, 1.0), True),
}


def augmentation(augment, size):
    """The training transforms of --augment (none: resize and centre-crop)."""
    if augment == "none":
        return [transforms.Resize(size), transforms.CenterCrop(size)]
    scale, flip = AUGMENTATIONS[augment]
    steps = [transforms.RandomResizedCrop(size, scale=scale)]
    if flip:
        steps.append(transforms.RandomHorizontalFlip())
    return steps
{%- endif %}


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
{%- if epoch_keyed %}
        # {{ "SeededAugmentation seeds each sample" if augmented else "TrainingWindows places each window" }} from its epoch and index.
        return iter([(self.epoch, index) for index in indices])
{%- else %}
        return iter(indices)
{%- endif %}

    def __len__(self):
        return (self.end - self.start) // self.num_replicas
{%- if augmented %}


class SeededAugmentation(Dataset):
    """Each sample's random augmentation drawn from its own seed (run seed,
    epoch, index): the same whichever DataLoader worker loads it, and whether
    or not the run was resumed, so a resumed run stays exact."""

    def __init__(self, dataset, seed):
        self.dataset = dataset
        self.seed = seed

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, key):
        epoch, index = key
        # Tuples of ints hash alike in every process (no PYTHONHASHSEED salt).
        seed = hash((self.seed, epoch, index)) & 0xFFFF_FFFF_FFFF
        python_state = random.getstate()
        with torch.random.fork_rng(devices=[]):  # leave the caller's streams alone
            torch.manual_seed(seed)
            random.seed(seed)
            sample = self.dataset[index]
        random.setstate(python_state)
        return sample
{%- endif %}


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
{%- if augmented %}
    train_set = SeededAugmentation(train_set, config.seed)
{%- endif %}
    # drop_last: a last batch of one breaks BatchNorm; every rank drops alike.
    train = DataLoader(train_set, sampler=sampler, drop_last=True, **common)
    evaluation = DataLoader(
        eval_set, sampler=EvalShardSampler(eval_set, placement), **common
    )
    return train, evaluation
