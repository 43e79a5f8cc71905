"""Datasets, sharding and loaders. Put your own dataset in `build_datasets`."""

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
        # SeededAugmentation seeds each sample from its epoch and index.
        return iter([(self.epoch, index) for index in indices])

    def __len__(self):
        return (self.end - self.start) // self.num_replicas


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
    train_set = SeededAugmentation(train_set, config.seed)
    # drop_last: a last batch of one breaks BatchNorm; every rank drops alike.
    train = DataLoader(train_set, sampler=sampler, drop_last=True, **common)
    evaluation = DataLoader(
        eval_set, sampler=EvalShardSampler(eval_set, placement), **common
    )
    return train, evaluation
