"""DDP004 torch.load without map_location

Tensors return to the device they were saved from: every rank loads onto the
saver's GPU (pytorch/examples#1078). `torch.load(path, **kwargs)` is not
reported: the keywords may carry map_location.

```python
state = torch.load("model.pt")                          # bad
state = torch.load("model.pt", map_location="cpu")      # fixed (or this rank's device)
```
"""

from ddpgen.lint.rule import Rule
from ddpgen.lint.syntax import dotted, end_of, keyword


def load_without_map_location(module, rule):
    if not module.distributed:
        return
    for call in module.calls_named("load"):
        if dotted(call.func) == "torch.load" and keyword(call, "map_location") is None:
            passes_kwargs = any(k.arg is None for k in call.keywords)
            if len(call.args) < 2 and not passes_kwargs:
                yield module.finding(call, rule)


def add_map_location(call, starts):
    """`map_location="cpu"` after the last argument: right on every rank."""
    items = [*call.args, *call.keywords]
    if not items or keyword(call, "map_location") is not None:
        return None
    position = end_of(max(items, key=lambda n: end_of(n, starts)), starts)
    return position, position, ', map_location="cpu"'


RULE = Rule(
    "DDP004",
    "torch.load without map_location loads onto the GPU that saved it: pass "
    "map_location ('cpu', or this rank's device)",
    load_without_map_location,
    docs=__doc__,
    fix=add_map_location,
    cases=(
        """
        import torch
        import torch.distributed as dist
        state = torch.load("model.pt")  # <- DDP004
        """,
        """
        import torch
        import torch.distributed as dist
        state = torch.load("model.pt", map_location="cpu")
        """,
        """
        # no torch.distributed: one process loads onto its own device
        import torch
        state = torch.load("model.pt")
        """,
        """
        # torch.load(path, **kwargs) may pass map_location
        import torch
        import torch.distributed as dist
        def restore(path, **kwargs):
            return torch.load(path, **kwargs)
        """,
    ),
)
