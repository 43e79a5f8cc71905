"""DDP009 training forward through `.module`

`ddp_model.module(x)` bypasses DDP's hooks: gradients are never all-reduced and
the replicas drift (jingyaogong/minimind#853). Reported in files that call
`backward()`; forwards under `torch.no_grad()` (evaluation) are fine. An
alias counts too: `raw = ddp_model.module` then `raw(x)`.

```python
loss = loss_fn(ddp_model.module(inputs), targets)   # bad
loss = loss_fn(ddp_model(inputs), targets)          # fixed
```
"""

from ddpgen.lint.rule import Rule


def forward_through_module(module, rule):
    for call in module.forwards_around_ddp:
        yield module.finding(call, rule)


RULE = Rule(
    "DDP009",
    "training forward through ddp_model.module skips DDP's gradient "
    "all-reduce: call ddp_model(inputs)",
    forward_through_module,
    docs=__doc__,
    cases=(
        """
        from torch.nn.parallel import DistributedDataParallel
        ddp_model = DistributedDataParallel(model)
        loss = loss_fn(ddp_model.module(inputs), targets)  # <- DDP009
        loss.backward()
        """,
        """
        import torch
        from torch.nn.parallel import DistributedDataParallel
        ddp_model = DistributedDataParallel(model)
        loss_fn(ddp_model(inputs), targets).backward()
        with torch.no_grad():
            check = ddp_model.module(inputs)
        """,
        """
        # the forward through an alias of model.module skips the all-reduce,
        # and then no accumulation finding (DDP012) either: nothing to skip
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(net)
        raw = model.module
        for i, batch in enumerate(loader):
            loss = raw(batch).sum()  # <- DDP009
            loss.backward()
            if (i + 1) % accumulation == 0:
                optimizer.step()
        """,
    ),
)
