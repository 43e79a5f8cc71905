"""Trackers, read back with their own readers: each gets the records
metrics.jsonl gets, from rank 0 only, each step once across a resume that
re-runs steps; a fresh start begins a new tracker run. And the plot module."""

import json
import os

import pytest
from helpers import (
    PYTHON,
    SMALL_SYNTHETIC,
    STEPS_PER_EPOCH,
    child_env,
    import_generated,
    package,
    run,
    train,
    train_alone,
)

FLAGS = ["--log-every", "1"]


def jsonl_curve(run_dir, key):
    """{step: value} of one key of metrics.jsonl."""
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    return {r["step"]: r[key] for r in records if r.get(key) is not None}


def tensorboard_curve(run_dir, name):
    from tensorboard.backend.event_processing.event_accumulator import (
        EventAccumulator,
    )

    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()  # honours the purge of a restart, as TensorBoard does
    steps = [event.step for event in events.Scalars(name)]
    assert len(steps) == len(set(steps)), steps
    return {event.step: event.value for event in events.Scalars(name)}


def mlflow_client(run_dir):
    from mlflow.tracking import MlflowClient

    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    return MlflowClient(tracking_uri=(run_dir / "mlruns").resolve().as_uri())


def mlflow_curve(run_dir, name):
    client = mlflow_client(run_dir)
    run_id = tracker_run_id(run_dir)
    assert client.get_run(run_id).info.status == "FINISHED"
    history = client.get_metric_history(run_id, name)
    steps = [metric.step for metric in history]
    assert len(steps) == len(set(steps)), steps
    return {metric.step: metric.value for metric in history}


def wandb_records(path):
    """The protobuf records of a .wandb file (LevelDB log blocks after a
    7-byte header), parsed with wandb's own schema."""
    from wandb.proto import wandb_internal_pb2

    data, block, header = path.read_bytes(), 32768, 7
    assert data[:4] == b":W&B"
    position, pending = header, b""
    while position + header <= len(data):
        if block - position % block < header:  # a block's padding
            position += block - position % block
            continue
        length = int.from_bytes(data[position + 4 : position + 6], "little")
        pending += data[position + header : position + header + length]
        kind, position = data[position + 6], position + header + length
        if kind in (1, 4):  # a full record, or the last piece of one
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            yield record
            pending = b""


def wandb_curve(run_dir, name):
    """Each offline attempt's history; W&B keeps a step's first value."""
    curve, run_ids = {}, set()
    for path in sorted(run_dir.glob("wandb/offline-run-*/run-*.wandb")):
        for record in wandb_records(path):
            if record.WhichOneof("record_type") == "run":
                run_ids.add(record.run.run_id)
            if record.WhichOneof("record_type") != "history":
                continue
            items = {
                item.key or "/".join(item.nested_key): json.loads(item.value_json)
                for item in record.history.item
            }
            if name in items:
                curve.setdefault(items["_step"], items[name])
    assert run_ids == {tracker_run_id(run_dir)}
    return curve


def tracker_run_id(run_dir):
    return json.loads((run_dir / "tracker-run.json").read_text())["id"]


READERS = {
    "tensorboard": tensorboard_curve,
    "mlflow": mlflow_curve,
    "wandb": wandb_curve,
}


