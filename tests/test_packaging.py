"""The wheel carries the template; the editable install finds it in the checkout."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
TEMPLATE = ROOT / "templates" / "ddp"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    outdir = tmp_path_factory.mktemp("wheel")
    command = [sys.executable, "-m", "build", "--wheel", "--no-isolation"]
    result = subprocess.run(
        [*command, "--outdir", str(outdir)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (built,) = outdir.glob("ddpgen-*.whl")
    return built


def test_wheel_contains_the_template(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    prefix = "ddpgen/templates/ddp/"
    expected = [
        path.relative_to(TEMPLATE).as_posix()
        for path in TEMPLATE.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    ]
    shipped = [name[len(prefix) :] for name in names if name.startswith(prefix)]
    assert sorted(shipped) == sorted(expected)


def test_runtime_dependencies_leave_torch_out(wheel):
    archive = zipfile.ZipFile(wheel)
    metadata = next(name for name in archive.namelist() if name.endswith("METADATA"))
    requires = [
        line.removeprefix("Requires-Dist: ").split(">")[0].strip()
        for line in archive.read(metadata).decode().splitlines()
        if line.startswith("Requires-Dist:") and "extra ==" not in line
    ]
    assert sorted(requires) == ["black", "click", "cookiecutter", "jinja2"]


def test_installed_wheel_renders_from_its_own_template(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)  # installing a wheel is unzipping it
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "import ddpgen.spec as s; print(s.builtin_template_dir())"
    )
    found = subprocess.run(
        [sys.executable, "-c", code, str(site)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert found.stdout.strip() == str(site / "ddpgen" / "templates" / "ddp")
