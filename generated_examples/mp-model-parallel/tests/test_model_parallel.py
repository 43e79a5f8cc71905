"""The device layout of model parallelism: two GPUs per process."""

import pytest

from mp_model_parallel.model_parallel import (
    LayoutError,
    processes_per_node,
    stage_devices,
)


@pytest.mark.parametrize("gpus", [2, 4, 8])
def test_each_process_owns_its_own_pair(gpus):
    count = processes_per_node(gpus)
    assert count == gpus // 2
    layout = [stage_devices(rank, count, gpus) for rank in range(count)]
    assert layout == [(f"cuda:{2 * r}", f"cuda:{2 * r + 1}") for r in range(count)]


def test_cpu_runs_both_stages_on_cpu():
    assert stage_devices(1, 2, gpu_count=0) == ("cpu", "cpu")


def test_one_gpu_needs_share_gpu():
    with pytest.raises(LayoutError, match="--share-gpu"):
        stage_devices(0, 1, gpu_count=1)
    assert stage_devices(0, 1, gpu_count=1, share_gpu=True) == ("cuda:0", "cuda:0")


def test_more_processes_than_pairs_is_refused():
    with pytest.raises(LayoutError, match="start at most 2"):
        stage_devices(0, 3, gpu_count=4)
