"""Template authors: custom templates, --set, broken templates, check, update."""

import json
import shutil
from pathlib import Path

import pytest
from helpers import SLUG, invoke, write_template

from ddpgen.spec import builtin_template_dir


@pytest.fixture
def fork(tmp_path):
    """A local fork of the built-in template."""
    return Path(shutil.copytree(builtin_template_dir(), tmp_path / "fork"))


def test_custom_template_with_typed_settings(fork, tmp_path):
    config = fork / SLUG / "{{cookiecutter.package_name}}" / "config.py"
    config.write_text(config.read_text().replace("option(3,", "option(7,"))
    result = invoke(
        "new",
        "p",
        "--output-dir",
        tmp_path / "out",
        "--template",
        fork,
        "--set",
        "model_parallel=yes",
        "--set",
        "mode=mp",
    )
    assert result.exit_code == 0, result.output
    project = tmp_path / "out" / "p"
    assert "epochs: int = option(7," in (project / "p" / "config.py").read_text()
    assert (project / "p" / "spawn.py").is_file()
    assert (project / "p" / "model_parallel.py").is_file()
    record = json.loads((project / ".ddpgen.json").read_text())
    assert record["template"] == str(fork)
    assert (
        record["answers"]["model_parallel"] is True
        and record["answers"]["mode"] == "mp"
    )
    assert record["answers"]["data"] == "synthetic"  # every variable, defaults too


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        (
            "model_parallel=maybe",
            "Error: model_parallel=maybe: expected true or false\n",
        ),
        ("mode=thread", "Error: mode=thread: choose one of launch, mp\n"),
        (
            "colour=red",
            "Error: unknown template variable 'colour' (known: mode, "
            "model_parallel, data, model, tracker)\n",
        ),
        ("mode", "Error: --set mode: expected KEY=VALUE\n"),
    ],
    ids=["bool", "choice", "unknown", "no-equals"],
)
def test_bad_settings_are_usage_errors(tmp_path, setting, message):
    result = invoke("new", "p", "--output-dir", tmp_path, "--set", setting)
    assert (result.exit_code, result.output) == (2, message)
    assert list(tmp_path.iterdir()) == []


def test_fingerprint_follows_the_template(fork, tmp_path):
    def fingerprint(name):
        invoke("new", name, "--output-dir", tmp_path, "--template", fork)
        return json.loads((tmp_path / name / ".ddpgen.json").read_text())[
            "template_fingerprint"
        ]

    before = fingerprint("a")
    (fork / SLUG / "NOTES.md").write_text("new\n")
    assert fingerprint("b") != before


BROKEN = {
    "json": ({}, "{not json", "cookiecutter.json: invalid JSON: "),
    "undefined": (
        {f"{SLUG}/a.py": "X = '{{ cookiecutter.nope }}'\n"},
        None,
        "undefined variable: 'collections.OrderedDict object' has no attribute 'nope'",
    ),
    "hook": (
        {"hooks/pre_gen_project.py": "import sys\nsys.exit(3)\n", f"{SLUG}/a.py": ""},
        None,
        "hooks/pre_gen_project.py: Hook script failed (exit status: 3)",
    ),
    "syntax": ({f"{SLUG}/a.py": "{% if %}\n"}, None, "a.py:1: Jinja syntax error: "),
    "python": ({f"{SLUG}/a.py": "def f(:\n"}, None, "a.py: renders invalid Python: "),
}


@pytest.mark.parametrize("kind", BROKEN)
def test_broken_template_gives_one_line_and_writes_nothing(tmp_path, kind):
    files, raw_json, expected = BROKEN[kind]
    template = write_template(tmp_path / "t", files)
    if raw_json is not None:
        (template / "cookiecutter.json").write_text(raw_json)
    out = tmp_path / "out"
    result = invoke("new", "p", "--output-dir", out, "--template", template)
    assert result.exit_code == 2
    assert result.output.startswith("Error: ") and result.output.count("\n") == 1
    assert expected in result.output
    assert not out.exists()


def test_missing_template_folder(tmp_path):
    result = invoke(
        "new", "p", "--output-dir", tmp_path, "--template", tmp_path / "none"
    )
    assert (result.exit_code, result.output) == (
        2,
        f"Error: template {tmp_path / 'none'}: no such folder\n",
    )


# ddpgen check