@pytest.mark.parametrize("tracker", READERS)
def test_tracker_holds_each_step_once_across_a_resume(projects, tmp_path, tracker):
    project = projects("launch", tracker=tracker)
    env = child_env(WANDB_MODE="offline")
    run_dir = tmp_path / "run"
    train_alone(project, run_dir, *FLAGS, "--epochs", "2", env=env)  # saves 8, 16
    first_run_id = tracker_run_id(run_dir) if tracker != "tensorboard" else None
    # Back to step 8: steps 9..16 run again, then on to step 24.
    resume_at = run_dir / "checkpoints" / f"checkpoint-{STEPS_PER_EPOCH:09d}.pt"
    train_alone(
        project, run_dir, *FLAGS, "--epochs", "3", "--resume", resume_at, env=env
    )

    read = READERS[tracker]
    last_step = 3 * STEPS_PER_EPOCH
    for key, name in [("loss", "train/loss"), ("lr", "train/lr")]:
        expected = jsonl_curve(run_dir, key)
        assert sorted(expected) == list(range(1, last_step + 1))
        assert read(run_dir, name) == pytest.approx(expected, rel=1e-6)
    evaluations = jsonl_curve(run_dir, "eval_loss")
    assert read(run_dir, "eval/loss") == pytest.approx(evaluations, rel=1e-6)
    if first_run_id is not None:
        assert tracker_run_id(run_dir) == first_run_id  # the same tracker run

    # A fresh start in the same folder is a new run.
    train_alone(project, run_dir, *FLAGS, "--epochs", "1", "--resume", "none", env=env)
    if tracker == "tensorboard":
        steps = sorted(read(run_dir, "train/loss"))
        assert steps == list(range(1, STEPS_PER_EPOCH + 1))
    else:
        assert tracker_run_id(run_dir) != first_run_id


def test_no_tracker_writes_only_the_run_records(projects, tmp_path):
    project = projects("launch", tracker="none")
    assert not (project / package(project) / "tracking.py").exists()
    train_alone(project, tmp_path, *FLAGS, "--epochs", "1")
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "checkpoints",
        "config.json",
        "debug",
        "metrics.json",
        "metrics.jsonl",
    ]


def test_only_rank_0_writes_tensorboard_events(projects, tmp_path):
    train(projects("launch"), tmp_path, *SMALL_SYNTHETIC, *FLAGS, "--epochs", "1")
    assert len(list((tmp_path / "tensorboard").glob("events.out.tfevents.*"))) == 1


def test_plot_draws_the_curves_of_a_run(projects, tmp_path):
    from matplotlib.image import imread

    project = projects("launch")
    train_alone(project, tmp_path, *FLAGS, "--epochs", "2")
    result = run([PYTHON, "-m", f"{package(project)}.plot", tmp_path], cwd=project)
    assert result.stdout.strip() == f"wrote {tmp_path / 'metrics.png'}"
    height, width, _ = imread(tmp_path / "metrics.png").shape
    assert (height, width) == (700, 1100)


def test_plot_marks_where_the_number_of_processes_changed(projects, tmp_path):
    plot = import_generated(projects("launch"), "plot")
    records = [{"step": 1, "world_size": 2}, {"step": 2, "eval_loss": 1.0}]
    records += [{"step": 3, "world_size": 2}, {"step": 4, "world_size": 4}]
    records += [{"step": 5, "world_size": 4}, {"step": 6, "world_size": 1}]
    assert plot.world_size_changes(records) == [(4, 4), (6, 1)]
    assert "world_size" not in plot.curves(records)
    plot.plot(records, tmp_path / "resized.png")
    assert (tmp_path / "resized.png").stat().st_size > 0


def test_plot_of_a_folder_without_records_is_one_line(projects, tmp_path):
    project = projects("mp")
    command = [PYTHON, "-m", f"{package(project)}.plot", tmp_path]
    result = run(command, cwd=project, check=False)
    assert result.returncode == 2
    missing = tmp_path / "metrics.jsonl"
    assert result.stderr.splitlines()[-1].endswith(
        f"error: {missing} does not exist: is {tmp_path} a run folder?"
    )


def test_wandb_without_a_login_says_so_and_logs_offline(projects, tmp_path):
    env = child_env()
    for name in ("WANDB_MODE", "WANDB_API_KEY"):
        env.pop(name, None)
    project = projects("launch", tracker="wandb")
    _, result = train_alone(project, tmp_path, *FLAGS, "--epochs", "1", env=env)
    assert (
        "wandb: No API key configured. Use `wandb login` to log in. Logging offline; "
        "upload later with wandb sync."
    ) in result.stdout
    expected = jsonl_curve(tmp_path, "loss")
    assert wandb_curve(tmp_path, "train/loss") == pytest.approx(expected, rel=1e-6)
