"""The generated agreement.py on two real gloo processes: the replica check
sees a one-bit difference, and the pipelined stop check stops every rank at
the same step."""

import os
import textwrap

from helpers import PYTHON, child_env, package, run

SCRIPT = """
import signal
import sys
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from {package}.agreement import StopRequest, replicas_in_sync


def worker(rank, folder):
    store = dist.FileStore(f"{{folder}}/store", 2)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=2)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    model.append(torch.nn.Linear(2, 2).to(torch.bfloat16))
    same = replicas_in_sync(model, torch.device("cpu"))
    with torch.no_grad():
        if rank == 1:  # one bit of one weight: the smallest possible drift
            bits = model[0].weight.view(torch.int32)
            bits[1, 2] ^= 1
    drifted = replicas_in_sync(model, torch.device("cpu"))
    with torch.no_grad():
        if rank == 1:
            model[2].bias.view(torch.int16)[0] ^= 1  # a bf16 bit
            model[0].weight.view(torch.int32)[1, 2] ^= 1
    drifted_bf16 = replicas_in_sync(model, torch.device("cpu"))

    stop = StopRequest(None)
    stopped_at = stopped_by = None
    for step in range(1, 10):
        if rank == 1 and step == 4:
            stop.signal = signal.SIGTERM  # what SIGTERM sets, on one rank only
        stopped_by = stop.agreed()
        if stopped_by:
            stopped_at = step
            break
    stop.finish()
    # A file per rank: two processes printing to one pipe can interleave.
    with open(f"{{folder}}/rank{{rank}}.txt", "w") as out:
        results = [same, drifted, drifted_bf16, stopped_at, stopped_by]
        out.write(" ".join(map(str, results)))
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.start_processes(worker, (sys.argv[1],), nprocs=2, start_method="spawn")
"""


def test_replica_check_sees_one_bit_and_ranks_stop_together(launch, tmp_path):
    script = tmp_path / "agree.py"
    script.write_text(textwrap.dedent(SCRIPT.format(package=package(launch))))
    paths = [str(launch), os.environ.get("PYTHONPATH", "")]
    run(
        [PYTHON, script, tmp_path],
        cwd=launch,
        timeout=120,
        env=child_env(PYTHONPATH=os.pathsep.join(filter(None, paths))),
    )
    results = [(tmp_path / f"rank{rank}.txt").read_text() for rank in (0, 1)]
    # In sync, then one flipped float32 bit, then one flipped bfloat16 bit; the
    # request on rank 1 at step 4 is read by every rank at step 5, and rank 0,
    # which had no signal of its own, names rank 1's.
    assert results == ["True False False 5 SIGTERM"] * 2
