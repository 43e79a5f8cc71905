"""The wheel carries the template; the editable install finds it in the checkout."""

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).parents[1]


def test_wheel_contains_the_template(tmp_path):
    command = [
        sys.executable,
        "-m",
        "build",
        "--wheel",
        "--no-isolation",
        "--outdir",
        str(tmp_path),
    ]
    result = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (wheel,) = tmp_path.glob("ddpgen-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    template = "ddpgen/templates/ddp/"
    expected = [
        path.relative_to(ROOT / "templates" / "ddp").as_posix()
        for path in (ROOT / "templates" / "ddp").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    ]
    assert sorted(
        name[len(template) :] for name in names if name.startswith(template)
    ) == sorted(expected)
    metadata = next(name for name in names if name.endswith("METADATA"))
    requires = [
        line.split(";")[0].strip()
        for line in zipfile.ZipFile(wheel).read(metadata).decode().splitlines()
        if line.startswith("Requires-Dist:") and "extra ==" not in line
    ]
    assert sorted(r.split()[1].split(">")[0] for r in requires) == [
        "black",
        "click",
        "cookiecutter",
        "jinja2",
    ]


def test_installed_wheel_renders_from_its_own_template(tmp_path):
    wheel_dir = tmp_path / "wheel"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "build",
            "--wheel",
            "--no-isolation",
            "--outdir",
            wheel_dir,
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=300,
    )
    target = tmp_path / "site"
    (wheel,) = wheel_dir.glob("*.whl")
    zipfile.ZipFile(wheel).extractall(target)  # a wheel is installed by unzipping it
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "import ddpgen.spec as s; print(s.builtin_template_dir())"
    )
    found = subprocess.run(
        [sys.executable, "-c", code, str(target)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert found.stdout.strip() == str(
        target / "ddpgen" / "templates" / "ddp"
    ), found.stderr
