"""Shared test helpers: render projects, run them with timeouts and free ports."""

import importlib.util
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

from ddpgen import make_spec, render_project

PYTHON = sys.executable
BIN = str(Path(sys.executable).parent)
TORCHRUN = [PYTHON, "-m", "torch.distributed.run"]
LEGACY_LAUNCH = [PYTHON, "-m", "torch.distributed.launch"]
# Set per test by conftest.py: when pytest-timeout will end the test.
deadline = None
STACKS_MARGIN_S = 45  # time left to dump the stacks of a hung run

# A learning-rate schedule of fixed length: a run stopped by --epochs 1 and
# resumed with --epochs 2 follows the 2-epoch run's curve.
SMALL_SYNTHETIC = ["--train-size", "256", "--eval-size", "64", "--batch-size", "16"]
SMALL_SYNTHETIC += ["--decay-steps", "64"]
STEPS_PER_EPOCH = 256 // (16 * 2)  # SMALL_SYNTHETIC on 2 processes
# The same steps in one process (batch 32, not 2 x 16), for what one rank does
# alone (files, schedules, metrics): train(..., nprocs=1) in launch mode starts
# one interpreter where torchrun starts three.
ALONE = [*SMALL_SYNTHETIC, "--batch-size", "32"]

SLUG = "{{cookiecutter.project_slug}}"
PACKAGE = "{{cookiecutter.package_name}}"
TEMPLATE_NAMES = {"project_name": "x", "project_slug": "x", "package_name": "x"}


def invoke(*args):
    """ddpgen's command line, in this process."""
    from click.testing import CliRunner

    from ddpgen.cli import main

    return CliRunner().invoke(main, [str(arg) for arg in args], catch_exceptions=False)


def tree(folder):
    """{relative path: bytes} of every file under `folder`, caches left out."""
    return {
        path.relative_to(folder).as_posix(): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }


def write_template(root, files=None, context=None):
    """A small cookiecutter template: cookiecutter.json holds `context` (the
    three names by default); `files` maps paths under `root` to their text (by
    default one module in the project folder). Hooks are executable."""
    root.mkdir(parents=True)
    context = TEMPLATE_NAMES if context is None else context
    (root / "cookiecutter.json").write_text(json.dumps(context))
    for relative, text in (files or {f"{SLUG}/x.py": "X = 1\n"}).items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if relative.startswith("hooks/"):
            path.chmod(0o755)
    return root


def png_bytes():
    """A 1x1 PNG: not UTF-8 text (its signature starts with 0x89)."""

    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", pixels)
        + chunk(b"IEND", b"")
    )


def render(root, name, **answers):
    spec = make_spec(name, output_dir=root, answers=answers)
    return render_project(spec).destination


def answers(project):
    """The template answers a project was rendered with (its update record)."""
    return json.loads((project / ".ddpgen.json").read_text())["answers"]


def package(project):
    """The import name of a rendered project's package."""
    return answers(project)["package_name"]


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
    test instead of the CI job. It gives up before pytest-timeout would, so a
    hang always leaves its processes' stacks in the report."""
    if deadline is not None:
        timeout = max(1, min(timeout, deadline - time.monotonic() - STACKS_MARGIN_S))
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
        stacks = stacks_of_group(process.pid)
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        raise AssertionError(
            f"timed out after {timeout:.0f}s: {command}\n{stdout}\n{stderr}\n{stacks}"
        ) from None
    finally:
        kill_group(process.pid)
    result = Run(command, process.returncode, stdout, stderr)
    if check and result.returncode != 0:
        raise AssertionError(
            f"exit {result.returncode}: {command}\n{result.output[-6000:]}"
        )
    return result


def stacks_of_group(group):
    """Every process of a hung run with its Python and native stacks (py-spy)."""
    listing = subprocess.run(
        ["ps", "-o", "pid=,args=", "-g", str(group)], capture_output=True, text=True
    ).stdout
    spy = Path(BIN) / "py-spy"
    report = [f"processes of the hung run:\n{listing}"]
    pythons = [line for line in listing.splitlines() if "python" in line]
    for line in pythons if spy.exists() else []:
        dump = subprocess.run(
            [spy, "dump", "--native", "--pid", line.split()[0]],
            capture_output=True,
            text=True,
            timeout=60,
        )
        report.append(dump.stdout + dump.stderr)
    return "\n".join(report)


