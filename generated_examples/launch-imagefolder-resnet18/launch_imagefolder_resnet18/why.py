"""`python -m PACKAGE.doctor why RUN_DIR`: what the ranks of a job that died
or timed out left behind, on one screen.

For each rank: the collective its failure came in (op, sequence number,
sizes) and the line of this project that issued it, from its flight-recorder
dump (RUN_DIR/debug/collectives-rank-N, forensics.py); a rank that wrote
none was frozen, killed or stuck outside a collective (`doctor stacks` shows
where, while it runs). Then which rank failed first, with what.
"""

import argparse
import json
import pickle
import sys
import time
from pathlib import Path

from .forensics import COLLECTIVES_FILE, place_in_project, recorded_ranks

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
        prog="python -m launch_imagefolder_resnet18.doctor why",
        description="Say where each rank of a job that died or hung was.",
    )
    parser.add_argument("run_dir", type=Path, help="the job's --run-dir")
    folder = parser.parse_args(argv).run_dir / "debug"
    ranks = recorded_ranks(folder)
    if not ranks:
        print(
            f"error: no rank wrote {folder}/rank-N.pid: is it a run?", file=sys.stderr
        )
        return 2
    failures = {rank: failure(folder, rank) for rank in ranks}
    print(f"what each rank left in {folder}:")
    for rank, record in sorted(ranks.items()):
        print(f"  rank {rank} (pid {record.pid} on {record.host}): ", end="")
        print(failures[rank]["where"] if failures[rank] else WROTE_NOTHING)
    failed = sorted((f["time"], rank) for rank, f in failures.items() if f)
    if failed:
        first_time, first = failed[0]
        clock = time.strftime("%H:%M:%S", time.localtime(first_time))
        print(f"first to fail: rank {first} at {clock}: {failures[first]['error']}")
    else:
        print("no rank failed in a collective: the job still runs, or was killed")
    return 0


def failure(folder, rank):
    """{"time", "error", "where"} of a rank that wrote its failure, or None."""
    error_file = folder / f"rank-{rank}.error"
    if not error_file.exists():
        return None
    found = json.loads(error_file.read_text())
    trace_file = folder / f"{COLLECTIVES_FILE}{rank}"
    entries = []
    if trace_file.exists():
        with open(trace_file, "rb") as stream:
            entries = pickle.load(stream).get("entries", [])
    recorded = last_collective(entries) or NOTHING_RECORDED
    found["where"] = f"failed in {recorded}"
    return found


def last_collective(entries):
    """'gloo:all_reduce #16 (Float [[1234]]) from pkg/trainer.py:146 in f'."""
    if not entries:
        return None
    entry = max(entries, key=lambda item: item["time_created_ns"])
    sizes = f"{' '.join(entry['input_dtypes'])} {entry['input_sizes']}"
    frames = entry.get("frames", [])
    places = (place_in_project(f["filename"], f["line"], f["name"]) for f in frames)
    issued_at = next((place for place in places if place), "outside this project")
    return (
        f"{entry['profiling_name']} #{entry['collective_seq_id']} ({sizes}) "
        f"from {issued_at}"
    )
