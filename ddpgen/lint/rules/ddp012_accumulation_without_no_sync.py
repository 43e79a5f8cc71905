"""DDP012 gradient accumulation without no_sync

Every `backward()` of a DDP model all-reduces; when several micro-steps make
one optimizer step, all but the last should skip it (pytorch/pytorch#43201).
The optimizer is recognised by its name or by what it was assigned from
(`opt = torch.optim.AdamW(...)`, then `opt.step()`); an accumulation loop is
one finding, its leftover flush after the loop included. A file whose forward
goes around DDP (DDP009) has no all-reduce to skip: only DDP009 is reported.

```python
loss.backward()                                     # bad: an all-reduce per micro-step
if (step + 1) % accumulation == 0:
    optimizer.step()

last = (step + 1) % accumulation == 0               # fixed
with contextlib.nullcontext() if last else model.no_sync():
    loss.backward()
```

The optimizer step may be `optimizer.step()` or, with AMP, `scaler.step(optimizer)`.
"""

import ast
import re

from ddpgen.lint.rule import Rule
from ddpgen.lint.syntax import DDP_NAMES, assigned_names, dotted, last_name

OPTIMIZER_CLASSES = re.compile(
    r"^(SGD|Adam\w*|RMSprop|Adagrad|Adadelta|LAMB|Lamb|Lion|Adafactor|LBFGS|NAdam|RAdam)$"
)


def accumulation_without_no_sync(module, rule):
    if not module.calls_named(*DDP_NAMES) or module.forwards_around_ddp:
        return  # no DDP forward, so no all-reduce to skip (DDP009 says why)
    if module.attribute_used("no_sync") or module.attribute_used(
        "require_backward_grad_sync"
    ):
        return
    optimizers = assigned_names(module, is_optimizer_class)
    reported_loops = set()
    for node in periodic_ifs(module):
        loop = outermost_loop(module, node)
        if loop is None or id(loop) in reported_loops:
            continue  # a flush after the inner loop is the same accumulation
        if any(
            isinstance(n, ast.Call) and is_optimizer_step(n, optimizers)
            for statement in node.body
            for n in ast.walk(statement)
        ):
            reported_loops.add(id(loop))
            yield module.finding(node, rule)


def periodic_ifs(module):
    """`if <something> % <n> ...:` statements, in source order (an
    accumulation is reported at its first)."""
    found = [
        node
        for node in module.nodes_of(ast.If)
        if any(
            isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod)
            for n in ast.walk(node.test)
        )
    ]
    return sorted(found, key=lambda node: (node.lineno, node.col_offset))


def outermost_loop(module, node):
    """The outermost loop around node in its function: an epoch loop holds
    the step loop and the flush after it, one accumulation."""
    outermost = None
    for ancestor in module.ancestors(node):
        if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef)):
            break
        if isinstance(ancestor, (ast.For, ast.While)):
            outermost = ancestor
    return outermost


def is_optimizer_class(call):
    name = dotted(call.func)
    return ".optim." in f".{name}" or bool(OPTIMIZER_CLASSES.match(last_name(call)))


def is_optimizer_step(call, optimizers=()):
    """optimizer.step(), a step of a variable holding an optimizer (`opt`), or,
    under AMP, scaler.step(optimizer)."""
    if last_name(call) != "step":
        return False
    receiver = dotted(call.func.value) if isinstance(call.func, ast.Attribute) else ""
    names = [receiver, *(dotted(a) for a in call.args)]
    return any("optim" in name.lower() or name in optimizers for name in names)


RULE = Rule(
    "DDP012",
    "gradient accumulation on a DDP model without no_sync(): every micro-step "
    "all-reduces; run the micro-steps before the last in `with model.no_sync():`",
    accumulation_without_no_sync,
    docs=__doc__,
    cases=(
        """
        from torch.nn.parallel import DistributedDataParallel
        model = DistributedDataParallel(net)
        for step, batch in enumerate(loader):
            loss_fn(model(batch)).backward()
            if (step + 1) % accumulation == 0:  # <- DDP012
                optimizer.step()
        """,
        """
        import contextlib
        from torch.nn.parallel import DistributedDataParallel
        model = DistributedDataParallel(net)
        for step, batch in enumerate(loader):
            last = (step + 1) % accumulation == 0
            with contextlib.nullcontext() if last else model.no_sync():
                loss_fn(model(batch)).backward()
            if (step + 1) % accumulation == 0:
                optimizer.step()
        """,
        """
        # an optimizer known by its assignment, not its name
        import torch
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(net)
        opt = torch.optim.AdamW(model.parameters())
        for i, batch in enumerate(loader):
            model(batch).sum().backward()
            if (i + 1) % accumulation == 0:  # <- DDP012
                opt.step()
        """,
        """
        # an accumulation loop and its leftover flush: one report
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(net)
        for i, batch in enumerate(loader):
            model(batch).sum().backward()
            if (i + 1) % accumulation == 0:  # <- DDP012
                optimizer.step()
        if len(loader) % accumulation:
            optimizer.step()
        """,
        """
        # inside an epoch loop, the flush after the step loop: still one report
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(net)
        for epoch in range(3):
            for i, batch in enumerate(loader):
                model(batch).sum().backward()
                if (i + 1) % accumulation == 0:  # <- DDP012
                    optimizer.step()
            if len(loader) % accumulation:
                optimizer.step()
        """,
        """
        # jingyaogong/minimind trainer/train_pretrain.py: the optimizer
        # stepped through a GradScaler (AMP), no no_sync
        from torch.nn.parallel import DistributedDataParallel
        model = DistributedDataParallel(model)
        for step, batch in enumerate(loader):
            scaler.scale(model(batch).loss / accumulation).backward()
            if step % accumulation == 0:  # <- DDP012
                scaler.step(optimizer)
                scaler.update()
        """,
        """
        # the same loop, the all-reduce skipped on the micro-steps
        from torch.nn.parallel import DistributedDataParallel
        model = DistributedDataParallel(model)
        for step, batch in enumerate(loader):
            model.require_backward_grad_sync = step % accumulation == 0
            scaler.scale(model(batch).loss / accumulation).backward()
            if step % accumulation == 0:
                scaler.step(optimizer)
                scaler.update()
        """,
    ),
)
