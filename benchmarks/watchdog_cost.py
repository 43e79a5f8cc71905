"""What the generated watchdog costs a step: a generated mp project (synthetic
data, the MLP: the shortest steps, so any per-step cost shows most) trained
with --watchdog-factor 0 (off) and at its default, in alternating runs of the
same length on 2 CPU processes. Prints seconds per optimizer step (training
time only, from the metrics file) and the ratio on/off.

    python benchmarks/watchdog_cost.py [--quick]
"""

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

PYTHON = sys.executable
SETTINGS = {"off": ["--watchdog-factor", "0"], "on (default)": []}


def seconds_per_step(project, run_dir, steps, flags):
    metrics = run_dir / "metrics.json"
    command = [PYTHON, "train.py", "--nprocs", "2", "--device", "cpu"]
    command += ["--max-steps", str(steps), "--epochs", "1000", "--eval-size", "0"]
    command += ["--resume", "none", "--run-dir", str(run_dir)]
    command += ["--metrics-file", str(metrics), *flags]
    subprocess.run(command, cwd=project, check=True, capture_output=True)
    summary = json.loads(metrics.read_text())
    return summary["train_seconds"] / summary["steps"]


def measure(quick=False):
    steps, rounds = (50, 1) if quick else (600, 4)
    with tempfile.TemporaryDirectory() as scratch:
        new = [PYTHON, "-m", "ddpgen", "new", "cost", "--mode", "mp"]
        subprocess.run(new + ["--output-dir", scratch], check=True, capture_output=True)
        project = Path(scratch) / "cost"
        times = {name: [] for name in SETTINGS}
        for index in range(rounds):
            for name, flags in SETTINGS.items():
                run_dir = Path(scratch) / f"run-{index}-{len(flags)}"
                times[name].append(seconds_per_step(project, run_dir, steps, flags))
    medians = {name: statistics.median(values) for name, values in times.items()}
    return {
        "s_per_step": medians,
        "every_run": times,
        "on_over_off": medians["on (default)"] / medians["off"],
    }


if __name__ == "__main__":
    print(json.dumps(measure("--quick" in sys.argv), indent=2))
