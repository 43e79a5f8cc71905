"""DDP001 set_epoch is never called

A shuffling `DistributedSampler` draws its order from the seed and the epoch;
without `set_epoch` every epoch repeats the first one's order
(pytorch/pytorch#31771). Samplers with `shuffle=False` (evaluation) are fine.
`set_epoch` must reach the shuffling sampler itself: `val_sampler.set_epoch`
does not silence a `train_sampler` that never gets one. When it goes through
something the linter cannot follow (`loader.sampler.set_epoch(epoch)`) it stays
silent, and so for a sampler named or built for evaluation (`val`, `eval`,
`test`), whose order does not matter (precision over recall).

```python
sampler = DistributedSampler(train_set)            # bad: same order every epoch
for epoch in range(epochs):
    for batch in DataLoader(train_set, sampler=sampler): ...

for epoch in range(epochs):                        # fixed
    sampler.set_epoch(epoch)
    for batch in DataLoader(train_set, sampler=sampler): ...
```
"""

import ast
import re

from ddpgen.lint.rule import Rule
from ddpgen.lint.syntax import dotted, is_false, keyword, sampler_assignments

EVALUATION_WORDS = re.compile(r"val|eval|test")


def set_epoch_never_called(module, rule):
    if not module.nodes_of(ast.For, ast.While):
        return
    named = sampler_assignments(module)
    name_of = {id(call): name for name, call in named.items()}
    receivers = {
        dotted(call.func.value)
        for call in module.calls_named("set_epoch")
        if isinstance(call.func, ast.Attribute)
    }
    # `loader.sampler.set_epoch(epoch)` may be any sampler: stay silent.
    unknown_receiver = bool(receivers - set(named)) or (
        module.attribute_used("set_epoch") and not receivers
    )
    for call in module.calls_named("DistributedSampler"):
        if is_false(keyword(call, "shuffle")) or is_evaluation_sampler(call, name_of):
            continue  # an evaluation's order does not matter
        name = name_of.get(id(call))
        if unknown_receiver or (name is None and receivers) or name in receivers:
            continue
        yield module.finding(call, rule)


def is_evaluation_sampler(call, name_of):
    words = [name_of.get(id(call), ""), *(dotted(arg) for arg in call.args[:1])]
    return any(EVALUATION_WORDS.search(word.lower()) for word in words)


RULE = Rule(
    "DDP001",
    "DistributedSampler shuffles, but set_epoch is never called: every epoch "
    "has the same order; call sampler.set_epoch(epoch) before each epoch",
    set_epoch_never_called,
    docs=__doc__,
    cases=(
        """
        sampler = DistributedSampler(train_set)  # <- DDP001
        loader = DataLoader(train_set, sampler=sampler)
        for epoch in range(3):
            for batch in loader:
                pass
        """,
        """
        sampler = DistributedSampler(train_set)
        for epoch in range(3):
            sampler.set_epoch(epoch)
        """,
        """
        eval_sampler = DistributedSampler(val_set, shuffle=False)
        for batch in DataLoader(val_set, sampler=eval_sampler):
            pass
        """,
        """
        # set_epoch on another sampler does not reshuffle the training one
        train_sampler = DistributedSampler(train_set)  # <- DDP001
        other_sampler = DistributedSampler(other_set)
        for epoch in range(3):
            other_sampler.set_epoch(epoch)
            for batch in DataLoader(train_set, sampler=train_sampler):
                pass
        """,
        """
        # set_epoch through the loader may be any sampler: silent
        train_sampler = DistributedSampler(train_set)
        loader = DataLoader(train_set, sampler=train_sampler)
        for epoch in range(3):
            loader.sampler.set_epoch(epoch)
        """,
        """
        # an evaluation sampler's order does not matter
        def validate(model, val_set):
            val_sampler = DistributedSampler(val_set)
            with torch.no_grad():
                for batch in DataLoader(val_set, sampler=val_sampler):
                    model(batch)
        """,
    ),
)
