"""Preflight check before a long run: can every rank meet, how fast do they talk?
    python -m PACKAGE.doctor --nprocs 2 --device cpu  # starts its own processes
    srun --ntasks-per-node 2 python -m PACKAGE.doctor  # Slurm: one rank per task

PACKAGE is mp_model_parallel.

Global rank 0 prints versions, devices, the layout training would use, the
environment variables that matter and the room in /dev/shm, then the latency
and bandwidth of all_reduce over every rank. A rank that does not join within
--timeout is named and the exit code is 1.

    python -m PACKAGE.doctor stacks RUN_DIR  # a running job: where is each rank?
    python -m PACKAGE.doctor why RUN_DIR  # a job that died or timed out
"""

import dataclasses
import os
import platform
import shutil
import socket
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

from .bandwidth import all_reduce_table
from .config import Config, ConfigError, build_parser, exit_for
from .distributed import (
    Placement,
    default_store,
    first_line,
    pick_backend,
    pick_devices,
    placement_from_env,
    process_group,
    processes,
)
from .spawn import spawn
from .stacks import stacks
from .why import why

COMMANDS = {"stacks": stacks, "why": why}  # the ones that read a run folder
FLAGS = ["device", "backend", "share_gpu", "nprocs", "nnodes", "node_rank"]
FLAGS += ["master_addr", "master_port", "local_rank"]
ENVIRONMENT = ["OMP_NUM_THREADS", "TORCH_DISTRIBUTED_DEBUG", "GLOO_SOCKET_IFNAME"]
ENVIRONMENT_PREFIXES = ("NCCL_", "TORCH_NCCL_", "GLOO_", "CUDA_VISIBLE_DEVICES")
SHM_ADVICE_BYTES = 1 << 30
POLL_SECONDS = 0.05


def parse_args(argv=None):
    parser = build_parser(only=FLAGS, description=__doc__)
    parser.add_argument(
        "--timeout", type=float, default=60.0, help="seconds to wait for every rank"
    )
    parser.add_argument(
        "--max-mib", type=int, default=64, help="largest all_reduce message, in MiB"
    )
    args = vars(parser.parse_args(argv))
    timeout, max_mib = args.pop("timeout"), args.pop("max_mib")
    if timeout <= 0 or max_mib <= 0:
        parser.error("--timeout and --max-mib must be positive")
    return Config(**args, dist_timeout=timeout), max_mib


def main(argv=None):
    config, max_mib = parse_args(argv)
    slurm = slurm_placement()
    if slurm:
        check_rank(config, slurm, max_mib=max_mib)
        return
    if "RANK" in os.environ:  # torchrun started one process per rank already
        check_rank(config, placement_from_env(), max_mib=max_mib)
        return
    spawn(config, entry=CheckRank(max_mib))


@dataclasses.dataclass(frozen=True)
class CheckRank:
    """check_rank with the message sizes bound: spawn pickles it to each process."""

    max_mib: int

    def __call__(self, config, placement, store):
        check_rank(config, placement, store, self.max_mib)


def slurm_placement():
    """The ranks srun gives its tasks, when no launcher set RANK."""
    if "RANK" in os.environ or "SLURM_PROCID" not in os.environ:
        return None
    tasks, nodes = int(os.environ["SLURM_NTASKS"]), int(os.environ["SLURM_NNODES"])
    os.environ.setdefault("MASTER_ADDR", os.environ["SLURM_LAUNCH_NODE_IPADDR"])
    job = int(os.environ["SLURM_JOB_ID"])
    os.environ.setdefault("MASTER_PORT", str(20001 + job % 20000))
    return Placement(
        rank=int(os.environ["SLURM_PROCID"]),
        local_rank=int(os.environ["SLURM_LOCALID"]),
        world_size=tasks,
        local_world_size=tasks // nodes,
    )


def check_rank(config, placement, store=None, max_mib=64):
    try:
        devices = pick_devices(config, placement)
    except ConfigError as error:  # --device cuda without one, too few GPUs
        exit_for(error, printer=placement.is_main)
    backend = pick_backend(config.backend, devices[0])
    if devices[0].type == "cuda":
        torch.cuda.set_device(devices[0])
    timeout = timedelta(seconds=config.dist_timeout)
    store = store or job_store(placement, timeout)
    meet(store, placement, config.dist_timeout)
    if placement.is_main:
        report(config, placement, devices, backend)
    doctor_store = dist.PrefixStore("doctor", store)
    with process_group(
        backend, placement, config.dist_timeout, doctor_store, devices[0]
    ):
        ranks = [None] * placement.world_size
        dist.all_gather_object(ranks, (socket.gethostname(), bound_device(devices)))
        table = all_reduce_table(devices[0], placement.world_size, max_mib)
    if placement.is_main:
        hosts = {host for host, _ in ranks}
        print(f"ranks: {placement.world_size} on {len(hosts)} host(s); ", end="")
        print("devices: " + " ".join(f"{r}={d}" for r, (_, d) in enumerate(ranks)))
        print(table)
        print("ok: every rank joined and all_reduce works")


