"""The experiment tracker (tensorboard): global rank 0 sends it the records that
go to metrics.jsonl. A resume continues the tracker's run; a fresh start in the
same run folder begins a new one. Only global rank 0 imports the tracker's
package (seconds for some): the other ranks only check that it is there."""

import importlib.util
from pathlib import Path

from .config import ConfigError

PACKAGE = "tensorboard"  # installed with the project (pip install -e .)


def check_installed():
    """Every rank, before training: a missing package is one line, not a
    traceback on rank 0 alone."""
    if importlib.util.find_spec(PACKAGE) is None:
        raise ConfigError(
            f"the {PACKAGE} tracker needs the {PACKAGE} package: pip install -e ."
            f" installs the project's dependencies (or pip install {PACKAGE})"
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
        from torch.utils.tensorboard import SummaryWriter

        log_dir = Path(config.run_dir) / "tensorboard"
        self.writer = SummaryWriter(log_dir, purge_step=start_step + 1)

    def log(self, record):
        for name, value in metric_values(record):
            self.writer.add_scalar(name, value, record["step"])

    def close(self):
        self.writer.close()
