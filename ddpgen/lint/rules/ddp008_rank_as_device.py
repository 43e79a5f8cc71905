"""DDP008 the global rank as a CUDA device index

`RANK` runs past the GPUs of a node from the second node on
(meta-llama/llama-cookbook#90). Reported for `dist.get_rank()`,
`os.environ["RANK"]` and names assigned from them used in `set_device`,
`.cuda(...)`, `torch.device("cuda", ...)`, `f"cuda:{...}"` or `device_ids=[...]`.
`rank % torch.cuda.device_count()` and local ranks are fine.

```python
torch.cuda.set_device(dist.get_rank())                        # bad
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))          # fixed
```
"""

import ast
import re

from ddpgen.lint.rule import Rule
from ddpgen.lint.syntax import dotted, keyword, last_name

GLOBAL_RANK_CALLS = ("dist.get_rank", "torch.distributed.get_rank")
ENVIRON_RANK = re.compile(r"os\.environ(\[['\"]RANK['\"]\]|\.get\(['\"]RANK['\"].*\))")


def rank_as_device(module, rule):
    ranks = GlobalRankNames(module)
    for node, suspect in device_indices(module):
        if ranks.is_global_rank(suspect):
            yield module.finding(node, rule, ast.unparse(suspect))


def device_indices(module):
    """(node, expression) of each CUDA device index: set_device(i), .cuda(i),
    torch.device("cuda", i), device_ids=[i], f"cuda:{i}"."""
    for call in module.calls:
        name = last_name(call)
        if name in ("set_device", "cuda") and call.args:
            yield call, call.args[0]
        if name == "device" and len(call.args) == 2:
            yield call, call.args[1]
        device_ids = keyword(call, "device_ids")
        if isinstance(device_ids, ast.List):
            yield from ((call, element) for element in device_ids.elts)
    for node in module.nodes_of(ast.JoinedStr):
        if ast.unparse(node).startswith("f'cuda:"):
            values = [v.value for v in node.values if isinstance(v, ast.FormattedValue)]
            if values:
                yield node, values[0]


def runs_before(module, assignment, use):
    """Whether `assignment` always runs before `use`: its statement list holds,
    later on, the use or a statement around it."""
    parent = module.parents[assignment]
    for _, block in ast.iter_fields(parent):
        if isinstance(block, list) and any(s is assignment for s in block):
            later = block[[id(s) for s in block].index(id(assignment)) + 1 :]
            around = [use, *module.ancestors(use)]
            return any(s is a for s in later for a in around)
    return False


class GlobalRankNames:
    """Which names hold the global rank where they are used. The last
    assignment that always runs before the use decides; without one (a name
    set in a branch, an attribute set in another method), every assignment of
    the name must be a global rank: a name that holds the local rank on some
    path stays quiet."""

    def __init__(self, module):
        self.module = module
        self.resolving = set()  # names met again while resolving: a = b; b = a

    def holds(self, use):
        name = dotted(use)
        if name in self.resolving:
            return False
        self.resolving.add(name)
        try:
            return self.last_assignment_is_global_rank(name, use)
        finally:
            self.resolving.discard(name)

    def last_assignment_is_global_rank(self, name, use):
        candidates = self.module.assignments.get(name, [])
        before = [a for a in candidates if runs_before(self.module, a, use)]
        if before:
            nearest = max(before, key=lambda a: (a.lineno, a.col_offset))
            return self.is_global_rank(nearest.value)
        return bool(candidates) and all(
            self.is_global_rank(a.value) for a in candidates
        )

    def is_global_rank(self, node):
        if isinstance(node, ast.Call) and last_name(node) == "get_rank":
            return not node.args and dotted(node.func) in GLOBAL_RANK_CALLS
        if isinstance(node, ast.Call) and last_name(node) == "int" and node.args:
            return self.is_global_rank(node.args[0])
        if ENVIRON_RANK.fullmatch(ast.unparse(node)):
            return True
        return bool(dotted(node)) and self.holds(node)


RULE = Rule(
    "DDP008",
    "the global rank used as a CUDA device index: from the second node on it "
    "names a GPU that does not exist; use the local rank (LOCAL_RANK)",
    rank_as_device,
    docs=__doc__,
    cases=(
        """
        import torch
        import torch.distributed as dist
        rank = dist.get_rank()
        torch.cuda.set_device(rank)  # <- DDP008
        """,
        """
        import torch
        import torch.distributed as dist
        torch.cuda.set_device(dist.get_rank() % torch.cuda.device_count())
        """,
        """
        import os
        import torch.distributed as dist
        local_rank = int(os.environ["LOCAL_RANK"])
        model.cuda(local_rank)
        """,
        """
        # microsoft/LoRA examples/NLG/src/gpu.py: one function calls the global
        # rank `local_rank` on one platform, the real local rank on the others;
        # only the use the global rank reaches is reported
        import os
        import torch
        import torch.distributed as dist
        def setup(args):
            if args.platform == "local":
                local_rank = dist.get_rank()
                torch.cuda.set_device(local_rank)  # <- DDP008
            elif args.platform == "philly":
                local_rank = args.local_rank
                torch.cuda.set_device(local_rank)
            else:
                local_rank = int(os.environ["LOCAL_RANK"])
                torch.cuda.set_device(local_rank)
            device = torch.device("cuda", local_rank)
        """,
        """
        # names set from each other in a cycle resolve without looping
        import torch
        def cycle():
            a = b
            b = a
            torch.cuda.set_device(a)
        """,
    ),
)
