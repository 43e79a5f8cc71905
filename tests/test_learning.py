"""What the defaults learn on real data nobody here wrote, and a diverging run
stopped before it leaves a checkpoint (issue 21)."""

import sys
from pathlib import Path

import pytest
from helpers import SMALL_SYNTHETIC, checkpoints, train

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
from real_data import write_image_folder  # noqa: E402

DIGITS_FLAGS = ["--image-size", "32"]  # and --data-dir: nothing else is set


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    return write_image_folder("digits", tmp_path_factory.mktemp("digits"))


@pytest.mark.timeout(600)
def test_cnn_defaults_learn_digits(projects, digits, tmp_path):
    """scikit-learn's digits as an image folder, 12 epochs, the defaults, on 2
    processes. One process at the same global batch learns the same (0.981
    both, benchmarks/learning.py); that 2 processes train as 1 does is shown
    exactly in test_runs.py."""
    project = projects("launch", data="imagefolder", model="cnn", tracker="none")
    flags = ["--data-dir", digits, *DIGITS_FLAGS, "--epochs", "12"]
    two, _ = train(project, tmp_path / "two", *flags, timeout=280)
    assert two["eval_samples"] == 359 and two["world_size"] == 2
    assert two["eval_accuracy"] >= 0.97, two


def test_a_diverging_run_stops_with_one_line_and_saves_nothing(launch, tmp_path):
    blow_up = ["--optimizer", "sgd", "--lr", "1000", "--epochs", "3"]
    _, result = train(
        launch, tmp_path, *SMALL_SYNTHETIC, *blow_up, check=False, nprocs=1
    )
    assert result.returncode == 1, result.output
    errors = [line for line in result.stderr.splitlines() if "non-finite" in line]
    assert len(errors) == 1 and "at step" in errors[0] and "--lr" in errors[0]
    assert "Traceback" not in result.output
    assert checkpoints(tmp_path) == []
