"""What a rank leaves behind to explain a hang or a failure.

Each rank writes its host, pid and main thread to RUN_DIR/debug/rank-N.pid.
`kill -USR1 PID` makes it append every thread's Python stack to rank-N.stacks
and go on: faulthandler writes them from its C signal handler, so a rank
answers even inside a collective (`doctor stacks` asks every rank: stacks.py).

torch's flight recorder keeps each rank's last collectives (op, sizes,
sequence number, the Python stack that issued it) in C++, for gloo and NCCL.
A rank whose collective fails (a peer gone, --dist-timeout passed), or whose
watchdog ends the job (watchdog.py), writes them to collectives-rank-N (the
recorder's pickle, which torch.distributed.flight_recorder.fr_trace reads for
NCCL) and what failed, and where it raised, to rank-N.error; `doctor why`
reads them (why.py).
"""

import faulthandler
import json
import os
import re
import signal
import socket
import sys
import threading
import time
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import torch

from .config import ConfigError
from .distributed import first_line

PACKAGE_DIR = Path(__file__).resolve().parent
PROJECT_DIR = PACKAGE_DIR.parent
THREAD = re.compile(r"^(?:Current thread|Thread) (0x[0-9a-fA-F]+)")
FRAME = re.compile(r'^\s+File "(.*)", line (\d+) in (\S+)')
COLLECTIVES_KEPT = 2000  # per rank; TORCH_FR_BUFFER_SIZE overrides it


class RankRecord(NamedTuple):
    host: str
    pid: int
    main_thread: int
    written: float  # when the rank wrote its record (the file's mtime)


def forget_last_attempt(run_dir, rank):
    """A restarted rank's failure files are its last attempt's: history."""
    folder = Path(run_dir) / "debug"
    for last_attempts in (error_file(folder, rank), collectives_file(folder, rank)):
        last_attempts.unlink(missing_ok=True)


def record_stacks_on_request(run_dir, rank):
    if not hasattr(signal, "SIGUSR1"):
        return  # not on Windows
    folder = Path(run_dir) / "debug"
    folder.mkdir(parents=True, exist_ok=True)
    # Open for the life of the process: the handler writes to its descriptor.
    stream = open(stacks_file(folder, rank), "a")
    faulthandler.register(signal.SIGUSR1, file=stream, all_threads=True, chain=False)
    # Last: `doctor stacks` signals the ranks it finds recorded, and SIGUSR1
    # without the handler would end the process.
    record = f"{socket.gethostname()} {os.getpid()} {threading.main_thread().ident}"
    (folder / f"rank-{rank}.pid").write_text(record + "\n")


def record_collectives(run_dir):
    """Before the process group starts: the flight recorder reads these once."""
    os.environ.setdefault("TORCH_FR_BUFFER_SIZE", str(COLLECTIVES_KEPT))
    os.environ.setdefault("TORCH_NCCL_DUMP_ON_TIMEOUT", "1")
    trace_prefix = collectives_file(Path(run_dir).resolve() / "debug", rank="")
    os.environ.setdefault("TORCH_FR_DUMP_TEMP_FILE", str(trace_prefix))


@contextmanager
def collectives_written_on_failure(run_dir, rank):
    """A rank that fails (in a collective, or its own code raised) writes what
    it recorded and where it raised, then fails as before."""
    try:
        yield
    except ConfigError:  # the user's mistake, said in one line: no forensics
        raise
    except Exception as error:
        write_failure(Path(run_dir) / "debug", rank, error)
        raise


def write_failure(folder, rank, error):
    """RUN_DIR/debug/rank-N.error (when, what) and the collectives recorded."""
    folder.mkdir(parents=True, exist_ok=True)
    try:
        trace = torch._C._distributed_c10d._dump_fr_trace()
    except (AttributeError, RuntimeError):  # a torch without the recorder
        trace = None
    dump = collectives_file(folder, rank)
    if trace and not dump.exists():  # NCCL's own dump on its timeout stays
        dump.write_bytes(trace)
    what = f"{type(error).__name__}: {first_line(error)}"
    frames = traceback.extract_tb(error.__traceback__)[::-1]  # innermost first
    failure = {
        "time": time.time(),
        "error": what,
        "in_collective": failed_in_a_collective(error, frames),
        "raised_at": innermost_place([(f.filename, f.lineno, f.name) for f in frames]),
    }
    error_file(folder, rank).write_text(json.dumps(failure) + "\n")


def recorded_ranks(folder):
    ranks = {}
    for path in folder.glob("rank-*.pid"):
        host, pid, main_thread = path.read_text().split()
        rank = int(path.stem.removeprefix("rank-"))
        ranks[rank] = RankRecord(host, int(pid), int(main_thread), path.stat().st_mtime)
    return ranks


def not_a_run(folder):
    print(f"error: no rank wrote {folder}/rank-N.pid: is it a run?", file=sys.stderr)
    return 2  # the exit status; one line, as every mistake gets


def failed_in_a_collective(error, frames):
    """NCCL's and the store's errors are DistErrors; gloo's are RuntimeErrors
    (worded as the transport words them), raised inside torch.distributed or
    from backward, where DDP all-reduces the gradients."""
    if isinstance(error, torch.distributed.DistError):
        return True
    return any(
        "/torch/distributed/" in frame.filename or frame.name == "_engine_run_backward"
        for frame in frames
    )


def stacks_file(folder, rank):
    return folder / f"rank-{rank}.stacks"


def error_file(folder, rank):
    return folder / f"rank-{rank}.error"


def collectives_file(folder, rank):
    return folder / f"collectives-rank-{rank}"


def where(text, main_thread):
    """The main thread's innermost line of this project, and the call it waits
    in: 'pkg/trainer.py:123 in _optimizer_step (all_reduce)'."""
    threads, frames = {}, None
    for line in text.splitlines():
        if thread := THREAD.match(line):
            frames = threads.setdefault(int(thread.group(1), 16), [])
        elif (frame := FRAME.match(line)) and frames is not None:
            frames.append(frame.groups())
    return innermost_place(threads.get(main_thread) or next(iter(threads.values()), []))


def innermost_place(frames):
    """The innermost of (file, line, function) frames (innermost first) that
    is this project's code, and the call it made."""
    for index, (file, line, function) in enumerate(frames):
        if place := place_in_project(file, line, function):
            return place + (f" ({frames[index - 1][2]})" if index else "")
    return "outside this project's code" if frames else "no Python frame"


def place_in_project(file, line, function):
    """'pkg/trainer.py:123 in f' for a frame of this project's code, else None."""
    path = PROJECT_DIR / file  # an absolute file stays itself
    if path.is_relative_to(PACKAGE_DIR) or path == PROJECT_DIR / "train.py":
        return f"{path.relative_to(PROJECT_DIR)}:{line} in {function}"
    return None
