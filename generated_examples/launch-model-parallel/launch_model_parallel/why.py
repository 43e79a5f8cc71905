"""`python -m PACKAGE.doctor why RUN_DIR`: what the ranks of a job that died,
timed out or was ended by its watchdog left behind, on one screen.

For each rank: the collective its failure came in (op, sequence number,
sizes) and the line of this project that issued it, from its flight-recorder
dump (RUN_DIR/debug/collectives-rank-N, forensics.py); for a rank whose own
code raised, the line it raised at; for a rank its watchdog stopped
(watchdog.py), the line its main thread stood on; a rank that wrote
nothing was frozen, killed or stuck outside a collective (`doctor stacks`
shows where, while it runs). Then the ranks that never
entered the newest collective, and which rank failed first, with what.
"""

import argparse
import json
import pickle
import time
from pathlib import Path

from .forensics import (
    collectives_file,
    error_file,
    not_a_run,
    place_in_project,
    recorded_ranks,
    stacks_file,
    where,
)
from .watchdog import STACKS_MARK, Stalled

WROTE_NOTHING = (
    "wrote no failure: frozen, killed or stuck outside a collective "
    "(while it runs, `doctor stacks` shows where)"
)
NOTHING_RECORDED = (
    "a collective the flight recorder did not keep (TORCH_FR_BUFFER_SIZE)"
)


def why(argv=None):
    """0 when the run folder holds a rank's record, else 2 (one line)."""
    parser = argparse.ArgumentParser(
        prog="python -m launch_model_parallel.doctor why",
        description="Say where each rank of a job that died or hung was.",
    )
    parser.add_argument("run_dir", type=Path, help="the job's --run-dir")
    folder = parser.parse_args(argv).run_dir / "debug"
    if not (ranks := recorded_ranks(folder)):
        return not_a_run(folder)
    failures = {
        rank: failure(folder, rank, record.main_thread)
        for rank, record in ranks.items()
    }
    print(f"what each rank left in {folder}:")
    for rank, record in sorted(ranks.items()):
        print(f"  rank {rank} (pid {record.pid} on {record.host}): ", end="")
        print(failures[rank]["where"] if failures[rank] else WROTE_NOTHING)
    if behind := never_entered(failures):
        print(behind)
    failed = sorted((f["time"], rank) for rank, f in failures.items() if f)
    if failed:
        first_time, first = failed[0]
        clock = time.strftime("%H:%M:%S", time.localtime(first_time))
        print(f"first to fail: rank {first} at {clock}: {failures[first]['error']}")
    else:
        print("no rank failed in a collective: the job still runs, or was killed")
    return 0


def failure(folder, rank, main_thread):
    """{"time", "error", "where", "entered"} of a rank that wrote its failure
    ("entered": {process group: its newest sequence number}), else None."""
    if not error_file(folder, rank).exists():
        return None
    found = json.loads(error_file(folder, rank).read_text())
    entries = []
    if collectives_file(folder, rank).exists():
        with open(collectives_file(folder, rank), "rb") as stream:
            entries = pickle.load(stream).get("entries", [])
    found["entered"] = {}
    for entry in sorted(entries, key=lambda e: e["collective_seq_id"]):
        found["entered"][entry["process_group"][1]] = entry["collective_seq_id"]
    last = max(entries, key=lambda e: e["time_created_ns"], default=None)
    recorded = describe(last) if last else NOTHING_RECORDED
    if found["error"].startswith(Stalled.__name__):
        stacks = stacks_file(folder, rank).read_text().rsplit(STACKS_MARK, 1)[-1]
        place = where(stacks, main_thread)
        found["where"] = f"stalled at {place}; its last collective {recorded}"
    elif found["in_collective"]:
        found["where"] = f"failed in {recorded}"
    else:  # its own code raised
        kind = found["error"].split(":", 1)[0]
        found["where"] = (
            f"raised {kind} at {found['raised_at']}; its last collective {recorded}"
        )
    return found


def describe(entry):
    """'gloo:all_reduce #16 (Float [[1234]]) from pkg/trainer.py:146 in f'."""
    sizes = f"{' '.join(entry['input_dtypes'])} {entry['input_sizes']}"
    frames = entry.get("frames", [])
    places = (place_in_project(f["filename"], f["line"], f["name"]) for f in frames)
    issued_at = next((place for place in places if place), "outside this project")
    return (
        f"{entry['profiling_name']} #{entry['collective_seq_id']} ({sizes}) "
        f"from {issued_at}"
    )


def never_entered(failures):
    """'never entered default_pg #16: rank 1 (its last #15)' for each process
    group some rank lags in, one line each."""
    lines = []
    entered = [(rank, f["entered"]) for rank, f in sorted(failures.items()) if f]
    for group in sorted({group for _, groups in entered for group in groups}):
        last = {rank: groups[group] for rank, groups in entered if group in groups}
        newest = max(last.values())
        behind = [f"rank {r} (its last #{n})" for r, n in last.items() if n < newest]
        if behind:
            lines.append(f"never entered {group} #{newest}: {', '.join(behind)}")
    return "\n".join(lines)
