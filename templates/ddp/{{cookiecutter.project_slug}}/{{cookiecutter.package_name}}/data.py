"""Datasets, sharding and loaders. Put your own dataset in `build_datasets`."""

{% if cookiecutter.data == "synthetic" -%}
import itertools

import torch
from torch.utils.data import DataLoader, DistributedSampler, Sampler, TensorDataset
{%- elif cookiecutter.data == "cifar10" %}
import itertools
from pathlib import Path

import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler, Sampler
from torchvision import datasets, transforms
{%- else %}
import itertools
{%- if cookiecutter.data == "imagefolder" %}
from pathlib import Path
{%- endif %}

from torch.utils.data import DataLoader, DistributedSampler, Sampler
from torchvision import datasets, transforms
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
{%- else %}

CHANNELS = 3


def output_size(train_set):
    """Number of classes: the model's output width."""
    return {{ "train_set.num_classes" if cookiecutter.data == "fakedata" else "len(train_set.classes)" }}
{%- endif %}
{%- if cookiecutter.data == "fakedata" %}
IMAGE_SIZE = 32


def build_datasets(config, placement):
    """torchvision FakeData: random images, deterministic per index."""
    to_tensor = transforms.ToTensor()
    shape = (CHANNELS, IMAGE_SIZE, IMAGE_SIZE)
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


def build_datasets(config, placement):
    root = Path(config.data_dir)
    if config.download and placement.is_main:
        for train in (True, False):
            datasets.CIFAR10(root, train=train, download=True)
    dist.barrier()  # everyone waits for rank 0's download; no rank skips it
    normalize = [transforms.ToTensor(), transforms.Normalize(MEAN, STD)]
    augment = [transforms.RandomCrop(32, padding=4), transforms.RandomHorizontalFlip()]
    try:
        return (
            datasets.CIFAR10(root, train=True, transform=transforms.Compose(augment + normalize)),
            datasets.CIFAR10(root, train=False, transform=transforms.Compose(normalize)),
        )
    except RuntimeError as error:  # torchvision: "Dataset not found or corrupted"
        raise SystemExit(
            f"CIFAR-10 is not in {root}: pass --download to fetch it (170 MB)"
        ) from error
{%- elif cookiecutter.data == "imagefolder" %}
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def image_folder(path, transform):
    if not path.is_dir():
        raise SystemExit(f"no image folder at {path}: expected {path}/<class>/<image>")
    return datasets.ImageFolder(path, transform=transform)


def build_datasets(config, placement):
    """Images in <data-dir>/train/<class>/ and <data-dir>/val/<class>/."""
    root, size = Path(config.data_dir), config.image_size
    normalize = [transforms.ToTensor(), transforms.Normalize(MEAN, STD)]
    train_transform = transforms.Compose(
        [transforms.RandomResizedCrop(size), transforms.RandomHorizontalFlip()]
        + normalize
    )
    eval_transform = transforms.Compose(
        [transforms.Resize(size), transforms.CenterCrop(size)] + normalize
    )
    train = image_folder(root / "train", train_transform)
    evaluation = image_folder(root / "val", eval_transform)
    if evaluation.classes != train.classes:
        raise SystemExit(f"{root}/val must hold the same class folders as train/")
    return train, evaluation
{%- endif %}


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
        return itertools.islice(super().__iter__(), self.skip, None)

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
    }
    sampler = ResumableDistributedSampler(train_set, placement, config.seed)
    # drop_last: a last batch of one breaks BatchNorm; every rank drops alike.
    train = DataLoader(train_set, sampler=sampler, drop_last=True, **common)
    evaluation = DataLoader(
        eval_set, sampler=EvalShardSampler(eval_set, placement), **common
    )
    return train, evaluation
