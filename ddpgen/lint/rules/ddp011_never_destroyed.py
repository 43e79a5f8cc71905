"""DDP011 no destroy_process_group

Without it, NCCL resources are not freed and torch warns at exit; with gloo a
group torn down during interpreter exit can abort the process
(pytorch/pytorch#126275).

```python
dist.init_process_group("gloo")        # bad: never destroyed
try:                                   # fixed
    train()
finally:
    dist.destroy_process_group()
```
"""

from ddpgen.lint.rule import Rule


def never_destroyed(module, rule):
    if module.calls_named("destroy_process_group"):
        return
    for call in module.calls_named("init_process_group"):
        yield module.finding(call, rule)


RULE = Rule(
    "DDP011",
    "init_process_group without destroy_process_group: destroy the group "
    "before exit so its resources are released",
    never_destroyed,
    docs=__doc__,
    cases=(
        """
        import torch.distributed as dist
        dist.init_process_group("gloo")  # <- DDP011
        """,
        """
        import torch.distributed as dist
        dist.init_process_group("gloo")
        dist.destroy_process_group()
        """,
    ),
)
