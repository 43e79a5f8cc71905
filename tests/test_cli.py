"""The command line: exit codes, exact messages, and what lands on disk."""

import json
import subprocess
import sys
import tempfile

import pytest
from click.testing import CliRunner
from helpers import invoke, tree

from ddpgen import __version__
from ddpgen.cli import main


def test_version_and_help():
    assert invoke("--version").output == f"ddpgen, version {__version__}\n"
    help_text = invoke("new", "--help").output
    for flag in [
        "--mode [launch|mp]",
        "--model-parallel / --no-model-parallel",
        "--data",
        "--model",
        "--output-dir",
        "--force",
        "--dry-run",
        "--template",
        "--set",
    ]:
        assert flag in help_text


def test_python_dash_m_runs_the_cli():
    result = subprocess.run(
        [sys.executable, "-m", "ddpgen", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (
        result.returncode == 0 and result.stdout == f"ddpgen, version {__version__}\n"
    )


def test_new_writes_the_project(tmp_path):
    result = invoke(
        "new", "my-proj", "--mode", "mp", "--model-parallel", "--output-dir", tmp_path
    )
    assert result.exit_code == 0
    project = tmp_path / "my-proj"
    assert result.output.startswith(f"wrote {len(tree(project))} files to {project}\n")
    assert (project / "my_proj" / "model_parallel.py").is_file()
    assert (project / "my_proj" / "spawn.py").is_file()
    answers = json.loads((project / ".ddpgen.json").read_text())["answers"]
    assert answers["mode"] == "mp" and answers["model_parallel"] is True
    assert answers["package_name"] == "my_proj"


def test_name_may_be_a_path(tmp_path):
    assert (
        invoke("new", "nested/dir/cool-thing", "--output-dir", tmp_path).exit_code == 0
    )
    assert (tmp_path / "nested/dir/cool-thing/cool_thing/trainer.py").is_file()


def test_dry_run_lists_files_and_writes_nothing(tmp_path):
    result = invoke("new", "p", "--output-dir", tmp_path, "--dry-run")
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert lines[0] == f"would write {len(lines) - 1} files to {tmp_path / 'p'}:"
    assert "  p/trainer.py" in lines and "  train.py" in lines
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("1proj", "it starts with a digit; a Python package name starts with a letter"),
        ("class", "'class' is a Python keyword"),
        ("my proj", "use letters, digits, '-' and '_' only, starting with a letter"),
        ("a.b", "use letters, digits, '-' and '_' only, starting with a letter"),
        ("_private", "use letters, digits, '-' and '_' only, starting with a letter"),
        ("torch", "package 'torch' would hide the module of the same name"),
        ("json", "package 'json' would hide the module of the same name"),
        ("", "it is empty"),
        (".", "it does not end in a name; give the new project's name, as in"),
        ("runs/..", "it does not end in a name; give the new project's name, as in"),
        ("x" * 41, "it is longer than 40 characters"),
    ],
    ids=[
        "digit",
        "keyword",
        "space",
        "dot",
        "underscore",
        "torch",
        "stdlib",
        "empty",
        "current-folder",
        "parent-folder",
        "long",
    ],
)
def test_bad_names_are_refused(tmp_path, name, reason):
    result = invoke("new", name, "--output-dir", tmp_path)
    assert result.exit_code == 2
    assert result.output.startswith(f"Error: invalid project name {name!r}: {reason}")
    assert result.output.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_unsupported_combination_is_refused(tmp_path):
    result = invoke("new", "p", "--model", "cnn", "--output-dir", tmp_path)
    assert result.exit_code == 2
    assert result.output == (
        "Error: unsupported combination data=synthetic with model=cnn: synthetic "
        "data are feature vectors; image models need data fakedata, cifar10 or "
        "imagefolder\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_unknown_choice_is_a_usage_error(tmp_path):
    result = invoke("new", "p", "--mode", "thread", "--output-dir", tmp_path)
    assert result.exit_code == 2
    assert (
        "Invalid value for '--mode': 'thread' is not one of 'launch', 'mp'."
        in result.output
    )


def test_existing_destination_is_left_untouched(tmp_path):
    project = tmp_path / "p"
    project.mkdir()
    (project / "train.py").write_text("mine\n")
    before = tree(project)
    result = invoke("new", "p", "--output-dir", tmp_path)
    assert result.exit_code == 2
    assert result.output == (
        f"Error: destination {project} is not empty; pass --force to write the "
        "template's files into it (other files are kept)\n"
    )
    assert tree(project) == before


def test_force_overwrites_template_files_and_keeps_the_users(tmp_path):
    project = tmp_path / "p"
    project.mkdir()
    (project / "train.py").write_text("old\n")
    (project / "notes.txt").write_text("keep me\n")
    assert invoke("new", "p", "--output-dir", tmp_path, "--force").exit_code == 0
    assert (project / "notes.txt").read_text() == "keep me\n"
    assert "def main" in (project / "train.py").read_text()


def test_destination_that_is_a_file(tmp_path):
    (tmp_path / "p").write_text("x")
    result = invoke("new", "p", "--output-dir", tmp_path)
    assert result.exit_code == 2
    assert (
        result.output
        == f"Error: destination {tmp_path / 'p'} exists and is not a folder\n"
    )


def test_nothing_is_written_to_the_home_folder(tmp_path, isolated_home):
    assert invoke("new", "p", "--output-dir", tmp_path / "out").exit_code == 0
    assert list(isolated_home.iterdir()) == []


def test_options_lists_every_variable():
    result = invoke("options")
    assert result.exit_code == 0
    assert "--mode {launch|mp}  default: launch" in result.output
    assert "--model-parallel {bool}  default: False" in result.output
    assert (
        "--data {synthetic|fakedata|cifar10|imagefolder|text}  default: synthetic"
        in result.output
    )
    rows = json.loads(invoke("options", "--json").output)
    assert [row["name"] for row in rows] == [
        "mode",
        "model_parallel",
        "data",
        "model",
        "tracker",
    ]
    assert rows[0] == {
        "name": "mode",
        "flag": "--mode",
        "kind": "choice",
        "choices": ["launch", "mp"],
        "default": "launch",
        "help": rows[0]["help"],
    }
    assert all(row["help"] for row in rows)


def test_generating_never_imports_torch(tmp_path):
    code = (
        "import sys\n"
        "from ddpgen.cli import main\n"
        f"try:\n    main(['new', 'p', '--output-dir', {str(tmp_path)!r}])\n"
        "except SystemExit as e:\n    assert e.code == 0, e.code\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "p" / "train.py").is_file()


def test_rendering_leaves_nothing_in_the_temp_folder(tmp_path, monkeypatch):
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    result = CliRunner().invoke(main, ["new", "p", "--output-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert list(temp.iterdir()) == []


@pytest.mark.parametrize("command", ["new", "check", "options", "update"])
def test_a_folder_that_is_not_a_template_is_a_usage_error(tmp_path, command):
    (tmp_path / "not-a-template").mkdir()
    args = {
        "new": ["new", "p", "--output-dir", tmp_path / "out"],
        "check": ["check", tmp_path / "not-a-template"],
        "options": ["options"],
        "update": ["update", tmp_path / "nowhere"],
    }[command]
    if command in ("new", "options"):
        args += ["--template", tmp_path / "not-a-template"]
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert result.output.startswith("Error: ") and result.output.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_a_full_disk_is_one_short_line(tmp_path, monkeypatch):
    """A copy across file systems that runs out of space (shutil.Error holds
    a list of every failed file)."""
    import os
    import shutil

    real_replace, real_copytree = os.replace, shutil.copytree

    def cross_device(source, target):
        if str(target).startswith(str(tmp_path)):
            raise OSError(18, "Invalid cross-device link")
        return real_replace(source, target)

    def full(source, target, *args, **kwargs):
        if not str(target).startswith(str(tmp_path)):
            return real_copytree(source, target, *args, **kwargs)
        failures = [(f"{source}/f", f"{target}/f", "[Errno 28] No space left")]
        raise shutil.Error(failures * 300)

    monkeypatch.setattr(os, "replace", cross_device)
    monkeypatch.setattr(shutil, "copytree", full)
    result = invoke("new", "p", "--output-dir", tmp_path)
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: cannot write {tmp_path / 'p'}: ")
    assert result.output.endswith("[Errno 28] No space left (and 299 more)\n")
    assert len(result.output) < 300
