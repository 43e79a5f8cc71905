"""What a template holds reaches a project as intended: no litter, binary files
byte for byte (and through update), file modes; and every bad environment or
destination is one line with nothing written."""

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from helpers import PACKAGE, SLUG, invoke, png_bytes, tree, write_template
from helpers import TEMPLATE_NAMES as NAMES

from ddpgen.spec import builtin_template_dir


def one_line_error(result, code):
    assert result.exit_code == code, result.output
    assert result.output.startswith("Error: ") and result.output.count("\n") == 1
    return result.output


@pytest.fixture
def fork(tmp_path):
    """A fork of the built-in template, with an image and an editor's litter."""
    fork = Path(shutil.copytree(builtin_template_dir(), tmp_path / "fork"))
    (fork / SLUG / "logo.png").write_bytes(png_bytes())
    for litter in [
        f"{SLUG}/{PACKAGE}/__pycache__/model.cpython-311.pyc",
        f"{SLUG}/.DS_Store",
        f"{SLUG}/.pytest_cache/v/cache/lastfailed",
        f"{SLUG}/train.py~",
        "hooks/__pycache__/pre_gen_project.cpython-311.pyc",
    ]:
        (fork / litter).parent.mkdir(parents=True, exist_ok=True)
        (fork / litter).write_bytes(b"\xa7\r\r\n litter")
    return fork


def new_from(fork, out, *flags):
    result = invoke("new", "p", "--output-dir", out, "--template", fork, *flags)
    assert result.exit_code == 0, result.output
    return out / "p"


LITTER_NAMES = {"__pycache__", ".DS_Store", ".pytest_cache", "train.py~"}


def litter_in(project):
    return [
        p for p in project.rglob("*") if p.name in LITTER_NAMES or p.suffix == ".pyc"
    ]


def test_litter_never_reaches_a_project_and_images_are_copied(fork, tmp_path):
    project = new_from(fork, tmp_path)
    assert litter_in(project) == []
    assert (project / "logo.png").read_bytes() == png_bytes()
    base = json.loads((project / ".ddpgen-base.json").read_text())
    assert set(base["logo.png"]) == {"sha256"}
    assert not any("__pycache__" in path for path in base)


def test_litter_does_not_change_the_fingerprint(fork, tmp_path):
    def fingerprint(out):
        record = new_from(fork, out) / ".ddpgen.json"
        return json.loads(record.read_text())["template_fingerprint"]

    before = fingerprint(tmp_path / "a")
    (fork / SLUG / ".DS_Store").write_bytes(b"other litter")
    assert fingerprint(tmp_path / "b") == before


def test_check_and_update_leave_litter_out(fork, tmp_path):
    result = invoke("check", fork, "--max-combinations", "1")
    assert result.exit_code == 0, result.output
    project = new_from(fork, tmp_path)
    assert invoke("update", project, "--set", "mode=mp").exit_code == 0
    assert litter_in(project) == []


def test_builtin_template_caches_never_reach_a_project(tmp_path):
    hooks_cache = builtin_template_dir() / "hooks" / "__pycache__"
    existed = hooks_cache.exists()
    hooks_cache.mkdir(exist_ok=True)
    try:
        (hooks_cache / "ddpgen-test.cpython-311.pyc").write_bytes(b"\xa7\r\r\n")
        assert invoke("new", "p", "--output-dir", tmp_path).exit_code == 0
    finally:
        (hooks_cache / "ddpgen-test.cpython-311.pyc").unlink()
        if not existed:
            hooks_cache.rmdir()
    assert litter_in(tmp_path / "p") == []


# Binary files through `ddpgen update`

OTHER_PNG = b"\x89PNG\r\n\x1a\n another image"


def test_update_replaces_an_image_the_user_left_alone(fork, tmp_path):
    project = new_from(fork, tmp_path)
    (fork / SLUG / "logo.png").write_bytes(OTHER_PNG)
    result = invoke("update", project)
    assert result.exit_code == 0, result.output
    assert "changed: update   logo.png" in result.output
    assert (project / "logo.png").read_bytes() == OTHER_PNG


def test_update_keeps_an_image_both_sides_changed(fork, tmp_path):
    project = new_from(fork, tmp_path)
    (fork / SLUG / "logo.png").write_bytes(OTHER_PNG)
    (project / "logo.png").write_bytes(b"\x89 the user's own image")
    result = invoke("update", project)
    assert result.exit_code == 0, result.output
    assert (
        "changed: kept     logo.png (binary, changed by you and the template: "
        "yours is kept)" in result.output
    )
    assert (project / "logo.png").read_bytes() == b"\x89 the user's own image"


def test_update_leaves_an_image_only_the_user_changed(fork, tmp_path):
    project = new_from(fork, tmp_path)
    (project / "logo.png").write_bytes(b"\x89 mine")
    result = invoke("update", project)
    assert result.output == "up to date: the template has no changes to merge\n"
    assert (project / "logo.png").read_bytes() == b"\x89 mine"


