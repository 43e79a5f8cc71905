"""DDP005 a collective inside a rank-conditional branch

A collective that only some ranks call never completes: the job hangs until
the timeout. Helpers of the same file that call a collective count too. The
same collective in both branches is fine, and so is the rank-0-first pair of
Hugging Face-era scripts (huggingface/transformers examples/run_glue.py at
commit c9439e1, in `main` and in `load_and_cache_examples`):
`if local_rank not in [-1, 0]: barrier()` ... `if local_rank == 0: barrier()`
in one function, where every rank enters exactly one barrier. A test that is
the same on every rank is no rank condition: `local_rank != -1` (-1 is "not
distributed") and `"RANK" in os.environ`. Two barriers that both skip rank 0
are still reported.

```python
if dist.get_rank() == 0:                           # bad: ranks 1.. never join
    dist.barrier()

if dist.get_rank() == 0:                           # fixed
    save(model)
dist.barrier()
```
"""

import ast
import re

from ddpgen.lint.rule import Rule
from ddpgen.lint.syntax import constants, dotted, last_name

COLLECTIVES = {
    "barrier", "all_reduce", "broadcast", "all_gather", "all_gather_object",
    "all_gather_into_tensor", "broadcast_object_list", "reduce", "reduce_scatter",
    "reduce_scatter_tensor", "gather", "gather_object", "scatter",
    "scatter_object_list", "all_to_all", "all_to_all_single", "monitored_barrier",
}  # fmt: skip


def collective_under_rank_condition(module, rule):
    unmatched = list(unmatched_collectives(module))
    for call, name, if_node, side in unmatched:
        if side and any(
            other_name == name
            and other_side not in (None, side)
            and module.enclosing_function(other) is module.enclosing_function(call)
            for other, other_name, _, other_side in unmatched
        ):
            continue  # rank 0 enters one, the others the other: a pair
        yield module.finding(
            call, rule, f"{name} under `if {ast.unparse(if_node.test)}`"
        )


def unmatched_collectives(module):
    """(call, name, if_node, rank 0's side) of each collective in one branch
    of a rank test and not in the other."""
    helpers = collective_helpers(module)
    for call in module.calls:
        name = last_name(call)
        if not (is_collective(call) or calls_local(call, helpers)):
            continue
        found = module.rank_branch(call)
        if found is None:
            continue
        if_node, branch = found
        other = if_node.orelse if branch is if_node.body else if_node.body
        if not any(
            isinstance(n, ast.Call) and last_name(n) == name
            for statement in other
            for n in ast.walk(statement)
        ):
            yield call, name, if_node, rank_zero_side(
                if_node.test, branch is if_node.body
            )


def collective_helpers(module):
    """Local functions that run a collective (directly or one call deep)."""
    direct = functions_around(module, [c for c in module.calls if is_collective(c)])
    if not direct:
        return set()
    indirect = functions_around(
        module, [call for call in module.calls if calls_local(call, direct)]
    )
    return direct | indirect


def functions_around(module, calls):
    """The names of the module's functions (by name, the first definition)
    that hold one of these calls, at any depth."""
    return {
        function.name
        for call in calls
        for function in module.ancestors(call)
        if module.functions.get(getattr(function, "name", None)) is function
    }


def calls_local(node, names):
    """A call of one of this module's functions, `name(...)` or `self.name(...)`;
    `other_module.name(...)` only shares the name."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Name):
        return func.id in names
    receiver = dotted(func.value) if isinstance(func, ast.Attribute) else ""
    return receiver in ("self", "cls") and func.attr in names


def is_collective(call):
    name = dotted(call.func)
    return last_name(call) in COLLECTIVES and (
        name.startswith(("dist.", "torch.distributed.")) or "." not in name
    )


def rank_zero_side(test, branch_is_body=True):
    """'in' for a branch rank 0 takes (`rank == 0`, `in [-1, 0]`,
    `is_main_process()`), 'out' for one it skips (`!= 0`, `not in [-1, 0]`),
    None when the test says neither."""
    flip = {"in": "out", "out": "in", None: None}
    if not branch_is_body:
        return flip[rank_zero_side(test)]
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return flip[rank_zero_side(test.operand)]
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        sides = {rank_zero_side(value) for value in test.values} - {None}
        return sides.pop() if len(sides) == 1 else None  # `rank == 0 and not x`
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        op, values = test.ops[0], constants(test.comparators[0])
        if 0 in values and isinstance(op, (ast.Eq, ast.In)):
            return "in"
        if 0 in values and isinstance(op, (ast.NotEq, ast.NotIn, ast.Gt)):
            return "out"
        return None
    if re.search(r"main|master", ast.unparse(test).lower()):
        return "in"
    return None


RULE = Rule(
    "DDP005",
    "collective inside a rank-conditional branch: the other ranks never join "
    "it and the job hangs; call it on every rank",
    collective_under_rank_condition,
    docs=__doc__,
    cases=(
        """
        import torch.distributed as dist
        if dist.get_rank() == 0:
            dist.barrier()  # <- DDP005
        """,
        """
        import torch.distributed as dist
        if rank == 0:
            dist.broadcast(tensor, src=0)
        else:
            dist.broadcast(tensor, src=0)
        """,
        """
        import torch.distributed as dist
        if rank == 0:
            print("saved")
        dist.barrier()
        """,
        """
        import torch.distributed as dist
        def save(state):
            dist.barrier()

        if rank == 0:
            checkpoint.save(state)  # another module's save
        """,
        """
        # huggingface/transformers examples/run_glue.py (c9439e1): the
        # rank-0-first barrier pair, each rank enters exactly one barrier
        import torch
        def load(args):
            if args.local_rank not in [-1, 0]:
                torch.distributed.barrier()
            data = prepare()
            if args.local_rank == 0:
                torch.distributed.barrier()
            return data
        """,
        """
        # the same pair under an extra condition that is the same on every rank
        import torch
        def load(args, evaluate=False):
            if args.local_rank not in [-1, 0] and not evaluate:
                torch.distributed.barrier()
            data = prepare()
            if args.local_rank == 0 and not evaluate:
                torch.distributed.barrier()
            return data
        """,
        """
        # one half of the pair alone still hangs
        import torch
        def load(args):
            if args.local_rank not in [-1, 0]:
                torch.distributed.barrier()  # <- DDP005
            return prepare()
        """,
        """
        # two barriers that both skip rank 0 are no pair
        import torch
        def load(args):
            if args.local_rank != 0:
                torch.distributed.barrier()  # <- DDP005
            if args.local_rank > 0:
                torch.distributed.barrier()  # <- DDP005
        """,
        """
        # a collective under the non-distributed test runs on every rank
        import os
        import torch.distributed as dist
        def sync(args, tensor):
            if args.local_rank != -1:
                dist.all_reduce(tensor)
            if "RANK" in os.environ:
                dist.barrier()
        """,
    ),
)