FLAVOURED = {
    f"{SLUG}/{{{{cookiecutter.package_name}}}}/__init__.py": (
        "{% if cookiecutter.flavor == 'fancy' and cookiecutter.extra %}"
        "import os\n{% endif %}"
        'FLAVOR = "{{ cookiecutter.flavor }}"\n'
    ),
    f"{SLUG}/tests/test_flavor.py": (
        "from {{ cookiecutter.package_name }} import FLAVOR\n\n\n"
        "def test_flavor_is_plain():\n"
        '    assert FLAVOR == "plain"\n'
    ),
    f"{SLUG}/pyproject.toml": '[tool.pytest.ini_options]\npythonpath = ["."]\n',
}
FLAVOURED_CONTEXT = {
    "project_name": "x",
    "project_slug": "x",
    "package_name": "x",
    "flavor": ["plain", "fancy"],
    "extra": False,
}


def test_check_names_the_one_broken_combination(tmp_path):
    template = write_template(tmp_path / "t", FLAVOURED, FLAVOURED_CONTEXT)
    result = invoke("check", template)
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert lines[0] == "checking all 4 supported combinations"
    assert lines[1].split() == [
        "combination",
        "render",
        "black",
        "ruff",
        "ddp-lint",
        "compiles",
        "no-jinja",
    ]
    rows = {line[:25].strip(): line[25:].split() for line in lines[2:6]}
    assert rows["flavor=fancy extra=True"] == ["ok", "ok", "FAIL", "ok", "ok", "ok"]
    assert rows["flavor=plain extra=False"] == ["ok"] * 6
    assert (
        "flavor=fancy extra=True: ruff: " in result.output and "F401" in result.output
    )
    assert "ruff: ruff:" not in result.output
    assert lines[-1] == "Error: 1 of 4 combinations failed"


def test_check_run_runs_each_projects_tests(tmp_path):
    template = write_template(tmp_path / "t", FLAVOURED, FLAVOURED_CONTEXT)
    result = invoke(
        "check", template, "--run", "--max-combinations", "2", "--seed", "3"
    )
    assert (
        result.output.splitlines()[0]
        == "checking a sample of 2 of 4 combinations (seed 3)"
    )
    rows = [line.split() for line in result.output.splitlines()[2:4]]
    for row in rows:
        flavor, tests = row[0], row[-1]
        assert tests == ("ok" if flavor == "flavor=plain" else "FAIL")
    assert result.exit_code == (
        1 if any(row[0] == "flavor=fancy" for row in rows) else 0
    )


def test_check_on_the_built_in_template_passes():
    result = invoke(
        "check", builtin_template_dir(), "--max-combinations", "3", "--seed", "0"
    )
    assert result.exit_code == 0, result.output
    assert result.output.startswith(
        "checking a sample of 3 of 128 combinations (seed 0)\n"
    )


# ddpgen update


def replace_in(path, old, new):
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


@pytest.fixture
def edited(fork, tmp_path):
    """A project from the fork, then edited by its user."""
    assert (
        invoke("new", "p", "--output-dir", tmp_path, "--template", fork).exit_code == 0
    )
    project = tmp_path / "p"
    replace_in(
        project / "p" / "trainer.py",
        "self.epoch = 0  # completed epochs",
        "self.epoch = 0  # completed epochs (user's note)",
    )
    replace_in(project / "p" / "config.py", "option(3, ", "option(30, ")
    (project / "scripts" / "pytorchjob.yaml").unlink()
    (project / "NOTES.md").write_text("mine\n")
    return project


def change_fork(fork):
    package = fork / SLUG / "{{cookiecutter.package_name}}"
    replace_in(
        package / "trainer.py",
        "bf16 has fp32's range.",
        "bf16 has fp32's range (template fix).",
    )
    replace_in(package / "config.py", "option(3, ", "option(5, ")
    replace_in(
        fork / SLUG / "scripts" / "pytorchjob.yaml", "maxRestarts: 3", "maxRestarts: 5"
    )
    (fork / SLUG / "CHANGELOG.md").write_text("template changelog\n")


def test_update_merges_both_sides_and_loses_nothing(fork, edited):
    change_fork(fork)  # edited in place: the old render must come from the project
    notes_before = (edited / "NOTES.md").read_bytes()
    result = invoke("update", edited)
    assert result.exit_code == 1
    assert result.output.splitlines()[-1] == (
        "Error: conflicts (resolve the <<<<<<< markers) in: p/config.py"
    )
    assert "changed: add      CHANGELOG.md" in result.output
    assert "changed: merge    p/trainer.py" in result.output
    trainer = (edited / "p" / "trainer.py").read_text()
    assert "(user's note)" in trainer and "(template fix)" in trainer
    config = (edited / "p" / "config.py").read_text()
    assert (
        "<<<<<<< yours" in config and "option(30, " in config and "option(5, " in config
    )
    assert not (edited / "scripts" / "pytorchjob.yaml").exists()  # stays deleted
    assert (edited / "NOTES.md").read_bytes() == notes_before
    assert (edited / "CHANGELOG.md").read_text() == "template changelog\n"
    # The new render is the next base: a second update has nothing to merge.
    assert (
        invoke("update", edited).output
        == "up to date: the template has no changes to merge\n"
    )


