"""Inject tests/faults/inject.py's fault into training processes started by a
script (torchrun's workers carry RANK; the agent and the script do not)."""

import os

if os.environ.get("FAULT") and "RANK" in os.environ:
    import inject  # noqa: F401  (patches the trainer on import)
