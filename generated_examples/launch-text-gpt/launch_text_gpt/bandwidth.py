"""The latency and bandwidth of all_reduce by message size, like nccl-tests'
all_reduce_perf (the doctor prints this table)."""

import time

import torch
import torch.distributed as dist


def all_reduce_table(device, world_size, max_mib):
    """Time a float32 all_reduce per message size, like nccl-tests' all_reduce_perf."""
    lines = [f"{'all_reduce':>12} {'time':>10} {'algbw':>11} {'busbw':>11}"]
    for size in message_sizes(max_mib * 2**20):
        seconds = time_all_reduce(torch.ones(size // 4, device=device))
        algbw = size / seconds / 1e9
        busbw = algbw * 2 * (world_size - 1) / world_size
        lines.append(
            f"{human_bytes(size):>12} {seconds * 1e3:>8.3f}ms "
            f"{algbw:>7.3f}GB/s {busbw:>7.3f}GB/s"
        )
    return "\n".join(lines)


def message_sizes(largest):
    """4 bytes, then x16 each step, ending with the largest."""
    sizes = [4]
    while sizes[-1] * 16 < largest:
        sizes.append(sizes[-1] * 16)
    return sizes + [largest]


def time_all_reduce(tensor, repeats=5):
    dist.all_reduce(tensor)  # warm-up: connections and buffers
    synchronize(tensor.device)
    started = time.perf_counter()
    for _ in range(repeats):
        dist.all_reduce(tensor)
    synchronize(tensor.device)
    elapsed = torch.tensor([time.perf_counter() - started], device=tensor.device)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # the slowest rank's view
    return elapsed.item() / repeats


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def human_bytes(size):
    for unit in ("B", "KiB", "MiB"):
        if size < 1024 or unit == "MiB":
            return f"{size:g} {unit}"
        size /= 1024
    return f"{size:g}"
