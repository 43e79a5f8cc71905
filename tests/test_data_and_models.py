"""The data and model choices train; missing data stops with a clear message."""

import pytest
from helpers import train
from PIL import Image


def write_image_folder(root, classes=("cat", "dog", "eel"), per_class=6):
    for split in ("train", "val"):
        for index, label in enumerate(classes):
            folder = root / split / label
            folder.mkdir(parents=True)
            for number in range(per_class):
                colour = (80 * index, 255 - 60 * number, 30 * number)
                Image.new("RGB", (36, 28), colour).save(folder / f"{number}.png")
    return root


@pytest.mark.parametrize("mode", ["launch", "mp"])
def test_fakedata_cnn_counts_every_eval_sample_once(projects, tmp_path, mode):
    project = projects(mode, data="fakedata", model="cnn")
    flags = [
        "--train-size",
        "32",
        "--eval-size",
        "17",
        "--batch-size",
        "4",
        "--epochs",
        "1",
    ]
    metrics, _ = train(project, tmp_path, *flags)
    assert metrics["eval_samples"] == 17  # uneven over 2 ranks, no padding counted
    assert 0.0 <= metrics["eval_accuracy"] <= 1.0
    assert metrics["replicas_in_sync"]


def test_imagefolder_resnet18_takes_its_classes_from_the_folders(projects, tmp_path):
    project = projects("launch", data="imagefolder", model="resnet18")
    images = write_image_folder(tmp_path / "images")
    flags = ["--data-dir", images, "--image-size", "32", "--batch-size", "2"]
    metrics, _ = train(
        project, tmp_path / "run", *flags, "--epochs", "1", "--num-workers", "1"
    )
    assert metrics["eval_samples"] == 18
    import torch

    state = torch.load(metrics["checkpoint"], weights_only=True)
    assert state["model"]["fc.weight"].shape[0] == 3  # cat, dog, eel
    assert "layer4.1.conv2.weight" in state["model"]  # torchvision's own names


def test_imagefolder_without_the_folder_says_what_is_expected(projects, tmp_path):
    project = projects("launch", data="imagefolder", model="cnn")
    _, result = train(
        project, tmp_path, "--data-dir", tmp_path / "nope", nprocs=1, check=False
    )
    assert result.returncode != 0
    assert (
        f"no image folder at {tmp_path / 'nope' / 'train'}: expected" in result.stderr
    )


def test_imagefolder_needs_a_data_dir(projects, tmp_path):
    project = projects("mp", data="imagefolder", model="cnn")
    _, result = train(project, tmp_path, check=False)
    assert result.returncode == 2
    assert "--data-dir is required" in result.stderr


def test_cifar10_absent_without_download_is_a_clear_error(projects, tmp_path):
    project = projects("launch", data="cifar10", model="cnn")
    _, result = train(
        project, tmp_path, "--data-dir", tmp_path / "cifar", nprocs=1, check=False
    )
    assert result.returncode != 0
    assert (
        f"CIFAR-10 is not in {tmp_path / 'cifar'}: pass --download to fetch it"
        in result.stderr
    )
