"""The optimizer and the learning-rate schedule.

The schedule is a function of the optimizer step alone, its length fixed by the
settings (never by --max-steps or a signal): a resumed run follows the
uninterrupted run's learning rate at every step.
"""

import math

import torch


def build_optimizer(config, model, device):
    groups = parameter_groups(model, config.weight_decay)
    if config.optimizer == "adamw":
        # One fused kernel per step on CUDA; on CPU, foreach batches the updates.
        fast = {"fused": True} if device.type == "cuda" else {"foreach": True}
        return torch.optim.AdamW(groups, lr=config.lr, **fast)
    return torch.optim.SGD(groups, lr=config.lr, momentum=config.momentum)


def parameter_groups(model, weight_decay):
    """Weight decay on weight matrices and kernels only: decaying biases and
    normalisation weights (1-D) pulls them towards zero for no gain."""
    decay, no_decay = [], []
    for parameter in model.parameters():
        if parameter.requires_grad:
            (decay if parameter.ndim >= 2 else no_decay).append(parameter)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def build_scheduler(config, optimizer, steps_per_epoch):
    decay_steps = config.decay_steps or config.epochs * steps_per_epoch
    warmup_steps = config.warmup_steps or round(config.warmup_ratio * decay_steps)
    factor = lr_factor(
        config.lr_schedule,
        warmup_steps,
        decay_steps,
        min_ratio=config.min_lr / config.lr if config.lr > 0 else 0.0,
    )
    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def lr_factor(schedule, warmup_steps, decay_steps, min_ratio):
    """The learning rate at a step, as a fraction of --lr: a linear warm-up,
    then constant, cosine or linear decay to --min-lr at `decay_steps`."""

    def factor(step):
        if step < warmup_steps:
            return (step + 1) / (warmup_steps + 1)
        if schedule == "constant" or decay_steps <= warmup_steps:
            return 1.0
        progress = min(1.0, (step - warmup_steps) / (decay_steps - warmup_steps))
        if schedule == "cosine":
            shape = 0.5 * (1.0 + math.cos(math.pi * progress))
        else:
            shape = 1.0 - progress
        return min_ratio + (1.0 - min_ratio) * shape

    return factor


def restore(optimizer, scheduler, optimizer_state, scheduler_state):
    """The checkpoint's moments and position in the schedule, with this run's
    settings (--lr, --weight-decay, momentum, betas, the schedule): a resume
    that changes one means the change from the next step on."""
    settings = [
        {key: value for key, value in group.items() if key != "params"}
        for group in optimizer.param_groups
    ]
    optimizer.load_state_dict(optimizer_state)
    for group, setting in zip(optimizer.param_groups, settings, strict=True):
        group.update(setting)
    scheduler.last_epoch = scheduler_state["last_epoch"]
    for group, factor in zip(optimizer.param_groups, scheduler.lr_lambdas, strict=True):
        group["lr"] = group["initial_lr"] * factor(scheduler.last_epoch)


def steps_per_epoch(samples, global_batch):
    """Optimizer steps in a full epoch: whole global batches only, so the
    number does not depend on how many processes share them."""
    return samples // global_batch
