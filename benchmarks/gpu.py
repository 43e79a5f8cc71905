"""The GPU benchmark (`make bench-gpu`): on every visible GPU, DDP's step time
against one GPU training alone with the same per-GPU batch (ResNet-18 at
224x224, batch 64 per GPU), and the all_reduce bus bandwidth by message size
from the generated doctor's own table (bandwidth.py). Without CUDA it says why
it skipped and exits 0.

    python benchmarks/gpu.py [--cpu-smoke]   # --cpu-smoke: the same code on
                                             # 2 gloo CPU processes, tiny sizes
"""

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
GPU = {"image": 224, "batch": 64, "steps": 30, "max_mib": 256, "backend": "nccl"}
CPU_SMOKE = {"image": 32, "batch": 4, "steps": 2, "max_mib": 1, "backend": "gloo"}


def bandwidth_module(scratch):
    """The generated project's bandwidth.py, so the table is the doctor's."""
    command = [sys.executable, "-m", "ddpgen", "new", "gpu-bench", "--mode", "mp"]
    subprocess.run(
        [*command, "--output-dir", scratch],
        check=True,
        stdout=subprocess.DEVNULL,
        timeout=300,
    )
    return str(Path(scratch) / "gpu-bench")


def device_for(rank, size):
    import torch

    if size["backend"] == "nccl":
        torch.backends.cudnn.benchmark = True  # fixed shapes: pick the fastest kernels
        torch.cuda.set_device(rank)
        return torch.device("cuda", rank)
    return torch.device("cpu")


def seconds_per_step(model, size, device):
    """Median step time over `steps` steps after 5 warm-up steps."""
    import torch
    from torch import nn

    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    shape = (size["batch"], 3, size["image"], size["image"])
    inputs = torch.randn(shape, device=device).to(memory_format=torch.channels_last)
    targets = torch.randint(0, 1000, (size["batch"],), device=device)
    times = []
    for index in range(size["steps"] + 5):
        started = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(model(inputs), targets).backward()
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if index >= 5:
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def resnet18(device):
    import torch
    from torchvision.models import resnet18 as build

    torch.manual_seed(0)
    return build().to(device, memory_format=torch.channels_last)


def single_device_step(size):
    device = device_for(0, size)
    return seconds_per_step(resnet18(device), size, device)


def ddp_worker(rank, world, port, size, project, results):
    from torch.nn.parallel import DistributedDataParallel
    from workloads import process_group

    device = device_for(rank, size)
    with process_group(size["backend"], rank, world, port):
        ids = [rank] if device.type == "cuda" else None
        model = DistributedDataParallel(
            resnet18(device), device_ids=ids, gradient_as_bucket_view=True
        )
        step = seconds_per_step(model, size, device)
        sys.path.insert(0, project)
        from gpu_bench.bandwidth import all_reduce_table

        table = all_reduce_table(device, world, size["max_mib"])
        if rank == 0:
            results.put({"ddp_s_per_step": step, "all_reduce": table})
        del model


def ddp_step_and_bandwidth(world, size, project):
    import torch.multiprocessing as mp
    from workloads import free_port

    results = mp.get_context("spawn").SimpleQueue()
    arguments = (world, free_port(), size, project, results)
    mp.start_processes(ddp_worker, arguments, nprocs=world, start_method="spawn")
    return results.get()


def measure(size, world):
    """With one GPU, DDP's all_reduce is a no-op: the ratio is then DDP's own
    overhead and the bus bandwidth 0 (the table still shows algbw)."""
    with tempfile.TemporaryDirectory() as scratch:
        project = bandwidth_module(scratch)
        single = single_device_step(size)
        ddp = ddp_step_and_bandwidth(world, size, project)
    return {
        "world_size": world,
        "per_device_batch": size["batch"],
        "single_device_s_per_step": single,
        **ddp,
        "ddp_step_vs_single": ddp["ddp_s_per_step"] / single,
        "scaling_efficiency": single / ddp["ddp_s_per_step"],
    }


def main():
    import torch

    if "--cpu-smoke" in sys.argv:
        results = measure(CPU_SMOKE, world=2)
    elif not torch.cuda.is_available():
        print("bench-gpu skipped: no CUDA device (torch.cuda.is_available() is False)")
        return
    else:
        results = measure(GPU, world=torch.cuda.device_count())
        results["device"] = torch.cuda.get_device_name(0)
    table = results.pop("all_reduce")
    print(json.dumps(results, indent=2))
    print(table)


if __name__ == "__main__":
    main()
