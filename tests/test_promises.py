"""What the READMEs promise holds when tried: checkpoint retention across runs,
honest metrics, runs that cannot train refused, mistakes as one line."""

import json

import pytest
import torch
from helpers import (
    PYTHON,
    SMALL_SYNTHETIC,
    STEPS_PER_EPOCH,
    assert_same_weights,
    checkpoints,
    final_model,
    import_generated,
    package,
    run,
    train,
    train_alone,
)


def steps_in(folder):
    return [torch.load(p, weights_only=True)["step"] for p in checkpoints(folder)]


# Retention: the checkpoint folder holds one run's line


def test_a_fresh_run_keeps_its_checkpoint_and_sets_older_runs_aside(launch, tmp_path):
    train_alone(launch, tmp_path, "--epochs", "4")
    assert steps_in(tmp_path) == [2 * STEPS_PER_EPOCH, 3 * STEPS_PER_EPOCH, 32]
    fresh, result = train_alone(launch, tmp_path, "--epochs", "1", "--resume", "none")
    assert steps_in(tmp_path) == [STEPS_PER_EPOCH]
    assert torch.load(fresh["checkpoint"], weights_only=True)["step"] == 8
    (aside,) = (tmp_path / "checkpoints" / "superseded").iterdir()
    assert sorted(path.name for path in aside.iterdir()) == [
        "checkpoint-000000016.pt",
        "checkpoint-000000024.pt",
        "checkpoint-000000032.pt",
    ]
    assert f"(another run) to {aside}" in result.stdout
    # --resume auto continues the newest run, not the older one's higher steps.
    again, result = train_alone(launch, tmp_path, "--epochs", "1")
    assert f"resumed from {fresh['checkpoint']}" in result.stdout
    assert again["steps"] == STEPS_PER_EPOCH


def test_rerunning_a_finished_command_changes_nothing(launch, tmp_path):
    command = ["--epochs", "1", "--max-steps", "5"]
    first, _ = train_alone(launch, tmp_path, *command)
    weights = final_model(tmp_path)
    second, _ = train_alone(launch, tmp_path, *command)
    assert second["steps"] == first["steps"] == 5
    assert_same_weights(final_model(tmp_path), weights)
    assert steps_in(tmp_path) == [5]


def test_resuming_an_older_checkpoint_sets_the_newer_ones_aside(launch, tmp_path):
    train_alone(launch, tmp_path, "--epochs", "3")
    older = checkpoints(tmp_path)[0]  # step 8
    metrics, _ = train_alone(launch, tmp_path, "--epochs", "2", "--resume", older)
    assert metrics["steps"] == 2 * STEPS_PER_EPOCH
    assert steps_in(tmp_path) == [8, 16]


# Metrics describe what happened


def test_final_metrics_describe_the_final_weights(launch, tmp_path):
    metrics, result = train_alone(
        launch, tmp_path, "--epochs", "3", "--eval-every", "2"
    )
    assert metrics["steps"] == 3 * STEPS_PER_EPOCH
    assert metrics["eval_step"] == metrics["steps"]
    evaluations = [line for line in result.stdout.splitlines() if "eval after" in line]
    assert [line.split(":")[0] for line in evaluations] == [
        "eval after epoch 2, step 16",
        "eval after epoch 3, step 24",
    ]


# Trains in one process with a clock that jumps an hour after every evaluation
# and save: only a training clock that stops for them stays under an hour.
HOUR_PER_PAUSE = """
import runpy, sys, time
sys.path.insert(0, ".")
from {package}.trainer import Trainer

real_clock, skipped = time.perf_counter, [0.0]
time.perf_counter = lambda: real_clock() + skipped[0]


def an_hour_later(method):
    def wrapper(*args, **kwargs):
        result = method(*args, **kwargs)
        skipped[0] += 3600.0
        return result
    return wrapper


Trainer.evaluate = an_hour_later(Trainer.evaluate)
Trainer.save_checkpoint = an_hour_later(Trainer.save_checkpoint)
sys.argv[0] = "train.py"
runpy.run_path("train.py", run_name="__main__")
"""


def test_throughput_counts_training_time_only(launch, tmp_path):
    driver = tmp_path / "hour_per_pause.py"
    driver.write_text(HOUR_PER_PAUSE.format(package=package(launch)))
    flags = [
        *SMALL_SYNTHETIC,
        "--epochs",
        "2",
        "--eval-every-steps",
        "4",
        "--log-every",
        "2",
    ]
    flags += ["--run-dir", tmp_path / "run", "--metrics-file", tmp_path / "m.json"]
    result = run([PYTHON, driver, "--device", "cpu", *flags], cwd=launch)
    metrics = json.loads((tmp_path / "m.json").read_text())
    assert result.stdout.count("eval after") >= 2 * STEPS_PER_EPOCH // 4
    assert 0 < metrics["train_seconds"] < 3600
    trained = metrics["steps"] * 16
    assert metrics["samples_per_second"] == pytest.approx(
        trained / metrics["train_seconds"]
    )
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    rates = [json.loads(line).get("samples_per_second") for line in lines]
    rates = [rate for rate in rates if rate is not None]
    assert rates and min(rates) > 1  # an hour in a rate's window: < 1 sample/s


