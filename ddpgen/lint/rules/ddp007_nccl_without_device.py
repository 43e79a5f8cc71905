"""DDP007 NCCL without set_device or device_id

NCCL's first collectives run on the current CUDA device: GPU 0 for every rank
unless the process picked its own (pytorch/examples PR #1142). Calls that pass
the backend through `**kwargs` are not judged.

```python
dist.init_process_group("nccl")                                   # bad
torch.cuda.set_device(local_rank)                                 # fixed
dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
```
"""

import ast

from ddpgen.lint.rule import Rule
from ddpgen.lint.syntax import keyword


def nccl_without_device(module, rule):
    if module.calls_named("set_device"):
        return
    for call in module.calls_named("init_process_group"):
        if any(k.arg is None for k in call.keywords):
            continue  # **kwargs: the backend cannot be read here
        if is_nccl(call) and keyword(call, "device_id") is None:
            yield module.finding(call, rule)


def is_nccl(init_call):
    """NCCL named, or no backend given (CUDA machines then get NCCL)."""
    backend = keyword(init_call, "backend") or (
        init_call.args[0] if init_call.args else None
    )
    return backend is None or (
        isinstance(backend, ast.Constant) and "nccl" in str(backend.value)
    )


RULE = Rule(
    "DDP007",
    "NCCL init_process_group with neither torch.cuda.set_device nor device_id=: "
    "the first collectives may all use GPU 0",
    nccl_without_device,
    docs=__doc__,
    cases=(
        """
        import torch.distributed as dist
        dist.init_process_group("nccl")  # <- DDP007
        """,
        """
        import torch
        import torch.distributed as dist
        torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl")
        """,
        """
        import torch.distributed as dist
        dist.init_process_group("nccl", device_id=device)
        """,
        """
        import torch.distributed as dist
        dist.init_process_group("gloo")
        """,
    ),
)
