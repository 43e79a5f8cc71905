"""DDP003 torch.save on every rank

Every rank writes the same file at once: truncated or interleaved checkpoints
(bytedance/ibot#15). Reported for a `torch.save` with no rank guard around it,
before it (`if rank != 0: return`) or around every use of the helper that holds
it, in a file that uses torch.distributed.

```python
def save(model):
    torch.save(model.state_dict(), "model.pt")
save(model)                                        # bad: every rank

if dist.get_rank() == 0:                           # fixed
    save(model)
dist.barrier()
```
"""

from ddpgen.lint.rule import Rule
from ddpgen.lint.syntax import dotted


def save_on_every_rank(module, rule):
    if not module.distributed:
        return
    for call in module.calls_named("save"):
        if dotted(call.func) != "torch.save" or module.guarded(call):
            continue
        function = module.enclosing_function(call)
        if function is None:
            yield module.finding(call, rule)
            continue
        uses = module.references(function)
        unguarded = [use for use in uses if not module.guarded(use)]
        if unguarded:
            detail = f"through {function.name}()" if uses else ""
            yield module.finding(call, rule, detail)


RULE = Rule(
    "DDP003",
    "torch.save runs on every rank: guard it with `if rank == 0:` (every rank "
    "writes the same file at once)",
    save_on_every_rank,
    docs=__doc__,
    cases=(
        """
        import torch
        import torch.distributed as dist
        def save(model):
            torch.save(model.state_dict(), "model.pt")  # <- DDP003
        def train():
            dist.init_process_group("gloo")
            save(model)
        """,
        """
        # a periodic save is still on every rank
        import torch
        import torch.distributed as dist
        for step in range(steps):
            if step % 100 == 0:
                torch.save(model.state_dict(), "model.pt")  # <- DDP003
        """,
        """
        import torch
        import torch.distributed as dist
        def train():
            dist.init_process_group("gloo")
            if dist.get_rank() == 0:
                torch.save(model.state_dict(), "model.pt")
        """,
        """
        import torch
        import torch.distributed as dist
        def save(model, rank):
            if rank != 0:
                return
            torch.save(model.state_dict(), "model.pt")
        """,
        """
        import torch
        import torch.distributed as dist
        def save(model):
            torch.save(model.state_dict(), "model.pt")
        def train(rank):
            if rank == 0:
                save(model)
        """,
        """
        # no torch.distributed: one process, nothing to guard
        import torch
        torch.save(model.state_dict(), "model.pt")
        """,
        """
        # the rank under another name (pytorch/examples' multigpu.py)
        import torch
        import torch.distributed as dist
        class Trainer:
            def _save_checkpoint(self, epoch):
                torch.save(self.model.module.state_dict(), "checkpoint.pt")
            def train(self, epochs):
                for epoch in range(epochs):
                    if self.gpu_id == 0 and epoch % self.save_every == 0:
                        self._save_checkpoint(epoch)
        """,
    ),
)
