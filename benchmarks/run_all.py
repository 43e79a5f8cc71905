"""Benchmarks, each a ratio against a baseline measured in the same run (these
machines are shared and noisy, so no test asserts a time).

    python benchmarks/run_all.py [--quick]

1. `ddpgen new` wall time (median of 5) against plain cookiecutter + black on
   the same template, alternating.
2. A 2-process CPU run: each process on cores // 2 threads (the generated
   default) against every process on all cores (OMP_NUM_THREADS=cores, what
   PyTorch does when nothing sets it).
3. ddp_loop.py: DDP's settings, the per-step stop check, the end-of-run
   replica check and the flight recorder, each variant against the others in
   alternating rounds.
4. side_by_side.py: the generated project (both modes) beside the patterns a
   user would otherwise copy, on the small CNN and ResNet-18, as ratios to a
   one-process limit proxy; time to the first step, resume cost, checkpoint
   save, 1 and 2 processes. Writes side_by_side.png and prints the table.
5. watchdog_cost.py: a generated project with its watchdog off and on, in
   alternating runs.
6. learning.py: validation accuracy per epoch of the image defaults on real
   image sets that packages ship, and the GPT on tiny Shakespeare at
   nanoGPT's CPU configuration beside a plain one-file loop.

The GPU benchmark is gpu.py (`make bench-gpu`).
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable


def wall(command, **kwargs):
    started = time.perf_counter()
    subprocess.run(
        command,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=600,
        **kwargs,
    )
    return time.perf_counter() - started


def median_wall(command, repeat=5, **kwargs):
    return statistics.median(wall(command, **kwargs) for _ in range(repeat))


def bench_generate(scratch):
    """`ddpgen new` against plain cookiecutter + black on the same template,
    alternating, median of 5 each."""
    template = ROOT / "templates" / "ddp"
    answers = ["mode=mp", "model_parallel=yes"]

    def ddpgen_new(index):
        name = f"p{index}"
        flags = ["--mode", "mp", "--model-parallel", "--output-dir", scratch]
        return wall([PYTHON, "-m", "ddpgen", "new", name, *flags])

    def cookiecutter_and_black(index):
        out = Path(scratch) / f"cc{index}"
        started = time.perf_counter()
        for command in (
            [PYTHON, "-m", "cookiecutter", "--no-input", "-o", out, template]
            + [f"project_name=q{index}", *answers],
            [PYTHON, "-m", "black", "-q", out / f"q{index}"],
        ):
            subprocess.run([str(part) for part in command], check=True, timeout=300)
        return time.perf_counter() - started

    ours, plain = [], []
    for index in range(5):
        ours.append(ddpgen_new(index))
        plain.append(cookiecutter_and_black(index))
    baseline = median_wall([PYTHON, "-c", "pass"])
    return {
        "ddpgen_new_median_s": statistics.median(ours),
        "cookiecutter_plus_black_median_s": statistics.median(plain),
        "ratio_to_cookiecutter_plus_black": statistics.median(ours)
        / statistics.median(plain),
        "python_startup_median_s": baseline,
    }


def samples_per_second(project, workdir, threads, train_size):
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    metrics = workdir / f"metrics-{threads or 'shared'}.json"
    command = [
        PYTHON,
        "train.py",
        "--nprocs",
        "2",
        "--device",
        "cpu",
        "--num-workers",
        "0",
        "--train-size",
        str(train_size),
        "--eval-size",
        "64",
        "--batch-size",
        "32",
        "--epochs",
        "1",
        "--resume",
        "none",
        "--checkpoint-dir",
        str(workdir / "c"),
        "--metrics-file",
        str(metrics),
    ]
    subprocess.run(
        command,
        cwd=project,
        env=env,
        check=True,
        timeout=600,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return json.loads(metrics.read_text())


def bench_threads(scratch, train_size):
    subprocess.run(
        [
            PYTHON,
            "-m",
            "ddpgen",
            "new",
            "threads",
            "--mode",
            "mp",
            "--data",
            "fakedata",
            "--model",
            "cnn",
            "--output-dir",
            scratch,
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    project = Path(scratch) / "threads"
    cores = len(os.sched_getaffinity(0))
    shared = [
        samples_per_second(project, Path(scratch), 0, train_size) for _ in range(3)
    ]
    oversubscribed = [
        samples_per_second(project, Path(scratch), cores, train_size) for _ in range(3)
    ]
    fast = statistics.median(m["samples_per_second"] for m in shared)
    slow = statistics.median(m["samples_per_second"] for m in oversubscribed)
    return {
        "cores": cores,
        "threads_per_process_shared": shared[0]["threads_per_process"],
        "samples_per_s_shared": fast,
        "samples_per_s_all_cores_each": slow,
        "speedup": fast / slow,
    }


def main():
    import ddp_loop  # beside this file; they import torch
    import side_by_side
    import watchdog_cost

    quick = "--quick" in sys.argv
    steps = 5 if quick else 20
    with tempfile.TemporaryDirectory() as scratch:
        results = {
            "generate": bench_generate(scratch),
            "threads": bench_threads(scratch, 512 if quick else 2048),
            "ddp_settings_resnet18_s_per_step": ddp_loop.bench_ddp_settings(
                "resnet18", steps, 16
            ),
            "stop_check_small_cnn_s_per_step": ddp_loop.bench_agreement(steps * 10, 32),
            "replica_check_resnet18_s": ddp_loop.bench_replica_check("resnet18"),
            "flight_recorder_small_cnn_s_per_step": ddp_loop.bench_flight_recorder(
                steps * 10, 32
            ),
            "watchdog": watchdog_cost.measure(quick),
            "side_by_side": side_by_side.measure(quick),
        }
    print(json.dumps(results, indent=2))
    print(side_by_side.ratio_table(results["side_by_side"]))
    if not quick:
        side_by_side.chart(results["side_by_side"], side_by_side.CHART)
    # What the defaults learn: real images and the GPT (writes learning.json).
    learning = [PYTHON, str(ROOT / "benchmarks" / "learning.py")]
    subprocess.run(learning + (["--quick"] if quick else []), check=True)


if __name__ == "__main__":
    main()
