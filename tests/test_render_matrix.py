"""Every supported combination renders clean code; every other one is refused."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
from cookiecutter.environment import StrictEnvironment
from cookiecutter.generate import generate_context
from cookiecutter.prompt import prompt_for_config
from helpers import load_tool, package
from jinja2 import FileSystemLoader

from ddpgen import Template, UsageError, make_spec, render_project
from ddpgen.checks import STATIC_CHECKS, combinations
from ddpgen.cookiecutter_run import run_cookiecutter
from ddpgen.files import is_litter
from ddpgen.postprocess import black_settings, ruff_binary, unformatted
from ddpgen.spec import MAX_NAME_LENGTH, builtin_template_dir

# One pytest worker takes them all: the renders and the batched black and ruff
# runs are fixtures, which another worker would set up again. Session-scoped,
# so that other modules' tests run between these on that worker do not tear
# them down (measured: a second 38 s setup when they were module-scoped).
pytestmark = pytest.mark.xdist_group("render-matrix")

TEMPLATE = Template.load()
ALL = combinations(TEMPLATE.options)
DEFAULT_TRACKER = "tensorboard"
# The tracker's code (tracking.py, its lines in metrics.py and pyproject.toml)
# reads no other option, so each tracker is rendered with every mode and
# model-parallel choice and the rest of the matrix with the default tracker
# (test_tracker_code_reads_no_other_option keeps that true).
CHECKED = [
    answers
    for answers in ALL
    if answers["tracker"] == DEFAULT_TRACKER
    or (answers["data"], answers["model"]) == ("fakedata", "cnn")
]
SUPPORTED = [a for a in CHECKED if not list(TEMPLATE.violations(a))]
UNSUPPORTED = [a for a in CHECKED if list(TEMPLATE.violations(a))]


def combination_id(answers):
    def shown(value):
        return {True: "yes", False: "no"}.get(value, value)

    return "-".join(f"{key}={shown(value)}" for key, value in answers.items())


def test_the_matrix_has_both_kinds():
    assert len(ALL) == 2 * 2 * 5 * 4 * 4
    assert len(SUPPORTED) == 2 * 2 * 8 + 2 * 2 * 3 and len(UNSUPPORTED) == 2 * 2 * 12


TRACKER_FILES = ["tracking.py", "metrics.py"]


def render_files(answers, names, project_name="p"):
    """The package files `names` as cookiecutter renders them for these
    answers: its context and Jinja environment, without writing a project."""
    template = builtin_template_dir()
    context = generate_context(
        str(template / "cookiecutter.json"),
        extra_context=make_spec(project_name, answers=answers).context(),
    )
    context["cookiecutter"] = prompt_for_config(context, no_input=True)
    env = StrictEnvironment(context=context, keep_trailing_newline=True)
    env.loader = FileSystemLoader(str(template))
    package = "{{cookiecutter.project_slug}}/{{cookiecutter.package_name}}"
    return tuple(
        env.get_template(f"{package}/{name}").render(**context) for name in names
    )


@pytest.mark.parametrize("tracker", ["tensorboard", "wandb", "mlflow", "none"])
def test_tracker_code_reads_no_other_option(tracker):
    """Every combination renders the tracker's modules alike."""
    renders = {
        render_files(answers, TRACKER_FILES)
        for answers in ALL
        if answers["tracker"] == tracker and not list(TEMPLATE.violations(answers))
    }
    assert len(renders) == 1


def test_tracker_files_render_as_in_a_project(rendered):
    """render_files gives what a whole render writes (the template renders
    formatted: test_plain_cookiecutter_output_needs_no_formatting)."""
    compared = 0
    for tracker in ("mlflow", "none"):  # with none, tracking.py is left out
        answers = next(a for a in SUPPORTED if a["tracker"] == tracker)
        project = rendered(answers)
        texts = render_files(answers, TRACKER_FILES, project.name)
        for name, text in zip(TRACKER_FILES, texts, strict=True):
            written = project / package(project) / name
            if written.exists():
                assert text == written.read_text(), (tracker, name)
                compared += 1
    assert compared == 3