def test_update_gives_files_the_modes_of_a_fresh_render(fork, tmp_path):
    project = new_from(fork, tmp_path)
    script = fork / SLUG / "scripts" / "multinode.sh"
    script.write_text(script.read_text() + "# template change\n")
    assert invoke("update", project).exit_code == 0
    assert os.stat(project / "scripts" / "multinode.sh").st_mode & stat.S_IXUSR
    fresh = new_from(fork, tmp_path / "fresh")
    ours, theirs = tree(project), tree(fresh)
    assert ours == theirs
    for relative in theirs:
        modes = [os.stat(root / relative).st_mode for root in (project, fresh)]
        assert modes[0] == modes[1], relative


def test_update_dry_run_conflict_says_nothing_was_written(fork, tmp_path):
    project = new_from(fork, tmp_path)
    config = project / "p" / "config.py"
    config.write_text(config.read_text().replace("option(3, ", "option(30, "))
    template_config = fork / SLUG / PACKAGE / "config.py"
    template_config.write_text(
        template_config.read_text().replace("option(3, ", "option(5, ")
    )
    before = tree(project)
    result = invoke("update", project, "--dry-run")
    assert result.exit_code == 1
    assert result.output.splitlines()[-1] == (
        "Error: would conflict in: p/config.py (nothing was written)"
    )
    assert tree(project) == before


@pytest.mark.parametrize("record", ["{}", "[]", '{"template": 1, "answers": {}}'])
def test_update_with_a_malformed_record_is_one_line(tmp_path, record):
    assert invoke("new", "p", "--output-dir", tmp_path).exit_code == 0
    (tmp_path / "p" / ".ddpgen.json").write_text(record)
    output = one_line_error(invoke("update", tmp_path / "p"), 2)
    assert "not a ddpgen answers record" in output


# Bad environments


def test_template_without_cookiecutter_json(tmp_path):
    (tmp_path / "t" / SLUG).mkdir(parents=True)
    output = one_line_error(
        invoke(
            "new", "p", "--output-dir", tmp_path / "out", "--template", tmp_path / "t"
        ),
        2,
    )
    assert "cookiecutter.json: missing (not a cookiecutter template)" in output
    assert not (tmp_path / "out").exists()


def test_unreadable_template_file(fork, tmp_path):
    broken = fork / SLUG / "README.md"
    broken.unlink()
    broken.symlink_to(tmp_path / "gone")  # a link to nothing: unreadable
    out = tmp_path / "out"
    output = one_line_error(
        invoke("new", "p", "--output-dir", out, "--template", fork), 2
    )
    assert f"{broken}: cannot read template file" in output
    assert not out.exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_template_file_without_read_permission(fork, tmp_path):
    locked = fork / SLUG / "README.md"
    locked.chmod(0)
    out = tmp_path / "out"
    output = one_line_error(
        invoke("new", "p", "--output-dir", out, "--template", fork), 2
    )
    assert "cannot read template file" in output


@pytest.fixture
def read_only_folder(tmp_path):
    """A real read-only file system (a tmpfs mounted ro; needs root)."""
    folder = tmp_path / "ro"
    folder.mkdir()
    mount = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if mount.returncode != 0:
        pytest.skip(f"cannot mount a read-only tmpfs here: {mount.stderr.strip()}")
    yield folder
    subprocess.run(["umount", str(folder)], check=True, timeout=30)


@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]], ids=["write", "dry-run"])
def test_read_only_destination(read_only_folder, dry_run):
    output = one_line_error(
        invoke("new", "p", "--output-dir", read_only_folder, *dry_run), 2
    )
    assert (
        output == f"Error: cannot write to {read_only_folder}: read-only file system\n"
    )


@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]], ids=["write", "dry-run"])
def test_name_below_a_file(tmp_path, dry_run):
    (tmp_path / "afile").write_text("mine\n")
    output = one_line_error(
        invoke("new", "afile/sub", "--output-dir", tmp_path, *dry_run), 2
    )
    assert output == (
        f"Error: cannot create {tmp_path / 'afile' / 'sub'}: "
        f"{tmp_path / 'afile'} is a file\n"
    )
    assert (tmp_path / "afile").read_text() == "mine\n"


@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]], ids=["write", "dry-run"])
def test_force_refuses_a_file_where_a_folder_goes_and_writes_nothing(tmp_path, dry_run):
    project = tmp_path / "full"
    project.mkdir()
    (project / "scripts").write_text("mine\n")
    (project / "README.md").write_text("my readme\n")
    before = tree(project)
    output = one_line_error(
        invoke("new", "full", "--output-dir", tmp_path, "--force", *dry_run), 2
    )
    assert output == (
        f"Error: cannot write into {project}: scripts is a file where the template "
        "writes a folder; nothing was written\n"
    )
    assert tree(project) == before


def test_force_refuses_a_folder_where_a_file_goes(tmp_path):
    (tmp_path / "full" / "train.py").mkdir(parents=True)
    output = one_line_error(
        invoke("new", "full", "--output-dir", tmp_path, "--force"), 2
    )
    assert "train.py is a folder where the template writes a file" in output
    assert sorted(p.name for p in (tmp_path / "full").iterdir()) == ["train.py"]


