"""DDP002 shuffle=True with a DistributedSampler

`DataLoader` raises `ValueError: sampler option is mutually exclusive with
shuffle` (ultralytics/yolov3#231). A sampler chosen by a condition counts too:
`sampler = DistributedSampler(d) if distributed else None`, as in
dvlab-research/MiSLAS datasets/cifar100.py (commit bb5ba7e), where
`self.dist_sampler` is one and the loader beside it passes `shuffle=True`.

```python
DataLoader(train_set, shuffle=True, sampler=DistributedSampler(train_set))  # bad
DataLoader(train_set, sampler=DistributedSampler(train_set))                # fixed
```
"""

import ast

from ddpgen.lint.rule import Rule
from ddpgen.lint.syntax import (
    dotted,
    end_of,
    is_true,
    keyword,
    last_name,
    sampler_assignments,
    start_of,
)


def shuffle_with_sampler(module, rule):
    samplers = set(sampler_assignments(module))
    for call in module.calls_named("DataLoader"):
        sampler = keyword(call, "sampler")
        if sampler is None or not is_true(keyword(call, "shuffle")):
            continue
        is_distributed = (
            isinstance(sampler, ast.Call) and last_name(sampler) == "DistributedSampler"
        ) or dotted(sampler) in samplers
        if is_distributed:
            yield module.finding(call, rule)


def drop_shuffle(call, starts):
    """The sampler shuffles: `shuffle=True` and its comma go."""
    shuffle = next(k for k in call.keywords if k.arg == "shuffle")
    items = sorted([*call.args, *call.keywords], key=lambda n: start_of(n, starts))
    index = items.index(shuffle)
    if index + 1 < len(items):  # up to the next item: its comma goes too
        return start_of(shuffle, starts), start_of(items[index + 1], starts), ""
    if index > 0:  # the last item: from the end of the one before it
        return end_of(items[index - 1], starts), end_of(shuffle, starts), ""
    return start_of(shuffle, starts), end_of(shuffle, starts), ""


RULE = Rule(
    "DDP002",
    "DataLoader(shuffle=True) with a DistributedSampler raises ValueError: "
    "drop shuffle=True (the sampler shuffles)",
    shuffle_with_sampler,
    docs=__doc__,
    fix=drop_shuffle,
    cases=(
        """
        sampler = DistributedSampler(train_set)
        loader = DataLoader(train_set, shuffle=True, sampler=sampler)  # <- DDP002
        """,
        "loader = DataLoader(train_set, sampler=DistributedSampler(train_set))",
        "loader = DataLoader(train_set, shuffle=True)",
        """
        # a sampler chosen by a condition, then shuffle=True beside it
        train_sampler = DistributedSampler(train_set) if distributed else None
        loader = DataLoader(train_set, shuffle=True, sampler=train_sampler)  # <- DDP002
        """,
        """
        # the shape of dvlab-research/MiSLAS datasets/cifar100.py (bb5ba7e)
        class LongTailed:
            def __init__(self, train_set, distributed):
                self.sampler = DistributedSampler(train_set) if distributed else None
                self.train = DataLoader(  # <- DDP002
                    train_set, shuffle=True, sampler=self.sampler
                )
        """,
    ),
)
