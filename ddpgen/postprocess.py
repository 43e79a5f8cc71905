"""Format every rendered .py as black, with the project's own config, and prove
it compiles.

Black takes ~20 ms a file, most of `ddpgen new`; ruff's formatter, which makes
the same choices, tells in one call which files are already formatted, and
black formats only the others. A template that renders formatted code (the
built-in one does: the tests run `black --check` on every combination) never
waits for black.
"""

import shutil
import subprocess
import sys

from ddpgen.errors import TemplateError

DEFAULT_LINE_LENGTH = 88


def ruff_binary():
    """ruff from this interpreter's environment (a venv's own copy), or PATH's."""
    try:
        from ruff.__main__ import find_ruff_bin

        return find_ruff_bin()
    except (ImportError, FileNotFoundError):
        return shutil.which("ruff")


def black_settings(project):
    """[tool.black]'s line length and target versions, read without importing
    black (its import alone is a tenth of `ddpgen new`)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # black depends on tomli before 3.11
        import tomli as tomllib

    pyproject = project / "pyproject.toml"
    if not pyproject.is_file():
        return DEFAULT_LINE_LENGTH, []
    try:
        config = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as error:
        raise TemplateError(f"pyproject.toml: renders invalid TOML: {error}") from None
    black = config.get("tool", {}).get("black", {})
    targets = black.get("target-version", black.get("target_version", []))
    return black.get("line-length", DEFAULT_LINE_LENGTH), targets


def unformatted(project, paths, line_length, targets):
    """The paths ruff's formatter would change (all of them without ruff)."""
    ruff = ruff_binary()
    if ruff is None:
        return paths
    command = [ruff, "format", "--check", "--isolated", "--no-cache"]
    command += ["--output-format", "concise"]  # older ruff: exit 2, black does all
    command += ["--line-length", str(line_length)]
    if targets:
        command += ["--target-version", min(targets)]
    result = subprocess.run(
        command + [str(p.relative_to(project)) for p in paths],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if result.returncode == 0:
        return []
    reported = set(reported_paths(result.stdout))
    changed = [p for p in paths if str(p.relative_to(project)) in reported]
    return changed or paths  # ruff could not parse a file: black says why


def reported_paths(output):
    """The files `ruff format --check` lists ("path:line:col: unformatted: ...")."""
    for line in output.splitlines():
        if ": unformatted" in line:
            yield line.split(":", 1)[0]


def black_format(paths, project, line_length, targets):
    import black

    mode = black.Mode(
        target_versions={black.TargetVersion[name.upper()] for name in targets},
        line_length=line_length,
    )
    for path in paths:
        source = path.read_text(encoding="utf-8")
        try:
            formatted = black.format_str(source, mode=mode)
        except black.InvalidInput as error:
            raise invalid_python(path, project, error) from None
        if formatted != source:
            path.write_text(formatted, encoding="utf-8")


def invalid_python(path, project, error):
    first = str(error).strip().splitlines()[0]
    return TemplateError(
        f"{path.relative_to(project)}: renders invalid Python: {first}"
    )


def format_and_check(project):
    line_length, targets = black_settings(project)
    paths = sorted(project.rglob("*.py"))
    black_format(
        unformatted(project, paths, line_length, targets), project, line_length, targets
    )
    for path in paths:
        try:
            compile(
                path.read_text(encoding="utf-8"), str(path.relative_to(project)), "exec"
            )
        except SyntaxError as error:
            raise invalid_python(path, project, error) from None
