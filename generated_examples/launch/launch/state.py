"""Saving and resuming a Trainer: what a checkpoint holds, and the collectives
that keep every rank on the same checkpoint (checkpoint.py handles the files)."""

import dataclasses

import torch
import torch.distributed as dist

from . import checkpoint, optim
from .agreement import raise_if_any_failed
from .config import ConfigError
from .distributed import processes


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
        "batch_in_epoch": trainer.batch_in_epoch,
        "world_size": trainer.placement.world_size,
        "batch_size": trainer.config.batch_size,
        "rng": rng_states,
        "config": dataclasses.asdict(trainer.config),  # the resolved settings
    }


def resume(trainer):
    """Load the checkpoint rank 0 chose, on every rank."""
    path, state = agreed_resume_point(trainer)  # rank 0 has read it already
    if path is None:
        return
    error = None
    if state is None:
        try:
            state = checkpoint.load(path)
        except ValueError as failure:
            error = (
                f"cannot read {path}: {failure} (every node must see the "
                "checkpoint folder: put it on shared storage)"
            )
    raise_if_any_failed(error, trainer.placement)
    restore(trainer, state, path)
    trainer.last_checkpoint = path
    trainer.log(f"resumed from {path}: epoch {trainer.epoch}, step {trainer.step}")
    for change in changed_settings(state, trainer.config, trainer.placement):
        trainer.log(change)


def changed_settings(state, config, placement):
    """One line per setting that differs from the checkpoint's, the number of
    processes included."""
    saved, now = state.get("config", {}), dataclasses.asdict(config)
    changes = [
        f"setting {name} differs from the checkpoint's: {saved[name]!r} then, "
        f"{now[name]!r} now"
        for name in now
        if name in saved and name != "resume" and saved[name] != now[name]
    ]
    then, now = state["world_size"], placement.world_size
    if then != now:
        changes.append(
            f"world size differs from the checkpoint's: {processes(then)} then, "
            f"{processes(now)} now"
        )
    return changes


def agreed_resume_point(trainer):
    """Rank 0 picks the checkpoint (or none) and sets aside newer ones of
    another run; every rank gets its path (rank 0 also the loaded state), or
    exits with rank 0's error."""
    config = trainer.config
    choice, state = [None, None], None  # (path, error)
    if trainer.placement.is_main:
        try:
            path, state = checkpoint.find_resume_point(
                config.resume, config.checkpoint_folder
            )
            choice = [str(path) if path else None, None]
            start_step = state["step"] if path else 0
            aside = checkpoint.set_aside_newer(config.checkpoint_folder, start_step)
            if aside:
                trainer.log(
                    f"moved checkpoints past step {start_step} (another run) to {aside}"
                )
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
    check_same_shards(state, trainer.placement, trainer.config.batch_size)
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
    trainer.batch_in_epoch = state.get("batch_in_epoch", 0)
    trainer.saved_at_step = trainer.step
    rng_states = state["rng"]
    set_rng_state(rng_states[trainer.placement.rank % len(rng_states)])


def weights_mismatch(error):
    """The first problem load_state_dict names, in one short line."""
    problems = str(error).splitlines()[1:] or [str(error)]
    return problems[0].strip().rstrip(".")[:160]


def check_same_shards(state, placement, batch_size):
    """Mid-epoch, the samples already seen are counted in this job's shards:
    another world size or batch size would skip the wrong ones."""
    if not state.get("batch_in_epoch"):
        return  # an epoch boundary: any layout resumes
    saved = (state["world_size"], state.get("batch_size", batch_size))
    now = (placement.world_size, batch_size)
    if saved != now:
        raise ConfigError(
            f"the checkpoint was saved mid-epoch by {processes(saved[0])} at "
            f"--batch-size {saved[1]}; resume it with the same, or resume an "
            f"epoch-end checkpoint ({processes(now[0])}, --batch-size {now[1]} now)"
        )


def rng_state():
    state = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state):
    torch.set_rng_state(state["torch"])
    if "cuda" in state and len(state["cuda"]) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(state["cuda"])
