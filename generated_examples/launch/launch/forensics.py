"""What a rank leaves behind to explain a hang: its Python stacks on request.

`kill -USR1 PID` (each rank's host and pid are in RUN_DIR/debug/rank-N.pid)
makes that rank append every thread's stack to RUN_DIR/debug/rank-N.stacks,
and training goes on. faulthandler writes them from its C signal handler, so
a rank answers even while it waits inside a collective. Nothing runs per step.
"""

import faulthandler
import os
import signal
import socket
from pathlib import Path


def record_stacks_on_request(run_dir, rank):
    if not hasattr(signal, "SIGUSR1"):
        return  # not on Windows
    folder = Path(run_dir) / "debug"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"rank-{rank}.pid").write_text(f"{socket.gethostname()} {os.getpid()}\n")
    # Open for the life of the process: the handler writes to its descriptor.
    stream = open(folder / f"rank-{rank}.stacks", "a")
    faulthandler.register(signal.SIGUSR1, file=stream, all_threads=True, chain=False)
