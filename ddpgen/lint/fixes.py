"""`ddpgen lint --fix`: the findings that have one safe rewrite, rewritten.

Each fix is a minimal edit of the source text at the node the rule reported
(the rule's `fix`, in its module): the other lines, their formatting and
comments stay as they were, and a second run changes nothing (a fixed call is
no longer a finding).
"""

import difflib
from pathlib import Path

from ddpgen.lint.engine import module_findings, parse, read_source
from ddpgen.lint.rules import RULES
from ddpgen.lint.syntax import line_starts

FIXABLE = tuple(rule.code for rule in RULES if rule.fix)


def fix_source(source, path, rules):
    """(fixed source, the findings it fixed)."""
    module, parse_error = parse(source, path)
    if parse_error:
        return source, []
    calls = {(node.lineno, node.col_offset + 1): node for node in module.calls}
    data = source.encode("utf-8")
    starts = line_starts(data)
    fixes = {rule.code: rule.fix for rule in rules if rule.fix}
    edits, fixed = [], []
    for finding in module_findings(module, source, rules):
        call = calls.get((finding.line, finding.col))
        edit = (
            fixes[finding.code](call, starts)
            if call and finding.code in fixes
            else None
        )
        if edit:
            edits.append(edit)
            fixed.append(finding)
    for start, end, text in sorted(edits, reverse=True):
        data = data[:start] + text.encode("utf-8") + data[end:]
    return data.decode("utf-8"), fixed


def fix_paths(files, rules, write):
    """Fix each file (or only say how, when not write): (diff text, fixed count)."""
    diffs, count = [], 0
    for path in files:
        source = read_source(path)
        fixed_source, fixed = fix_source(source, str(path), rules)
        if not fixed:
            continue
        count += len(fixed)
        diffs.append(unified_diff(source, fixed_source, str(path)))
        if write:
            Path(path).write_text(fixed_source, encoding="utf-8")
    return "".join(diffs), count


def unified_diff(before, after, path):
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile=f"a/{path}",
            tofile=f"b/{path}",
        )
    )
