"""Run the generator's tests (no torch) on each Python version ddpgen supports:
`make test-pythons`.

Each version gets its own venv (.venv-3.X) with the `test-generator` extra. A
version whose interpreter is not on this machine is skipped, saying so; any
other failure fails the run.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GENERATOR_TESTS = [
    "tests/test_cli.py",
    "tests/test_templates.py",
    "tests/test_render_matrix.py",
    "tests/test_golden.py",
    "tests/test_docs.py",
    "tests/test_lint.py",
    "tests/test_ddp_lint.py",
    "tests/test_lint_formats.py",
    "tests/test_lint_fix.py",
    "tests/test_packaging.py",
]
TIMEOUT = 1500


def find_interpreter(version):
    """pythonX.Y on PATH, else pyenv's newest X.Y.*; None when neither exists."""
    candidates = [shutil.which(f"python{version}")]
    pyenv_root = os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv"))
    installed = sorted(Path(pyenv_root, "versions").glob(f"{version}.*"))
    candidates += [str(path / "bin" / "python3") for path in reversed(installed)]
    for candidate in filter(None, candidates):
        if reports_version(candidate, version):
            return candidate
    return None


def reports_version(interpreter, version):
    code = "import sys; print('%d.%d' % sys.version_info[:2])"
    try:
        result = subprocess.run(
            [interpreter, "-c", code], capture_output=True, text=True, timeout=30
        )
    except OSError:  # a pyenv shim for a version that is not installed
        return False
    return result.returncode == 0 and result.stdout.strip() == version


def test_on(version, interpreter):
    venv = ROOT / f".venv-{version}"
    python = venv / "bin" / "python"
    steps = [
        [interpreter, "-m", "venv", "--clear", str(venv)],
        [str(python), "-m", "pip", "install", "-q", "-e", ".[test-generator]"],
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", *GENERATOR_TESTS],
    ]
    for step in steps:
        if subprocess.run(step, cwd=ROOT, timeout=TIMEOUT).returncode != 0:
            return False
    return True


def main(versions):
    failed = []
    for version in versions:
        interpreter = find_interpreter(version)
        if interpreter is None:
            print(f"== Python {version}: SKIPPED, no interpreter on this machine")
            continue
        print(f"== Python {version}: {interpreter}", flush=True)
        if not test_on(version, interpreter):
            failed.append(version)
    if failed:
        print(f"generator tests failed on Python {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["3.10", "3.12", "3.13"]))
