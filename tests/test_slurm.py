"""The generated scripts/slurm.sbatch on a real two-node Slurm cluster
(tests/slurm/cluster.sh; `make test-slurm` starts and stops it).

Jobs are submitted as a user would, with command-line overrides only. Each
node has one CPU and no GPU, so each runs one training process.
"""

import json
import os
import re
import subprocess
import time
from functools import partial
from pathlib import Path

import pytest
from helpers import (
    BIN,
    assert_same_weights,
    checkpoints,
    final_model,
    step_records,
)

pytestmark = pytest.mark.slurm

SLURM_DIR = Path(os.environ.get("DDPGEN_SLURM_DIR", "/tmp/ddpgen-slurm"))
CPU_NODES = ["--nodes=2", "--gpus-per-node=0", "--cpus-per-task=1"]
SMALL = ["--device", "cpu", "--train-size", "256", "--eval-size", "64"]
SMALL += ["--batch-size", "16", "--epochs", "1", "--metrics-file", "metrics.json"]
STEPS_PER_EPOCH = 1250  # 40000 samples, batch 16, 2 processes


def long_run(epochs=1, train_size=40000):
    """Long enough to be signalled mid-epoch."""
    return [
        *("--device", "cpu", "--train-size", str(train_size), "--eval-size", "64"),
        *("--batch-size", "16", "--epochs", str(epochs), "--save-every", "0"),
        *("--log-every", "10", "--metrics-file", "metrics.json"),
    ]


JOB_TIMEOUT = 420


def slurm_env():
    env = dict(os.environ)
    env["SLURM_CONF"] = str(SLURM_DIR / "slurm.conf")
    env["PATH"] = BIN + os.pathsep + env["PATH"]
    for name in [k for k in env if k.startswith(("SLURM_JOB", "SBATCH_"))]:
        del env[name]
    return env


