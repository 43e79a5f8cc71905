"""Shared test helpers: render projects, run them with timeouts and free ports."""

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import torch

from ddpgen import make_spec, render_project

PYTHON = sys.executable
BIN = str(Path(sys.executable).parent)
TORCHRUN = [PYTHON, "-m", "torch.distributed.run"]
LEGACY_LAUNCH = [PYTHON, "-m", "torch.distributed.launch"]
SMALL_SYNTHETIC = ["--train-size", "256", "--eval-size", "64", "--batch-size", "16"]


def render(root, name, **answers):
    spec = make_spec(name, output_dir=root, answers=answers)
    return render_project(spec).destination


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def child_env(**extra):
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TORCHELASTIC", "PET_"))
    }
    for name in (
        "RANK",
        "LOCAL_RANK",
        "WORLD_SIZE",
        "MASTER_ADDR",
        "MASTER_PORT",
        "OMP_NUM_THREADS",
    ):
        env.pop(name, None)
    env["PATH"] = BIN + os.pathsep + env.get("PATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    env.update({key: str(value) for key, value in extra.items()})
    return env


class Run(subprocess.CompletedProcess):
    @property
    def output(self):
        return self.stdout + self.stderr


def run(command, cwd, timeout=240, check=True, env=None):
    """Run in a new session and kill the whole tree on timeout: a hang fails the
    test instead of the CI job."""
    process = subprocess.Popen(
        [str(part) for part in command],
        cwd=cwd,
        env=env or child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        raise AssertionError(
            f"timed out after {timeout}s: {command}\n{stdout}\n{stderr}"
        ) from None
    finally:
        kill_group(process.pid)
    result = Run(command, process.returncode, stdout, stderr)
    if check and result.returncode != 0:
        raise AssertionError(
            f"exit {result.returncode}: {command}\n{result.output[-6000:]}"
        )
    return result


def kill_group(pid):
    try:
        os.killpg(pid, signal.SIGKILL)  # leftovers of the run, if any
    except ProcessLookupError:
        pass


def train_command(project, nprocs, launcher="auto"):
    """The command that trains `project` with `nprocs` processes."""
    mode = json.loads((project / ".ddpgen.json").read_text())["answers"]["mode"]
    if mode == "mp":
        return [PYTHON, "train.py", "--nprocs", nprocs]
    if launcher == "plain" or (launcher == "auto" and nprocs == 1):
        return [PYTHON, "train.py"]
    if launcher == "legacy":
        return LEGACY_LAUNCH + [
            "--nproc-per-node",
            nprocs,
            "--master-port",
            free_port(),
            "train.py",
        ]
    return TORCHRUN + ["--standalone", "--nproc-per-node", nprocs, "train.py"]


def train(
    project,
    workdir,
    *flags,
    nprocs=2,
    launcher="auto",
    timeout=240,
    check=True,
    env=None,
):
    """Train on CPU; return (metrics or None, the Run)."""
    workdir.mkdir(parents=True, exist_ok=True)
    metrics = workdir / "metrics.json"
    command = train_command(project, nprocs, launcher) + [
        "--device",
        "cpu",
        "--checkpoint-dir",
        workdir / "checkpoints",
        "--metrics-file",
        metrics,
        *flags,
    ]
    result = run(command, cwd=project, timeout=timeout, check=check, env=env)
    return (json.loads(metrics.read_text()) if metrics.exists() else None), result


def checkpoints(workdir):
    return sorted((workdir / "checkpoints").glob("checkpoint-*.pt"))


def final_model(workdir):
    return torch.load(checkpoints(workdir)[-1], weights_only=True)["model"]


def assert_same_weights(actual, expected):
    assert actual.keys() == expected.keys()
    for key, value in actual.items():
        torch.testing.assert_close(value, expected[key], msg=key)
