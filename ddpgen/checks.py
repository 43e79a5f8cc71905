"""Checks every rendered project must pass: black, ruff, compiles, no Jinja left.

Each returns a list of one-line problems (empty when the check passes).
"""

import itertools
import shutil
import subprocess
import sys

JINJA_MARKERS = ("{{", "{%", "{#", "%}", "}}")


def python_files(project):
    return sorted(project.rglob("*.py"))


def tool_command(module):
    """Run black/ruff from this interpreter's environment (a venv's own copy)."""
    if module == "ruff":
        found = shutil.which("ruff")
        try:
            from ruff.__main__ import find_ruff_bin

            found = find_ruff_bin()
        except ImportError:
            pass
        return [found] if found else None
    return [sys.executable, "-m", module]


def run_tool(project, module, *args):
    command = tool_command(module)
    if command is None:
        return [f"{module} is not installed (pip install {module})"]
    result = subprocess.run(
        command + list(args), cwd=project, capture_output=True, text=True, timeout=300
    )
    if result.returncode == 0:
        return []
    output = (result.stdout + result.stderr).strip().splitlines()
    return [f"{module}: {line}" for line in output[:20]] or [f"{module} failed"]


def check_black(project):
    return run_tool(project, "black", "--check", "--quiet", ".")


def check_ruff(project):
    return run_tool(project, "ruff", "check", "--quiet", "--output-format", "concise", ".")


def check_compiles(project):
    problems = []
    for path in python_files(project):
        try:
            compile(path.read_text(encoding="utf-8"), str(path), "exec")
        except SyntaxError as error:
            problems.append(f"{path.relative_to(project)}:{error.lineno}: {error.msg}")
    return problems


def check_no_jinja(project):
    problems = []
    for path in sorted(project.rglob("*")):
        if not path.is_file():
            continue
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError:
            continue  # binary files cannot hold template syntax
        for number, line in enumerate(lines, 1):
            if any(marker in line for marker in JINJA_MARKERS):
                problems.append(f"{path.relative_to(project)}:{number}: leftover Jinja")
    return problems


STATIC_CHECKS = {
    "black": check_black,
    "ruff": check_ruff,
    "compiles": check_compiles,
    "no-jinja": check_no_jinja,
}


def combinations(options):
    """Every combination of the choice and boolean options, as answer dicts."""
    axes = []
    for option in options:
        if option.kind == "choice":
            axes.append([(option.name, choice) for choice in option.choices])
        elif option.kind == "bool":
            axes.append([(option.name, False), (option.name, True)])
    return [dict(values) for values in itertools.product(*axes)]