def slurm(*command, timeout=60):
    return subprocess.run(
        [str(part) for part in command],
        env=slurm_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module", autouse=True)
def cluster():
    try:
        nodes = slurm("sinfo", "-h", "-N", "-o", "%N %T", timeout=20)
    except (FileNotFoundError, subprocess.TimeoutExpired):
        nodes = None
    if nodes is None or nodes.returncode != 0 or "n2" not in nodes.stdout:
        pytest.skip("no Slurm cluster is running: `make test-slurm` starts one")


def submit(project, *sbatch_flags, train_flags):
    result = subprocess.run(
        ["sbatch", "--parsable", *sbatch_flags, "scripts/slurm.sbatch", *train_flags],
        cwd=project,
        env=slurm_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().split(";")[0]


def wait_until(condition, what, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def job_done(job):
    return slurm("squeue", "-h", "-j", job, "-o", "%T").stdout.strip() == ""


def finish(project, job, timeout=JOB_TIMEOUT):
    """Wait for the job to leave the queue; its log; cancel it on a timeout."""
    try:
        wait_until(lambda: job_done(job), f"job {job}", timeout)
    finally:
        slurm("scancel", job)
    return (project / f"slurm-{job}.out").read_text()


def job_restarts(job):
    shown = slurm("scontrol", "show", "job", job).stdout
    found = re.search(r"Restarts=(\d+)", shown)
    return int(found[1]) if found else None


def metrics_of(project):
    return json.loads((project / "metrics.json").read_text())


def logged_steps(project):
    lines = (project / "run" / "metrics.jsonl").read_text().splitlines()
    return [(r["step"], "loss" in r) for r in map(json.loads, lines)]


def copy_of(source, tmp_path):
    """A fresh copy per test: jobs write into the project folder."""
    target = tmp_path / source.name
    subprocess.run(["cp", "-a", str(source), str(target)], check=True, timeout=60)
    return target


@pytest.fixture(params=["launch", "mp"])
def project(request, projects, tmp_path):
    return copy_of(projects(request.param), tmp_path)


def test_sbatch_trains_one_process_per_cpu_node(project):
    started = time.monotonic()
    job = submit(project, *CPU_NODES, train_flags=SMALL)
    log = finish(project, job)
    metrics = metrics_of(project)
    assert metrics["world_size"] == 2 and metrics["replicas_in_sync"] is True
    assert metrics["threads_per_process"] == 1
    assert "libgomp" not in log and "Traceback" not in log
    print(f"{project.name}: 2-node job in {time.monotonic() - started:.1f} s")


def signal_mid_epoch(project, job, *scancel_flags):
    log = project / f"slurm-{job}.out"
    wait_until(
        lambda: log.exists() and re.search(r"^step [1-9]\d+ ", log.read_text(), re.M),
        "the job's first logged steps",
        JOB_TIMEOUT,
    )
    result = slurm("scancel", *scancel_flags, job)
    assert result.returncode == 0, result.stderr


def events(log):
    """The lines that tell a job's story, for a failure message: a log's tail
    shows only the last attempt."""
    story = re.compile(r"SIGTERM|stopping|saved|resumed|Traceback|error", re.I)
    return "\n".join(line for line in log.splitlines() if story.search(line))


def uninterrupted(project, tmp_path):
    straight = tmp_path / "straight"
    subprocess.run(["cp", "-a", str(project), str(straight)], check=True, timeout=60)
    finish(straight, submit(straight, *CPU_NODES, train_flags=long_run()))
    return straight


def test_scancel_term_checkpoints_requeues_and_finishes_exactly(project, tmp_path):
    straight = uninterrupted(project, tmp_path)
    job = submit(project, *CPU_NODES, train_flags=long_run())
    signal_mid_epoch(project, job, "--signal=TERM", "--batch")
    log = finish(project, job)
    stopped = re.search(r"SIGTERM: stopping at step (\d+) to save", log)
    assert stopped, events(log)
    step = int(stopped[1])
    assert f"saved run/checkpoints/checkpoint-{step:09d}.pt" in log
    assert f"resumed from run/checkpoints/checkpoint-{step:09d}.pt" in log
    assert job_restarts(job) == 1
    metrics = metrics_of(project)
    assert metrics["steps"] == metrics_of(straight)["steps"] == STEPS_PER_EPOCH
    assert_same_weights(final_model(project / "run"), final_model(straight / "run"))
    # The requeued attempt dropped the records past its checkpoint: each step once.
    assert logged_steps(project) == logged_steps(straight)
    assert [path.name for path in checkpoints(project / "run")] == [
        f"checkpoint-{step:09d}.pt",
        f"checkpoint-{STEPS_PER_EPOCH:09d}.pt",
    ]


def node_state(node):
    return slurm("sinfo", "-h", "-n", node, "-o", "%T").stdout.strip()


@pytest.fixture
def drain():
    """Drains a node the way an admin does; resumes it afterwards whatever
    the test did."""
    drained = []

    def drain_node(node):
        result = slurm(
            "scontrol",
            "update",
            f"nodename={node}",
            "state=drain",
            "reason=ddpgen-test",
        )
        assert result.returncode == 0, result.stderr
        drained.append(node)

    yield drain_node
    for node in drained:
        slurm("scontrol", "update", f"nodename={node}", "state=resume")
        wait_until(partial(is_idle, node), f"{node} back to idle", 60)


def is_idle(node):
    return node_state(node) == "idle"


RESIZED_STEPS = 500  # global batch 32


def test_a_preempted_job_requeued_onto_one_node_resumes_mid_epoch(project, drain):
    """--nodes=1-2: Slurm gives the job both nodes; one is drained while it
    runs, the job is preempted, and its requeued attempt gets the one node
    left. It resumes mid-epoch on 1 process with the global batch kept."""
    job = submit(
        project,
        "--nodes=1-2",
        *CPU_NODES[1:],
        train_flags=long_run(train_size=RESIZED_STEPS * 32),
    )
    log_file = project / f"slurm-{job}.out"
    wait_until(
        lambda: log_file.exists()
        and re.search(r"^step [1-9]\d+ ", log_file.read_text(), re.M),
        "the job's first logged steps",
        JOB_TIMEOUT,
    )
    drain("n2")
    result = slurm("scancel", "--signal=TERM", "--batch", job)
    assert result.returncode == 0, result.stderr
    log = finish(project, job)
    stopped = re.search(r"SIGTERM: stopping at step (\d+) to save", log)
    assert stopped, events(log)
    step = int(stopped[1])
    assert 0 < step < RESIZED_STEPS, events(log)
    assert (
        f"resumed at step {step}: 2 -> 1 process, micro-steps 1 -> 2, "
        "global batch 32 kept" in log
    ), events(log)
    assert job_restarts(job) == 1
    records = step_records(project / "run")  # one per --log-every 10 steps
    logged = list(range(10, RESIZED_STEPS + 1, 10))
    assert [r["step"] for r in records] == logged
    sizes = [r["world_size"] for r in records]
    assert sizes == [2 if n <= step else 1 for n in logged]
    assert 2 in sizes and 1 in sizes
    metrics = metrics_of(project)
    assert metrics["world_size"] == 1 and metrics["steps"] == RESIZED_STEPS
    assert node_state("n2").startswith("drain")


@pytest.mark.timeout(900)
def test_time_limit_signal_checkpoints_requeues_and_resumes(projects, tmp_path):
    """Launch mode only: the signal path is the same script code in mp mode,
    which the scancel test runs."""
    project = copy_of(projects("launch"), tmp_path)
    # Three minutes per attempt and TERM 60 s before the limit, which Slurm
    # sends up to a minute early: 60 to 120 s into the attempt. The training
    # would run for hours: follow the chain signal, save, requeue, resume.
    job = submit(
        project,
        *CPU_NODES,
        "--time=3",
        "--signal=B:TERM@60",
        train_flags=long_run(epochs=1000),
    )
    log = project / f"slurm-{job}.out"
    try:
        wait_until(
            lambda: log.exists() and "resumed from" in log.read_text(),
            "the requeued attempt to resume",
            timeout=600,
        )
    finally:
        slurm("scancel", job)
    text = log.read_text()
    assert "SIGTERM: asking the workers to checkpoint, then requeueing" in text
    stopped = re.search(r"SIGTERM: stopping at step (\d+) to save", text)
    assert stopped, events(text)
    step = int(stopped[1])
    assert f"saved run/checkpoints/checkpoint-{step:09d}.pt" in text
    assert f"resumed from run/checkpoints/checkpoint-{step:09d}.pt" in text


def test_doctor_under_srun_on_two_nodes(projects, tmp_path):
    project = copy_of(projects("mp"), tmp_path)
    package = json.loads((project / ".ddpgen.json").read_text())["answers"]
    doctor = f"srun python -m {package['package_name']}.doctor --device cpu --max-mib 1"
    result = subprocess.run(
        ["sbatch", "--parsable", "--nodes=2", "--ntasks-per-node=1"]
        + ["--cpus-per-task=1", "--output=slurm-%j.out", "--wrap", doctor],
        cwd=project,
        env=slurm_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    log = finish(project, result.stdout.strip().split(";")[0], timeout=180)
    assert "layout: 2 processes, 1 on this node" in log
    assert "ok: every rank joined and all_reduce works" in log, log[-3000:]
    assert log.count("ranks: ") == 1, log  # rank 0 reports, once
