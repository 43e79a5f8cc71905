"""Checks every rendered project must pass: black, ruff, `ddpgen lint`, compiles,
no Jinja left.

Each returns a list of one-line problems (empty when the check passes).
"""

import itertools
import random
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ddpgen.errors import DdpgenError
from ddpgen.lint import lint_paths
from ddpgen.postprocess import ruff_binary
from ddpgen.render import BASE_FILE, render_project
from ddpgen.spec import make_spec

# Template syntax that survived rendering: a cookiecutter variable, a Jinja
# statement or a comment. Bare braces are not enough: `{"a": {"b": 1}}` is
# Python, and so is a set inside a set.
LEFTOVER_JINJA = re.compile(
    r"\{\{-?\s*cookiecutter\b"
    r"|\{%-?\s*(if|elif|else|endif|for|endfor|set|endset|raw|endraw|macro"
    r"|endmacro|include|import|from|block|endblock|extends|filter|with)\b"
    r"|\{#.*#\}"
)


def python_files(project):
    return sorted(project.rglob("*.py"))


def tool_command(module):
    """Run black/ruff from this interpreter's environment (a venv's own copy)."""
    if module == "ruff":
        found = ruff_binary()
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
    return output[:20] or [f"{module} failed"]


def check_black(project):
    return run_tool(project, "black", "--check", "--quiet", ".")


def check_ruff(project):
    return run_tool(
        project, "ruff", "check", "--quiet", "--output-format", "concise", "."
    )


def check_ddp_lint(project):
    findings, _ = lint_paths([project])
    return [finding.text().removeprefix(f"{project}/") for finding in findings]


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
        if not path.is_file() or path.name == BASE_FILE:
            continue  # the base file holds copies of the files checked here
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError:
            continue  # binary files cannot hold template syntax
        for number, line in enumerate(lines, 1):
            if LEFTOVER_JINJA.search(line):
                problems.append(f"{path.relative_to(project)}:{number}: leftover Jinja")
    return problems


STATIC_CHECKS = {
    "black": check_black,
    "ruff": check_ruff,
    "ddp-lint": check_ddp_lint,
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


def run_project_tests(project):
    """The project's own test suite (`--run`), bounded in time."""
    command = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider"]
    try:
        result = subprocess.run(
            command, cwd=project, capture_output=True, text=True, timeout=900
        )
    except subprocess.TimeoutExpired:
        return ["tests: timed out after 900 s"]
    if result.returncode in (0, 5):  # 5: the project has no tests
        return []
    tail = (result.stdout + result.stderr).strip().splitlines()[-5:]
    return [f"tests: {line}" for line in tail]


@dataclass
class CheckedCombination:
    answers: dict
    problems: dict = field(default_factory=dict)  # check name -> problems

    @property
    def ok(self):
        return not any(self.problems.values())


def choose_combinations(template, max_combinations, seed):
    """(combinations to check, how many the template supports in all)."""
    supported = [
        answers
        for answers in combinations(template.options)
        if not list(template.violations(template.defaults() | answers))
    ]
    if len(supported) <= max_combinations:
        return supported, len(supported)
    return random.Random(seed).sample(supported, max_combinations), len(supported)


def check_combination(template, answers, scratch, index, run_tests):
    """Render one combination under `scratch` and run every check on it."""
    checked = CheckedCombination(answers)
    try:
        spec = make_spec(
            f"check{index}", output_dir=scratch, template=template, answers=answers
        )
        project = render_project(spec).destination
    except DdpgenError as error:
        checked.problems["render"] = [error.message]
        return checked
    checked.problems["render"] = []
    for name, check in STATIC_CHECKS.items():
        checked.problems[name] = check(project)
    if run_tests:
        checked.problems["tests"] = run_project_tests(project)
    return checked


def check_template(template, *, run_tests=False, max_combinations=64, seed=0):
    """Check each (or a seeded sample of the) supported combination(s)."""
    chosen, total = choose_combinations(template, max_combinations, seed)
    with tempfile.TemporaryDirectory(prefix="ddpgen-check-") as scratch:
        results = [
            check_combination(template, answers, Path(scratch), index, run_tests)
            for index, answers in enumerate(chosen)
        ]
    return results, total