def descendants(pid):
    """The pids of every process below `pid`."""
    listing = subprocess.run(
        ["ps", "-e", "-o", "pid=,ppid="], capture_output=True, text=True
    ).stdout
    children = {}
    for line in listing.splitlines():
        child, parent = map(int, line.split())
        children.setdefault(parent, []).append(child)
    found, todo = [], [pid]
    while todo:
        below = children.get(todo.pop(), [])
        found += below
        todo += below
    return found


def kill_group(pid):
    """SIGKILL what is left of a run: its process group and every process
    below its launcher (torchrun starts each worker in a session of its own,
    so the group alone would leave them running)."""
    below = descendants(pid)
    for kill, target in [(os.killpg, pid)] + [(os.kill, p) for p in below]:
        try:
            kill(target, signal.SIGKILL)
        except ProcessLookupError:
            pass


def train_command(project, nprocs, launcher="auto"):
    """The command that trains `project` with `nprocs` processes."""
    if answers(project)["mode"] == "mp":
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
        "--run-dir",
        workdir,  # checkpoints in workdir/checkpoints
        "--metrics-file",
        metrics,
        *flags,
    ]
    result = run(command, cwd=project, timeout=timeout, check=check, env=env)
    return (json.loads(metrics.read_text()) if metrics.exists() else None), result


def train_alone(project, workdir, *flags, **options):
    """train() in one process on ALONE's data: STEPS_PER_EPOCH steps an epoch."""
    return train(project, workdir, *ALONE, *flags, nprocs=1, **options)


def assert_contract(metrics, world_size):
    """The metrics and checkpoint every training run promises (DESIGN.md)."""
    import torch  # here: the generator's tests run without torch

    assert metrics["world_size"] == world_size
    assert metrics["replicas_in_sync"] is True
    assert metrics["samples_per_second"] > 0
    assert isinstance(metrics["final_loss"], float)
    state = torch.load(metrics["checkpoint"], weights_only=True)
    assert {
        "model",
        "optimizer",
        "scheduler",
        "scaler",
        "epoch",
        "step",
        "rng",
    } <= state.keys()
    assert not [
        key for key in state["model"] if key.startswith(("module.", "_orig_mod."))
    ]
    assert state["step"] == metrics["steps"] and state["epoch"] == metrics["epochs"]


def step_records(workdir):
    """metrics.jsonl's training records (the ones with a learning rate)."""
    lines = (workdir / "metrics.jsonl").read_text().splitlines()
    return [record for record in map(json.loads, lines) if "lr" in record]


def checkpoints(workdir):
    return sorted((workdir / "checkpoints").glob("checkpoint-*.pt"))


def final_model(workdir):
    import torch  # the generator's own tests run where torch is not installed

    return torch.load(checkpoints(workdir)[-1], weights_only=True)["model"]


def assert_same_weights(actual, expected):
    import torch

    assert actual.keys() == expected.keys()
    for key, value in actual.items():
        torch.testing.assert_close(value, expected[key], msg=key)


TEMPLATES_DOC = Path(__file__).parents[1] / "docs" / "templates.md"
DOC_FILE_BLOCK = re.compile(r"```\w+ file=(?P<path>\S+)\n(?P<text>.*?)```", re.DOTALL)


def write_example_template(root):
    """The small template docs/templates.md shows, written out under `root`."""
    blocks = list(DOC_FILE_BLOCK.finditer(TEMPLATES_DOC.read_text()))
    assert len(blocks) == 3
    for block in blocks:
        path = root / block["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(block["text"])
    return root


def load_tool(name):
    """A script of tools/ as a module."""
    path = Path(__file__).parents[1] / "tools" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def import_generated(project, module):
    """A module of a rendered project, imported in this process."""
    sys.path.insert(0, str(project))
    try:
        return importlib.import_module(f"{package(project)}.{module}")
    finally:
        sys.path.remove(str(project))
