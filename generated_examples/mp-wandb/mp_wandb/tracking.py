"""The experiment tracker (wandb): global rank 0 sends it the records that
go to metrics.jsonl. A resume continues the tracker's run; a fresh start in the
same run folder begins a new one. Only global rank 0 imports the tracker's
package (seconds for some): the other ranks only check that it is there."""

import dataclasses
import importlib.util
import json
import uuid
from pathlib import Path

from .config import ConfigError

PACKAGE = "wandb"  # installed with the project (pip install -e .)

PROJECT = "mp-wandb"


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


def tracker_run_id(run_dir, start_step, new_id):
    """The run a resume continues (its id is kept in the run folder), or a new
    one for a run that starts at step 0."""
    id_file = Path(run_dir) / "tracker-run.json"
    if start_step > 0 and id_file.exists():
        return json.loads(id_file.read_text())["id"]
    run_id = new_id()
    id_file.write_text(json.dumps({"tracker": "wandb", "id": run_id}) + "\n")
    return run_id


def new_run_id():
    return uuid.uuid4().hex[:12]


class Tracker:
    """Weights & Biases, files in RUN_DIR/wandb. Without network set
    WANDB_MODE=offline; upload later: wandb sync RUN_DIR/wandb/offline-run-*"""

    def __init__(self, config, start_step):
        import wandb

        run_id = tracker_run_id(config.run_dir, start_step, new_run_id)
        settings = {
            "project": PROJECT,
            "dir": config.run_dir,
            "id": run_id,
            "resume": "allow",
            "config": dataclasses.asdict(config),
        }
        try:
            self.run = wandb.init(**settings)
        except wandb.errors.UsageError as error:  # not logged in, no terminal
            # Hours of training are worth more than a live dashboard.
            reason = str(error).splitlines()[0]
            print(f"wandb: {reason} Logging offline; upload later with wandb sync.")
            self.run = wandb.init(mode="offline", **settings)

    def log(self, record):
        if record["step"] >= self.run.step:  # wandb refuses steps it has passed
            self.run.log(dict(metric_values(record)), step=record["step"])

    def close(self):
        self.run.finish()
