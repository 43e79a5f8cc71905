"""Saving and resuming a Trainer: what a checkpoint holds, and the collectives
that keep every rank on the same checkpoint (checkpoint.py handles the files)."""

import dataclasses
from dataclasses import dataclass

import torch
import torch.distributed as dist

from . import batching, checkpoint, optim
from .agreement import raise_if_any_failed
from .config import ConfigError
from .distributed import log


def save(trainer):
    """Rank 0 writes; every rank calls this (it gathers every rank's RNG)."""
    trainer.divergence.check(trainer.step, trainer.ddp.parameters())
    rng_states = [None] * trainer.placement.world_size
    dist.all_gather_object(rng_states, rng_state())  # every rank's stream
    error = None
    folder = trainer.config.checkpoint_folder
    if trainer.placement.is_main:
        try:
            trainer.last_checkpoint = checkpoint.save(
                state_dict(trainer, rng_states),
                folder,
                trainer.step,
                trainer.config.keep_last,
            )
            trainer.log(f"saved {trainer.last_checkpoint}")
        except OSError as failure:
            error = f"cannot save a checkpoint in {folder}: {failure}"
    # Also a barrier: no rank goes on (or resumes) before the file is complete.
    raise_if_any_failed(error, trainer.placement)
    trainer.saved_at_step = trainer.step


def state_dict(trainer, rng_states):
    return {
        "model": checkpoint.unwrap(trainer.model).state_dict(),
        "optimizer": trainer.optimizer.state_dict(),
        "scheduler": trainer.scheduler.state_dict(),
        "scaler": trainer.scaler.state_dict(),
        "epoch": trainer.epoch,
        "step": trainer.step,
        "samples_in_epoch": trainer.samples_in_epoch,
        "world_size": trainer.placement.world_size,
        "batch_size": trainer.config.batch_size,
        "global_batch": trainer.config.global_batch_size,
        "rng": rng_states,
        "config": dataclasses.asdict(trainer.config),  # the resolved settings
        # Sampling and resumes decode and encode with the same tokens.
        "vocabulary": vocabulary(trainer).state(),
    }


@dataclass(frozen=True)
class ResumePoint:
    path: str
    state: dict


def resume_point(config, placement):
    """The checkpoint rank 0 chose, loaded on every rank; None: a fresh start.
    Read before the trainer is built: its global batch sets the layout."""
    path, state = agreed_resume_point(config, placement)  # rank 0 has read it
    if path is None:
        return None
    error = None
    if state is None:
        try:
            state = checkpoint.load(path)
        except ValueError as failure:
            error = (
                f"cannot read {path}: {failure} (every node must see the "
                "checkpoint folder: put it on shared storage)"
            )
    raise_if_any_failed(error, placement)
    return ResumePoint(path, state)


def resume(trainer, point):
    """Continue from the resume point, if any, on every rank."""
    if point is None:
        return
    restore(trainer, point.state, point.path)
    trainer.last_checkpoint = point.path
    trainer.log(
        f"resumed from {point.path}: epoch {trainer.epoch}, step {trainer.step}"
    )
    for change in changed_settings(point.state, trainer.config):
        trainer.log(change)
    layout = batching.settled_layout(trainer.config, trainer.placement.world_size)
    note = batching.resume_note(
        trainer.step, batching.saved_layout(point.state), layout
    )
    if note:
        trainer.log(note)


# Not compared: --resume (which checkpoint), and the layout's settings, whose
# changes resume_note sums up in one line.
NOT_COMPARED = {"resume", "batch_size", "grad_accum", "global_batch_size"}


def changed_settings(state, config):
    """One line per setting that differs from the checkpoint's."""
    saved, now = state.get("config", {}), dataclasses.asdict(config)
    return [
        f"setting {name} differs from the checkpoint's: {saved[name]!r} then, "
        f"{now[name]!r} now"
        for name in now
        if name in saved and name not in NOT_COMPARED and saved[name] != now[name]
    ]


def agreed_resume_point(config, placement):
    """Rank 0 picks the checkpoint (or none) and sets aside newer ones of
    another run; every rank gets its path (rank 0 also the loaded state), or
    exits with rank 0's error."""
    choice, state = [None, None], None  # (path, error)
    if placement.is_main:
        try:
            path, state = checkpoint.find_resume_point(
                config.resume, config.checkpoint_folder
            )
            choice = [str(path) if path else None, None]
            start_step = state["step"] if path else 0
            aside = checkpoint.set_aside_newer(config.checkpoint_folder, start_step)
            if aside:
                moved = f"past step {start_step} (another run) to {aside}"
                log(placement, f"moved checkpoints {moved}")
        except ConfigError as error:
            choice = [None, str(error)]
        except OSError as error:
            choice = [None, f"{config.checkpoint_folder}: {error}"]
    dist.broadcast_object_list(choice, src=0)
    path, error = choice
    if error:
        raise ConfigError(error)
    return path, state


def restore(trainer, state, path):
    if state.get("vocabulary") != vocabulary(trainer).state():
        raise ConfigError(
            "the checkpoint was trained on another vocabulary than --data-dir "
            "gives now: resume with the same text and --tokenizer"
        )
    try:
        checkpoint.unwrap(trainer.model).load_state_dict(state["model"])
    except RuntimeError as error:  # missing, unexpected or mis-shaped weights
        raise ConfigError(
            f"{path} holds another model's weights ({weights_mismatch(error)}): "
            "resume a checkpoint of this model, or start fresh with --resume none"
        ) from None
    optim.restore(
        trainer.optimizer, trainer.scheduler, state["optimizer"], state["scheduler"]
    )
    if state["scaler"]:  # empty when saved with --amp off or bf16
        trainer.scaler.load_state_dict(state["scaler"])
    trainer.epoch = state["epoch"]
    trainer.step = state["step"]
    trainer.samples_in_epoch = samples_in_epoch(state)
    trainer.saved_at_step = trainer.step
    rng_states = state["rng"]
    set_rng_state(rng_states[trainer.placement.rank % len(rng_states)])


def weights_mismatch(error):
    """The first problem load_state_dict names, in one short line."""
    problems = str(error).splitlines()[1:] or [str(error)]
    return problems[0].strip().rstrip(".")[:160]


def samples_in_epoch(state):
    """The positions of the epoch's order trained on (older checkpoints
    counted micro-batches per rank)."""
    if "samples_in_epoch" in state:
        return state["samples_in_epoch"]
    layout = batching.saved_layout(state)
    if not state.get("batch_in_epoch") or layout is None:
        return 0
    return state["batch_in_epoch"] * layout.micro_batch * layout.world_size


def rng_state():
    state = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state):
    torch.set_rng_state(state["torch"])
    if "cuda" in state and len(state["cuda"]) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(state["cuda"])


def vocabulary(trainer):
    return trainer.train_loader.dataset.vocabulary
