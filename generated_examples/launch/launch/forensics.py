"""What a rank leaves behind to explain a hang, and the command that reads it.

Each rank writes its host, pid and main thread to RUN_DIR/debug/rank-N.pid.
`kill -USR1 PID` makes it append every thread's Python stack to rank-N.stacks
and go on: faulthandler writes them from its C signal handler, so a rank
answers even inside a collective. `python -m PACKAGE.doctor stacks RUN_DIR`
asks every rank of this host and prints one line per group of ranks.

torch's flight recorder keeps each rank's last collectives (op, sizes,
sequence number, the Python stack that issued it) in C++, for gloo and NCCL.
A rank whose collective fails (a peer gone, --dist-timeout passed), or whose
watchdog ends the job (watchdog.py), writes them to collectives-rank-N (the
recorder's pickle, which torch.distributed.flight_recorder.fr_trace reads for
NCCL) and what failed to rank-N.error; `doctor why` reads them (why.py).
"""

import argparse
import faulthandler
import json
import os
import re
import signal
import socket
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import torch

from .distributed import first_line

PACKAGE_DIR = Path(__file__).resolve().parent
PROJECT_DIR = PACKAGE_DIR.parent
THREAD = re.compile(r"^(?:Current thread|Thread) (0x[0-9a-fA-F]+)")
FRAME = re.compile(r'^\s+File "(.*)", line (\d+) in (\S+)')
SETTLED_S = 0.3  # a dump that stopped growing this long is whole
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
    """A failed collective raises RuntimeError (torch's DistError and gloo's
    timeouts): the rank writes what it recorded, then fails as before."""
    try:
        yield
    except RuntimeError as error:
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
    failure = {"time": time.time(), "error": what}
    error_file(folder, rank).write_text(json.dumps(failure) + "\n")


def stacks(argv=None):
    """`doctor stacks RUN_DIR`: 0 when every rank of this host answered."""
    parser = argparse.ArgumentParser(
        prog="python -m launch.doctor stacks",
        description="Print where every rank of a running job on this host is now.",
    )
    parser.add_argument("run_dir", type=Path, help="the job's --run-dir")
    parser.add_argument(
        "--wait", type=float, default=5.0, help="seconds to wait for each rank"
    )
    args = parser.parse_args(argv)
    folder = args.run_dir / "debug"
    if not (ranks := recorded_ranks(folder)):
        return not_a_run(folder)
    asked, unasked = ask_for_stacks(folder, ranks)
    answers = wait_for_answers(folder, asked, args.wait)
    places = {
        rank: where(text, ranks[rank].main_thread) for rank, text in answers.items()
    }
    silent = [
        f"rank {rank}: did not answer within {args.wait:g} s: stopped, or in "
        f"uninterruptible I/O (`ps -o stat= {ranks[rank].pid}`)"
        for rank in sorted(asked.keys() - answers.keys())
    ]
    print(f"where the ranks are now (whole stacks: {folder}/rank-N.stacks):")
    for line in grouped(places) + silent + unasked:
        print(f"  {line}")
    return 0 if len(answers) == len(asked) else 1


def ask_for_stacks(folder, ranks):
    """SIGUSR1 to each live rank of this host: ({rank: its stacks file's size
    before}, [a line for each rank not asked])."""
    asked, unasked, here = {}, [], socket.gethostname()
    for rank, record in sorted(ranks.items()):
        if record.host != here:
            unasked.append(f"rank {rank}: on host {record.host}: run this there")
        elif why_not := why_not_running(record):
            unasked.append(f"rank {rank}: not running: {why_not}")
        else:
            asked[rank] = stacks_file(folder, rank).stat().st_size
            os.kill(record.pid, signal.SIGUSR1)
    return asked, unasked


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


def stacks_file(folder, rank):
    return folder / f"rank-{rank}.stacks"


def error_file(folder, rank):
    return folder / f"rank-{rank}.error"


def collectives_file(folder, rank):
    return folder / f"collectives-rank-{rank}"


def why_not_running(record):
    """None for a live rank; else why it is not asked (a signal to a process
    without the handler would end it, so a reused pid is never signalled)."""
    try:
        os.kill(record.pid, 0)
    except ProcessLookupError:
        return f"pid {record.pid} has exited"
    started = started_at(record.pid)
    if started is not None and started > record.written + 2:
        return f"pid {record.pid} now belongs to a process started later"
    return None


def started_at(pid):
    """When process `pid` started, in seconds since the epoch (Linux), or None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        boot = next(
            int(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime ")
        )
    except (OSError, StopIteration):
        return None
    return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")


def wait_for_answers(folder, asked, wait_s):
    """{rank: the stacks it appended}, for the ranks whose dump is whole."""
    deadline, sizes, answers = time.monotonic() + wait_s, {}, {}
    while asked.keys() - answers.keys() and time.monotonic() < deadline:
        time.sleep(SETTLED_S)
        for rank in asked.keys() - answers.keys():
            size = stacks_file(folder, rank).stat().st_size
            if size > asked[rank] and sizes.get(rank) == size:
                with open(stacks_file(folder, rank)) as stream:
                    stream.seek(asked[rank])
                    answers[rank] = stream.read()
            sizes[rank] = size
    return answers


def where(text, main_thread):
    """The main thread's innermost line of this project, and the call it waits
    in: 'pkg/trainer.py:123 in _optimizer_step (all_reduce)'."""
    threads, frames = {}, None
    for line in text.splitlines():
        if thread := THREAD.match(line):
            frames = threads.setdefault(int(thread.group(1), 16), [])
        elif (frame := FRAME.match(line)) and frames is not None:
            frames.append(frame.groups())
    frames = threads.get(main_thread) or next(iter(threads.values()), [])
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


def grouped(places):
    """'ranks 0, 2: <place>' lines, the place most ranks share first."""
    ranks_at = {}
    for rank, place in sorted(places.items()):
        ranks_at.setdefault(place, []).append(rank)
    return [
        f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}: {place}"
        for place, ranks in sorted(ranks_at.items(), key=lambda item: -len(item[1]))
    ]