def test_a_stop_on_an_epochs_last_step_completes_the_epoch(launch, tmp_path):
    metrics, _ = train_alone(
        launch, tmp_path, "--epochs", "3", "--max-steps", str(STEPS_PER_EPOCH)
    )
    assert metrics["steps"] == STEPS_PER_EPOCH and metrics["epochs"] == 1
    state = torch.load(metrics["checkpoint"], weights_only=True)
    assert (state["epoch"], state["batch_in_epoch"]) == (1, 0)


def test_no_evaluation_set_evaluates_nothing_and_logs_without_bars(launch, tmp_path):
    """--eval-size 0: no eval line, record or metric. Logs without a terminal
    have no progress bars."""
    metrics, result = train_alone(launch, tmp_path, "--eval-size", "0")
    assert not [key for key in metrics if key.startswith("eval")], metrics
    assert "eval after" not in result.stdout
    assert "eval_" not in (tmp_path / "metrics.jsonl").read_text()
    assert "%|" not in result.output and "it/s" not in result.output
    assert "saved " in result.stdout


# Runs that cannot train, and mistakes: one line, exit 2


def test_a_dataset_smaller_than_one_batch_is_refused(mp, tmp_path):
    metrics, result = train(
        mp, tmp_path, "--train-size", "48", "--batch-size", "32", check=False
    )
    assert result.returncode == 2 and metrics is None
    assert (
        "error: 48 training samples give each of the 2 processes 24 per epoch, "
        "fewer than --batch-size 32: nothing would train"
    ) in result.stderr
    assert result.stderr.count("error: 48 training samples") == 1  # rank 0 only
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "checkpoints").exists()


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("--max-steps", "-1", "--max-steps must be at least 0 (got -1)"),
        ("--num-workers", "-1", "--num-workers must be at least 0 (got -1)"),
        ("--dist-timeout", "0", "--dist-timeout must be at least 1 (got 0.0)"),
    ],
)
def test_out_of_range_flags_are_one_line(mp, tmp_path, flag, value, message):
    _, result = train(mp, tmp_path, *SMALL_SYNTHETIC, flag, value, check=False)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == f"train.py: error: {message}"
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("--train-size", "0", "--train-size must be at least 1 (got 0)"),
        ("--eval-every", "-2", "--eval-every must be at least 0 (got -2)"),
        ("--save-every", "-1", "--save-every must be at least 0 (got -1)"),
        ("--warmup-steps", "-5", "--warmup-steps must be at least 0 (got -5)"),
        ("--lr", "-0.1", "--lr must be at least 0 (got -0.1)"),
        ("--nnodes", "0", "--nnodes must be at least 1 (got 0)"),
        ("--master-port", "70000", "--master-port must be at most 65535 (got 70000)"),
    ],
)
def test_every_flag_has_its_range_checked(mp, capsys, flag, value, message):
    """The same check in process, for the other bounds (no torch start-up)."""
    config = import_generated(mp, "config")
    with pytest.raises(SystemExit) as exit_info:
        config.parse_args([flag, value])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith(f": error: {message}")


@pytest.mark.parametrize(
    "content, reason",
    [
        (None, "no such file"),
        ("not a checkpoint", "not a checkpoint saved by torch.save (UnpicklingError"),
    ],
    ids=["missing", "junk"],
)
def test_a_bad_resume_path_says_why(launch, tmp_path, content, reason):
    path = tmp_path / "junk.pt"
    if content is not None:
        path.write_text(content)
    _, result = train(
        launch, tmp_path, *SMALL_SYNTHETIC, "--resume", path, check=False, nprocs=1
    )
    assert result.returncode == 2
    assert f"--resume {path}: cannot load checkpoint: {reason}" in result.stderr
    assert "Traceback" not in result.stderr


# Resuming under other settings


def test_mid_epoch_resume_with_another_world_size_is_refused(launch, tmp_path):
    train(launch, tmp_path, *SMALL_SYNTHETIC, "--max-steps", "3")
    before = steps_in(tmp_path)
    _, result = train(launch, tmp_path, *SMALL_SYNTHETIC, nprocs=1, check=False)
    assert result.returncode == 2
    assert (
        "error: the checkpoint was saved mid-epoch by 2 processes at --batch-size 16; "
        "resume it with the same, or resume an epoch-end checkpoint "
        "(1 process, --batch-size 16 now)"
    ) in result.stderr
    assert steps_in(tmp_path) == before


def test_epoch_end_resume_with_another_world_size_trains_on(launch, tmp_path):
    train(launch, tmp_path, *SMALL_SYNTHETIC, "--epochs", "1")
    metrics, result = train(
        launch, tmp_path, *SMALL_SYNTHETIC, "--epochs", "2", nprocs=1
    )
    assert "resumed from" in result.stdout
    assert metrics["world_size"] == 1 and metrics["epochs"] == 2


def test_a_run_without_amp_resumes_with_fp16(launch, tmp_path):
    train_alone(launch, tmp_path, "--epochs", "1")
    metrics, result = train_alone(launch, tmp_path, "--epochs", "2", "--amp", "fp16")
    assert "resumed from" in result.stdout and metrics["epochs"] == 2
