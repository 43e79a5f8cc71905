"""ProjectSpec -> cookiecutter renders into a temp dir -> black, syntax check ->
moved into the destination. A failure at any step leaves no destination behind."""

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ddpgen.cookiecutter_run import run_cookiecutter
from ddpgen.errors import DdpgenError, UsageError
from ddpgen.files import (
    copy_atomically,
    copy_template,
    project_files,
    read_content,
    recorded,
)
from ddpgen.postprocess import format_and_check

ANSWERS_FILE = ".ddpgen.json"
BASE_FILE = ".ddpgen-base.json"  # the pristine render: `ddpgen update` merges from it
RECORD_FILES = (ANSWERS_FILE, BASE_FILE)


@dataclass(frozen=True)
class Rendered:
    destination: Path
    files: tuple  # relative paths, sorted
    written: bool
    stale: tuple = ()  # an earlier render's files this one does not write


def earlier_render_files(destination):
    """The files the render already in `destination` wrote (none without one)."""
    try:
        return set(json.loads((destination / BASE_FILE).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return set()


def render_project(spec, *, force=False, dry_run=False):
    """Render `spec` into its destination (or only list the files, for a dry run).

    Every reason the files cannot be written is found before one is written.
    """
    check_destination(spec.destination, force)
    with tempfile.TemporaryDirectory(prefix="ddpgen-") as scratch:
        project = render_to_directory(spec, Path(scratch))
        files = tuple(project_files(project))
        check_paths_free(spec.destination, files)
        stale = earlier_render_files(spec.destination) - set(files)
        stale = tuple(sorted(p for p in stale if (spec.destination / p).is_file()))
        if not dry_run:
            install(project, spec.destination)
    return Rendered(spec.destination, files, written=not dry_run, stale=stale)


def check_destination(destination, force):
    if destination.exists() and not destination.is_dir():
        raise UsageError(f"destination {destination} exists and is not a folder")
    if destination.is_dir() and any(destination.iterdir()) and not force:
        raise UsageError(
            f"destination {destination} is not empty; pass --force to write the "
            "template's files into it (other files are kept)"
        )
    existing = nearest_existing(destination)
    if not existing.is_dir():
        raise UsageError(f"cannot create {destination}: {existing} is a file")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"cannot write to {existing}: {write_problem(existing)}")


def nearest_existing(path):
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def write_problem(folder):
    try:
        read_only = bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    return "read-only file system" if read_only else "permission denied"


def check_paths_free(destination, files):
    """Refuse when a user's file stands where the template writes a folder, or a
    folder where it writes a file (only possible with --force)."""
    blocked = []
    for relative in files:
        target = destination / relative
        folders = [destination / part for part in Path(relative).parents][:-1]
        blocked += [f for f in folders if f.exists() and not f.is_dir()]
        if target.is_dir():
            blocked.append(target)
    if blocked:
        first, *others = sorted(set(blocked))
        found, wanted = (
            ("a folder", "a file") if first.is_dir() else ("a file", "a folder")
        )
        more = f" (and {len(others)} more)" if others else ""
        raise UsageError(
            f"cannot write into {destination}: {first.relative_to(destination)} is "
            f"{found} where the template writes {wanted}{more}; nothing was written"
        )


def render_to_directory(spec, scratch):
    """Render, format and check the project under `scratch`; return its folder.

    The template is rendered from a copy without its litter (caches, editor
    files), so no template folder ever leaks them into a project."""
    template = copy_template(spec.template.path, scratch / "template")
    project = run_cookiecutter(template, spec.context(), scratch, spec.template.path)
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
    rendered = {path: recorded(text) for path, text in read_files(project).items()}
    write_json(project / BASE_FILE, rendered)
    write_json(project / ANSWERS_FILE, answers_record(spec))


def write_json(path, data):
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def read_files(folder):
    """{relative path: text, or bytes for a binary file} of every file but the
    records."""
    return {
        relative: read_content(folder / relative)
        for relative in project_files(folder)
        if relative not in RECORD_FILES
    }


def install(project, destination):
    """Move the rendered project into place: renamed whole when the destination is
    new, file by file (each replaced atomically) when it already exists."""
    try:
        if destination.exists():
            replace_files(project, destination)
        else:
            move_whole(project, destination)
    except OSError as error:
        raise DdpgenError(f"cannot write {destination}: {one_line(error)}") from None


def one_line(error):
    """An OSError in one short line; shutil.Error carries a list of failures."""
    failures = error.args[0] if isinstance(error, shutil.Error) else None
    if failures and isinstance(failures, list):
        _, where, why = failures[0]
        more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
        return f"{where}: {why}{more}"
    return error.strerror or str(error)


def move_whole(project, destination):
    destination.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(project, destination)
    except OSError:  # another file system: copy, and undo a partial copy
        try:
            shutil.copytree(project, destination, symlinks=True)
        except BaseException:
            shutil.rmtree(destination, ignore_errors=True)
            raise


def replace_files(project, destination):
    for relative in project_files(project):
        target = destination / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        copy_atomically(project / relative, target)
