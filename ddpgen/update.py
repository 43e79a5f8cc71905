"""`ddpgen update`: re-render a project with the current template and merge the
template's changes into the user's edits, three-way.

The base is the render the project came from, kept in the project itself
(.ddpgen-base.json), so it survives edits to the template in place. The merge
is `git merge-file`: changes on both sides to different lines both survive; the
same lines get conflict markers. A binary file (not UTF-8 text) is recorded by
its hash: it is updated when the user left it as rendered, and kept as the
user's when both sides changed it (reported as `kept`), since bytes cannot merge.
"""

import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ddpgen.errors import DdpgenError, UsageError
from ddpgen.files import (
    copy_atomically,
    read_content,
    recorded,
    temporary_beside,
)
from ddpgen.render import (
    ANSWERS_FILE,
    BASE_FILE,
    RECORD_FILES,
    read_files,
    render_to_directory,
)
from ddpgen.spec import BUILTIN_SOURCE, NAME_VARIABLES, Template, make_spec


@dataclass(frozen=True)
class Change:
    path: str
    action: str  # add, update, merge, conflict, kept, left, delete
    text: str | None = None  # merged text (merge, conflict); else the render's file


@dataclass(frozen=True)
class UpdateResult:
    changes: tuple
    written: bool

    @property
    def conflicts(self):
        return [change.path for change in self.changes if change.action == "conflict"]


def read_json(path, what, kind=dict):
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(
            f"{path.parent} is not a ddpgen project ({path.name} is missing)"
        ) from None
    except (OSError, ValueError) as error:
        raise UsageError(f"{path}: unreadable {what}: {error}") from None
    if not isinstance(data, kind):
        raise UsageError(f"{path}: not a ddpgen {what}")
    return data


def read_answers_record(project):
    path = project / ANSWERS_FILE
    record = read_json(path, "answers record")
    if not isinstance(record.get("template"), str) or not isinstance(
        record.get("answers"), dict
    ):
        raise UsageError(
            f"{path}: not a ddpgen answers record (needs 'template' and 'answers')"
        )
    return record


def update_project(project, *, template=None, settings=(), dry_run=False):
    """Merge the template's changes since the project's render into it."""
    project = Path(project).resolve()
    record = read_answers_record(project)
    base = read_json(project / BASE_FILE, "merge base")
    template = Template.load(template or source_path(record["template"]))
    with tempfile.TemporaryDirectory(prefix="ddpgen-update-") as scratch:
        rendered = render_new(project, record, template, settings, Path(scratch))
        new = read_files(rendered)
        changes = tuple(plan(base, new, read_current(project, base, new)))
        if not dry_run:
            apply(project, rendered, changes)
            for name in RECORD_FILES:
                copy_atomically(rendered / name, project / name)
    return UpdateResult(changes, written=not dry_run)


def source_path(source):
    return None if source == BUILTIN_SOURCE else source


def render_new(project, record, template, settings, scratch):
    """The folder of a fresh render with the recorded answers and `settings`."""
    known = {option.name for option in template.options}
    answers = {  # the template may have dropped some
        key: value
        for key, value in record["answers"].items()
        if key in known and key not in NAME_VARIABLES
    }
    slug = record["answers"].get("project_slug", project.name)
    spec = make_spec(
        slug, output_dir=scratch, template=template, answers=answers, settings=settings
    )
    return render_to_directory(spec, scratch / "render")


def read_current(project, base, new):
    return {
        relative: read_content(project / relative)
        for relative in set(base) | set(new)
        if (project / relative).is_file()
    }


def plan(base, new, current):
    for path in sorted(set(base) | set(new)):
        change = plan_file(
            path, base.get(path), new.get(path), path in current, current.get(path)
        )
        if change:
            yield change


def plan_file(path, base, new, exists, mine):
    """base is as recorded (text, or a binary's hash); new and mine are contents."""
    if not exists:
        # Deleted by the user stays deleted; a new template file is added.
        return Change(path, "add") if base is None and new is not None else None
    if mine == new:
        return None
    if new is None:  # the template dropped the file
        return Change(path, "delete" if recorded(mine) == base else "left")
    if recorded(mine) == base:
        return Change(path, "update")
    if recorded(new) == base:
        return None  # only the user changed it
    if not all(isinstance(text, str) for text in (mine, new, base or "")):
        return Change(path, "kept")  # bytes cannot be merged: the user's file stays
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


def apply(project, rendered, changes):
    """Write each change; files get the fresh render's mode (an executable
    script stays executable)."""
    for change in changes:
        target = project / change.path
        if change.action == "delete":
            target.unlink()
        elif change.action in ("add", "update"):
            target.parent.mkdir(parents=True, exist_ok=True)
            copy_atomically(rendered / change.path, target)
        elif change.action in ("merge", "conflict"):
            temp = temporary_beside(target)
            temp.write_text(change.text, encoding="utf-8")
            shutil.copymode(rendered / change.path, temp)
            os.replace(temp, target)
