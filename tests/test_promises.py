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
    step_records,
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
    assert (state["epoch"], state["samples_in_epoch"]) == (1, 0)


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
        "error: 48 training samples are fewer than one global batch of 64 "
        "(--batch-size 32 x 2 processes): nothing would train"
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


# 2 epochs of 16 optimizer steps at any world size.
RESIZED = ["--train-size", "512", "--eval-size", "0", "--batch-size", "16"]
RESIZED += ["--global-batch-size", "32", "--epochs", "2", "--log-every", "1"]
RESIZED += ["--lr-schedule", "cosine", "--warmup-steps", "3"]


def test_a_run_resized_mid_epoch_ends_where_an_unresized_run_does(launch, tmp_path):
    """2 processes to step 5, 1 to step 11 (mid-epoch both), 4 to the end: the
    same weights, the same learning rate at every step, each step logged once
    with the world size that trained it."""
    whole, _ = train(launch, tmp_path / "whole", *RESIZED)
    resized = tmp_path / "resized"
    train(launch, resized, *RESIZED, "--max-steps", "5")
    _, shrunk = train(launch, resized, *RESIZED, "--max-steps", "11", nprocs=1)
    grown, regrown = train(launch, resized, *RESIZED, nprocs=4)
    assert (
        "resumed at step 5: 2 -> 1 process, micro-steps 1 -> 2, global batch 32 kept"
    ) in shrunk.stdout.splitlines()
    assert (
        "resumed at step 11: 1 -> 4 processes, micro-batch 16 -> 8, "
        "micro-steps 2 -> 1, global batch 32 kept"
    ) in regrown.stdout.splitlines()
    assert grown["steps"] == whole["steps"] == 32 and grown["epochs"] == 2
    assert_same_weights(final_model(resized), final_model(tmp_path / "whole"))
    records, expected = step_records(resized), step_records(tmp_path / "whole")
    assert [r["step"] for r in records] == list(range(1, 33))
    assert [r["lr"] for r in records] == pytest.approx([r["lr"] for r in expected])
    sizes = [r["world_size"] for r in records]
    assert sizes == [2] * 5 + [1] * 6 + [4] * 21


def test_an_mp_run_resumed_on_fewer_processes_mid_epoch_matches(mp, tmp_path):
    flags = [*RESIZED, "--epochs", "1"]
    train(mp, tmp_path / "whole", *flags)
    train(mp, tmp_path / "resized", *flags, "--max-steps", "7")
    metrics, _ = train(mp, tmp_path / "resized", *flags, nprocs=1)
    assert metrics["steps"] == 16 and metrics["world_size"] == 1
    assert_same_weights(
        final_model(tmp_path / "resized"), final_model(tmp_path / "whole")
    )
    sizes = [r["world_size"] for r in step_records(tmp_path / "resized")]
    assert sizes == [2] * 7 + [1] * 9


def test_each_sample_is_seen_once_per_epoch_across_changes_of_size(launch):
    """The sampler's shards over a run resized at steps 5 and 11: each sample
    once per epoch; with a tail short of a global batch, only the tail left out."""
    data = import_generated(launch, "data")
    Placement = import_generated(launch, "distributed").Placement
    for size, steps in [(512, 16), (500, 15)]:
        dataset = range(size)
        seen = []
        for start, stop, world_size in [(0, 5, 2), (5, 11, 1), (11, None, 4)]:
            for rank in range(world_size):
                placement = Placement(rank, rank, world_size, world_size)
                sampler = data.ResumableDistributedSampler(dataset, placement, 0, 32)
                sampler.start_epoch(1, consumed=start * 32)
                per_rank = 32 // world_size * ((stop or steps) - start)
                taken = list(sampler)
                assert len(taken) == len(sampler)
                if stop is None:
                    assert len(taken) == per_rank  # to the epoch's end
                seen += taken[:per_rank]
        assert len(seen) == len(set(seen)) == steps * 32


def test_epoch_end_resume_with_another_world_size_keeps_the_global_batch(
    launch, tmp_path
):
    train(launch, tmp_path, *SMALL_SYNTHETIC, "--epochs", "1")
    metrics, result = train(
        launch, tmp_path, *SMALL_SYNTHETIC, "--epochs", "2", nprocs=1
    )
    assert (
        "resumed at step 8: 2 -> 1 process, micro-steps 1 -> 2, global batch 32 kept"
    ) in result.stdout.splitlines()
    assert metrics["world_size"] == 1 and metrics["epochs"] == 2
    assert metrics["steps"] == 2 * STEPS_PER_EPOCH  # the same steps per epoch


def test_a_global_batch_that_does_not_split_is_refused(launch, tmp_path):
    train(launch, tmp_path, *SMALL_SYNTHETIC, "--max-steps", "3", nprocs=1)
    before = steps_in(tmp_path)
    _, result = train(launch, tmp_path, *SMALL_SYNTHETIC, nprocs=3, check=False)
    assert result.returncode != 0
    line = (
        "error: the checkpoint's global batch of 16 cannot be split evenly over "
        "3 processes: give --global-batch-size a multiple of 3, such as 15 or 18"
    )
    assert result.stderr.count(line) == 1, result.stderr
    assert steps_in(tmp_path) == before


def test_a_global_batch_is_split_into_the_fewest_micro_steps(launch):
    batching = import_generated(launch, "batching")
    assert batching.split(32, 2, 16, "G") == batching.Layout(32, 2, 16, 1)
    assert batching.split(32, 1, 16, "G") == batching.Layout(32, 1, 16, 2)
    assert batching.split(96, 4, 16, "G") == batching.Layout(96, 4, 12, 2)
    assert batching.split(34, 2, 16, "G") == batching.Layout(34, 2, 1, 17)
    with pytest.raises(
        Exception,
        match="^G cannot be split evenly over 4 processes: "
        "give --global-batch-size a multiple of 4, such as 20 or 24$",
    ):
        batching.split(22, 4, 16, "G")
    with pytest.raises(Exception, match="such as 4$"):
        batching.split(3, 4, 16, "G")


def test_a_run_without_amp_resumes_with_fp16(launch, tmp_path):
    train_alone(launch, tmp_path, "--epochs", "1")
    metrics, result = train_alone(launch, tmp_path, "--epochs", "2", "--amp", "fp16")
    assert "resumed from" in result.stdout and metrics["epochs"] == 2