@pytest.fixture(scope="session")
def rendered(tmp_path_factory):
    root = tmp_path_factory.mktemp("matrix")
    cache = {}

    def get(answers):
        key = combination_id(answers)
        if key not in cache:
            name = f"combination-{len(cache)}"  # the full id passes 40 characters
            spec = make_spec(name, output_dir=root, answers=answers)
            cache[key] = render_project(spec).destination
        return cache[key]

    return get


# black and ruff run once over every render (one process each, not one per
# combination); the other checks run in this process.
BATCHED = ("black", "ruff")


@pytest.fixture(scope="session")
def batched_findings(rendered):
    """{(check, project folder): [finding]} for black and ruff over all renders."""
    projects = [rendered(answers) for answers in SUPPORTED]
    root = projects[0].parent
    black = [sys.executable, "-m", "black", "--check", "--line-length", "88"]
    black += ["--target-version", "py310", *[p.name for p in projects]]
    ruff = [ruff_binary(), "check", "--no-cache", "--output-format", "concise"]
    ruff += [p.name for p in projects]
    findings = {}
    for check, command in (("black", black), ("ruff", ruff)):
        result = subprocess.run(
            command, cwd=root, capture_output=True, text=True, timeout=600
        )
        for line in (result.stdout + result.stderr).splitlines():
            folder = re.search(r"(combination-\d+)/", line)
            if folder and "would reformat" in line or folder and check == "ruff":
                findings.setdefault((check, folder[1]), []).append(line)
        assert result.returncode in (0, 1), result.stderr
    return findings


@pytest.mark.parametrize("answers", SUPPORTED, ids=combination_id)
@pytest.mark.parametrize("check", STATIC_CHECKS)
def test_supported_combination_is_clean(rendered, batched_findings, answers, check):
    project = rendered(answers)
    if check in BATCHED:
        assert batched_findings.get((check, project.name), []) == []
    else:
        assert STATIC_CHECKS[check](project) == []


@pytest.mark.parametrize("answers", SUPPORTED, ids=combination_id)
def test_only_the_chosen_files_are_rendered(rendered, answers):
    project = rendered(answers)
    package = project / project.name.replace("-", "_").lower()
    assert (package / "spawn.py").exists() == (answers["mode"] == "mp")
    assert (package / "model_parallel.py").exists() == answers["model_parallel"]
    assert (package / "tracking.py").exists() == (answers["tracker"] != "none")
    text = answers["data"] == "text"
    for module in ("tokens.py", "sample.py", "lm_metrics.py"):
        assert (package / module).exists() == text, module
    data_source = (package / "data.py").read_text()
    marks = {
        "fakedata": "FakeData",
        "cifar10": "CIFAR10",
        "imagefolder": "ImageFolder",
        "synthetic": "TensorDataset",
        "text": "TrainingWindows",
    }
    for other in marks.values():
        chosen = marks[answers["data"]]
        assert (other in data_source) == (other == chosen), other


MAX_MODULE_LINES = 250  # a module a user reads at once; split what grows past it


@pytest.mark.parametrize("answers", SUPPORTED, ids=combination_id)
def test_every_generated_module_stays_short(rendered, answers):
    project = rendered(answers)
    lengths = {
        str(path.relative_to(project)): len(path.read_text().splitlines())
        for path in project.rglob("*.py")
    }
    assert {p: n for p, n in lengths.items() if n > MAX_MODULE_LINES} == {}


def lowest_python(project):
    """The X.Y of the project's `requires-python = ">=X.Y"`."""
    pyproject = (project / "pyproject.toml").read_text()
    found = re.search(r'^requires-python = ">=(3\.\d+)"$', pyproject, re.MULTILINE)
    assert found, "requires-python must name its lowest version as >=3.X"
    return found[1]


