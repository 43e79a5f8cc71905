"""Curves of a run from its metrics.jsonl, as a PNG (no TensorBoard server needed).
The first command writes run/metrics.png:

    python -m launch.plot run
    python -m launch.plot run -o curves.png

Needs matplotlib: pip install -e '.[plot]'
"""

import argparse
import json
from pathlib import Path


def is_evaluation_curve(key):
    """eval_accuracy and the like: eval_loss goes with the loss, and the
    number of samples is no curve."""
    return key.startswith("eval_") and key not in ("eval_loss", "eval_samples")


PANELS = {  # title: which keys of the records it draws
    "loss": lambda key: key in ("loss", "eval_loss"),
    "evaluation": is_evaluation_curve,
    "learning rate": lambda key: key == "lr",
    "samples per second": lambda key: key == "samples_per_second",
}


def read_records(path):
    lines = path.read_text().splitlines()
    return [json.loads(line) for line in lines if line.endswith("}")]


def world_size_changes(records):
    """(step, number of processes) at each record where that number changed:
    a resume at another world size."""
    changes, previous = [], None
    for record in records:
        size = record.get("world_size", previous)
        if previous is not None and size != previous:
            changes.append((record["step"], size))
        previous = size
    return changes


def curves(records):
    """{key: ([steps], [values])} of every metric in the records."""
    found = {}
    for record in records:
        for key, value in record.items():
            if key not in ("step", "epoch", "world_size") and isinstance(
                value, (int, float)
            ):
                steps, values = found.setdefault(key, ([], []))
                steps.append(record["step"])
                values.append(value)
    return found


def plot(records, output):
    import matplotlib

    matplotlib.use("Agg")  # files only: clusters have no display
    from matplotlib import pyplot

    found = curves(records)
    figure, axes = pyplot.subplots(2, 2, figsize=(11, 7), constrained_layout=True)
    for axis, (title, wanted) in zip(axes.flat, PANELS.items(), strict=True):
        keys = sorted(filter(wanted, found))
        for key in keys:
            steps, values = found[key]
            axis.plot(steps, values, marker="." if len(steps) < 30 else None, label=key)
        for step, size in world_size_changes(records):
            axis.axvline(step, color="grey", linestyle=":", linewidth=1)
            axis.annotate(
                f"{size} proc.",
                (step, 1),
                xycoords=("data", "axes fraction"),
                fontsize=8,
                color="grey",
                rotation=90,
                va="top",
            )
        axis.set_title(title)
        axis.set_xlabel("optimizer step")
        if keys:
            axis.legend()
        else:
            axis.text(0.5, 0.5, "no records", ha="center", transform=axis.transAxes)
    figure.savefig(output, dpi=100)
    pyplot.close(figure)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="a run folder (--run-dir)")
    parser.add_argument("-o", "--output", type=Path, help="RUN_DIR/metrics.png")
    args = parser.parse_args(argv)
    metrics = args.run_dir / "metrics.jsonl"
    if not metrics.is_file():
        parser.error(f"{metrics} does not exist: is {args.run_dir} a run folder?")
    records = read_records(metrics)
    if not records:
        parser.error(f"{metrics} has no records yet")
    output = args.output or args.run_dir / "metrics.png"
    try:
        plot(records, output)
    except ImportError:
        parser.error("matplotlib is not installed: pip install -e '.[plot]'")
    except OSError as error:
        parser.error(f"cannot write {output}: {error.strerror}")
    print(f"wrote {output}")


if __name__ == "__main__":
    main()
