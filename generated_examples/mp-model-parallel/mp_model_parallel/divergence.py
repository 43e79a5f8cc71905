"""A diverging run is stopped, not trained on.

The first optimizer step whose loss is not finite is noted on the device (no
host sync per step) and checked where the loop waits for the device anyway: on
logging steps and before every save, so no checkpoint of a diverged model is
ever written for --resume auto to pick.
"""

import torch
import torch.distributed as dist

NEVER = torch.iinfo(torch.int64).max


class Diverged(Exception):
    """The loss or the weights are no longer finite: rank 0 prints the one-line
    message and every rank exits 1."""


class DivergenceWatch:
    def __init__(self, device):
        self.first_bad_step = torch.full((), NEVER, dtype=torch.int64, device=device)

    def observe(self, loss, step):
        bad_at = torch.where(torch.isfinite(loss), NEVER, step)
        torch.minimum(self.first_bad_step, bad_at, out=self.first_bad_step)

    def check(self, step, parameters=()):
        """A collective: every rank raises Diverged if any rank saw a non-finite
        loss, or (before a save) the weights are not finite."""
        found = self.first_bad_step.clone()
        if not all(torch.isfinite(p).all() for p in parameters):
            found.fill_(min(step, int(found)))
        dist.all_reduce(found, op=dist.ReduceOp.MIN)
        if int(found) != NEVER:
            raise Diverged(
                f"the loss became non-finite at step {int(found)}: try a lower "
                "--lr, --clip-grad-norm 1.0, or --amp off (fp16 can overflow); "
                "no checkpoint was saved after it"
            )
