"""DDP010 wrapper state into the bare model (opt-in)

The wrapper's `state_dict()` keys start with `module.`; loading them into the
bare model (or the reverse) fails or, with `strict=False`, loads nothing
(NVIDIA/apex#647). Off unless selected (`--select DDP010`): its evidence is
names (`ddp_model`), so it guesses more than the others.

```python
torch.save(ddp_model.state_dict(), "m.pt")                         # bad
model.load_state_dict(torch.load("m.pt", map_location="cpu"))

torch.save(ddp_model.module.state_dict(), "m.pt")                  # fixed
```
"""

import ast
import re

from ddpgen.lint.rule import Rule

WRAPPER_NAMES = re.compile(r"ddp|wrapped")


def wrapper_state_into_bare_model(module, rule):
    """Saved from the DDP wrapper (keys start with 'module.') and loaded into
    the bare model, or the reverse, in one file."""
    saved_wrapper = saved_bare = False
    for call in module.calls_named("save"):
        source = ast.unparse(call.args[0]) if call.args else ""
        saved_wrapper |= bool(re.search(r"(ddp|wrapped)\w*\.state_dict\(\)", source))
        saved_bare |= ".module.state_dict()" in source
    for call in module.calls_named("load_state_dict"):
        target = (
            ast.unparse(call.func.value) if isinstance(call.func, ast.Attribute) else ""
        )
        into_wrapper = bool(WRAPPER_NAMES.search(target)) and ".module" not in target
        if saved_wrapper and not into_wrapper and not re.search(r"optim|sched", target):
            yield module.finding(call, rule, "the saved keys start with 'module.'")
        if saved_bare and into_wrapper:
            yield module.finding(call, rule, "the wrapper expects keys with 'module.'")


RULE = Rule(
    "DDP010",
    "state_dict saved from the DDP wrapper and loaded into the bare model, or "
    "the reverse: the 'module.' key prefixes do not match",
    wrapper_state_into_bare_model,
    docs=__doc__,
    default=False,
    cases=(
        """
        import torch
        from torch.nn.parallel import DistributedDataParallel
        ddp_model = DistributedDataParallel(model)
        torch.save(ddp_model.state_dict(), "m.pt")
        model.load_state_dict(torch.load("m.pt", map_location="cpu"))  # <- DDP010
        """,
        """
        import torch
        from torch.nn.parallel import DistributedDataParallel
        ddp_model = DistributedDataParallel(model)
        torch.save(ddp_model.module.state_dict(), "m.pt")
        model.load_state_dict(torch.load("m.pt", map_location="cpu"))
        """,
    ),
)
