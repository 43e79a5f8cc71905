"""Every training option: one dataclass, and the command line built from it."""

import argparse
import dataclasses
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .config_file import ConfigFileError, read_settings, to_yaml
from .constraints import config_problem


class ConfigError(Exception):
    """A user mistake (settings, files, this machine's devices) found after the
    command line is parsed: one line, printed once, and exit 2 (exit_for)."""


def exit_for(error, printer=True):
    """Every process exits 2; only `printer` (global rank 0) says why."""
    if printer:
        print(f"error: {error}", file=sys.stderr)
    raise SystemExit(2)


def option(default, help, choices=None, minimum=None, maximum=None):
    """A dataclass field that also carries its command-line help, its choices
    and the range of its values."""
    bounds = {"minimum": minimum, "maximum": maximum}
    return field(default=default, metadata={"help": help, "choices": choices} | bounds)


@dataclass
class Config:
    epochs: int = option(3, "passes over the training data", minimum=1)
    max_steps: int = option(
        0, "stop after this many optimizer steps; 0 = no limit", minimum=0
    )
    batch_size: int = option(
        32,
        "samples per process per micro-step; with --global-batch-size, the most",
        minimum=1,
    )
    global_batch_size: int = option(
        0,
        "samples per optimizer step at any number of processes (micro-steps "
        "derived); 0 = --batch-size x processes x --grad-accum, or a resume's",
        minimum=0,
    )
    optimizer: str = option(
        "adamw", "adamw, or sgd (with --momentum)", ("adamw", "sgd")
    )
    lr: float = option(
        0.03,
        "peak learning rate",
        minimum=0,
    )
    momentum: float = option(0.9, "SGD momentum", minimum=0)
    weight_decay: float = option(
        0.05,
        "weight decay of matrices and kernels (not biases, norms); AdamW's is "
        "decoupled from the lr, for SGD use about 5e-4",
        minimum=0,
    )
    warmup_steps: int = option(
        0, "linear warm-up, in optimizer steps; 0 = --warmup-ratio", minimum=0
    )
    warmup_ratio: float = option(
        0.05,
        "warm-up as a share of the decay steps, when --warmup-steps is 0",
        minimum=0,
        maximum=1,
    )
    lr_schedule: str = option(
        "cosine",
        "after the warm-up: cosine or linear decay to --min-lr, or constant",
        ("cosine", "linear", "constant"),
    )
    min_lr: float = option(
        0.0,
        "the learning rate at the end of the decay",
        minimum=0,
    )
    decay_steps: int = option(
        0,
        "optimizer steps from the start to the end of the decay; "
        "0 = --epochs x steps per epoch (--max-steps never changes it)",
        minimum=0,
    )
    seed: int = option(0, "seed of the initial weights and the shuffling", minimum=0)
    run_dir: str = option(
        "run",
        "this run's folder: config.json, metrics.jsonl and the checkpoints; "
        "keep it for restarts and requeues, so --resume auto finds them",
    )
    checkpoint_dir: str = option("", "default: RUN_DIR/checkpoints")
    save_every: int = option(
        1, "save every N epochs (always at the end too); 0 = only at the end", minimum=0
    )
    keep_last: int = option(3, "how many of the newest checkpoints to keep", minimum=1)
    resume: str = option(
        "auto",
        "auto = newest valid checkpoint in --checkpoint-dir; none = start fresh; "
        "or the path of a checkpoint",
    )
    backend: str = option(
        "auto", "auto = nccl on CUDA, gloo on CPU", ("auto", "gloo", "nccl")
    )
    device: str = option(
        "auto", "auto = CUDA when available, else CPU", ("auto", "cpu", "cuda")
    )
    num_workers: int = option(
        0,
        "DataLoader worker processes per training process",
        minimum=0,
    )
    amp: str = option(
        "off", "mixed precision; fp16 adds a GradScaler", ("off", "bf16", "fp16")
    )
    grad_accum: int = option(1, "micro-steps per optimizer step", minimum=1)
    clip_grad_norm: float = option(
        0.0,
        "clip the gradient norm to this; 0 = off",
        minimum=0,
    )
    compile: bool = option(False, "torch.compile the model")
    bucket_cap_mb: float = option(
        25.0, "DDP's gradient bucket size in MiB (one all-reduce each)", minimum=1
    )
    gradient_as_bucket_view: bool = option(
        True, "gradients are views of DDP's buckets: no copy, less memory"
    )
    static_graph: str = option(
        "auto",
        "DDP optimises for a model that uses the same parameters every step; "
        "auto = on unless --grad-accum > 1 (no_sync needs a dynamic graph)",
        ("auto", "on", "off"),
    )
    tf32: bool = option(
        False, "allow TF32 matmuls and convolutions on GPUs (faster, less exact)"
    )
    metrics_file: str = option("", "global rank 0 writes a JSON summary here")
    log_every: int = option(
        50, "log the loss to the terminal and metrics.jsonl every N steps", minimum=1
    )
    eval_every: int = option(1, "evaluate every N epochs; 0 = at the end", minimum=0)
    eval_every_steps: int = option(
        0, "also evaluate every N optimizer steps; 0 = off", minimum=0
    )
    dist_timeout: float = option(
        600.0,
        "seconds to wait for every rank, at start-up and in collectives",
        minimum=1,
    )
    watchdog_factor: float = option(
        20.0, "no step in this many median step times ends the job; 0: off", minimum=0
    )
    watchdog_floor: float = option(
        300.0, "seconds the watchdog waits at the least", minimum=0
    )
    train_size: int = option(4096, "training samples", minimum=1)
    eval_size: int = option(1024, "evaluation samples; 0 = no evaluation", minimum=0)
    nprocs: int = option(
        0, "processes on this node; 0 = one per GPU, or 2 on CPU", minimum=0
    )
    nnodes: int = option(1, "number of nodes", minimum=1)
    node_rank: int = option(0, "this node's index, 0 .. nnodes-1")
    master_addr: str = option("127.0.0.1", "address of node 0")
    master_port: int = option(
        0,
        "port on node 0 for the rendezvous; 0 = a free one (one node only)",
        minimum=0,
        maximum=65535,
    )

    @property
    def checkpoint_folder(self):
        """--checkpoint-dir, or RUN_DIR/checkpoints when it is not given: it
        stays derived, so a config file of one run never points another run
        at the first one's checkpoints."""
        return Path(self.checkpoint_dir or Path(self.run_dir) / "checkpoints")


