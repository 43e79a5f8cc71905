"""Inject tests/faults/inject.py's fault into training processes started by a
script: torchrun's workers carry RANK (the agent and the script do not), and
an mp project's workers are multiprocessing spawn children."""

import os
import sys

worker = "RANK" in os.environ or "--multiprocessing-fork" in sys.argv
if os.environ.get("FAULT") and worker:
    import inject  # noqa: F401  (patches the trainer on import)
