"""A bare 2-process gloo DDP loop for measuring one setting against another in
the same run: DDP's own options, the SIGTERM agreement per step, the
end-of-run replica check and the flight recorder. Used by run_all.py; each
function returns seconds per step (or per call), the median over rounds that
alternate the variants.

    python benchmarks/ddp_loop.py   # prints every table as JSON
"""

import json
import os
import signal
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from workloads import MODELS, free_port, process_group, small_cnn

WORLD = 2
ROUNDS = 3


def run_workers(task, *args):
    """Run task(rank, *args) on 2 gloo processes; return rank 0's result."""
    port = free_port()
    results = mp.get_context("spawn").SimpleQueue()
    mp.start_processes(
        worker, (port, task, args, results), nprocs=WORLD, start_method="spawn"
    )
    return results.get()


def worker(rank, port, task, args, results):
    torch.set_num_threads(max(1, (os.cpu_count() or 2) // WORLD))
    with process_group("gloo", rank, WORLD, port):
        result = task(rank, *args)
        if rank == 0:
            results.put(result)


def timed_steps(model, steps, batch, after_step=lambda: None):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    inputs, targets = torch.randn(batch, 3, 32, 32), torch.randint(0, 10, (batch,))
    for index in range(steps + 3):  # three warm-up steps
        if index == 3:
            dist.barrier()
            started = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(model(inputs), targets).backward()
        optimizer.step()
        after_step()
    return (time.perf_counter() - started) / steps


def settings_task(rank, model_name, settings, steps, batch):
    torch.manual_seed(0)
    model = DistributedDataParallel(MODELS[model_name](), **settings)
    return timed_steps(model, steps, batch)


def agreement_task(rank, variant, steps, batch):
    """Seconds per step of the small CNN with a stop check after each step."""
    torch.manual_seed(0)
    model = DistributedDataParallel(small_cnn())
    group = dist.new_group(backend="gloo")
    requested = torch.zeros(1)
    pending = []

    def blocking():
        flag = requested.clone()
        dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=group)
        return bool(flag.item())

    def pipelined():
        if pending:
            flag, work = pending.pop()
            work.wait()
            bool(flag.item())
        flag = requested.clone()
        work = dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=group, async_op=True)
        pending.append((flag, work))

    check = {"none": lambda: None, "blocking": blocking, "pipelined": pipelined}
    seconds = timed_steps(model, steps, batch, check[variant])
    for _, work in pending:
        work.wait()
    return seconds


@torch.no_grad()
def replica_check_task(rank, model_name, variant):
    """Seconds of one end-of-run replica check (median of 5 calls)."""
    model = DistributedDataParallel(MODELS[model_name]())

    def float_sums():  # the check before: a float64 copy and two sums each
        fingerprint = [
            (float(p.double().sum()), float(p.double().square().sum()))
            for p in model.parameters()
        ]
        gathered = [None] * WORLD
        dist.all_gather_object(gathered, fingerprint)
        return all(other == gathered[0] for other in gathered)

    def bit_sums():  # the generated agreement.replicas_in_sync
        ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
        checksums = torch.stack(
            [
                p.detach().view(ints[p.element_size()]).sum(dtype=torch.int64)
                for p in model.parameters()
            ]
        )
        gathered = [torch.empty_like(checksums) for _ in range(WORLD)]
        dist.all_gather(gathered, checksums)
        return all(torch.equal(other, gathered[0]) for other in gathered)

    check = {"float64_sums_gathered_as_objects": float_sums, "bit_sums": bit_sums}
    times = []
    for _ in range(5):
        dist.barrier()
        started = time.perf_counter()
        assert check[variant]()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def alternate(task, variants, *args):
    """{variant: median over ROUNDS}, the variants interleaved in each round."""
    times = {variant: [] for variant in variants}
    for _ in range(ROUNDS):
        for name, variant in variants.items():
            times[name].append(run_workers(task, *variant, *args))
    return {name: statistics.median(values) for name, values in times.items()}


DDP_SETTINGS = {
    "defaults (bucket_cap_mb 25)": {},
    "gradient_as_bucket_view": {"gradient_as_bucket_view": True},
    "static_graph": {"static_graph": True},
    "bucket_cap_mb 5": {"bucket_cap_mb": 5},
    "bucket_cap_mb 100": {"bucket_cap_mb": 100},
    "gradient_as_bucket_view + static_graph": {
        "gradient_as_bucket_view": True,
        "static_graph": True,
    },
}


def bench_ddp_settings(model_name, steps, batch):
    variants = {name: (model_name, s) for name, s in DDP_SETTINGS.items()}
    return alternate(settings_task, variants, steps, batch)


def bench_agreement(steps, batch):
    variants = {name: (name,) for name in ("none", "blocking", "pipelined")}
    return alternate(agreement_task, variants, steps, batch)


def bench_replica_check(model_name):
    names = ("float64_sums_gathered_as_objects", "bit_sums")
    variants = {name: (model_name, name) for name in names}
    return alternate(replica_check_task, variants)


def bench_flight_recorder(steps, batch):
    """The generated step (small CNN, the pipelined stop check: two collectives
    a step) with torch's flight recorder off and at the generated default;
    the workers read TORCH_FR_BUFFER_SIZE when their process group starts."""
    sizes = {"off": "0", "2000 entries (generated default)": "2000"}
    times = {name: [] for name in sizes}
    before = os.environ.get("TORCH_FR_BUFFER_SIZE")
    try:
        for _ in range(ROUNDS):
            for name, size in sizes.items():
                os.environ["TORCH_FR_BUFFER_SIZE"] = size
                times[name].append(
                    run_workers(agreement_task, "pipelined", steps, batch)
                )
    finally:
        os.environ.pop("TORCH_FR_BUFFER_SIZE")
        if before is not None:
            os.environ["TORCH_FR_BUFFER_SIZE"] = before
    return {name: statistics.median(values) for name, values in times.items()}


def main():
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    quick = "--quick" in sys.argv
    steps = 5 if quick else 20
    results = {
        "ddp_settings_resnet18_s_per_step": bench_ddp_settings("resnet18", steps, 16),
        "stop_check_small_cnn_s_per_step": bench_agreement(steps * 10, 32),
        "replica_check_resnet18_s": bench_replica_check("resnet18"),
        "flight_recorder_small_cnn_s_per_step": bench_flight_recorder(steps * 10, 32),
    }
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
