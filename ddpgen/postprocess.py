"""Format every rendered .py with black and prove it compiles."""

import black

from ddpgen.errors import TemplateError


def format_and_check(project):
    for path in sorted(project.rglob("*.py")):
        relative = path.relative_to(project)
        source = path.read_text(encoding="utf-8")
        try:
            formatted = black.format_str(source, mode=black.Mode())
            compile(formatted, str(relative), "exec")
        except (black.InvalidInput, SyntaxError) as error:
            first = str(error).strip().splitlines()[0]
            raise TemplateError(f"{relative}: renders invalid Python: {first}") from None
        if formatted != source:
            path.write_text(formatted, encoding="utf-8")
