"""Which settings cannot work together: checked once the command line and the
config file are read, before any process starts."""

import dataclasses


def static_graph_wanted(config):
    """DDP's static graph, unless gradient accumulation needs no_sync (the
    reducer's static graph asserts on it)."""
    if config.static_graph == "auto":
        return config.grad_accum == 1
    return config.static_graph == "on"


def config_problem(config):
    """Why the options cannot work together, or None."""
    for spec in dataclasses.fields(config):
        value, bounds = getattr(config, spec.name), spec.metadata
        flag = "--" + spec.name.replace("_", "-")
        if bounds["minimum"] is not None and value < bounds["minimum"]:
            return f"{flag} must be at least {bounds['minimum']} (got {value})"
        if bounds["maximum"] is not None and value > bounds["maximum"]:
            return f"{flag} must be at most {bounds['maximum']} (got {value})"
    if config.static_graph == "on" and config.grad_accum > 1:
        return "--static-graph on cannot skip gradient syncs: use --grad-accum 1"
    if config.global_batch_size and config.grad_accum > 1:
        return "--global-batch-size sets the micro-steps itself: leave out --grad-accum"
    if config.min_lr > config.lr:
        return f"--min-lr {config.min_lr:g} is above --lr {config.lr:g}"
    if config.backend == "nccl" and config.device == "cpu":
        return "--backend nccl needs --device cuda; use gloo on CPU"
    if not config.data_dir:
        return "--data-dir is required: a folder with train/ and val/ class folders"
    return None
