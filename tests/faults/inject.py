"""Run a generated project's train.py with one fault injected; torchrun starts
this file in place of train.py (cwd: the project).

FAULT=kill-at-step   SIGKILL the process right after optimizer step FAULT_STEP
FAULT=kill-in-save   SIGKILL it after writing the temp file of the checkpoint of
                     step FAULT_STEP, before the rename
FAULT_RANK           the global rank that dies (default 1)
FAULT_ONCE=1         only on torchrun's first attempt (restarts run clean)
"""

import importlib
import json
import os
import runpy
import signal
import sys
from pathlib import Path

sys.path.insert(0, os.getcwd())
PACKAGE = json.loads(Path(".ddpgen.json").read_text())["answers"]["package_name"]
trainer = importlib.import_module(f"{PACKAGE}.trainer")
checkpoint = importlib.import_module(f"{PACKAGE}.checkpoint")
FAULT, STEP = os.environ["FAULT"], int(os.environ["FAULT_STEP"])


def doomed():
    if os.environ.get("RANK", "0") != os.environ.get("FAULT_RANK", "1"):
        return False
    first_attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0"
    return first_attempt or os.environ.get("FAULT_ONCE") != "1"


def die():
    os.kill(os.getpid(), signal.SIGKILL)


if FAULT == "kill-at-step":
    optimizer_step = trainer.Trainer._optimizer_step

    def step_then_die(self):
        optimizer_step(self)
        if self.step == STEP and doomed():
            die()

    trainer.Trainer._optimizer_step = step_then_die
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
else:
    raise SystemExit(f"unknown FAULT {FAULT}")

if __name__ == "__main__":
    sys.argv[0] = "train.py"
    runpy.run_path("train.py", run_name="__main__")
