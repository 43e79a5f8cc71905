"""Every command a generated README shows is run here, for every data option,
when a CPU machine can run it; the others are named with the reason and the
test that covers them."""

import json
import re
import shlex
import sys
from pathlib import Path

import pytest
import torch
from helpers import (
    BIN,
    PYTHON,
    TORCHRUN,
    assert_contract,
    child_env,
    free_port,
    package,
    run,
)
from PIL import Image

BASH_BLOCK = re.compile(r"```bash\n(.*?)```", re.DOTALL)
# Small data, so the documented epochs finish in seconds.
DATA_SIZE = {
    "synthetic": ["--train-size", "256", "--eval-size", "64", "--batch-size", "16"],
    "fakedata": ["--train-size", "64", "--eval-size", "16", "--batch-size", "8"],
    "imagefolder": ["--image-size", "16", "--batch-size", "4"],
    # No CIFAR-10 here (no downloads in tests): each command must get as far as
    # saying so.
    "cifar10": ["--data-dir", "no-cifar"],
    "text": ["--block-size", "16", "--n-layer", "1", "--n-head", "2", "--n-embd", "16"]
    + ["--batch-size", "8"],
}
NO_CIFAR = "CIFAR-10 is not in no-cifar: pass --download to fetch it (170 MB)"
NOT_RUN_HERE = [
    ("needs GPUs (tests/test_gpu.py)", r"--nproc-per-node (gpu|4)\b"),
    ("downloads CIFAR-10", r"--download"),
    (
        "installs the project (tests/test_generated_tests.py)",
        r"^(python -m venv|pip |pytest)",
    ),
    ("needs a Slurm allocation (tests/test_slurm.py)", r"^srun "),
    ("needs a container engine and a Kubernetes cluster", r"^(docker|kubectl) "),
    ("starts a web server", r"^(tensorboard|mlflow ui) "),
    ("uploads to W&B (needs network)", r"^wandb sync "),
    (
        "needs a cluster of nodes",
        r"^(NNODES=|torchrun --nnodes|python train.py --nnodes)",
    ),
]


def readme_commands(project):
    """[(section, command)] of the README's bash blocks, comments stripped."""
    commands = []
    for section in re.split(r"^## ", (project / "README.md").read_text(), flags=re.M):
        title = section.splitlines()[0] if section else ""
        for block in BASH_BLOCK.findall(section):
            for line in block.replace("\\\n", " ").splitlines():
                command = line.split(" #")[0].strip()
                if command and not command.startswith("#"):
                    commands.append((title, command))
    return commands


def why_not_run(command):
    for reason, pattern in NOT_RUN_HERE:
        if re.search(pattern, command):
            return reason
    return None


def argv_and_env(command):
    """The command's words (our interpreter for python and torchrun) and the
    environment its leading NAME=value words set."""
    words = shlex.split(command)
    settings = {}
    while "=" in words[0]:
        name, value = words.pop(0).split("=", 1)
        settings[name] = value
    if words[0] == "torchrun":
        return TORCHRUN + words[1:], settings
    if words[0] == "ddpgen":
        return [str(Path(BIN) / "ddpgen")] + words[1:], settings
    assert words[0] == "python", command
    if words[1:3] == ["-m", "torch.distributed.launch"]:
        # Its default port is 29500: tests take a free one, so nothing else on
        # the machine can collide with them.
        words[3:3] = ["--master-port", str(free_port())]
    return [PYTHON] + words[1:], settings


def trains(command):
    return (
        "train.py" in command
        and "--print-config" not in command
        and not command.startswith("ddpgen ")
    )


def with_test_data(words, command, data, folder):
    """Small data, a private run folder and the final metrics in it; the
    doctor trains nothing, and the plot draws the run folder the README calls
    `run`."""
    if ".plot" in command or ".sample" in command:
        return [str(folder) if word == "run" else word for word in words]
    if ".doctor" in command or command.startswith("ddpgen "):
        return words
    metrics = ["--metrics-file", folder / METRICS] if trains(command) else []
    return words + DATA_SIZE[data] + ["--run-dir", folder, *metrics]


METRICS = "final-metrics.json"


def world_size(mode, command):
    """2 where the command asks for 2 processes, and for an mp project on a
    CPU machine (its default); 1 for plain `python train.py` in launch mode."""
    asked = re.search(r"--(nproc-per-node|nprocs) (\d+)", command)
    return int(asked.group(2)) if asked else 2 if mode == "mp" else 1


def write_noise_images(folder):
    noise = torch.Generator().manual_seed(0)
    for split in ("train", "val"):
        for label in ("cat", "dog"):
            (folder / split / label).mkdir(parents=True, exist_ok=True)
            for index in range(4):
                pixels = torch.randint(0, 256, (20, 24, 3), generator=noise)
                image = Image.fromarray(pixels.to(torch.uint8).numpy())
                image.save(folder / split / label / f"{index}.png")


