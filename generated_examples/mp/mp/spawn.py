"""`python train.py` starts its own workers: one per GPU (2 on CPU)."""

import logging
import multiprocessing
import os
import signal
import sys
from datetime import timedelta

import torch.distributed as dist
import torch.multiprocessing as mp

from .agreement import QUIT_NOW, CtrlC
from .config import ConfigError, exit_for
from .distributed import Placement, first_line, visible_gpus


def train(config, placement, store):
    """The workers' entry. Imported in them only: the launcher trains nothing,
    and the data and model libraries take it seconds to import."""
    from .worker import run

    run(config, placement, store)


def spawn(config, entry=train):
    """Start this node's processes; each calls entry(config, placement, store)."""
    try:
        context, store = start(config, entry)  # the store lives as long as the job
    except ConfigError as error:
        exit_for(error)
    except KeyboardInterrupt:
        raise SystemExit(QUIT_NOW) from None
    # Not torch's "Terminating process" warnings: a worker's error says enough.
    logging.getLogger("torch.multiprocessing.spawn").setLevel(logging.ERROR)
    try:
        while not context.join():
            pass
    except mp.ProcessExitedException as error:
        # 2: the worker said which setting is wrong; QUIT_NOW: Ctrl-C.
        if error.exit_code not in (2, QUIT_NOW):
            print(
                f"worker {error.error_index} exited with code {error.exit_code}",
                file=sys.stderr,
            )
        raise SystemExit(max(error.exit_code, 1)) from None
    except mp.ProcessRaisedException as error:
        raise SystemExit(str(error)) from None


def start(config, entry):
    gpus = visible_gpus(config.device)
    nprocs = config.nprocs or default_nprocs(config, gpus)
    store = host_store(config) if config.node_rank == 0 else None
    port = store.port if store else config.master_port
    context = mp.start_processes(
        worker, args=(config, nprocs, port, entry), nprocs=nprocs, join=False
    )
    forward_stop_signals(context.processes)
    return context, store


def default_nprocs(config, gpus):
    return gpus or 2


def host_store(config):
    """Node 0's launcher hosts the rendezvous store for the job's lifetime.

    Port 0 lets the OS pick a free port, so jobs on one machine never collide.
    """
    try:
        return dist.TCPStore(
            config.master_addr,
            config.master_port,
            is_master=True,
            wait_for_workers=False,
            timeout=timedelta(seconds=config.dist_timeout),
        )
    except RuntimeError as error:
        raise ConfigError(
            f"cannot listen on {config.master_addr}:{config.master_port} "
            f"({first_line(error)}): choose another --master-port"
        ) from None


def forward_stop_signals(processes):
    """SIGTERM and a first Ctrl-C: the workers save a checkpoint and exit 0.
    A second Ctrl-C ends them at once."""
    ctrl_c = CtrlC()

    def forward(signum, frame):
        quit_now = signum == signal.SIGINT and ctrl_c.is_second_press()
        for process in processes:
            if process.is_alive():
                os.kill(process.pid, signal.SIGKILL if quit_now else signal.SIGTERM)
        if quit_now:
            os._exit(QUIT_NOW)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)


def worker(local_rank, config, nprocs, port, entry):
    if sys.platform == "linux":
        # A spawned process inherits "spawn" as its start method, so each
        # DataLoader worker would re-import torch and train.py (seconds each).
        # Fork them instead, as the workers torchrun starts do.
        multiprocessing.set_start_method("fork", force=True)
    placement = Placement(
        rank=config.node_rank * nprocs + local_rank,
        local_rank=local_rank,
        world_size=config.nnodes * nprocs,
        local_world_size=nprocs,
    )
    try:
        store = dist.TCPStore(
            config.master_addr,
            port,
            placement.world_size,
            is_master=False,
            timeout=timedelta(seconds=config.dist_timeout),
        )
    except RuntimeError as error:
        raise SystemExit(
            f"rank {placement.rank}: no rendezvous at {config.master_addr}:{port} "
            f"within {config.dist_timeout:g}s: {first_line(error)}"
        ) from None
    entry(config, placement, store)
