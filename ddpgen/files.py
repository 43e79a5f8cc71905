"""Files of templates and projects: which belong, how they are read and recorded.

A template folder can hold caches and editor files nobody meant to ship (pip
byte-compiles the built-in template's hooks when it installs ddpgen); they are
never rendered. A file that is not UTF-8 text (an image, a binary) is copied
byte for byte and recorded by its hash.
"""

import fnmatch
import hashlib
import os
import shutil
from pathlib import Path

from ddpgen.errors import TemplateError

LITTER = (
    "__pycache__",
    "*.pyc",
    "*.pyo",
    ".DS_Store",
    "Thumbs.db",
    "desktop.ini",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".ipynb_checkpoints",
    ".git",
    ".hg",
    ".svn",
    "*.swp",
    "*.swo",
    "*~",
    ".#*",
)


def is_litter(name):
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in LITTER)


def template_files(folder):
    """Relative paths of a template's files, litter left out, sorted."""
    found = []
    for path in sorted(Path(folder).rglob("*")):
        relative = path.relative_to(folder)
        if any(is_litter(part) for part in relative.parts):
            continue
        if path.is_file() or path.is_symlink():
            found.append(relative)
    return found


def copy_template(source, target):
    """Copy a template without its litter; an unreadable file is one line."""
    try:
        shutil.copytree(
            source, target, ignore=lambda _folder, names: list(filter(is_litter, names))
        )
    except shutil.Error as error:
        (path, _target, reason), *_ = error.args[0]
        raise TemplateError(f"{path}: cannot read template file: {reason}") from None
    except OSError as error:
        raise TemplateError(f"{source}: cannot read template: {error}") from None
    return Path(target)


def read_content(path):
    """A file's text, or its bytes when it is not UTF-8 text."""
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data


def recorded(content):
    """How content is kept in a project's merge base: text itself, bytes by hash."""
    if isinstance(content, bytes):
        return {"sha256": hashlib.sha256(content).hexdigest()}
    return content


def copy_atomically(source, target):
    """Replace `target` with a copy of `source` (contents and mode) in one
    rename: readers see the old file or the whole new one."""
    temp = temporary_beside(target)
    shutil.copy2(source, temp)
    os.replace(temp, target)


def temporary_beside(path):
    return path.with_name(f".{path.name}.ddpgen-tmp")


def project_files(folder):
    """Relative posix paths of every file under a rendered project."""
    return sorted(
        path.relative_to(folder).as_posix()
        for path in Path(folder).rglob("*")
        if path.is_file()
    )
