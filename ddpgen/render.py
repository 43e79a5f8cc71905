"""ProjectSpec -> cookiecutter renders into a temp dir -> black, syntax check ->
moved into the destination. A failure at any step leaves no destination behind."""

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ddpgen.cookiecutter_run import run_cookiecutter
from ddpgen.errors import UsageError
from ddpgen.postprocess import format_and_check

ANSWERS_FILE = ".ddpgen.json"
BASE_FILE = ".ddpgen-base.json"  # the pristine render: `ddpgen update` merges from it
RECORD_FILES = (ANSWERS_FILE, BASE_FILE)


@dataclass(frozen=True)
class Rendered:
    destination: Path
    files: tuple  # relative paths, sorted
    written: bool


def render_project(spec, *, force=False, dry_run=False):
    """Render `spec` into its destination (or only list the files, for a dry run)."""
    check_destination(spec.destination, force)
    with tempfile.TemporaryDirectory(prefix="ddpgen-") as scratch:
        project = render_to_directory(spec, Path(scratch))
        files = tuple(sorted(relative_files(project)))
        if not dry_run:
            install(project, spec.destination)
    return Rendered(spec.destination, files, written=not dry_run)


def check_destination(destination, force):
    if destination.exists() and not destination.is_dir():
        raise UsageError(f"destination {destination} exists and is not a folder")
    if destination.is_dir() and any(destination.iterdir()) and not force:
        raise UsageError(
            f"destination {destination} is not empty; pass --force to write the "
            "template's files into it (other files are kept)"
        )


def render_to_directory(spec, scratch):
    """Render, format and check the project under `scratch`; return its folder."""
    project = run_cookiecutter(spec.template.path, spec.context(), scratch)
    format_and_check(project)
    write_records(spec, project)
    return project


def answers_record(spec):
    return {
        "template": spec.template.source,
        "template_fingerprint": spec.template.fingerprint(),
        "answers": spec.context(),
    }


def write_records(spec, project):
    """What the project was rendered from, and the render itself (the merge base)."""
    rendered = read_text_files(project)
    write_json(project / BASE_FILE, rendered)
    write_json(project / ANSWERS_FILE, answers_record(spec))


def write_json(path, data):
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def read_text_files(folder):
    """{relative path: text} of every file but the records."""
    files = {}
    for relative in sorted(relative_files(folder)):
        if relative not in RECORD_FILES:
            files[relative] = (folder / relative).read_text(encoding="utf-8")
    return files


def relative_files(folder):
    for path in folder.rglob("*"):
        if path.is_file():
            yield path.relative_to(folder).as_posix()


def install(project, destination):
    """Move the rendered project into place: renamed whole when the destination is
    new, file by file (each replaced atomically) when it already exists."""
    if not destination.exists():
        destination.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(project, destination)
            return
        except OSError:  # another file system: copy, and undo a partial copy
            try:
                shutil.copytree(project, destination, symlinks=True)
            except BaseException:
                shutil.rmtree(destination, ignore_errors=True)
                raise
            return
    for relative in relative_files(project):
        target = destination / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        temp = target.with_name(f".{target.name}.ddpgen-tmp")
        shutil.copy2(project / relative, temp)
        os.replace(temp, target)
