"""Render generated_examples/ through the real CLI: `make examples`.

Never edit generated_examples/ by hand; tests/test_golden.py fails when it
differs from a fresh render.
"""

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

EXAMPLES = {
    "launch": ["--mode", "launch"],
    "mp": ["--mode", "mp"],
    "launch-model-parallel": ["--mode", "launch", "--model-parallel"],
    "mp-model-parallel": ["--mode", "mp", "--model-parallel"],
    "mp-fakedata-cnn": ["--mode", "mp", "--data", "fakedata", "--model", "cnn"],
    "mp-wandb": ["--mode", "mp", "--tracker", "wandb"],
    "launch-mlflow": ["--mode", "launch", "--tracker", "mlflow"],
    "launch-no-tracker": ["--mode", "launch", "--tracker", "none"],
    "launch-imagefolder-resnet18": [
        "--mode",
        "launch",
        "--data",
        "imagefolder",
        "--model",
        "resnet18",
    ],
    "launch-text-gpt": ["--mode", "launch", "--data", "text", "--model", "gpt"],
}


def render_examples(target):
    """Render every example under `target`, replacing what was there."""
    target = Path(target)
    with tempfile.TemporaryDirectory(prefix="ddpgen-examples-") as scratch:
        for name, flags in EXAMPLES.items():
            command = [
                sys.executable,
                "-m",
                "ddpgen",
                "new",
                name,
                "--output-dir",
                scratch,
            ]
            subprocess.run(
                command + flags, check=True, timeout=120, stdout=subprocess.DEVNULL
            )
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(scratch, target)


if __name__ == "__main__":
    render_examples(sys.argv[1] if len(sys.argv) > 1 else "generated_examples")
