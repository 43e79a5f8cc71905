"""The generated project beside the code a user would otherwise copy, on the
same models and data (workloads.py), 2 CPU processes with gloo.

Variants, alternating in every round (median of the rounds):
  limit       one process on all cores, no DDP (patterns/limit.py): the proxy
  bare_ddp    a hand-tuned DDP loop (patterns/bare_ddp.py)
  gen_mp      `ddpgen new --mode mp`, edited to the workload (see `edit`)
  gen_launch  `ddpgen new --mode launch`, the same edit, under torchrun
  tutorial    PyTorch's ddp-tutorial-series pattern under torchrun
  seed        the seed blog's mp.spawn pattern

Also: the time from the command to the first optimizer step, the time from
a resume's command to its first step, a checkpoint save against a plain
torch.save, and the generated project on 1 and 2 processes.

    python benchmarks/side_by_side.py [--quick]   # JSON, markdown, chart
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PYTHON = sys.executable
TORCHRUN = [PYTHON, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node"]
VARIANTS = ("limit", "bare_ddp", "gen_mp", "gen_launch", "tutorial", "seed")
LABELS = {
    "limit": "one process, all cores, no DDP (limit proxy)",
    "bare_ddp": "hand-tuned bare DDP loop",
    "gen_mp": "generated, mp mode (edited to the workload)",
    "gen_launch": "generated, launch mode under torchrun (same edit)",
    "tutorial": "PyTorch ddp-tutorial-series (multigpu_torchrun.py)",
    "seed": "the seed blog's mp.spawn pattern",
}
TIMEOUT_S = 900
CHART = HERE / "side_by_side.png"
EXIT_ABORTS = {}  # variant: runs that aborted at exit after their timing was saved


class Settings:
    def __init__(self, quick):
        self.rounds = 1 if quick else 3
        self.throughput_rounds = 1 if quick else 5  # ResNet-18's rounds vary most
        self.workloads = ("small_cnn",) if quick else ("small_cnn", "resnet18")
        # Steps per run and per timing window, per workload.
        self.steps = {"small_cnn": 8 if quick else 40, "resnet18": 40}
        self.window = {"small_cnn": 2 if quick else 10, "resnet18": 5}

    def samples(self, workload):
        from workloads import BATCH_PER_PROCESS

        return self.steps[workload] * BATCH_PER_PROCESS[workload] * 2


def child_env(**extra):
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    paths = [str(HERE), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, paths))
    env.update(extra)
    return env


def run(command, cwd, env, tolerate_exit_abort=False):
    """Run to the end; True when it aborted at exit (tolerated only for the
    copied patterns: their process group dies with DDP's threads still alive)."""
    command = [str(part) for part in command]
    result = subprocess.run(
        command,
        cwd=cwd,
        env=env,
        timeout=TIMEOUT_S,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    aborted = "terminate called without an active exception" in result.stderr
    if result.returncode != 0 and not (tolerate_exit_abort and aborted):
        raise RuntimeError(f"{' '.join(command)} failed:\n{result.stderr[-3000:]}")
    return result.returncode != 0


# The generated projects --------------------------------------------------

MODEL_EDIT = """

# Benchmark edit: the workload's model, as a user replaces build_model.
import workloads  # noqa: E402


def build_model(config, outputs):  # noqa: F811
    return workloads.build_model("{workload}")
"""

DATA_EDIT = """

# Benchmark edit: the workload's in-memory data, as a user replaces these.
import workloads  # noqa: E402


def build_datasets(config, placement):  # noqa: F811
    return workloads.dataset(config.train_size), workloads.dataset(64, seed=1)


def output_size(train_set):  # noqa: F811
    return workloads.CLASSES
"""


def generate(scratch, mode, workload):
    """A generated project, edited where its README says to put your own model
    and data (model.py's build_model, data.py's build_datasets)."""
    name = f"gen-{mode}-{workload.replace('_', '-')}"
    command = [PYTHON, "-m", "ddpgen", "new", name, "--mode", mode]
    command += ["--data", "fakedata", "--model", "cnn", "--tracker", "none"]
    run([*command, "--output-dir", scratch], ROOT, child_env())
    project = Path(scratch) / name
    package = project / name.replace("-", "_")
    with (package / "model.py").open("a") as model:
        model.write(MODEL_EDIT.format(workload=workload))
    with (package / "data.py").open("a") as data:
        data.write(DATA_EDIT)
    return project


def generated_command(mode, processes=2):
    if mode == "mp":
        return [PYTHON, "train.py", "--nprocs", str(processes)]
    return [*TORCHRUN, str(processes), "train.py"]


def generated_flags(workload, samples, run_dir, **overrides):
    from workloads import BATCH_PER_PROCESS

    flags = {
        "device": "cpu",
        "num_workers": 0,  # in-memory tensors: workers would only copy them
        "batch_size": BATCH_PER_PROCESS[workload],
        "train_size": samples,
        "epochs": 1,
        "optimizer": "sgd",
        "momentum": 0,
        "lr": 0.001,
        "warmup_ratio": 0,
        "eval_every": 0,
        "run_dir": run_dir,
        "resume": "none",
        **overrides,
    }
    return [f"--{key.replace('_', '-')}={value}" for key, value in flags.items()]


def training_records(run_dir):
    lines = (Path(run_dir) / "metrics.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    return [record for record in records if "samples_per_second" in record]


# One timed run of each variant ---------------------------------------------


def steady_rate(rates):
    """samples/s after the first window (the warm-up)."""
    return statistics.median(rates[1:] if len(rates) > 1 else rates)


def pattern_run(variant, workload, samples, window, scratch, processes=2):
    """Run a pattern script; return (samples/s, seconds to the first step)."""
    out = Path(scratch) / f"{variant}-{workload}.json"
    out.unlink(missing_ok=True)
    script = HERE / "patterns" / f"{variant}.py"
    if variant == "tutorial":
        command = [*TORCHRUN, str(processes), script]
    else:
        command = [PYTHON, script]
    from workloads import free_port

    env = child_env(
        BENCH_OUT=str(out), BENCH_WINDOW=str(window), MASTER_PORT=str(free_port())
    )
    started = time.time()
    if run([*command, workload, samples], scratch, env, tolerate_exit_abort=True):
        EXIT_ABORTS[variant] = EXIT_ABORTS.get(variant, 0) + 1
    record = json.loads(out.read_text())  # saved before the exit
    return steady_rate(record["rates"]), record["first_step_time"] - started


def generated_run(project, mode, workload, samples, window, processes=2):
    run_dir = project / "run"
    flags = generated_flags(workload, samples, run_dir, log_every=window)
    run([*generated_command(mode, processes), *flags], project, child_env())
    rates = [record["samples_per_second"] for record in training_records(run_dir)]
    return steady_rate(rates)


def seconds_to_step(project, mode, flags, run_dir, step):
    """Start the generated project and return the seconds until run_dir's
    metrics.jsonl holds the training record of `step` (polled; --log-every 1)."""
    command = [*generated_command(mode), *flags, "--log-every=1"]
    started = time.time()
    process = subprocess.Popen(
        [str(part) for part in command],
        cwd=project,
        env=child_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while not any(r["step"] == step for r in records_if_any(run_dir)):
            if process.poll() is not None:
                raise RuntimeError(f"{command} exited {process.returncode}")
            if time.time() - started > TIMEOUT_S:
                raise TimeoutError(command)
            time.sleep(0.005)
        return time.time() - started
    finally:
        process.wait(timeout=TIMEOUT_S)


def records_if_any(run_dir):
    try:
        return training_records(run_dir)
    except (FileNotFoundError, json.JSONDecodeError):
        return []  # not written yet, or a line being written


# The measurements ------------------------------------------------------------


def throughput(settings, scratch, projects):
    """{workload: {variant: [samples/s per round]}}, variants alternating."""
    results = {w: {v: [] for v in VARIANTS} for w in settings.workloads}
    for _ in range(settings.throughput_rounds):
        for workload in settings.workloads:
            samples = settings.samples(workload)
            window = settings.window[workload]
            for variant in VARIANTS:
                if variant.startswith("gen_"):
                    mode = variant.removeprefix("gen_")
                    project = projects[mode, workload]
                    rate = generated_run(project, mode, workload, samples, window)
                else:
                    rate, _ = pattern_run(variant, workload, samples, window, scratch)
                results[workload][variant].append(rate)
    return results


def startup(settings, scratch, projects):
    """Seconds from the command to the first optimizer step (small CNN), and
    from a resume's command to its first step, median of the rounds."""
    samples = settings.samples("small_cnn")
    seconds = {key: [] for key in ("seed", "tutorial", "gen_mp", "gen_launch")}
    resumes = {"gen_mp": [], "gen_launch": []}
    for round_index in range(settings.rounds):
        for variant in ("seed", "tutorial"):
            _, first = pattern_run(variant, "small_cnn", samples, 2, scratch)
            seconds[variant].append(first)
        for mode in ("mp", "launch"):
            project = projects[mode, "small_cnn"]
            run_dir = project / f"startup-{round_index}"  # no earlier records
            flags = generated_flags("small_cnn", samples, run_dir, max_steps=2)
            seconds[f"gen_{mode}"].append(
                seconds_to_step(project, mode, flags, run_dir, 1)
            )
            # The run above saved its checkpoint at step 2: resume from it.
            flags = generated_flags(
                "small_cnn", samples, run_dir, max_steps=3, resume="auto"
            )
            resumes[f"gen_{mode}"].append(
                seconds_to_step(project, mode, flags, run_dir, 3)
            )
    return {
        "first_step_s": {k: statistics.median(v) for k, v in seconds.items()},
        "resume_to_first_step_s": {k: statistics.median(v) for k, v in resumes.items()},
    }


def process_counts(settings, projects):
    """The generated mp project on 1 and 2 processes (small CNN)."""
    samples = settings.samples("small_cnn")
    window = settings.window["small_cnn"]
    project = projects["mp", "small_cnn"]
    rates = {1: [], 2: []}
    for _ in range(settings.rounds):
        for processes in rates:
            rate = generated_run(project, "mp", "small_cnn", samples, window, processes)
            rates[processes].append(rate)
    return {f"{n}_processes": statistics.median(v) for n, v in rates.items()}


def checkpoint_save(project, scratch, rounds):
    """The generated checkpoint.save (atomic rename, fsync, pruning) against a
    plain torch.save of the same ResNet-18 model and optimizer state."""
    script = HERE / "checkpoint_save.py"
    package = project.name.replace("-", "_")
    out = Path(scratch) / "save.json"
    command = [PYTHON, script, package, scratch, rounds, out]
    run(command, scratch, child_env(PYTHONPATH=f"{HERE}{os.pathsep}{project}"))
    return json.loads(out.read_text())


def measure(quick=False):
    import torch  # noqa: F401  (fail early, before generating anything)

    settings = Settings(quick)
    with tempfile.TemporaryDirectory() as scratch:
        projects = {
            (mode, workload): generate(scratch, mode, workload)
            for mode in ("mp", "launch")
            for workload in settings.workloads
        }
        samples = throughput(settings, scratch, projects)
        results = {
            "samples_per_second": {
                workload: {v: statistics.median(r) for v, r in rates.items()}
                for workload, rates in samples.items()
            },
            "throughput_rounds": settings.throughput_rounds,
            "rounds": settings.rounds,
            **startup(settings, scratch, projects),
            "generated_mp_samples_per_second": process_counts(settings, projects),
            "checkpoint_save_s": checkpoint_save(
                projects["mp", "small_cnn"], scratch, settings.rounds + 2
            ),
            "runs_aborted_at_exit": EXIT_ABORTS,
        }
    return results


# Reporting -----------------------------------------------------------------


def ratio_table(results):
    rows = ["| pattern | " + " | ".join(results["samples_per_second"]) + " |"]
    rows.append("| --- |" + " --- |" * len(results["samples_per_second"]))
    for variant in VARIANTS:
        cells = []
        for rates in results["samples_per_second"].values():
            ratio = rates[variant] / rates["limit"]
            cells.append(f"{rates[variant]:.0f} samples/s ({ratio:.2f}x)")
        rows.append(f"| {LABELS[variant]} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def chart(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    workloads = list(results["samples_per_second"])
    variants = [v for v in VARIANTS if v != "limit"]
    figure, axes = plt.subplots(figsize=(8, 4))
    width = 0.8 / len(workloads)
    for index, workload in enumerate(workloads):
        rates = results["samples_per_second"][workload]
        ratios = [rates[v] / rates["limit"] for v in variants]
        positions = [i + index * width for i in range(len(variants))]
        axes.barh(positions, ratios, height=width, label=workload)
    axes.set_yticks(
        [i + width * (len(workloads) - 1) / 2 for i in range(len(variants))]
    )
    axes.set_yticklabels([LABELS[v] for v in variants], fontsize=8)
    axes.invert_yaxis()
    axes.axvline(1.0, color="black", linewidth=0.8)
    axes.set_xlabel("samples/s as a ratio of the one-process limit proxy")
    axes.set_title("2 CPU processes, gloo (benchmarks/side_by_side.py)")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def main():
    quick = "--quick" in sys.argv
    results = measure(quick)
    print(json.dumps(results, indent=2))
    print(ratio_table(results))
    if not quick:
        chart(results, CHART)
    return results


if __name__ == "__main__":
    main()
