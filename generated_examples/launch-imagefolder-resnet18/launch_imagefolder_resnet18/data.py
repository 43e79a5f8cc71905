"""Datasets, sharding and loaders. Put your own dataset in `build_datasets`."""

import itertools
import random
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler, Sampler
from torchvision import datasets, transforms

from .config import ConfigError
from .distributed import processes

CHANNELS = 3


def output_size(train_set):
    """Number of classes: the model's output width."""
    return len(train_set.classes)


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
        # SeededAugmentation seeds each sample from its epoch and index.
        return ((self.epoch, index) for index in indices)

    def __len__(self):
        return self.num_samples - self.skip


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
    train_set = SeededAugmentation(train_set, config.seed)
    # drop_last: a last batch of one breaks BatchNorm; every rank drops alike.
    train = DataLoader(train_set, sampler=sampler, drop_last=True, **common)
    evaluation = DataLoader(
        eval_set, sampler=EvalShardSampler(eval_set, placement), **common
    )
    return train, evaluation
