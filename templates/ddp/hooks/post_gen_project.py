"""Drop the files that belong to options not chosen (whole-file conditionals)."""

from pathlib import Path

MODE = "{{ cookiecutter.mode }}"
MODEL_PARALLEL = "{{ cookiecutter.model_parallel }}" == "True"
TRACKER = "{{ cookiecutter.tracker }}"
TEXT = "{{ cookiecutter.data }}" == "text"
PACKAGE = Path("{{ cookiecutter.package_name }}")

FILES_FOR_OPTION = {
    PACKAGE / "spawn.py": MODE == "mp",
    PACKAGE / "model_parallel.py": MODEL_PARALLEL,
    PACKAGE / "tracking.py": TRACKER != "none",
    PACKAGE / "tokens.py": TEXT,
    PACKAGE / "sample.py": TEXT,
    PACKAGE / "lm_metrics.py": TEXT,
    Path("tests") / "test_model_parallel.py": MODEL_PARALLEL,
}

for path, wanted in FILES_FOR_OPTION.items():
    if not wanted:
        path.unlink()
