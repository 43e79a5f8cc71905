"""The run directory (config.json, metrics.jsonl), AdamW and the learning-rate
schedules, checked by running generated projects in one process (the records
and the schedule are rank 0's; 2-process resumes are in test_runs.py)."""

import json
import math

import pytest
import torch
from helpers import (
    STEPS_PER_EPOCH,
    checkpoints,
    final_model,
    import_generated,
    train,
    train_alone,
)

ADAMW_COSINE = [
    *("--epochs", "2", "--log-every", "1"),
    *("--optimizer", "adamw", "--lr", "0.01", "--weight-decay", "0.05"),
    *("--lr-schedule", "cosine", "--warmup-steps", "3", "--min-lr", "0.001"),
    *("--decay-steps", "0"),  # the decay's end from --epochs, what this checks
]


def records(run_dir):
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def training(run_dir):
    return [
        (r["step"], r["epoch"], r["lr"], r["loss"])
        for r in records(run_dir)
        if "loss" in r
    ]


def test_adamw_cosine_resumed_at_max_steps_follows_the_uninterrupted_run(
    launch, tmp_path
):
    resumed, straight = tmp_path / "resumed", tmp_path / "straight"
    train_alone(launch, resumed, *ADAMW_COSINE, "--max-steps", "5")
    metrics, _ = train_alone(launch, resumed, *ADAMW_COSINE)
    train_alone(launch, straight, *ADAMW_COSINE)

    # Each step once, in order, with the uninterrupted run's lr and loss.
    assert training(resumed) == training(straight)
    assert [step for step, *_ in training(resumed)] == list(
        range(1, 2 * STEPS_PER_EPOCH + 1)
    )
    training_keys = {"step", "epoch", "world_size", "loss", "lr", "samples_per_second"}
    for record in records(resumed):
        assert set(record) == training_keys or "eval_loss" in record, record
    expected = final_model(straight)
    for key, value in final_model(resumed).items():
        torch.testing.assert_close(value, expected[key], rtol=1e-6, atol=1e-6)

    # The curve: warm-up to --lr over 3 steps, then cosine down to --min-lr at
    # the last step of --epochs (not of --max-steps).
    lrs = [lr for _, _, lr, _ in training(straight)]
    assert lrs[:4] == pytest.approx([0.0025, 0.005, 0.0075, 0.01])
    assert all(a > b for a, b in zip(lrs[3:-1], lrs[4:], strict=True))
    assert lrs[-1] == pytest.approx(
        0.001 + 0.009 * 0.5 * (1 + math.cos(math.pi * 12 / 13))
    )
    assert metrics["final_loss"] == pytest.approx(training(resumed)[-1][3])


def test_the_run_dir_holds_the_resolved_config_and_the_checkpoints(launch, tmp_path):
    train_alone(launch, tmp_path, "--epochs", "1")
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["checkpoint_dir"] == ""  # derived from run_dir, never pinned
    assert checkpoints(tmp_path)
    assert config["train_size"] == 256 and config["optimizer"] == "adamw"
    evaluations = [r for r in records(tmp_path) if "eval_loss" in r]
    assert [(r["step"], r["epoch"]) for r in evaluations] == [(STEPS_PER_EPOCH, 1)]


def test_a_fresh_run_drops_the_older_runs_records(launch, tmp_path):
    flags = ["--epochs", "1", "--log-every", "4"]
    train_alone(launch, tmp_path, *flags, "--seed", "1")
    train_alone(launch, tmp_path, *flags, "--resume", "none")
    steps = [r["step"] for r in records(tmp_path) if "loss" in r]
    assert steps == [4, 8]


@pytest.mark.parametrize(
    ("schedule", "expected"),
    [
        ("constant", [0.25, 0.5, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]),
        ("linear", [0.25, 0.5, 0.75, 1.0, 0.775, 0.55, 0.325, 0.1, 0.1]),
        ("cosine", [0.25, 0.5, 0.75, 1.0, 0.868198, 0.55, 0.231802, 0.1, 0.1]),
    ],
)
def test_schedules_warm_up_then_decay_to_min_lr(mp, schedule, expected):
    optim = import_generated(mp, "optim")
    factor = optim.lr_factor(schedule, warmup_steps=3, decay_steps=7, min_ratio=0.1)
    assert [factor(step) for step in range(9)] == pytest.approx(expected, abs=1e-6)


def test_adamw_does_not_decay_biases_or_norms(mp):
    optim = import_generated(mp, "optim")
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4))
    decay, no_decay = optim.parameter_groups(model, weight_decay=0.1)
    assert [p.shape for p in decay["params"]] == [(4, 4)]
    assert len(no_decay["params"]) == 3 and no_decay["weight_decay"] == 0.0


def test_an_epoch_counts_whole_global_batches_only(mp):
    optim = import_generated(mp, "optim")
    assert optim.steps_per_epoch(samples=300, global_batch=32) == 9


def test_min_lr_above_lr_is_a_usage_error(mp, tmp_path):
    _, result = train(
        mp, tmp_path, "--lr", "0.01", "--min-lr", "0.1", check=False, timeout=60
    )
    assert result.returncode == 2
    assert "--min-lr 0.1 is above --lr 0.01" in result.stderr
    assert "Traceback" not in result.stderr
