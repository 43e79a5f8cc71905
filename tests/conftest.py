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
