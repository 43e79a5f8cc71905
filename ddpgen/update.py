"""`ddpgen update`: re-render a project with the current template and merge the
template's changes into the user's edits, three-way.

The base is the render the project came from, kept in the project itself
(.ddpgen-base.json), so it survives edits to the template in place. The merge
is `git merge-file`: changes on both sides to different lines both survive; the
same lines get conflict markers.
"""

import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ddpgen.errors import DdpgenError, UsageError
from ddpgen.render import (
    ANSWERS_FILE,
    BASE_FILE,
    RECORD_FILES,
    read_text_files,
    render_to_directory,
)
from ddpgen.spec import BUILTIN_SOURCE, NAME_VARIABLES, Template, make_spec


@dataclass(frozen=True)
class Change:
    path: str
    action: str  # add, update, merge, conflict, delete
    text: str | None = None  # the new content (None: delete)


@dataclass(frozen=True)
class UpdateResult:
    changes: tuple
    written: bool

    @property
    def conflicts(self):
        return [change.path for change in self.changes if change.action == "conflict"]


def read_json(path, what):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(
            f"{path.parent} is not a ddpgen project ({path.name} is missing)"
        ) from None
    except (OSError, ValueError) as error:
        raise UsageError(f"{path}: unreadable {what}: {error}") from None


def update_project(project, *, template=None, settings=(), dry_run=False):
    """Merge the template's changes since the project's render into it."""
    project = Path(project).resolve()
    record = read_json(project / ANSWERS_FILE, "answers record")
    base = read_json(project / BASE_FILE, "merge base")
    template = Template.load(template or source_path(record["template"]))
    new = render_new(project, record, template, settings)
    changes = tuple(plan(base, new[0], read_current(project, base, new[0])))
    if not dry_run:
        apply(project, changes)
        for name in RECORD_FILES:
            write_atomically(project / name, new[1][name])
    return UpdateResult(changes, written=not dry_run)


def source_path(source):
    return None if source == BUILTIN_SOURCE else source


def render_new(project, record, template, settings):
    """({path: text}, {record file: text}) of a fresh render with the answers."""
    answers = {k: v for k, v in record["answers"].items() if k not in NAME_VARIABLES}
    known = {option.name for option in template.options}
    answers = {
        k: v for k, v in answers.items() if k in known
    }  # the template may drop some
    slug = record["answers"].get("project_slug", project.name)
    with tempfile.TemporaryDirectory(prefix="ddpgen-update-") as scratch:
        spec = make_spec(
            slug,
            output_dir=scratch,
            template=template,
            answers=answers,
            settings=settings,
        )
        rendered = render_to_directory(spec, Path(scratch) / "render")
        records = {
            name: (rendered / name).read_text(encoding="utf-8") for name in RECORD_FILES
        }
        return read_text_files(rendered), records


def read_current(project, base, new):
    current = {}
    for relative in set(base) | set(new):
        path = project / relative
        if path.is_file():
            try:
                current[relative] = path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                current[relative] = None  # binary now: never merged, never overwritten
    return current


def plan(base, new, current):
    for path in sorted(set(base) | set(new)):
        change = plan_file(
            path, base.get(path), new.get(path), path in current, current.get(path)
        )
        if change:
            yield change


def plan_file(path, base, new, exists, mine):
    if not exists:
        # Deleted by the user stays deleted; a new template file is added.
        return Change(path, "add", new) if base is None and new is not None else None
    if mine is None or mine == new:
        return None
    if new is None:  # the template dropped the file
        return Change(path, "delete") if mine == base else None
    if mine == base:
        return Change(path, "update", new)
    if new == base:
        return None  # only the user changed it
    merged, clean = merge_texts(mine, base or "", new)
    return Change(path, "merge" if clean else "conflict", merged)


def merge_texts(mine, base, theirs):
    """(merged text, whether it merged without conflicts), via git merge-file."""
    git = shutil.which("git")
    if git is None:
        raise DdpgenError("ddpgen update needs git (it merges with git merge-file)")
    with tempfile.TemporaryDirectory(prefix="ddpgen-merge-") as scratch:
        paths = []
        for name, text in (("mine", mine), ("base", base), ("template", theirs)):
            path = Path(scratch) / name
            path.write_text(text, encoding="utf-8")
            paths.append(str(path))
        labels = ["-L", "yours", "-L", "last render", "-L", "template"]
        result = subprocess.run(
            [git, "merge-file", "-p", *labels, *paths],
            capture_output=True,
            text=True,
            timeout=60,
        )
    if result.returncode < 0 or result.returncode > 127:
        raise DdpgenError(f"git merge-file failed: {result.stderr.strip()}")
    return result.stdout, result.returncode == 0


def apply(project, changes):
    for change in changes:
        target = project / change.path
        if change.action == "delete":
            target.unlink()
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(target, change.text)


def write_atomically(path, text):
    temp = path.with_name(f".{path.name}.ddpgen-tmp")
    temp.write_text(text, encoding="utf-8")
    os.replace(temp, path)
