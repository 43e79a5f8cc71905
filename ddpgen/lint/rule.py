"""What a rule is and what it reports."""

import textwrap
from dataclasses import dataclass


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    col: int
    code: str
    message: str

    def text(self):
        return f"{self.path}:{self.line}:{self.col}: {self.code} {self.message}"


@dataclass(frozen=True)
class Rule:
    """One pitfall. docs: its section of docs/lint.md (a title line, then
    Markdown). cases: small scripts; a line ending in `# <- DDPnnn` must be
    reported by that rule, and no other line by this one (a case without a
    marker is one the rule must stay quiet on). fix: (call, line_starts) ->
    (start, end, new text), for the findings with one safe rewrite."""

    code: str
    message: str
    check: object
    docs: str = ""
    cases: tuple = ()
    fix: object = None
    default: bool = True

    @property
    def title(self):
        return self.docs.split("\n", 1)[0]

    @property
    def sources(self):
        return [textwrap.dedent(case).lstrip("\n") for case in self.cases]
