"""Who this process is in the job, which device it drives, and the process group."""

import contextlib
import gc
import os
import sys
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

# Imported before any process group exists. DDP imports it lazily otherwise,
# and its defaults (group=group.WORLD) then hold the default group for good:
# destroy_process_group cannot free it, gloo's threads outlive it, and one that
# releases a collective's tensors as the interpreter exits aborts the process
# ("terminate called without an active exception").
import torch.distributed.nn.functional  # noqa: F401
from tqdm import tqdm

from .config import ConfigError
from .model_parallel import stage_devices


@dataclass(frozen=True)
class Placement:
    rank: int
    local_rank: int
    world_size: int
    local_world_size: int

    @property
    def is_main(self):
        """Global rank 0 alone writes files and logs: local rank 0 exists per node."""
        return self.rank == 0


def processes(count):
    return f"{count} process" if count == 1 else f"{count} processes"


def log(placement, message):
    """On global rank 0 only, above its progress bar if any."""
    if placement.is_main:
        tqdm.write(message)
        sys.stdout.flush()  # Slurm and CI logs show it now, not at exit


def placement_from_env(local_rank_flag=0):
    """Read the ranks torchrun (or the legacy launcher) put in the environment."""
    world_size = int(os.environ.get("WORLD_SIZE", 1))
    return Placement(
        rank=int(os.environ.get("RANK", 0)),
        local_rank=int(os.environ.get("LOCAL_RANK", local_rank_flag)),
        world_size=world_size,
        local_world_size=int(os.environ.get("LOCAL_WORLD_SIZE", world_size)),
    )


def visible_gpus(device_flag):
    if device_flag == "cpu":
        return 0
    count = torch.cuda.device_count()
    if device_flag == "cuda" and count == 0:
        raise ConfigError("--device cuda: no CUDA device is visible")
    return count


def pick_devices(config, placement):
    """(input device, output device): the same one unless the model is split."""
    gpus = visible_gpus(config.device)
    first, second = stage_devices(
        placement.local_rank, placement.local_world_size, gpus, config.share_gpu
    )
    return torch.device(first), torch.device(second)


def pick_backend(requested, device):
    if requested == "auto":
        return "nccl" if device.type == "cuda" else "gloo"
    if requested == "nccl" and device.type != "cuda":
        raise ConfigError("--backend nccl needs CUDA devices; use gloo on CPU")
    return requested


def usable_cores():
    """Cores this process may run on: Slurm and containers restrict the affinity."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def share_cpu_threads(local_world_size):
    """Give each process its share of the cores unless OMP_NUM_THREADS says.

    Every process defaults to one thread per core, so N processes on a node
    oversubscribe the cores N times and a CPU run slows down about N-fold.
    """
    if "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(max(1, usable_cores() // local_world_size))


SHARED_STORE_RESTARTS = (
    "torchrun restarts on several nodes need TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 "
    "in torchrun's environment (scripts/multinode.sh sets it): restarted workers "
    "would otherwise hang on the previous attempt's addresses"
)


def agent_store(placement, timeout):
    """The rendezvous store torchrun's agent shares, its keys prefixed by the attempt.

    That store outlives a restart: without the prefix, restarted workers read the
    previous attempt's peer addresses and fail. The restart count is the same on
    every rank only when one agent started them all.
    """
    agents = int(os.environ.get("GROUP_WORLD_SIZE", 1))
    if agents > 1 and int(os.environ.get("TORCHELASTIC_MAX_RESTARTS", 0)) > 0:
        raise ConfigError(SHARED_STORE_RESTARTS)
    store = dist.TCPStore(
        os.environ["MASTER_ADDR"],
        int(os.environ["MASTER_PORT"]),
        placement.world_size,
        is_master=False,
        timeout=timeout,
    )
    attempt = os.environ["TORCHELASTIC_RESTART_COUNT"]
    return dist.PrefixStore(f"attempt-{attempt}", store)


def default_store(placement, timeout):
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        return agent_store(placement, timeout)
    if "MASTER_ADDR" not in os.environ:
        return dist.HashStore()  # a lone `python train.py` needs no rendezvous
    # env://: rank 0 serves a store at MASTER_ADDR:MASTER_PORT, which torchrun
    # (with TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1) picks afresh for every attempt.
    return None


@contextlib.contextmanager
def process_group(backend, placement, timeout_s, store=None, device=None):
    """Join the job's process group for the duration of the block."""
    timeout = timedelta(seconds=timeout_s)
    try:
        store = store or default_store(placement, timeout)
        kwargs = {"backend": backend, "timeout": timeout}
        if device is not None and device.type == "cuda":
            # Binds every NCCL communicator, barriers included, to this
            # process's (first) GPU; torch would otherwise guess rank % GPUs.
            kwargs["device_id"] = device
        if store is not None:
            kwargs.update(
                store=store, rank=placement.rank, world_size=placement.world_size
            )
        dist.init_process_group(**kwargs)
        dist.barrier()  # fails within the timeout if a rank never arrives
    except RuntimeError as error:  # torch's DistError and its timeout kinds
        leave_process_group()
        if "time" in str(error).lower():  # "timed out", "timeout"
            why = (
                f"the {placement.world_size} ranks did not all join within "
                f"{timeout_s:g}s (--dist-timeout)"
            )
        else:  # a peer that died or refused the connection
            why = f"the process group of {placement.world_size} ranks failed"
        message = f"rank {placement.rank}: {why}: {first_line(error)}"
        raise SystemExit(message) from error
    try:
        yield
    finally:
        leave_process_group()


def leave_process_group():
    """Destroy the group, on success and on failure alike, while the
    interpreter is whole: its threads finish and are joined here.

    DDP's reducer holds the group: free it first (it sits in reference cycles).
    """
    gc.collect()
    if dist.is_initialized():
        dist.destroy_process_group()


def first_line(error):
    return str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
