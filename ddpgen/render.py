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
    write_answers(spec, project)
    return project


def answers_record(spec):
    return {
        "template": spec.template.source,
        "template_fingerprint": spec.template.fingerprint(),
        "answers": spec.context(),
    }


def write_answers(spec, project):
    text = json.dumps(answers_record(spec), indent=2, sort_keys=True) + "\n"
    (project / ANSWERS_FILE).write_text(text, encoding="utf-8")


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

