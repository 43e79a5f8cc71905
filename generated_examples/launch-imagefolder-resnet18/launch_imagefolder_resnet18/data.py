"""Datasets, sharding and loaders. Put your own dataset in `build_datasets`."""

import itertools
from pathlib import Path

from torch.utils.data import DataLoader, DistributedSampler, Sampler
from torchvision import datasets, transforms

CHANNELS = 3


def output_size(train_set):
    """Number of classes: the model's output width."""
    return len(train_set.classes)


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
