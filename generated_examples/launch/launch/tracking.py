"""The experiment tracker (tensorboard): global rank 0 sends it the records that
go to metrics.jsonl. A resume continues the tracker's run; a fresh start in the
same run folder begins a new one."""

from pathlib import Path

from .config import ConfigError

try:  # installed with the project (pip install -e .); checked by check_installed
    from torch.utils.tensorboard import SummaryWriter
except ImportError as error:
    missing = (error.name or "tensorboard").partition(".")[0]
else:
    missing = None


def check_installed():
    """Every rank, before training: a missing package is one line, not a
    traceback on rank 0 alone."""
    if missing:
        raise ConfigError(
            f"the tensorboard tracker needs the {missing} package: pip install -e ."
            f" installs the project's dependencies (or pip install {missing})"
        )


def metric_values(record):
    """(name, value) of a record's metrics: train/loss, eval/accuracy, ..."""
    for key, value in record.items():
        if key in ("step", "epoch") or value is None:
            continue
        if key.startswith("eval_"):
            yield "eval/" + key.removeprefix("eval_"), value
        else:
            yield "train/" + key, value


class Tracker:
    """TensorBoard event files in RUN_DIR/tensorboard: tensorboard --logdir RUN_DIR"""

    def __init__(self, config, start_step):
        # A run that starts at step N hides the events past N that an earlier
        # attempt wrote (TensorBoard's purge), as metrics.jsonl drops them.
        log_dir = Path(config.run_dir) / "tensorboard"
        self.writer = SummaryWriter(log_dir, purge_step=start_step + 1)

    def log(self, record):
        for name, value in metric_values(record):
            self.writer.add_scalar(name, value, record["step"])

    def close(self):
        self.writer.close()