def bound_device(devices):
    """The device the group's communicators use (NCCL's, from device_id)."""
    bound = dist.group.WORLD.bound_device_id
    return str(bound if bound is not None else devices[0])


def job_store(placement, timeout):
    """torchrun's store, or one rank 0 serves at MASTER_ADDR:MASTER_PORT."""
    if placement.world_size > 1 and "MASTER_ADDR" not in os.environ:
        raise SystemExit(
            f"WORLD_SIZE={placement.world_size} but MASTER_ADDR is not set: the ranks "
            "cannot find each other (start under torchrun or srun, or set "
            "MASTER_ADDR and MASTER_PORT)"
        )
    store = default_store(placement, timeout)
    if store is not None:
        return store
    address, port = os.environ["MASTER_ADDR"], int(os.environ.get("MASTER_PORT", 29500))
    try:
        return dist.TCPStore(
            address,
            port,
            is_master=placement.rank == 0,
            wait_for_workers=False,
            timeout=timeout,
        )
    except RuntimeError as error:
        raise SystemExit(
            f"rank {placement.rank}: no store at {address}:{port} within "
            f"{timeout.total_seconds():g}s: {first_line(error)}"
        ) from None


def meet(store, placement, timeout_s):
    """Every rank checks in; rank 0 names the ranks that never do."""
    store.set(f"doctor/joined/{placement.rank}", socket.gethostname())
    deadline = time.monotonic() + timeout_s
    if placement.rank != 0:
        answers = ["doctor/go", "doctor/abort"]
        if not wait_until(lambda: any(store.check([k]) for k in answers), deadline):
            raise SystemExit(f"rank {placement.rank}: rank 0 never answered")
        if store.check(["doctor/abort"]):
            raise SystemExit(1)  # rank 0 says who is missing
        return
    expected = [f"doctor/joined/{rank}" for rank in range(placement.world_size)]
    wait_until(lambda: store.check(expected), deadline)
    missing = [key for key in expected if not store.check([key])]
    if missing:
        store.set("doctor/abort", "1")
        ranks = ", ".join(key.rsplit("/", 1)[1] for key in missing)
        raise SystemExit(
            f"missing rank(s) {ranks} of {placement.world_size}: not joined within "
            f"{timeout_s:g}s (--timeout); check that every node started and can "
            f"reach {os.environ.get('MASTER_ADDR', 'this host')}"
        )
    store.set("doctor/go", "1")


def wait_until(ready, deadline):
    """Poll (the store has no wait with a deadline for several keys)."""
    while not ready():
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_SECONDS)
    return True


def report(config, placement, devices, backend):
    gpus = torch.cuda.device_count()
    print(f"python {platform.python_version()}, torch {torch.__version__}", end="")
    print(f", CUDA {torch.version.cuda}" if torch.version.cuda else ", CPU build")
    if gpus:
        names = {torch.cuda.get_device_name(index) for index in range(gpus)}
        print(f"GPUs on this node: {gpus} ({', '.join(sorted(names))})")
    else:
        print(f"GPUs on this node: none; {os.cpu_count()} CPU cores")
    used = list(dict.fromkeys(map(str, devices)))
    print(
        f"layout: {processes(placement.world_size)}, {placement.local_world_size} on "
        f"this node; rank 0 uses {', '.join(used)}"
        + (f" ({len(used)} devices per process)" if len(used) > 1 else "")
    )
    print(f"backend: {backend}")
    print("environment: " + environment_line())
    print(shm_line())


def environment_line():
    names = sorted(name for name in os.environ if name.startswith(ENVIRONMENT_PREFIXES))
    shown = [f"{name}={os.environ[name]}" for name in names]
    shown += [f"{name}={os.environ.get(name, '(unset)')}" for name in ENVIRONMENT]
    return ", ".join(shown)


def shm_line():
    if not os.path.isdir("/dev/shm"):
        return "/dev/shm: absent (DataLoader workers share memory another way)"
    free = shutil.disk_usage("/dev/shm").free
    line = f"/dev/shm: {free / 2**30:.1f} GiB free"
    if free < SHM_ADVICE_BYTES:
        line += (
            " - DataLoader workers may die with a bus error: give the container "
            "more (docker --shm-size 8g, or a memory-backed /dev/shm volume)"
        )
    return line


if __name__ == "__main__":
    command = COMMANDS.get(sys.argv[1]) if sys.argv[1:] else None
    sys.exit(command(sys.argv[2:]) if command else main())