CASES = [  # every data option and every tracker (their README sections differ)
    ("launch", False, "synthetic", "mlp", "wandb"),
    ("mp", False, "fakedata", "cnn", "none"),
    ("launch", False, "imagefolder", "cnn", "tensorboard"),
    ("mp", False, "cifar10", "cnn", "mlflow"),
    ("launch", False, "text", "gpt", "none"),
]
# Each mode's first case runs every command. The others run their first
# training command (this data, trained as the README says), each command the
# first case has not run, and the whole of a section whose commands continue
# each other when one of them is new: the rest is the same code.
PRIMARY = {mode: case for mode, *case in reversed(CASES)}


def code_path(project, command):
    """The command without what only names this data or package."""
    command = re.sub(r" --data-dir \S+", "", command)
    return command.replace(package(project), "PACKAGE")


def commands_to_run(projects, project, mode, data, model, tracker):
    """The indices of the README commands this case runs, or None for all."""
    primary_answers = PRIMARY[mode]
    if (False, data, model, tracker) == tuple(primary_answers):
        return None
    primary = projects(mode, *primary_answers)
    done = {code_path(primary, command) for _, command in readme_commands(primary)}
    runnable = [
        (index, section, command)
        for index, (section, command) in enumerate(readme_commands(project))
        if not why_not_run(command)
    ]
    new = {i for i, _, command in runnable if code_path(project, command) not in done}
    chained = {s for i, s, _ in runnable if i in new and s in ONE_RUN_EACH}
    return new | {i for i, s, _ in runnable if s in chained} | {runnable[0][0]}


ONE_RUN_EACH = ("Resume", "Watch a run")  # each command continues the one before


def training_run(mode, command):
    """What a training command runs on this machine: without its counts, and
    without the flags that spell out the defaults of a machine with no GPU."""
    command = re.sub(r" --(epochs|log-every) \d+", "", command)
    command = command.replace(" --device cpu", "")
    return command.replace(" --nprocs 2", "") if mode == "mp" else command


def runs_again(mode, commands, selected):
    """The indices of the training commands that train as one of the Resume
    section's do."""
    if selected is not None and not any(
        commands[index][0] == "Resume" for index in selected
    ):
        return set()
    resumes = {training_run(mode, c) for s, c in commands if s == "Resume"}
    return {
        index
        for index, (section, command) in enumerate(commands)
        if section not in ONE_RUN_EACH
        and trains(command)
        and training_run(mode, command) in resumes
    }


@pytest.mark.timeout(600)  # up to 12 commands, each bounded at 100 s
@pytest.mark.parametrize(
    "mode, model_parallel, data, model, tracker",
    CASES,
    ids=[f"{m}-{d}-{t}{'-model_parallel' if p else ''}" for m, p, d, _, t in CASES],
)
def test_every_readme_command_runs(
    projects, tmp_path, mode, model_parallel, data, model, tracker
):
    project = projects(mode, model_parallel, data, model, tracker)
    if data == "imagefolder":
        write_noise_images(project / "images")
    if data == "text":  # a small corpus: the project's own configuration module
        corpus = (project / package(project) / "config.py").read_text()
        (project / "input.txt").write_text(corpus)
    commands = readme_commands(project)
    assert len(commands) >= 6
    selected = commands_to_run(projects, project, mode, data, model, tracker)
    ran, skipped = [], {}
    same_as_resume = runs_again(mode, commands, selected)
    for index, (section, command) in enumerate(commands):
        reason = why_not_run(command)
        if index in same_as_resume:
            reason = "trains as the Resume section does on a machine without GPUs"
        if not reason and selected is not None and index not in selected:
            reason = f"the same code as the {mode} {PRIMARY[mode][1]} case's"
        if reason:
            skipped[command] = reason
            continue
        if data == "cifar10" and ran:
            skipped[command] = "needs CIFAR-10; the first command showed the message"
            continue
        shared = section in ONE_RUN_EACH
        folder = tmp_path / (section.replace(" ", "-") if shared else f"run{index}")
        words, settings = argv_and_env(command)
        result = run(
            with_test_data(words, command, data, folder),
            cwd=project,
            env=child_env(**settings),
            timeout=100,
            check=data != "cifar10",
        )
        if data == "cifar10":
            assert result.returncode == 2 and NO_CIFAR in result.stderr, command
        elif trains(command):  # the contract, for every launcher the README shows
            metrics = json.loads((folder / METRICS).read_text())
            assert_contract(metrics, world_size(mode, command))
        assert "Traceback" not in result.output, command
        ran.append((section, command, result))
    resumed = [result for section, _, result in ran if section == "Resume"]
    assert ran
    if selected is None:
        assert len(ran) >= 3 and len(resumed) == 2
        assert "resumed from" in resumed[1].stdout
        assert (tmp_path / "Watch-a-run" / "metrics.png").stat().st_size > 10_000
    for command, reason in skipped.items():
        print(f"not run here ({reason}): {command}", file=sys.stderr)


def test_ddpgen_readme_quick_start_runs(tmp_path):
    """The first block of ddpgen's README, line by line, in a shell."""
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    block = BASH_BLOCK.findall(readme)[0]
    assert block.startswith("ddpgen new my-project")
    result = run(["bash", "-euc", block], cwd=tmp_path, timeout=300)
    assert "Traceback" not in result.output
    assert (tmp_path / "my-project" / "run" / "checkpoints").is_dir()
    assert (tmp_path / "my-project" / "run" / "metrics.jsonl").is_file()
