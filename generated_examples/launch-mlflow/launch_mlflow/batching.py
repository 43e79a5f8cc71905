"""The global batch (samples per optimizer step) and how a run splits it over
its processes: a micro-batch per process per micro-step, and micro-steps per
optimizer step. A resume keeps the checkpoint's global batch, so the steps per
epoch and the learning-rate schedule stay put at any number of processes."""

import dataclasses
from dataclasses import dataclass

from .config import ConfigError
from .distributed import processes


@dataclass(frozen=True)
class Layout:
    global_batch: int
    world_size: int
    micro_batch: int
    accumulation: int  # micro-steps per optimizer step


def split(global_batch, world_size, largest_micro_batch, source):
    """The fewest micro-steps whose micro-batch is at most the largest."""
    if global_batch % world_size:
        below = global_batch // world_size * world_size
        sizes = " or ".join(str(size) for size in (below, below + world_size) if size)
        raise ConfigError(
            f"{source} cannot be split evenly over {processes(world_size)}: "
            f"give --global-batch-size a multiple of {world_size}, such as {sizes}"
        )
    per_process = global_batch // world_size
    fewest = -(-per_process // largest_micro_batch)
    accumulation = next(
        steps for steps in range(fewest, per_process + 1) if per_process % steps == 0
    )
    return Layout(global_batch, world_size, per_process // accumulation, accumulation)


def saved_layout(state):
    """The layout a checkpoint was trained with (older ones: from its
    settings); None if it does not say (not saved by this project)."""
    settings = state.get("config", {})
    micro_batch = settings.get("batch_size", state.get("batch_size"))
    accumulation = settings.get("grad_accum", 1)
    world_size = state.get("world_size")
    if micro_batch is None or world_size is None:
        return None
    global_batch = state.get("global_batch", micro_batch * accumulation * world_size)
    return Layout(global_batch, world_size, micro_batch, accumulation)


def settle(config, world_size, saved_state=None):
    """The settings with this run's global batch, micro-batch and micro-steps.

    --global-batch-size wins; else a resume keeps the checkpoint's global
    batch; else it is --batch-size x processes x --grad-accum.
    """
    saved = saved_layout(saved_state) if saved_state is not None else None
    if config.global_batch_size:
        source = f"--global-batch-size {config.global_batch_size}"
        layout = split(config.global_batch_size, world_size, config.batch_size, source)
    elif saved:
        source = f"the checkpoint's global batch of {saved.global_batch}"
        layout = split(saved.global_batch, world_size, config.batch_size, source)
    else:
        global_batch = config.batch_size * config.grad_accum * world_size
        layout = Layout(global_batch, world_size, config.batch_size, config.grad_accum)
    if config.static_graph == "on" and layout.accumulation > 1:
        raise ConfigError(
            f"--static-graph on cannot skip gradient syncs, and a global batch of "
            f"{layout.global_batch} on {processes(world_size)} needs "
            f"{layout.accumulation} micro-steps: use --static-graph auto"
        )
    return dataclasses.replace(
        config,
        batch_size=layout.micro_batch,
        grad_accum=layout.accumulation,
        global_batch_size=layout.global_batch,
    )


def settled_layout(config, world_size):
    """The layout of settings that settle() returned."""
    return Layout(
        config.global_batch_size, world_size, config.batch_size, config.grad_accum
    )


def resume_note(step, saved, now):
    """What changed in the layout at a resume, in one line; None if nothing."""
    changes = []
    if saved is None:
        return None
    if saved.world_size != now.world_size:
        changes.append(f"{saved.world_size} -> {processes(now.world_size)}")
    if saved.micro_batch != now.micro_batch:
        changes.append(f"micro-batch {saved.micro_batch} -> {now.micro_batch}")
    if saved.accumulation != now.accumulation:
        changes.append(f"micro-steps {saved.accumulation} -> {now.accumulation}")
    if saved.global_batch != now.global_batch:
        changes.append(f"global batch {saved.global_batch} -> {now.global_batch}")
    elif changes:
        changes.append(f"global batch {now.global_batch} kept")
    return f"resumed at step {step}: {', '.join(changes)}" if changes else None
