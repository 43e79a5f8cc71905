"""Format every rendered .py with black, as the project's own config asks, and
prove it compiles."""

import black

from ddpgen.errors import TemplateError


def black_mode(project):
    """The Mode `black` run inside the project would use ([tool.black])."""
    pyproject = project / "pyproject.toml"
    config = black.parse_pyproject_toml(str(pyproject)) if pyproject.is_file() else {}
    targets = {
        black.TargetVersion[name.upper()] for name in config.get("target_version", [])
    }
    return black.Mode(
        target_versions=targets,
        line_length=config.get("line_length", black.DEFAULT_LINE_LENGTH),
    )


def format_and_check(project):
    mode = black_mode(project)
    for path in sorted(project.rglob("*.py")):
        relative = path.relative_to(project)
        source = path.read_text(encoding="utf-8")
        try:
            formatted = black.format_str(source, mode=mode)
            compile(formatted, str(relative), "exec")
        except (black.InvalidInput, SyntaxError) as error:
            first = str(error).strip().splitlines()[0]
            raise TemplateError(
                f"{relative}: renders invalid Python: {first}"
            ) from None
        if formatted != source:
            path.write_text(formatted, encoding="utf-8")