def test_update_dry_run_writes_nothing(fork, edited):
    change_fork(fork)
    before = {p: p.read_bytes() for p in edited.rglob("*") if p.is_file()}
    result = invoke("update", edited, "--dry-run")
    assert "would change: conflict config.py" not in result.output
    assert "would change: conflict p/config.py" in result.output
    assert "would change: merge    p/trainer.py" in result.output
    assert {p: p.read_bytes() for p in edited.rglob("*") if p.is_file()} == before


def test_update_with_set_changes_an_answer(tmp_path):
    assert invoke("new", "p", "--output-dir", tmp_path).exit_code == 0
    result = invoke("update", tmp_path / "p", "--set", "mode=mp")
    assert result.exit_code == 0, result.output
    assert "changed: add      p/spawn.py" in result.output
    assert "changed: update   train.py" in result.output
    assert (
        json.loads((tmp_path / "p" / ".ddpgen.json").read_text())["answers"]["mode"]
        == "mp"
    )


def test_update_outside_a_project_is_a_usage_error(tmp_path):
    result = invoke("update", tmp_path)
    assert (result.exit_code, result.output) == (
        2,
        f"Error: {tmp_path} is not a ddpgen project (.ddpgen.json is missing)\n",
    )


@pytest.mark.parametrize("pyproject", ["", "[tool.black]\nline-length = 40\n"])
def test_a_template_rendering_unformatted_code_is_formatted_by_black(
    tmp_path, pyproject
):
    """Only files ruff finds unformatted go through black, and black (with the
    project's own [tool.black]) has the last word on them."""
    import black

    source = "x=1\ndef f( a,b ):\n  return {'first':a,'second':b,'third':[a,b]}\n"
    files = {f"{SLUG}/a.py": source, f"{SLUG}/b.py": "y = 2\n"}
    if pyproject:
        files[f"{SLUG}/pyproject.toml"] = pyproject
    template = write_template(tmp_path / "t", files)
    result = invoke("new", "p", "--output-dir", tmp_path, "--template", template)
    assert result.exit_code == 0, result.output
    mode = black.Mode(line_length=40 if pyproject else 88)
    assert (tmp_path / "p" / "a.py").read_text() == black.format_str(source, mode=mode)
    assert (tmp_path / "p" / "b.py").read_text() == "y = 2\n"


def test_update_deletes_a_dropped_file_unless_the_user_edited_it(tmp_path):
    """--set tracker=none drops tracking.py (edited: it stays, and the output
    says so); --set mode=launch drops spawn.py (untouched: deleted)."""
    assert invoke("new", "p", "--output-dir", tmp_path, "--mode", "mp").exit_code == 0
    tracking = tmp_path / "p" / "p" / "tracking.py"
    tracking.write_text(tracking.read_text() + "# my change\n")
    result = invoke("update", tmp_path / "p", "--set", "tracker=none")
    assert result.exit_code == 0, result.output
    assert (
        "changed: left     p/tracking.py (the template dropped it; you edited it, "
        "so it stays)"
    ) in result.output
    assert tracking.read_text().endswith("# my change\n")
    result = invoke("update", tmp_path / "p", "--set", "mode=launch")
    assert "changed: delete   p/spawn.py" in result.output
    assert not (tmp_path / "p" / "p" / "spawn.py").exists()
    assert "tracking.py" not in result.output  # said once, then it is the user's


def test_new_force_names_the_earlier_renders_files_it_keeps(tmp_path):
    assert invoke("new", "p", "--output-dir", tmp_path, "--mode", "mp").exit_code == 0
    (tmp_path / "p" / "notes.txt").write_text("mine\n")
    result = invoke("new", "p", "--output-dir", tmp_path, "--force")
    assert result.exit_code == 0, result.output
    kept = [line for line in result.output.splitlines() if line.startswith("kept")]
    assert kept == ["kept: p/spawn.py (an earlier render wrote it, this one does not)"]
    assert (tmp_path / "p" / "p" / "spawn.py").exists()
