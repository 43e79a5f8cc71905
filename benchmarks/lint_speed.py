"""`ddpgen lint` over the installed torch package (about 2,350 files), beside
the floor any AST linter pays in the same run: reading and parsing each file.

    python benchmarks/lint_speed.py [PATH]

Prints one JSON object: seconds and peak memory for parsing alone, for
`ddpgen lint --jobs 1` and for `ddpgen lint` (one process per core), the
ratios to the parse floor, and the files and findings counted.
"""

import json
import resource
import subprocess
import sys
import time
from pathlib import Path

PARSE_ONLY = """
import ast, sys
from pathlib import Path
for path in sorted(Path(sys.argv[1]).rglob("*.py")):
    try:
        ast.parse(path.read_bytes().decode("utf-8", "replace"))
    except SyntaxError:
        pass
"""


def timed(command):
    """(seconds, peak RSS in MB of the largest process, stdout)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if done.returncode not in (0, 1):
        raise SystemExit(done.stderr)
    return round(seconds, 1), round(max(peak, before) / 1024), done.stdout


def main():
    if len(sys.argv) > 1:
        target = Path(sys.argv[1])
    else:
        import torch  # only to find it; ddpgen lint never imports it

        target = Path(torch.__file__).parent
    ddpgen = [sys.executable, "-m", "ddpgen", "lint"]
    parse_s, parse_mb, _ = timed([sys.executable, "-c", PARSE_ONLY, str(target)])
    serial_s, serial_mb, serial_out = timed([*ddpgen, "--jobs", "1", str(target)])
    parallel_s, _, parallel_out = timed([*ddpgen, str(target)])
    assert parallel_out == serial_out, "the pool changed the findings"
    summary = serial_out.splitlines()[-1]  # "63 findings in 2352 files"
    print(
        json.dumps(
            {
                "target": str(target),
                "summary": summary,
                "parse_only_s": parse_s,
                "lint_one_process_s": serial_s,
                "lint_one_process_peak_mb": serial_mb,
                "lint_per_core_s": parallel_s,
                "one_process_to_parse": round(serial_s / parse_s, 2),
                "per_core_to_parse": round(parallel_s / parse_s, 2),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
