"""Train as 2 CPU processes with gloo, then resume (`pip install -e .[test]`)."""

import json
{%- if cookiecutter.tracker == "wandb" %}
import os
{%- endif %}
import subprocess
import sys
from pathlib import Path

import pytest
import torch
{%- if cookiecutter.data == "imagefolder" %}
from PIL import Image
{%- endif %}

from {{ cookiecutter.package_name }}.checkpoint import PREFIXES, list_checkpoints

ROOT = Path(__file__).resolve().parents[1]
{%- if cookiecutter.mode == "launch" %}
TWO_PROCESSES = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
TWO_PROCESSES += ["--nproc-per-node", "2", "train.py"]
{%- else %}
TWO_PROCESSES = [sys.executable, "train.py", "--nprocs", "2"]
{%- endif %}
{%- if cookiecutter.tracker == "wandb" %}
OFFLINE = os.environ | {"WANDB_MODE": "offline"}  # tests never reach the network
{%- endif %}
{%- if cookiecutter.data == "cifar10" %}


@pytest.fixture(autouse=True)
def cifar10_present():
    if not (ROOT / "data" / "cifar-10-batches-py").is_dir():
        pytest.skip("CIFAR-10 is not in data/: run train.py --download once")
{%- endif %}


def data_flags(tmp_path):
{%- if cookiecutter.data == "synthetic" %}
    return ["--train-size", "256", "--eval-size", "64", "--batch-size", "16"]
{%- elif cookiecutter.data == "fakedata" %}
    return ["--train-size", "64", "--eval-size", "16", "--batch-size", "8"]
{%- elif cookiecutter.data == "cifar10" %}
    return ["--data-dir", str(ROOT / "data"), "--batch-size", "64"]
{%- elif cookiecutter.data == "text" %}
    """A small corpus every machine has: three of this package's modules."""
    corpus = tmp_path / "corpus.txt"
    package = ROOT / "{{ cookiecutter.package_name }}"
    modules = [package / f"{name}.py" for name in ("config", "data", "model")]
    corpus.write_text("".join(module.read_text() for module in modules))
    small = ["--block-size", "32", "--n-layer", "2", "--n-head", "2", "--n-embd", "32"]
    return ["--data-dir", str(corpus), "--batch-size", "8", *small]
{%- else %}
    """A tiny ImageFolder of noise images, which every crop and flip changes
    (solid colours would hide a resume that replays other augmentations)."""
    noise = torch.Generator().manual_seed(0)
    for split in ("train", "val"):
        for label in ("cat", "dog"):
            folder = tmp_path / "images" / split / label
            folder.mkdir(parents=True, exist_ok=True)
            for index in range(8):
                pixels = torch.randint(0, 256, (40, 48, 3), generator=noise)
                image = Image.fromarray(pixels.to(torch.uint8).numpy())
                image.save(folder / f"{index}.png")
    images = ["--data-dir", str(tmp_path / "images"), "--image-size", "32"]
    return images + ["--batch-size", "4"]
{%- endif %}


def train(tmp_path, *flags):
    metrics = tmp_path / "metrics.json"
    command = TWO_PROCESSES + data_flags(tmp_path)
    command += ["--device", "cpu"]  # the default DataLoader workers
    command += ["--run-dir", str(tmp_path)]  # checkpoints/, metrics.jsonl
    # A schedule of fixed length: a run stopped by --epochs 1 then follows the
    # learning rate of the 2-epoch run it resumes into.
    command += ["--decay-steps", "100"]
    command += ["--metrics-file", str(metrics), *flags]
    subprocess.run(command, cwd=ROOT, check=True, timeout=600{{ ', env=OFFLINE' if cookiecutter.tracker == 'wandb' }})
    return json.loads(metrics.read_text())


def final_weights(tmp_path):
    newest = list_checkpoints(tmp_path / "checkpoints")[0]
    return torch.load(newest, weights_only=True)["model"]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """Two epochs without a stop: what every resume must reproduce."""
    folder = tmp_path_factory.mktemp("uninterrupted")
    return folder, train(folder, "--epochs", "2")


def test_two_processes_train_and_checkpoint(uninterrupted):
    folder, metrics = uninterrupted
    assert metrics["world_size"] == 2
    assert metrics["epochs"] == 2 and metrics["steps"] > 0
    assert metrics["replicas_in_sync"]
    weights = final_weights(folder)
    assert not any(key.startswith(PREFIXES) for key in weights)
    lines = (folder / "metrics.jsonl").read_text().splitlines()
    assert json.loads(lines[-1])["step"] == metrics["steps"]


def test_resumes_mid_epoch_and_at_an_epoch_end_like_an_uninterrupted_run(
    tmp_path, uninterrupted
):
    """Stopped after 3 steps (mid-epoch), resumed to the end of epoch 1, then
    resumed to the end: each resume continues where the run stopped."""
    straight, expected = uninterrupted
    train(tmp_path, "--epochs", "2", "--max-steps", "3")
    train(tmp_path, "--epochs", "1")
    resumed = train(tmp_path, "--epochs", "2")
    assert resumed["steps"] == expected["steps"]
    weights = final_weights(straight)
    for key, value in final_weights(tmp_path).items():
        torch.testing.assert_close(value, weights[key])
