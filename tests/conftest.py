import contextlib
import os
import signal
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import helpers  # noqa: E402
from helpers import render  # noqa: E402


@pytest.fixture(autouse=True)
def run_deadline(request):
    """Tell helpers.run when pytest-timeout will end this test."""
    marker = request.node.get_closest_marker("timeout")
    seconds = marker and (marker.args[:1] or [marker.kwargs.get("timeout")])[0]
    seconds = seconds or float(request.config.getini("timeout") or 0)
    helpers.deadline = time.monotonic() + seconds if seconds else None
    yield
    helpers.deadline = None


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory, monkeypatch):
    """No test may read the user's cookiecutter config or write under $HOME."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("COOKIECUTTER_CONFIG", raising=False)
    return home


def processes_working_under(folder):
    """{pid: command} of the processes whose working directory is in folder."""
    found = {}
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if proc.joinpath("cwd").resolve().is_relative_to(folder):
                found[int(proc.name)] = proc.joinpath("cmdline").read_bytes()
        except OSError:  # exited meanwhile, or not ours to read
            continue
    return {
        pid: command.replace(b"\0", b" ").decode() for pid, command in found.items()
    }


@pytest.fixture(scope="session", autouse=True)
def no_process_outlives_the_tests(tmp_path_factory):
    """Every run a test starts ends with it: a worker left behind (torchrun
    starts each in a session of its own) would hold a core for the rest."""
    folder = tmp_path_factory.getbasetemp().resolve()
    yield
    deadline = time.monotonic() + 10  # time for processes already exiting
    while (left := processes_working_under(folder)) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert not left, f"processes outlived the tests: {left}"


@pytest.fixture(scope="session")
def projects(tmp_path_factory):
    """Render each combination once per session: projects["mp", True] etc."""
    root = tmp_path_factory.mktemp("projects")
    cache = {}

    def get(
        mode="launch",
        model_parallel=False,
        data="synthetic",
        model="mlp",
        tracker="tensorboard",
    ):
        key = (mode, model_parallel, data, model, tracker)
        if key not in cache:
            layout = "mp2" if model_parallel else "single"
            cache[key] = render(
                root,
                f"{mode}-{layout}-{data}-{model}-{tracker[:2]}",
                mode=mode,
                model_parallel=model_parallel,
                data=data,
                model=model,
                tracker=tracker,
            )
        return cache[key]

    return get


@pytest.fixture
def launch(projects):
    """The default launch-mode project."""
    return projects("launch")


@pytest.fixture
def mp(projects):
    """The default mp-mode project."""
    return projects("mp")
