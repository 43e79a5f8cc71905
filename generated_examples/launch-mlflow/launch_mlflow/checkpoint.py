"""Checkpoints: one file per save, written atomically by global rank 0.

Files load with `torch.load(path, weights_only=True)`, hold CPU tensors (so any
device layout can resume them) and model keys without DDP or compile prefixes.

The folder holds one run's line of checkpoints, so the highest step is the
newest: when a run starts fresh, or resumes from an older checkpoint, the
checkpoints past its starting step belong to another run and are moved into
`superseded/<time>/` (never deleted), where --resume auto and pruning never look.
"""

import os
import sys
import time
from pathlib import Path

import torch
from torch import nn

from .config import ConfigError
from .distributed import first_line

PREFIXES = ("module.", "_orig_mod.")  # added by DDP and by torch.compile
REQUIRED_KEYS = {"model", "optimizer", "scheduler", "scaler", "epoch", "step"}


def unwrap(model):
    """The user's module inside DDP and torch.compile wrappers."""
    while True:
        if isinstance(model, nn.parallel.DistributedDataParallel):
            model = model.module
        elif hasattr(model, "_orig_mod"):
            model = model._orig_mod
        else:
            return model


def strip_prefixes(state_dict):
    def clean(key):
        while key.startswith(PREFIXES):
            key = key.split(".", 1)[1]
        return key

    return {clean(key): value for key, value in state_dict.items()}


def to_cpu(state):
    if isinstance(state, torch.Tensor):
        return state.detach().cpu()
    if isinstance(state, dict):
        return {key: to_cpu(value) for key, value in state.items()}
    if isinstance(state, (list, tuple)):
        return type(state)(to_cpu(value) for value in state)
    return state


def checkpoint_path(directory, step):
    return Path(directory) / f"checkpoint-{step:09d}.pt"


def list_checkpoints(directory):
    """Finished checkpoints, newest first (temp files never match)."""
    return sorted(Path(directory).glob("checkpoint-*.pt"), reverse=True)


def save(state, directory, step, keep_last):
    """Write `state` atomically and prune old files. Call on global rank 0 only."""
    path = checkpoint_path(directory, step)
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.tmp")
    with open(temp, "wb") as file:
        torch.save(to_cpu(state), file)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temp, path)  # readers see the old file or the whole new one
    for stale in list_checkpoints(directory)[keep_last:]:
        stale.unlink()
    return path


def set_aside_newer(directory, step):
    """Move the checkpoints past `step` (another run's) out of the way; return
    where they went, or None."""
    newer = [path for path in list_checkpoints(directory) if step_of(path) > step]
    if not newer:
        return None
    aside = Path(directory) / "superseded" / time.strftime("%Y%m%d-%H%M%S")
    aside.mkdir(parents=True, exist_ok=True)
    for path in newer:
        os.replace(path, aside / path.name)
    return aside


def step_of(path):
    return int(path.stem.removeprefix("checkpoint-"))


def load(path):
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise ValueError("no such file") from None
    except IsADirectoryError:
        raise ValueError("it is a folder, not a checkpoint file") from None
    except Exception as error:  # torch raises many kinds for a foreign file
        raise ValueError(
            f"not a checkpoint saved by torch.save ({type(error).__name__}: "
            f"{first_line(error).split('. ')[0]})"
        ) from error
    missing = REQUIRED_KEYS - state.keys() if isinstance(state, dict) else REQUIRED_KEYS
    if missing:
        raise ValueError(f"not a training checkpoint (missing {sorted(missing)})")
    state["model"] = strip_prefixes(state["model"])
    return state


def newest_loadable(directory):
    """(path, state) of the newest checkpoint that loads, or (None, None)."""
    for path in list_checkpoints(directory):
        try:
            return path, load(path)
        except Exception as error:  # truncated, corrupt or foreign: try the previous
            print(f"skipping unreadable checkpoint {path}: {error}", file=sys.stderr)
    return None, None


def find_resume_point(resume, directory):
    """(path, state) to resume from, (None, None) to start fresh, or an error."""
    if resume == "none":
        return None, None
    if resume == "auto":
        return newest_loadable(directory)
    try:
        return Path(resume), load(resume)
    except ValueError as error:
        message = f"--resume {resume}: cannot load checkpoint: {error}"
        raise ConfigError(message) from None
