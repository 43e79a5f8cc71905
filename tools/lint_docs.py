"""Write docs/lint.md's rule sections from ddpgen/lint/rules/: `make lint-docs`.

The page's head (everything before the first `## DDP` section) is written by
hand and kept; each rule's section is its module's docstring.
tests/test_ddp_lint.py fails when the page differs from what this writes.
"""

from pathlib import Path

from ddpgen.lint.formats import rules_markdown

PAGE = Path(__file__).resolve().parents[1] / "docs" / "lint.md"
FIRST_RULE = "\n## DDP"


def page_text(current):
    head = current.split(FIRST_RULE, 1)[0].rstrip("\n")
    return f"{head}\n\n{rules_markdown()}"


if __name__ == "__main__":
    PAGE.write_text(page_text(PAGE.read_text(encoding="utf-8")), encoding="utf-8")
