"""`ddpgen lint --fix`: the findings that have one safe rewrite, rewritten.

Each fix is a minimal edit of the source text at the node the rule reported:
the other lines, their formatting and comments stay as they were, and a second
run changes nothing (a fixed call is no longer a finding).

DDP002  drop `shuffle=True` beside a DistributedSampler (the sampler shuffles)
DDP004  add `map_location="cpu"` to torch.load
DDP006  add the `--local-rank` spelling beside `--local_rank` (same dest)
"""

import ast
import difflib
from pathlib import Path

from ddpgen.lint import keyword, lint_source


def fix_source(source, path, rules):
    """(fixed source, the findings it fixed)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source, []
    calls = {
        (node.lineno, node.col_offset + 1): node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
    }
    data = source.encode("utf-8")
    starts = line_starts(data)
    edits, fixed = [], []
    for finding in lint_source(source, path, rules):
        call = calls.get((finding.line, finding.col))
        edit = (
            EDITS[finding.code](call, starts)
            if call and finding.code in EDITS
            else None
        )
        if edit:
            edits.append(edit)
            fixed.append(finding)
    for start, end, text in sorted(edits, reverse=True):
        data = data[:start] + text.encode("utf-8") + data[end:]
    return data.decode("utf-8"), fixed


def line_starts(data):
    """Byte offset of each line's start (ast columns count UTF-8 bytes)."""
    offsets, total = [0, 0], 0  # lines count from 1
    for line in data.splitlines(keepends=True):
        total += len(line)
        offsets.append(total)
    return offsets


def start_of(node, starts):
    return starts[node.lineno] + node.col_offset


def end_of(node, starts):
    return starts[node.end_lineno] + node.end_col_offset


def drop_shuffle(call, starts):
    shuffle = next(k for k in call.keywords if k.arg == "shuffle")
    items = sorted([*call.args, *call.keywords], key=lambda n: start_of(n, starts))
    index = items.index(shuffle)
    if index + 1 < len(items):  # up to the next item: its comma goes too
        return start_of(shuffle, starts), start_of(items[index + 1], starts), ""
    if index > 0:  # the last item: from the end of the one before it
        return end_of(items[index - 1], starts), end_of(shuffle, starts), ""
    return start_of(shuffle, starts), end_of(shuffle, starts), ""


def add_map_location(call, starts):
    if keyword(call, "map_location") is not None:
        return None
    items = [*call.args, *call.keywords]
    if not items:
        return None
    last = max(items, key=lambda n: end_of(n, starts))
    position = end_of(last, starts)
    return position, position, ', map_location="cpu"'


def add_local_rank_spelling(call, starts):
    for argument in call.args:
        if isinstance(argument, ast.Constant) and argument.value == "--local_rank":
            position = end_of(argument, starts)
            return position, position, ', "--local-rank"'
    return None


EDITS = {
    "DDP002": drop_shuffle,
    "DDP004": add_map_location,
    "DDP006": add_local_rank_spelling,
}
FIXABLE = tuple(EDITS)


def fix_paths(files, rules, write):
    """Fix each file (or only say how, when not write): (diff text, fixed count)."""
    diffs, count = [], 0
    for path in files:
        source = Path(path).read_bytes().decode("utf-8", errors="replace")
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
