"""Files in, findings out: rule choice, parsing, noqa, and the flake8 plugin."""

import ast
import functools
import os
import re
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from ddpgen.errors import UsageError
from ddpgen.lint.rule import Finding
from ddpgen.lint.rules import CODES, RULES
from ddpgen.lint.syntax import Module

FILES_PER_WORKER = 64  # fewer files per process cost more to start than they save
NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z0-9, ]+))?", re.IGNORECASE)


def chosen_rules(select, ignore):
    """Rules by code or prefix: --select (else the default ones), less --ignore."""
    for pattern in select + ignore:
        if not any(code.startswith(pattern) for code in CODES):
            first, last = min(CODES), max(CODES)
            raise UsageError(f"unknown rule {pattern!r}: the rules are {first}-{last}")
    chosen = [
        rule
        for rule in RULES
        if (any(rule.code.startswith(p) for p in select) if select else rule.default)
    ]
    return [rule for rule in chosen if not any(rule.code.startswith(p) for p in ignore)]


def parse(source, path):
    """(Module, None), or (None, the DDP000 finding) for a file that does not parse."""
    try:
        return Module(ast.parse(source, filename=path), path), None
    except SyntaxError as error:
        line, col = error.lineno or 1, error.offset or 1
        return None, Finding(path, line, col, "DDP000", f"cannot parse: {error.msg}")


def lint_source(source, path, rules):
    module, parse_error = parse(source, path)
    if parse_error:
        return [parse_error]
    return module_findings(module, source, rules)


def module_findings(module, source, rules):
    lines = source.splitlines()
    found = {
        finding
        for rule in rules
        for finding in rule.check(module, rule)
        if not suppressed(finding, lines)
    }
    return sorted(found, key=lambda f: (f.line, f.col, f.code))


def suppressed(finding, lines):
    line = lines[finding.line - 1] if finding.line <= len(lines) else ""
    match = NOQA.search(line)
    if not match:
        return False
    codes = match.group("codes")
    return codes is None or finding.code in {
        c.strip().upper() for c in codes.split(",")
    }


def python_files(paths):
    for path in map(Path, paths):
        if not path.exists():
            raise UsageError(f"{path}: no such file or folder")
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*.py") if p.is_file())
        else:
            yield path


def read_source(path):
    return Path(path).read_bytes().decode("utf-8", errors="replace")


def lint_file(path, rules):
    return lint_source(read_source(path), str(path), rules)


def lint_paths(paths, select=(), ignore=(), jobs=0):
    """(findings, number of files checked), on `jobs` processes (0: one per
    core) once there are enough files to pay for starting them."""
    rules = chosen_rules(list(select), list(ignore))
    files = list(python_files(paths))
    workers = min(jobs or usable_cores(), len(files) // FILES_PER_WORKER)
    lint_one = functools.partial(lint_file, rules=rules)
    if workers < 2:
        return flattened(map(lint_one, files)), len(files)
    with ProcessPoolExecutor(workers) as pool:  # parsing is most of the time
        chunks = pool.map(lint_one, files, chunksize=FILES_PER_WORKER // 4)
        return flattened(chunks), len(files)


def flattened(lists):
    return [item for items in lists for item in items]


def usable_cores():
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1


class Flake8Checker:
    """The same rules as a flake8 plugin (entry point flake8.extension: DDP)."""

    name = "ddpgen"
    version = "1"

    def __init__(self, tree, filename="<stdin>"):
        self.tree, self.filename = tree, filename

    def run(self):
        module = Module(self.tree, self.filename)
        for rule in chosen_rules([], []):  # flake8's --select picks among these
            for finding in rule.check(module, rule):
                text = f"{finding.code} {finding.message}"
                yield finding.line, finding.col - 1, text, type(self)
