"""`python -m PACKAGE.doctor stacks RUN_DIR`: where every rank of a running
job on this host is now.

It sends SIGUSR1 to each rank recorded in RUN_DIR/debug/rank-N.pid on this
host (forensics.py: faulthandler then appends the rank's stacks to
rank-N.stacks, even inside a collective, and training goes on) and prints one
line per group of ranks that stand on the same line of this project. Ranks on
other hosts are named: run the command there.
"""

import argparse
import os
import signal
import socket
import time
from pathlib import Path

from .forensics import not_a_run, recorded_ranks, stacks_file, where

SETTLED_S = 0.3  # a dump that stopped growing this long is whole


def stacks(argv=None):
    """`doctor stacks RUN_DIR`: 0 when every rank of this host answered."""
    parser = argparse.ArgumentParser(
        prog="python -m launch_mlflow.doctor stacks",
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


def grouped(places):
    """'ranks 0, 2: <place>' lines, the place most ranks share first."""
    ranks_at = {}
    for rank, place in sorted(places.items()):
        ranks_at.setdefault(place, []).append(rank)
    return [
        f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}: {place}"
        for place, ranks in sorted(ranks_at.items(), key=lambda item: -len(item[1]))
    ]