@pytest.mark.parametrize(
    "name, clash",
    [
        ("tests", "would collide with tests/, which the template writes"),
        ("scripts", "would collide with scripts/, which the template writes"),
        ("train", "would collide with train.py, which the template writes"),
        ("data", "would be ignored by the project's .gitignore (data/)"),
        ("checkpoints", "would be ignored by the project's .gitignore (checkpoints/)"),
    ],
)
def test_names_that_collide_with_the_template(tmp_path, name, clash):
    output = one_line_error(invoke("new", name, "--output-dir", tmp_path), 2)
    assert output == f"Error: invalid project name {name!r}: package {name!r} {clash}\n"
    assert list(tmp_path.iterdir()) == []


# Malformed templates


RULE = {"if": {"a": "1"}, "require": {"b": ["2"]}, "because": "why"}
MALFORMED = {
    "constraint-without-because": (
        {"_constraints": [{"if": {"a": "1"}, "require": {"b": ["2"]}}]},
        "_constraints[0] is malformed: rules are each a {",
    ),
    "constraints-not-a-list": ({"_constraints": RULE}, "_constraints must be a list"),
    "empty-choice": ({"a": []}, "a: a choice needs at least one item"),
    "prompts-not-an-object": (
        {"__prompts__": ["help"]},
        "__prompts__ must be an object",
    ),
    "numeric-choices": ({"n": [1, 2]}, 'n: choices must be strings (write "1")'),
}


@pytest.mark.parametrize("kind", MALFORMED)
@pytest.mark.parametrize("command", ["new", "options", "check"])
def test_malformed_template_is_one_line(tmp_path, kind, command):
    extra, expected = MALFORMED[kind]
    template = write_template(tmp_path / "t", context=NAMES | extra)
    args = {
        "new": ["new", "p", "--output-dir", tmp_path / "out", "--template", template],
        "options": ["options", "--template", template],
        "check": ["check", template],
    }[command]
    output = one_line_error(invoke(*args), 2)
    assert f"{template / 'cookiecutter.json'}: {expected}" in output
    assert not (tmp_path / "out").exists()


def test_failing_shell_hook_is_named(tmp_path):
    template = write_template(
        tmp_path / "t",
        {f"{SLUG}/x.py": "X = 1\n", "hooks/pre_gen_project.sh": "#!/bin/sh\nexit 4\n"},
    )
    output = one_line_error(
        invoke("new", "p", "--output-dir", tmp_path / "out", "--template", template), 2
    )
    assert output.startswith(f"Error: {template}/hooks/pre_gen_project.sh: ")
    assert "exit status: 4" in output


@pytest.mark.parametrize(
    "hook, expected",
    [
        ("X = {% if %}\n", "Jinja syntax error"),
        ("X = '{{ cookiecutter.nope }}'\n", "undefined variable"),
    ],
    ids=["syntax", "undefined"],
)
def test_jinja_errors_in_a_hook_name_the_hook(tmp_path, hook, expected):
    template = write_template(
        tmp_path / "t", {f"{SLUG}/x.py": "X = 1\n", "hooks/post_gen_project.py": hook}
    )
    output = one_line_error(
        invoke("new", "p", "--output-dir", tmp_path / "out", "--template", template), 2
    )
    assert output.startswith(f"Error: {template}/hooks/post_gen_project.py")
    assert expected in output
    assert not (tmp_path / "out").exists()


def test_options_of_another_template_show_the_set_spelling(tmp_path):
    template = write_template(
        tmp_path / "t", context=NAMES | {"backend": ["gloo", "nccl"]}
    )
    output = invoke("options", "--template", template).output
    assert output.splitlines()[0] == "--set backend=VALUE {gloo|nccl}  default: gloo"
    result = invoke(
        "new",
        "p",
        "--output-dir",
        tmp_path,
        "--template",
        template,
        "--set",
        "backend=nccl",
    )
    assert result.exit_code == 0, result.output


def test_check_with_every_combination_excluded_fails(tmp_path):
    rule = {"if": {"a": "x"}, "require": {"a": ["y"]}, "because": "never x"}
    template = write_template(
        tmp_path / "t", context=NAMES | {"a": ["x"], "_constraints": [rule]}
    )
    output = one_line_error(invoke("check", template), 1)
    assert "exclude every combination; nothing to check" in output


def test_next_hint_is_shell_quoted(tmp_path):
    result = invoke("new", "p", "--output-dir", tmp_path / "with space")
    assert result.output.splitlines()[-1] == (
        f"next: cd '{tmp_path / 'with space' / 'p'}' && less README.md"
    )


def test_no_readme_hint_for_a_template_without_a_readme(tmp_path):
    template = write_template(tmp_path / "t")
    result = invoke("new", "p", "--output-dir", tmp_path, "--template", template)
    assert result.output == f"wrote 3 files to {tmp_path / 'p'}\n"
