"""The same runs with nccl on CUDA. They skip, with the reason, without GPUs;
`make test-gpu` runs only these."""

import pytest
import torch
from helpers import SMALL_SYNTHETIC, assert_same_weights, final_model, train

GPUS = torch.cuda.device_count()
pytestmark = pytest.mark.gpu
needs_cuda = pytest.mark.skipif(GPUS == 0, reason="no CUDA device visible")
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


@needs_cuda
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
    assert metrics["steps"] > 0


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
