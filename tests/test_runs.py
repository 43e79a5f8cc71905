"""Generated projects trained for real: 2 CPU processes with gloo.

That a resume (mid-epoch, then at an epoch end) ends where an uninterrupted
run does is the generated project's own test, run in each mode by
test_generated_tests.py; it is not repeated here."""

import json
import os
import subprocess

import pytest
import torch
from helpers import (
    PYTHON,
    SMALL_SYNTHETIC,
    STEPS_PER_EPOCH,
    assert_contract,
    assert_same_weights,
    checkpoints,
    child_env,
    final_model,
    free_port,
    import_generated,
    package,
    run,
    train,
    train_alone,
)

ONE_EPOCH = ["--epochs", "1", *SMALL_SYNTHETIC]


def test_two_mp_jobs_on_one_machine_both_succeed(mp, tmp_path):
    jobs = []
    for index in range(2):
        command = [PYTHON, "train.py", "--nprocs", "2", *ONE_EPOCH, "--device", "cpu"]
        command += ["--checkpoint-dir", tmp_path / f"c{index}"]
        jobs.append(
            subprocess.Popen(
                [str(c) for c in command],
                cwd=mp,
                env=child_env(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    for job in jobs:
        _, stderr = job.communicate(timeout=240)
        assert job.returncode == 0, stderr[-3000:]


def test_threads_are_shared_between_processes(mp, tmp_path):
    """cores // local processes each, unless OMP_NUM_THREADS says otherwise."""
    shared, _ = train(mp, tmp_path / "shared", *ONE_EPOCH)
    assert shared["threads_per_process"] == max(1, len(os.sched_getaffinity(0)) // 2)
    explicit, _ = train(
        mp, tmp_path / "explicit", *ONE_EPOCH, env=child_env(OMP_NUM_THREADS=2)
    )
    assert explicit["threads_per_process"] == 2  # not the shared 1 on 2 cores


def test_checkpoints_every_save_every_epochs_and_at_the_end(launch, tmp_path):
    train_alone(launch, tmp_path, "--epochs", "3", "--save-every", "2")
    steps = [
        torch.load(path, weights_only=True)["step"] for path in checkpoints(tmp_path)
    ]
    assert steps == [2 * STEPS_PER_EPOCH, 3 * STEPS_PER_EPOCH]


def test_max_steps_stops_and_saves(launch, tmp_path):
    metrics, _ = train_alone(launch, tmp_path, "--epochs", "5", "--max-steps", "3")
    assert metrics["steps"] == 3 and metrics["epochs"] == 0
    assert torch.load(metrics["checkpoint"], weights_only=True)["step"] == 3


def test_keep_last_prunes_old_checkpoints(launch, tmp_path):
    train_alone(launch, tmp_path, "--epochs", "3", "--keep-last", "2")
    steps = [
        torch.load(path, weights_only=True)["step"] for path in checkpoints(tmp_path)
    ]
    assert steps == [2 * STEPS_PER_EPOCH, 3 * STEPS_PER_EPOCH]


def test_every_contract_flag_is_accepted(mp, tmp_path):
    flags = ["--lr", "0.01", "--seed", "3", "--backend", "gloo", "--num-workers", "1"]
    flags += ["--amp", "bf16", "--grad-accum", "2", "--clip-grad-norm", "1.0"]
    flags += ["--log-every", "1", "--warmup-steps", "2", "--resume", "none"]
    metrics, result = train(mp, tmp_path, *ONE_EPOCH, *flags)
    assert metrics["steps"] == STEPS_PER_EPOCH // 2
    assert "step 1 loss" in result.stdout  # logged by rank 0 only
    assert result.stdout.count("step 1 loss") == 1


def test_fp16_uses_a_grad_scaler(launch, tmp_path):
    metrics, _ = train_alone(
        launch, tmp_path, "--epochs", "1", "--amp", "fp16", "--clip-grad-norm", "1"
    )
    state = torch.load(metrics["checkpoint"], weights_only=True)
    assert state["scaler"]["scale"] > 0


def test_nccl_on_cpu_is_a_usage_error(launch, tmp_path):
    _, result = train(launch, tmp_path, "--backend", "nccl", nprocs=1, check=False)
    assert result.returncode == 2
    assert "--backend nccl needs --device cuda; use gloo on CPU" in result.stderr


def test_two_processes_equal_one_with_twice_the_batch(launch, tmp_path):
    """The DDP promise: N x B is one process at N*B. The reported training
    loss is the mean over every rank's samples, so it matches too."""
    data = ["--train-size", "256", "--eval-size", "64", "--epochs", "2"]
    data += ["--log-every", "1"]
    two, _ = train(launch, tmp_path / "two", *data, "--batch-size", "8")
    one, _ = train(launch, tmp_path / "one", *data, "--batch-size", "16", nprocs=1)
    assert_same_weights(final_model(tmp_path / "two"), final_model(tmp_path / "one"))
    assert training_losses(tmp_path / "two") == pytest.approx(
        training_losses(tmp_path / "one"), rel=1e-5
    )
    assert two["final_loss"] == pytest.approx(one["final_loss"], rel=1e-5)


def training_losses(run_dir):
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [record["loss"] for record in map(json.loads, lines) if "loss" in record]


def test_accumulation_equals_one_step_on_a_bigger_batch(mp, tmp_path):
    train(mp, tmp_path / "accum", *ONE_EPOCH, "--batch-size", "4", "--grad-accum", "4")
    train(mp, tmp_path / "big", *ONE_EPOCH, "--batch-size", "16")
    assert_same_weights(final_model(tmp_path / "accum"), final_model(tmp_path / "big"))


def test_unreadable_newest_checkpoint_falls_back_to_the_previous(launch, tmp_path):
    train_alone(launch, tmp_path, "--epochs", "2")
    older, newest = checkpoints(tmp_path)
    newest.write_bytes(newest.read_bytes()[:100])  # truncated mid-write
    metrics, result = train_alone(launch, tmp_path, "--epochs", "3")
    assert f"skipping unreadable checkpoint {newest}" in result.stderr
    assert "Warning" not in result.stderr  # one line of ours, no Python warning
    assert f"resumed from {older}" in result.stdout
    assert metrics["steps"] == 3 * STEPS_PER_EPOCH


def test_explicit_resume_that_cannot_load_names_the_file(launch, tmp_path):
    bad = tmp_path / "bad.pt"
    bad.write_text("not a checkpoint")
    _, result = train(launch, tmp_path, *ONE_EPOCH, "--resume", bad, check=False)
    assert result.returncode != 0
    assert f"--resume {bad}: cannot load checkpoint" in result.stderr


def test_compiled_model_saves_keys_without_prefixes(launch, tmp_path):
    metrics, _ = train(launch, tmp_path, *ONE_EPOCH, "--compile", nprocs=1, timeout=420)
    assert_contract(metrics, world_size=1)


def test_sampler_shards_are_disjoint_cover_the_data_and_reshuffle(launch):
    data = import_generated(launch, "data")
    distributed = import_generated(launch, "distributed")
    dataset = list(range(10))

    def shards(epoch):
        result = []
        for rank in range(2):
            placement = distributed.Placement(rank, rank, 2, 2)
            sampler = data.ResumableDistributedSampler(dataset, placement, 0, 2)
            sampler.start_epoch(epoch)
            result.append(list(sampler))
        return result

    first, second = shards(0), shards(1)
    assert not set(first[0]) & set(first[1])
    assert sorted(first[0] + first[1]) == dataset
    assert first != second
    placement = distributed.Placement(0, 0, 2, 2)
    sampler = data.ResumableDistributedSampler(dataset, placement, 0, 2)
    sampler.start_epoch(0, consumed=4)  # 2 steps of both ranks
    assert list(sampler) == first[0][2:] and len(sampler) == 3


# One process of a generated project's trainer, built and fitted here: `{hooks}`
# observes it, `{report}` prints what it saw.
ONE_PROCESS_TRAINER = """
import json
import sys
sys.path.insert(0, ".")  # the project: the current directory
import torch
import torch.distributed as dist
from {package}.batching import settle
from {package}.config import parse_args
from {package}.distributed import Placement, leave_process_group, pick_devices
from {package}.worker import build_trainer

dist.init_process_group("gloo", init_method="tcp://127.0.0.1:{port}", rank=0,
                        world_size=1)
config = settle(parse_args(sys.argv[1:]), world_size=1)
placement = Placement(0, 0, 1, 1)
trainer = build_trainer(config, placement, pick_devices(config, placement), "gloo")
{hooks}
trainer.fit()
{report}
leave_process_group()  # as worker.py does: else gloo's threads may abort the exit
"""


def run_one_process_trainer(project, tmp_path, hooks, report, *flags):
    script = tmp_path / "trainer.py"
    script.write_text(
        ONE_PROCESS_TRAINER.format(
            package=package(project), port=free_port(), hooks=hooks, report=report
        )
    )
    flags = [*flags, "--device", "cpu", "--run-dir", tmp_path / "run"]
    return run([PYTHON, script, *flags], cwd=project).stdout.splitlines()[-1]


RECORD_ORDERS = """
orders, sampler_type = [], type(trainer.train_loader.sampler)
iterate = sampler_type.__iter__


def recording(sampler):
    orders.append(list(iterate(sampler)))
    return iter(orders[-1])


sampler_type.__iter__ = recording
"""


def test_the_trainer_reshuffles_every_epoch(launch, tmp_path):
    """Each epoch the loop draws a new order of every sample (the sampler's
    own test cannot see whether the trainer tells it the epoch)."""
    flags = [*SMALL_SYNTHETIC, "--epochs", "3"]
    report = "print(json.dumps(orders))"
    orders = json.loads(
        run_one_process_trainer(launch, tmp_path, RECORD_ORDERS, report, *flags)
    )
    assert len(orders) == 3
    assert all(sorted(order) == list(range(256)) for order in orders)
    assert len({tuple(order) for order in orders}) == 3


def test_eval_shards_count_every_sample_once(launch):
    data = import_generated(launch, "data")
    distributed = import_generated(launch, "distributed")
    dataset = list(range(7))  # does not divide by 2
    seen = []
    for rank in range(2):
        seen += list(
            data.EvalShardSampler(dataset, distributed.Placement(rank, rank, 2, 2))
        )
    assert sorted(seen) == dataset


COUNT_ALL_REDUCES = """
calls = []


def counting_hook(state, bucket):
    calls.append(bucket.index())
    future = torch.futures.Future()
    future.set_result(bucket.buffer())
    return future


trainer.ddp.register_comm_hook(None, counting_hook)
"""


@pytest.mark.parametrize("accum", [4, 3], ids=["even-groups", "a-short-tail"])
def test_accumulation_all_reduces_once_per_optimizer_step(launch, tmp_path, accum):
    """no_sync on all but the last micro-step: DDP's comm hook runs once per
    optimizer step (the MLP is one bucket), not once per micro-batch. With 64
    micro-batches' worth of samples and 3 per step, the one left waits for the
    next epoch's order."""
    flags = [*ONE_EPOCH, "--batch-size", "4", "--grad-accum", str(accum)]
    report = "print(len(calls), trainer.step, len(trainer.train_loader))"
    counts = run_one_process_trainer(
        launch, tmp_path, COUNT_ALL_REDUCES, report, *flags
    )
    all_reduces, steps, micro_batches = map(int, counts.split())
    assert micro_batches == 64 // accum * accum
    assert steps == 64 // accum
    assert all_reduces == steps, counts
