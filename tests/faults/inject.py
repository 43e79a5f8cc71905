"""Run a generated project's train.py with one fault injected; torchrun starts
this file in place of train.py (cwd: the project).

FAULT=kill-at-step   SIGKILL the process right after optimizer step FAULT_STEP
FAULT=raise-at-step  raise a RuntimeError there instead
FAULT=hang-at-step   sleep there for an hour instead (the others then wait in
                     their next collective)
FAULT=unreadable-on-rank  loading any checkpoint fails on FAULT_RANK
FAULT=kill-in-save   SIGKILL it after writing the temp file of the checkpoint of
                     step FAULT_STEP, before the rename
FAULT_RANK           the global rank that dies (default 1)
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


def doomed():
    if os.environ.get("RANK", "0") != os.environ.get("FAULT_RANK", "1"):
        return False
    once = os.environ.get("FAULT_ONCE")
    if not once:
        return True
    try:
        Path(once).touch(exist_ok=False)
    except FileExistsError:
        return False
    return True


def die():
    os.kill(os.getpid(), signal.SIGKILL)


if FAULT == "raise-at-step":
    optimizer_step = trainer.Trainer._optimizer_step

    def step_then_raise(self):
        optimizer_step(self)
        if self.step == STEP and doomed():
            raise RuntimeError(f"injected failure after step {STEP}")

    trainer.Trainer._optimizer_step = step_then_raise
elif FAULT == "kill-at-step":
    optimizer_step = trainer.Trainer._optimizer_step

    def step_then_die(self):
        optimizer_step(self)
        if self.step == STEP and doomed():
            die()

    trainer.Trainer._optimizer_step = step_then_die
elif FAULT == "hang-at-step":
    optimizer_step = trainer.Trainer._optimizer_step

    def step_then_hang(self):
        optimizer_step(self)
        if self.step == STEP and doomed():
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