def build_parser(only=None, description=__doc__):
    """The command line of Config's fields (or of the fields named in `only`)."""
    parser = argparse.ArgumentParser(description=description)
    for spec in dataclasses.fields(Config):
        if only is not None and spec.name not in only:
            continue
        flags = ["--" + spec.name.replace("_", "-")]
        if spec.name == "local_rank":
            flags.append("--local_rank")  # torch < 2.0 passed the underscore form
        kwargs = {"default": spec.default, "help": spec.metadata["help"]}
        if spec.type is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            kwargs["type"] = spec.type
            kwargs["choices"] = spec.metadata["choices"]
        parser.add_argument(*flags, dest=spec.name, **kwargs)
    return parser


def parse_args(argv=None):
    """The resolved settings: the defaults, then --config FILE, then the flags."""
    parser = build_parser()
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="YAML settings, keys named as the flags with underscores; flags win",
    )
    parser.add_argument(
        "--print-config",
        action="store_true",
        help="print the resolved settings as YAML (a --config file) and exit",
    )
    try:
        parser.set_defaults(**read_settings_of(argv, dataclasses.fields(Config)))
    except ConfigFileError as error:
        parser.error(str(error))
    options = vars(parser.parse_args(argv))
    del options["config"]
    print_config = options.pop("print_config")
    config = Config(**options)
    if problem := config_problem(config):
        parser.error(problem)
    if print_config:
        print(to_yaml(config), end="")
        raise SystemExit(0)
    return config


def read_settings_of(argv, fields):
    """The settings of the --config file named in argv, if any."""
    finder = argparse.ArgumentParser(add_help=False)
    finder.add_argument("--config")
    path = finder.parse_known_args(argv)[0].config
    return read_settings(path, fields) if path else {}
