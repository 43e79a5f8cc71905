"""DDP006 only --local_rank

torch >= 2.0's `torch.distributed.launch` passes `--local-rank=N`; a parser with
only `--local_rank` fails (microsoft/LoRA#79). Scripts that start their own
workers (`mp.spawn`) are exempt.

```python
parser.add_argument("--local_rank", type=int)                 # bad
parser.add_argument("--local-rank", "--local_rank", type=int) # fixed
local_rank = int(os.environ["LOCAL_RANK"])                    # better: torchrun sets it
```
"""

import ast

from ddpgen.lint.rule import Rule
from ddpgen.lint.syntax import end_of


def underscore_local_rank_only(module, rule):
    if module.calls_named("spawn", "start_processes"):
        return  # the script starts its own workers
    declared = module.calls_named("add_argument")
    if any(option(call, "--local-rank") for call in declared):
        return
    for call in declared:
        if option(call, "--local_rank"):
            yield module.finding(call, rule)


def option(call, spelling):
    """The add_argument argument that spells this option, or None."""
    return next(
        (a for a in call.args if isinstance(a, ast.Constant) and a.value == spelling),
        None,
    )


def add_local_rank_spelling(call, starts):
    """`"--local-rank"` beside `"--local_rank"`: argparse gives both one dest."""
    underscored = option(call, "--local_rank")
    if underscored is None:
        return None
    position = end_of(underscored, starts)
    return position, position, ', "--local-rank"'


RULE = Rule(
    "DDP006",
    "argparse declares only --local_rank: torch >= 2.0's launcher passes "
    "--local-rank; accept both spellings or read os.environ['LOCAL_RANK']",
    underscore_local_rank_only,
    docs=__doc__,
    fix=add_local_rank_spelling,
    cases=(
        """
        import argparse
        parser = argparse.ArgumentParser()
        parser.add_argument("--local_rank", type=int, default=0)  # <- DDP006
        """,
        """
        import argparse
        parser = argparse.ArgumentParser()
        parser.add_argument("--local-rank", "--local_rank", type=int)
        """,
        """
        # the script spawns its own workers: no launcher passes the option
        import argparse
        import torch.multiprocessing as mp
        parser = argparse.ArgumentParser()
        parser.add_argument("--local_rank", type=int, default=0)
        mp.spawn(worker, nprocs=2)
        """,
    ),
)
