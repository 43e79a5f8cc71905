"""The same runs with nccl on CUDA. They skip, with the reason, without GPUs;
`make test-gpu` runs only these."""

import json

import pytest
import torch
from helpers import (
    SMALL_SYNTHETIC,
    TORCHRUN,
    assert_same_weights,
    final_model,
    run,
    train,
)

GPUS = torch.cuda.device_count()
pytestmark = pytest.mark.gpu
needs_cuda = pytest.mark.skipif(GPUS == 0, reason="no CUDA device visible")
needs_two_gpus = pytest.mark.skipif(
    GPUS < 2, reason=f"2 processes on 2 GPUs against 1; {GPUS} visible"
)
needs_two_gpus_per_process = pytest.mark.skipif(
    GPUS < 2, reason=f"model parallel needs 2 GPUs per process; {GPUS} visible"
)
WORLD = min(GPUS, 2)
ONE_EPOCH = ["--epochs", "1", *SMALL_SYNTHETIC]


def cuda_train(project, workdir, *flags, nprocs=WORLD, **kwargs):
    metrics, result = train(project, workdir, *flags, nprocs=nprocs, **kwargs)
    return metrics, result


def gpu_flags(*flags):
    """train() passes --device cpu first; a later --device cuda wins."""
    return ["--device", "cuda", "--backend", "nccl", *flags]


@needs_cuda
@pytest.mark.parametrize("mode", ["launch", "mp"])
def test_nccl_trains_and_checkpoints(projects, tmp_path, mode):
    metrics, _ = cuda_train(
        projects(mode), tmp_path, *gpu_flags(*ONE_EPOCH, "--amp", "bf16")
    )
    assert metrics["world_size"] == WORLD and metrics["replicas_in_sync"]
    state = torch.load(metrics["checkpoint"], weights_only=True)
    assert {t.device.type for t in state["model"].values()} == {"cpu"}


@needs_two_gpus  # on one GPU it would compare a run with itself
def test_nccl_equals_one_process_with_the_whole_batch(projects, tmp_path):
    project = projects("launch")
    data = ["--train-size", "256", "--eval-size", "64", "--epochs", "1"]
    cuda_train(
        project, tmp_path / "n", *gpu_flags(*data, "--batch-size", str(16 // WORLD))
    )
    cuda_train(
        project, tmp_path / "one", *gpu_flags(*data, "--batch-size", "16"), nprocs=1
    )
    assert_same_weights(final_model(tmp_path / "n"), final_model(tmp_path / "one"))


@needs_cuda
def test_fp16_with_grad_scaler_on_cuda(projects, tmp_path):
    flags = gpu_flags(*ONE_EPOCH, "--amp", "fp16", "--clip-grad-norm", "1")
    metrics, _ = cuda_train(projects("mp"), tmp_path, *flags)
    assert metrics["steps"] == 256 // (16 * WORLD)
    assert torch.isfinite(torch.tensor(metrics["final_loss"])), metrics
    scaler = torch.load(metrics["checkpoint"], weights_only=True)["scaler"]
    assert scaler["scale"] > 0 and scaler["_growth_tracker"] >= 0  # it was used


@needs_two_gpus_per_process
@pytest.mark.parametrize("mode", ["launch", "mp"])
def test_model_parallel_uses_two_gpus_per_process(projects, tmp_path, mode):
    project = projects(mode, model_parallel=True)
    metrics, _ = cuda_train(project, tmp_path, *gpu_flags(*ONE_EPOCH), nprocs=GPUS // 2)
    assert metrics["world_size"] == GPUS // 2 and metrics["replicas_in_sync"]


@needs_cuda
def test_single_gpu_runs_both_stages_with_share_gpu(projects, tmp_path):
    project = projects("launch", model_parallel=True)
    metrics, _ = cuda_train(
        project, tmp_path, *gpu_flags(*ONE_EPOCH, "--share-gpu"), nprocs=1
    )
    assert metrics["world_size"] == 1


@needs_cuda
def test_too_many_processes_for_the_gpu_pairs_fails_before_starting(projects, tmp_path):
    project = projects("mp", model_parallel=True)
    _, result = cuda_train(project, tmp_path, *gpu_flags(), nprocs=GPUS, check=False)
    assert result.returncode != 0
    assert (
        f"start at most {GPUS // 2}" in result.stderr or "needs 2 GPUs" in result.stderr
    )


def doctor_devices(project, nprocs, *flags):
    """The devices each rank's process group is bound to, as the doctor reports."""
    package = json.loads((project / ".ddpgen.json").read_text())["answers"]
    command = TORCHRUN + ["--standalone", "--nproc-per-node", nprocs]
    command += ["-m", f"{package['package_name']}.doctor", "--device", "cuda"]
    result = run(command + ["--max-mib", "4", *flags], cwd=project, timeout=180)
    assert "backend: nccl" in result.stdout
    line = next(ln for ln in result.stdout.splitlines() if ln.startswith("ranks: "))
    return line.split("devices: ")[1].split()


@needs_cuda
def test_nccl_groups_are_bound_to_each_process_gpu(projects):
    """init_process_group(device_id=...): rank r's communicators on cuda:r."""
    devices = doctor_devices(projects("launch"), WORLD)
    assert devices == [f"{rank}=cuda:{rank}" for rank in range(WORLD)]


@needs_two_gpus_per_process
def test_model_parallel_groups_are_bound_to_the_first_gpu_of_each_pair(projects):
    """Local rank r owns GPUs 2r and 2r+1: its group is bound to GPU 2r, not r."""
    devices = doctor_devices(projects("launch", model_parallel=True), GPUS // 2)
    assert devices == [f"{rank}=cuda:{2 * rank}" for rank in range(GPUS // 2)]


@needs_cuda
def test_model_parallel_on_one_gpu_binds_it(projects):
    devices = doctor_devices(projects("launch", model_parallel=True), 1, "--share-gpu")
    assert devices == ["0=cuda:0"]
