"""What every training process runs, however it was started."""

import json
import sys

import torch
from torch.nn.parallel import DistributedDataParallel

from . import batching, state
from .agreement import QUIT_NOW, StopRequest, control_group
from .config import ConfigError, exit_for
from .constraints import static_graph_wanted
from .data import build_datasets, build_loaders, output_size
from .distributed import pick_backend, pick_devices, process_group, share_cpu_threads
from .divergence import Diverged
from .forensics import (
    collectives_written_on_failure,
    forget_last_attempt,
    record_collectives,
    record_stacks_on_request,
)
from .metrics import write_atomically
from .model import build_model
from .trainer import Trainer


def run(config, placement, store=None):
    try:
        summary = start_and_train(config, placement, store)
    except ConfigError as error:  # every rank finds it: all exit alike
        exit_for(error, printer=placement.is_main)
    except Diverged as error:
        if placement.is_main:
            print(f"error: {error}", file=sys.stderr)
        raise SystemExit(1) from None
    except KeyboardInterrupt:  # Ctrl-C before training: nothing to save
        raise SystemExit(QUIT_NOW) from None
    if placement.is_main and config.metrics_file:
        write_atomically(config.metrics_file, json.dumps(summary, indent=2) + "\n")
    return summary


def start_and_train(config, placement, store):
    share_cpu_threads(placement.local_world_size)
    devices = pick_devices(config, placement)  # checks the GPU layout first
    backend = pick_backend(config.backend, devices[0])
    if devices[0].type == "cuda":
        torch.cuda.set_device(devices[0])  # before NCCL starts, or all use GPU 0
        torch.backends.cudnn.benchmark = True
        # TF32 trades float32 precision for speed: off unless asked, so runs
        # keep matching the one-process result.
        torch.backends.cuda.matmul.allow_tf32 = config.tf32
        torch.backends.cudnn.allow_tf32 = config.tf32
    record_collectives(config.run_dir)
    with process_group(backend, placement, config.dist_timeout, store, devices[0]):
        with collectives_written_on_failure(config.run_dir, placement.rank):
            return train(config, placement, devices, backend)


def train(config, placement, devices, backend):
    """Train and return the summary; the trainer (and DDP) die with this call."""
    # First: it settles the run folder (a fresh run sets older ones aside).
    point = state.resume_point(config, placement)
    config = batching.settle(config, placement.world_size, point and point.state)
    trainer = build_trainer(config, placement, devices, backend)
    trainer.resume(point)
    forget_last_attempt(config.run_dir, placement.rank)
    record_stacks_on_request(config.run_dir, placement.rank)
    return trainer.fit()


def build_trainer(config, placement, devices, backend):
    train_set, eval_set = build_datasets(config, placement)
    loaders = build_loaders(config, placement, devices[0], train_set, eval_set)
    torch.manual_seed(config.seed)  # the same initial weights on every rank
    model = build_model(config, output_size(train_set))
    model = wrap_model(model, devices, config)
    torch.manual_seed(config.seed + placement.rank)  # then a stream per rank
    stop_request = StopRequest(control_group(backend))
    return Trainer(config, placement, model, devices, loaders, stop_request)


def wrap_model(model, devices, config):
    settings = {
        "bucket_cap_mb": config.bucket_cap_mb,
        "gradient_as_bucket_view": config.gradient_as_bucket_view,
        "static_graph": static_graph_wanted(config),
    }
    device = devices[0]
    device_ids = [device] if device.type == "cuda" else None
    return DistributedDataParallel(model.to(device), device_ids=device_ids, **settings)
