{%- set tracker = cookiecutter.tracker -%}
"""The experiment tracker ({{ tracker }}): global rank 0 sends it the records that
go to metrics.jsonl. A resume continues the tracker's run; a fresh start in the
same run folder begins a new one. Only global rank 0 imports the tracker's
package (seconds for some): the other ranks only check that it is there."""
{%- if tracker != "tensorboard" %}

import dataclasses
import importlib.util
import json
{%- else %}

import importlib.util
{%- endif %}
{%- if tracker == "mlflow" %}
import os
import time
{%- elif tracker == "wandb" %}
import uuid
{%- endif %}
from pathlib import Path

from .config import ConfigError

PACKAGE = "{{ tracker }}"  # installed with the project (pip install -e .)
{%- if tracker != "tensorboard" %}

PROJECT = "{{ cookiecutter.project_slug }}"
{%- endif %}


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
{%- if tracker != "tensorboard" %}


def tracker_run_id(run_dir, start_step, new_id):
    """The run a resume continues (its id is kept in the run folder), or a new
    one for a run that starts at step 0."""
    id_file = Path(run_dir) / "tracker-run.json"
    if start_step > 0 and id_file.exists():
        return json.loads(id_file.read_text())["id"]
    run_id = new_id()
    id_file.write_text(json.dumps({"tracker": "{{ tracker }}", "id": run_id}) + "\n")
    return run_id
{%- endif %}
{%- if tracker == "tensorboard" %}


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
{%- elif tracker == "wandb" %}


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
{%- else %}


class Tracker:
    """MLflow: the server in MLFLOW_TRACKING_URI, else a file store in
    RUN_DIR/mlruns (mlflow ui --backend-store-uri RUN_DIR/mlruns)."""

    def __init__(self, config, start_step):
        from mlflow.tracking import MlflowClient

        local_store = (Path(config.run_dir) / "mlruns").resolve().as_uri()
        uri = os.environ.get("MLFLOW_TRACKING_URI", local_store)
        if uri == local_store:  # MLflow 3 asks file stores to opt in
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self.client = MlflowClient(tracking_uri=uri)
        self.settings = dataclasses.asdict(config)
        self.run_id = tracker_run_id(config.run_dir, start_step, self._new_run)
        self.client.update_run(self.run_id, status="RUNNING")
        # A resume after a kill re-runs steps an earlier attempt logged: MLflow
        # cannot drop them, so those values are logged once, by the first attempt.
        self.logged_through = self._last_steps()

    def _new_run(self):
        experiment = self.client.get_experiment_by_name(PROJECT)
        if experiment is None:
            experiment_id = self.client.create_experiment(PROJECT)
        else:
            experiment_id = experiment.experiment_id
        run_id = self.client.create_run(experiment_id).info.run_id
        from mlflow.entities import Param

        params = [Param(key, str(value)) for key, value in self.settings.items()]
        self.client.log_batch(run_id, params=params)  # a run's params never change
        return run_id

    def _last_steps(self):
        names = self.client.get_run(self.run_id).data.metrics
        return {
            name: max(m.step for m in self.client.get_metric_history(self.run_id, name))
            for name in names
        }

    def log(self, record):
        from mlflow.entities import Metric

        now, step = int(time.time() * 1000), record["step"]
        metrics = [
            Metric(name, float(value), now, step)
            for name, value in metric_values(record)
            if step > self.logged_through.get(name, 0)
        ]
        if metrics:
            self.client.log_batch(self.run_id, metrics=metrics)

    def close(self):
        self.client.set_terminated(self.run_id)
{%- endif %}