# Compiles every file in memory: no __pycache__ left in the shared renders.
COMPILE_ALL = (
    "import pathlib\n"
    "for path in sorted(pathlib.Path('.').rglob('*.py')):\n"
    "    compile(path.read_text(encoding='utf-8'), str(path), 'exec')\n"
    "    print(path)\n"
)


@pytest.mark.parametrize("answers", SUPPORTED, ids=combination_id)
def test_compiles_on_the_lowest_python_it_declares(rendered, answers):
    project = rendered(answers)
    version = lowest_python(project)
    interpreter = load_tool("test_pythons").find_interpreter(version)
    if interpreter is None:
        pytest.skip(f"no Python {version} interpreter on this machine")
    result = subprocess.run(
        [interpreter, "-c", COMPILE_ALL],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "train.py" in result.stdout.split()


@pytest.mark.parametrize("answers", UNSUPPORTED, ids=combination_id)
def test_unsupported_combination_writes_nothing(tmp_path, answers):
    with pytest.raises(UsageError, match=r"^unsupported combination .+: .+"):
        make_spec("p", output_dir=tmp_path, answers=answers)
    assert list(tmp_path.iterdir()) == []


def cookiecutter(output_dir, *answers):
    command = [sys.executable, "-m", "cookiecutter", str(builtin_template_dir())]
    command += ["--no-input", "--output-dir", str(output_dir), *answers]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def files_of(project):
    """A project's files, without the caches its checks leave (.ruff_cache)."""
    return {
        path.relative_to(project).as_posix(): path.read_text()
        for path in sorted(project.rglob("*"))
        if path.is_file() and not any(map(is_litter, path.relative_to(project).parts))
    }


@pytest.mark.parametrize("answers", SUPPORTED, ids=combination_id)
def test_plain_cookiecutter_output_needs_no_formatting(rendered, answers, tmp_path):
    """The template itself is black-clean: what ddpgen's black pass would
    change, plain cookiecutter users would get unformatted."""
    project = rendered(answers)
    context = make_spec(project.name, answers=answers).context()
    plain = run_cookiecutter(builtin_template_dir(), context, tmp_path)
    expected = files_of(project)
    del expected[".ddpgen.json"], expected[".ddpgen-base.json"]
    assert files_of(plain) == expected


def test_plain_cookiecutter_renders_the_same_project(tmp_path):
    plain = cookiecutter(tmp_path / "plain", "project_name=demo", "mode=mp")
    assert plain.returncode == 0, plain.stderr
    ours = render_project(
        make_spec("demo", output_dir=tmp_path / "ours", answers={"mode": "mp"})
    )
    expected = files_of(ours.destination)
    del expected[".ddpgen.json"], expected[".ddpgen-base.json"]
    assert files_of(tmp_path / "plain" / "demo") == expected


def test_plain_cookiecutter_rejects_an_unsupported_combination(tmp_path):
    result = cookiecutter(tmp_path, "model=resnet18")
    assert result.returncode != 0
    assert (
        "ERROR: unsupported combination data=synthetic with model=resnet18: synthetic "
        "data are feature vectors; image models need data fakedata, cifar10 or "
        "imagefolder"
    ) in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_built_in_template_is_found_in_the_checkout():
    assert builtin_template_dir() == Path(__file__).parents[1] / "templates" / "ddp"


def test_the_longest_name_still_lints_clean(tmp_path):
    name = "a" * MAX_NAME_LENGTH
    answers = {
        "mode": "mp",
        "model_parallel": True,
        "data": "imagefolder",
        "model": "resnet18",
    }
    project = render_project(
        make_spec(name, output_dir=tmp_path, answers=answers)
    ).destination
    assert [
        problem for check in STATIC_CHECKS.values() for problem in check(project)
    ] == []


@pytest.mark.parametrize("answers", SUPPORTED, ids=combination_id)
def test_ruff_finds_every_render_formatted(rendered, answers):
    """So `ddpgen new` never needs black's slower pass on the built-in template."""
    project = rendered(answers)
    paths = sorted(project.rglob("*.py"))
    assert unformatted(project, paths, *black_settings(project)) == []
