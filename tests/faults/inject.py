"""Run a generated project's train.py with one fault injected; torchrun starts
this file in place of train.py (cwd: the project).

FAULT=kill-at-step   SIGKILL the process right after optimizer step FAULT_STEP
FAULT=raise-at-step  raise a RuntimeError there instead
FAULT=hang-at-step   sleep there for an hour instead (the others then wait in
                     their next collective)
FAULT=unreadable-on-rank  loading any checkpoint fails on FAULT_RANK
FAULT=kill-in-save   SIGKILL it after writing the temp file of the checkpoint of
                     step FAULT_STEP, before the rename
FAULT=kill-agent-at-step  SIGKILL the process group of the torchrun agent that
                     started the process (a node lost), after step FAULT_STEP
FAULT=none           no fault (FAULT_STEP_SECONDS alone)
FAULT_RANK           the global rank that dies (default 1; any: every rank)
FAULT_STEP_SECONDS   sleep this long after every optimizer step (a slower run)
FAULT_LOG=PATH       kill-agent-at-step and hang-at-step write the time of
                     the fault there
FAULT_ONCE=PATH      die once per job: the dying rank creates PATH first, and
                     no rank dies once it exists (restarts run clean, whichever
                     node the restarted rank lands on)

tests/faults/sitecustomize.py applies the same fault to an unchanged train.py
(for scripts that start train.py themselves): put tests/faults on PYTHONPATH.
"""

import importlib
import json
import os
import runpy
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, os.getcwd())
PACKAGE = json.loads(Path(".ddpgen.json").read_text())["answers"]["package_name"]
trainer = importlib.import_module(f"{PACKAGE}.trainer")
checkpoint = importlib.import_module(f"{PACKAGE}.checkpoint")
FAULT, STEP = os.environ["FAULT"], int(os.environ["FAULT_STEP"])


def doomed(rank=None):
    """Whether this process dies: its global rank (the trainer's, or RANK
    where torchrun set it) is FAULT_RANK."""
    dying = os.environ.get("FAULT_RANK", "1")
    here = str(rank) if rank is not None else os.environ.get("RANK", "0")
    if dying != "any" and here != dying:
        return False
    once = os.environ.get("FAULT_ONCE")
    if not once:
        return True
    try:
        Path(once).touch(exist_ok=False)
    except FileExistsError:
        return False
    return True


def log_the_time():
    """When the fault struck, for the time to what follows it."""
    if os.environ.get("FAULT_LOG"):
        Path(os.environ["FAULT_LOG"]).write_text(f"{time.time()}\n")


def die():
    os.kill(os.getpid(), signal.SIGKILL)


def lose_the_node():
    log_the_time()
    os.killpg(os.getpgid(os.getppid()), signal.SIGKILL)  # the agent's group
    die()  # if this process was not in it


seconds_per_step = float(os.environ.get("FAULT_STEP_SECONDS", "0"))
if seconds_per_step:
    # Its own name: the branches below rebind optimizer_step to this wrapper.
    unslowed_step = trainer.Trainer._optimizer_step

    def slow_step(self):
        unslowed_step(self)
        time.sleep(seconds_per_step)

    trainer.Trainer._optimizer_step = slow_step

if FAULT == "none":
    pass
elif FAULT == "kill-agent-at-step":
    slowed_step = trainer.Trainer._optimizer_step

    def step_then_lose_the_node(self):
        slowed_step(self)
        if self.step == STEP and doomed(self.placement.rank):
            lose_the_node()

    trainer.Trainer._optimizer_step = step_then_lose_the_node
elif FAULT == "raise-at-step":
    optimizer_step = trainer.Trainer._optimizer_step

    def step_then_raise(self):
        optimizer_step(self)
        if self.step == STEP and doomed(self.placement.rank):
            raise RuntimeError(f"injected failure after step {STEP}")

    trainer.Trainer._optimizer_step = step_then_raise
elif FAULT == "kill-at-step":
    optimizer_step = trainer.Trainer._optimizer_step

    def step_then_die(self):
        optimizer_step(self)
        if self.step == STEP and doomed(self.placement.rank):
            die()

    trainer.Trainer._optimizer_step = step_then_die
elif FAULT == "hang-at-step":
    optimizer_step = trainer.Trainer._optimizer_step

    def step_then_hang(self):
        optimizer_step(self)
        if self.step == STEP and doomed(self.placement.rank):
            log_the_time()
            time.sleep(3600)

    trainer.Trainer._optimizer_step = step_then_hang
elif FAULT == "kill-in-save":
    replace = os.replace

    def die_before_rename(source, target):
        if (
            Path(target) == checkpoint.checkpoint_path(Path(target).parent, STEP)
            and doomed()
        ):
            die()
        replace(source, target)

    checkpoint.os.replace = die_before_rename
elif FAULT == "unreadable-on-rank":
    # As if the checkpoint folder were local to rank 0's node.
    def unreadable(path):
        raise ValueError("no such file")

    load = checkpoint.load
    checkpoint.load = lambda path: unreadable(path) if doomed() else load(path)
else:
    raise SystemExit(f"unknown FAULT {FAULT}")

if __name__ == "__main__":
    sys.argv[0] = "train.py"
    runpy.run_path("train.py", run_name="__main__")
