"""Train as 2 CPU processes with gloo, then resume (`pip install -e .[test]`)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from launch.checkpoint import PREFIXES, list_checkpoints

ROOT = Path(__file__).resolve().parents[1]
TWO_PROCESSES = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
TWO_PROCESSES += ["--nproc-per-node", "2", "train.py"]


def data_flags(tmp_path):
    return ["--train-size", "256", "--eval-size", "64", "--batch-size", "16"]


def train(tmp_path, *flags):
    metrics = tmp_path / "metrics.json"
    command = TWO_PROCESSES + data_flags(tmp_path)
    command += ["--device", "cpu"]  # the default DataLoader workers
    command += ["--run-dir", str(tmp_path)]  # checkpoints/, metrics.jsonl
    # A schedule of fixed length: a run stopped by --epochs 1 then follows the
    # learning rate of the 2-epoch run it resumes into.
    command += ["--decay-steps", "100"]
    command += ["--metrics-file", str(metrics), *flags]
    subprocess.run(command, cwd=ROOT, check=True, timeout=600)
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
