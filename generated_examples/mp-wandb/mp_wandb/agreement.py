"""What the ranks agree on: a stop, a failure, sums, and that replicas match.
Each function here is a collective: every rank calls it, in the same order."""

import os
import signal
import time

import torch
import torch.distributed as dist

# The integer type of each element size: a parameter's bits, read as integers.
BITS_AS_INT = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def control_group(backend):
    """A gloo group for small CPU messages, so they never wait on the CUDA stream."""
    return dist.new_group(backend="gloo") if backend != "gloo" else None


# A launcher passes the terminal's Ctrl-C on to workers that got it already:
# SIGINTs this close together are one press.
SAME_PRESS_S = 1.0
QUIT_NOW = 130  # the shell's code for a run ended by SIGINT


class CtrlC:
    """The first Ctrl-C asks for a stop with a checkpoint; a later one quits."""

    def __init__(self):
        self.first = None

    def is_second_press(self):
        now = time.monotonic()
        if self.first is None:
            self.first = now
        return now - self.first > SAME_PRESS_S


class StopRequest:
    """SIGTERM (Slurm preemption, torchrun shutdown) or a first Ctrl-C asks the
    job to stop; a second Ctrl-C ends it at once, without a checkpoint.

    Ranks receive the signal at slightly different times, so they agree before
    stopping: a rank that stopped alone would leave its peers in a collective.
    They agree on the signal itself (the highest number wins), so every rank
    names the same one even when rank 0 has not received it yet.
    The agreement never makes a step wait: each optimizer step starts a tiny
    all_reduce (CPU, control group) and reads the one the step before started,
    long finished by then. A stop lands one step after the signal.
    """

    def __init__(self, group):
        self.group = group
        self.signal = 0  # the number of the first stop signal this rank got
        self.pending = None  # (signal, work) of the check in flight
        self.ctrl_c = CtrlC()
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum, frame):
        if signum == signal.SIGINT and self.ctrl_c.is_second_press():
            os._exit(QUIT_NOW)
        self.signal = self.signal or signum

    def agreed(self):
        """The signal's name if any rank had one when the previous check
        started, else None."""
        agreed = self.finish()
        number = torch.tensor([int(self.signal)])
        work = dist.all_reduce(
            number, op=dist.ReduceOp.MAX, group=self.group, async_op=True
        )
        self.pending = (number, work)
        return agreed

    def finish(self):
        """Wait for the check in flight (before the group goes) and read it."""
        if self.pending is None:
            return None
        number, work = self.pending
        self.pending = None
        work.wait()
        return signal.Signals(number.item()).name if number.item() else None


def raise_if_any_failed(error, placement):
    """A collective: every rank learns whether any rank failed (`error` is its
    one-line message or None), and then all exit together. A rank that failed
    alone would leave the others waiting in the next collective until the
    timeout."""
    errors = [None] * placement.world_size
    dist.all_gather_object(errors, error)
    failed = [(rank, message) for rank, message in enumerate(errors) if message]
    if not failed:
        return
    rank, message = failed[0]
    if placement.is_main:
        raise SystemExit(f"rank {rank}: {message}")
    raise SystemExit(1)  # rank 0 says why


def all_reduce_sum(values, device):
    """Sum a list of numbers over all ranks (gloo has no AVG, so sum then divide)."""
    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor.tolist()


@torch.no_grad()
def replicas_in_sync(model, device):
    """Whether every rank holds bit-identical parameters (DDP's promise).

    Each parameter's bits, read as integers, are summed where the parameter
    lives (no copy to the host, no float rounding); one all_gather compares
    them, and the host waits for the device once.
    """
    checksums = torch.stack([bits_checksum(p).to(device) for p in model.parameters()])
    gathered = [torch.empty_like(checksums) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, checksums)
    return all(torch.equal(other, gathered[0]) for other in gathered)


def bits_checksum(tensor):
    bits = tensor.detach().contiguous().view(BITS_AS_INT[tensor.element_size()])
    return bits.sum(dtype=torch.int64)
