"""Installed the way users install it: the README's `pip install .`, the wheel and
the sdist, and pipx, each into a fresh venv (never editable), then new, check
and update run from there."""

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from helpers import png_bytes, write_example_template

from ddpgen.files import template_files

ROOT = Path(__file__).parents[1]
TEMPLATE = ROOT / "templates" / "ddp"
INSTALL_TIMEOUT = 600


def run(command, cwd, env=None, timeout=300):
    result = subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return result


def succeeded(result):
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    return result


@pytest.fixture(scope="module")
def dists(tmp_path_factory):
    """The wheel and the sdist, built once from this checkout."""
    outdir = tmp_path_factory.mktemp("dist")
    succeeded(
        run(
            [sys.executable, "-m", "build", "--no-isolation", "--outdir", outdir],
            cwd=ROOT,
        )
    )
    (wheel,) = outdir.glob("ddpgen-*.whl")
    (sdist,) = outdir.glob("ddpgen-*.tar.gz")
    return {"wheel": wheel, "sdist": sdist}


def fresh_venv(folder):
    succeeded(run([sys.executable, "-m", "venv", folder], cwd=folder.parent))
    return folder / "bin"


def template_with_image(root):
    """The docs' small template, shipping a PNG inside the project folder."""
    template = write_example_template(root)
    (template / "{{cookiecutter.project_slug}}" / "logo.png").write_bytes(png_bytes())
    return template


def exercise(bin_dir, work):
    """new (built-in and custom templates), check and update with the installed
    ddpgen, as a user runs them; returns the built-in project."""
    ddpgen = bin_dir / "ddpgen"
    succeeded(run([ddpgen, "new", "p", "--mode", "mp"], cwd=work))
    project = work / "p"
    assert (project / "p" / "spawn.py").is_file()
    litter = [path for path in project.rglob("*") if path.suffix == ".pyc"]
    assert litter == [] and not list(project.rglob("__pycache__"))

    template = template_with_image(work / "small-template")
    succeeded(run([ddpgen, "check", template], cwd=work))
    succeeded(run([ddpgen, "new", "q", "--template", template], cwd=work))
    assert (work / "q" / "logo.png").read_bytes() == png_bytes()

    user_edit = project / "README.md"
    user_edit.write_text(user_edit.read_text() + "\nmy notes\n")
    updated = succeeded(run([ddpgen, "update", "--set", "mode=launch"], cwd=project))
    assert "delete" in updated.stdout and "p/spawn.py" in updated.stdout
    assert not (project / "p" / "spawn.py").exists()
    assert user_edit.read_text().endswith("\nmy notes\n")
    return project


def installed_template(bin_dir):
    code = "import ddpgen.spec as s; print(s.builtin_template_dir())"
    found = succeeded(run([bin_dir / "python", "-c", code], cwd=bin_dir))
    return Path(found.stdout.strip())


def test_readme_install_command_gives_a_working_ddpgen(tmp_path):
    assert "`pip install .`" in (ROOT / "README.md").read_text()
    bin_dir = fresh_venv(tmp_path / "venv")
    succeeded(run([bin_dir / "pip", "install", "."], cwd=ROOT, timeout=INSTALL_TIMEOUT))
    template = installed_template(bin_dir)
    assert "site-packages" in template.parts
    # pip byte-compiled the template's hooks: the litter renders must leave out.
    assert list(template.rglob("*.pyc"))
    exercise(bin_dir, tmp_path)


@pytest.mark.parametrize("kind", ["wheel", "sdist"])
def test_built_distribution_installs_and_works(dists, kind, tmp_path):
    bin_dir = fresh_venv(tmp_path / "venv")
    install = [bin_dir / "pip", "install", dists[kind]]
    succeeded(run(install, cwd=tmp_path, timeout=INSTALL_TIMEOUT))
    exercise(bin_dir, tmp_path)


def test_pipx_install_as_documented(tmp_path):
    pipx = shutil.which("pipx", path=str(Path(sys.executable).parent))
    if pipx is None:
        pytest.skip("pipx is not installed in this environment (the test extra has it)")
    assert "pipx install" in (ROOT / "README.md").read_text()
    env = os.environ | {
        "PIPX_HOME": str(tmp_path / "pipx"),
        "PIPX_BIN_DIR": str(tmp_path / "bin"),
    }
    succeeded(run([pipx, "install", ROOT], cwd=tmp_path, env=env, timeout=600))
    ddpgen = tmp_path / "bin" / "ddpgen"
    succeeded(run([ddpgen, "new", "p", "--mode", "mp"], cwd=tmp_path))
    assert not list((tmp_path / "p").rglob("__pycache__"))


def test_wheel_contains_the_template_and_no_litter(dists):
    names = zipfile.ZipFile(dists["wheel"]).namelist()
    prefix = "ddpgen/templates/ddp/"
    expected = [path.as_posix() for path in template_files(TEMPLATE)]
    shipped = [name[len(prefix) :] for name in names if name.startswith(prefix)]
    assert sorted(shipped) == sorted(expected)


def test_sdist_holds_what_the_wheel_is_built_from(dists):
    names = tarfile.open(dists["sdist"]).getnames()
    assert any(name.endswith("templates/ddp/cookiecutter.json") for name in names)
    assert not any("__pycache__" in name for name in names)


def test_runtime_dependencies_leave_torch_out(dists):
    archive = zipfile.ZipFile(dists["wheel"])
    metadata = next(name for name in archive.namelist() if name.endswith("METADATA"))
    requires = [
        line.removeprefix("Requires-Dist: ").split(">")[0].strip()
        for line in archive.read(metadata).decode().splitlines()
        if line.startswith("Requires-Dist:") and "extra ==" not in line
    ]
    assert sorted(requires) == [
        "black",
        "click",
        "cookiecutter",
        "jinja2",
        "ruff",
        "tomli",
    ]
