"""make test's --dist loadgroup keeps an xdist_group on one worker (the render
matrix's renders and its batched black run are set up once)."""

import re
import subprocess
import sys

import pytest

pytest.importorskip("xdist")

GROUPED = """
import pytest

pytestmark = pytest.mark.xdist_group("one")


@pytest.mark.parametrize("index", range(8))
def test_grouped(index):
    pass
"""


def test_loadgroup_keeps_a_group_on_one_worker(tmp_path):
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    command = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider"]
    command += ["-n", "2", "--dist", "loadgroup", "test_grouped.py"]
    result = subprocess.run(
        command, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    workers = re.findall(r"^\[(gw\d+)\] .* PASSED", result.stdout, re.MULTILINE)
    assert len(workers) == 8 and len(set(workers)) == 1, result.stdout
