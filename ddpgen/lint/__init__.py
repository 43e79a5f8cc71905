"""`ddpgen lint`: DDP pitfalls found statically in any training script.

The standard `ast` module only; torch is never imported. Each rule prefers
silence to a guess: a case it cannot tell apart is not reported.

rules/     one module per rule: its docs (docs/lint.md is written from them),
           its check, its test cases and, where one is safe, its fix;
           adding a rule is adding a module there
syntax.py  the questions the rules ask of a parsed file
engine.py  files in, findings out (and the flake8 plugin)
fixes.py   `--fix` and `--diff`
formats.py `--format json|github|sarif`, and the rules as Markdown
"""

from ddpgen.lint.engine import (
    Flake8Checker,
    chosen_rules,
    lint_paths,
    lint_source,
    python_files,
)
from ddpgen.lint.rule import Finding, Rule
from ddpgen.lint.rules import RULES

__all__ = [
    "RULES",
    "Finding",
    "Flake8Checker",
    "Rule",
    "chosen_rules",
    "lint_paths",
    "lint_source",
    "python_files",
]
