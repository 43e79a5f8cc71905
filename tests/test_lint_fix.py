"""`ddpgen lint --fix` and `--diff`: each safe rewrite is exact, minimal (the
untouched lines keep their formatting and comments), idempotent, lints clean
and runs."""

import importlib.util
import subprocess
import sys
import textwrap

import pytest
from click.testing import CliRunner

from ddpgen.cli import main

HEADER = "import torch\nimport torch.distributed as dist\n"
# (code, the script with the bug, the same script fixed)
FIXES = [
    (
        "DDP002",
        """
        from torch.utils.data import DataLoader, DistributedSampler

        def loaders(data):  # keep   this comment
            sampler = DistributedSampler(data, num_replicas=1, rank=0)
            first = DataLoader(data, shuffle=True, sampler=sampler, batch_size=2)
            second = DataLoader(
                data,
                batch_size=2,
                sampler=sampler,
                shuffle=True,
            )
            return first, second
        """,
        """
        from torch.utils.data import DataLoader, DistributedSampler

        def loaders(data):  # keep   this comment
            sampler = DistributedSampler(data, num_replicas=1, rank=0)
            first = DataLoader(data, sampler=sampler, batch_size=2)
            second = DataLoader(
                data,
                batch_size=2,
                sampler=sampler,
            )
            return first, second
        """,
    ),
    (
        "DDP004",
        """
        def restore(path):
            state = torch.load(path)  # the newest checkpoint
            extra = torch.load(
                path,
                weights_only=True,
            )
            return state, extra
        """,
        """
        def restore(path):
            state = torch.load(path, map_location="cpu")  # the newest checkpoint
            extra = torch.load(
                path,
                weights_only=True, map_location="cpu",
            )
            return state, extra
        """,
    ),
    (
        "DDP006",
        """
        import argparse

        def parse(argv):
            parser = argparse.ArgumentParser()
            parser.add_argument("--local_rank", type=int, default=-1)
            return parser.parse_args(argv)
        """,
        """
        import argparse

        def parse(argv):
            parser = argparse.ArgumentParser()
            parser.add_argument("--local_rank", "--local-rank", type=int, default=-1)
            return parser.parse_args(argv)
        """,
    ),
]


def script(body):
    return HEADER + textwrap.dedent(body)


def lint(*args):
    return CliRunner().invoke(main, ["lint", *map(str, args)])


@pytest.mark.parametrize("code, bad, good", FIXES, ids=[c for c, _, _ in FIXES])
def test_fix_is_exact_minimal_and_idempotent(tmp_path, code, bad, good):
    path = tmp_path / "train.py"
    path.write_text(script(bad))
    assert code in lint("--select", code, path).output
    first = lint("--fix", path)
    assert "fixed " in first.output
    assert path.read_text() == script(good)
    assert lint("--select", code, path).exit_code == 0
    lint("--fix", path)
    assert path.read_text() == script(good)  # a second run changes nothing


def test_diff_shows_the_fixes_and_writes_nothing(tmp_path):
    for index, (_, bad, _) in enumerate(FIXES):
        (tmp_path / f"script{index}.py").write_text(script(bad))
    result = lint("--diff", tmp_path)
    assert result.exit_code == 1
    assert (
        '-    parser.add_argument("--local_rank", type=int, default=-1)'
        in result.output
    )
    assert '+    state = torch.load(path, map_location="cpu")' in result.output
    assert "-    first = DataLoader(data, shuffle=True," in result.output
    assert [p.read_text() for p in sorted(tmp_path.glob("*.py"))] == [
        script(bad) for _, bad, _ in FIXES
    ]
    clean = tmp_path / "clean"
    clean.mkdir()
    (clean / "ok.py").write_text("x = 1\n")
    assert lint("--diff", clean).exit_code == 0


def test_fixed_local_rank_parses_the_new_launchers_spelling(tmp_path):
    """torch >= 2.0's launcher passes --local-rank=N: the fix makes it parse."""
    path = tmp_path / "train.py"
    path.write_text(script(FIXES[2][1]) + "\nprint(parse(sys.argv[1:]).local_rank)\n")
    path.write_text("import sys\n" + path.read_text())
    command = [sys.executable, str(path), "--local-rank=3"]
    before = subprocess.run(command, capture_output=True, text=True, timeout=60)
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed here (the script imports it)")
    assert before.returncode == 2 and "unrecognized arguments" in before.stderr
    lint("--fix", path)
    after = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert after.returncode == 0 and after.stdout.strip() == "3", after.stderr


@pytest.mark.skipif(
    importlib.util.find_spec("torch") is None, reason="torch is not installed here"
)
def test_fixed_loaders_and_loads_run(tmp_path):
    """The DDP002 script raised ValueError; fixed, it builds both loaders. The
    fixed torch.load reads a checkpoint."""
    loaders, restore = tmp_path / "loaders.py", tmp_path / "restore.py"
    loaders.write_text(script(FIXES[0][1]) + "\nloaders(list(range(8)))\n")
    restore.write_text(script(FIXES[1][1]) + "\nprint(restore(__file__ + '.pt'))\n")
    import torch

    torch.save({"step": 3}, str(restore) + ".pt")
    run = [sys.executable]
    failing = subprocess.run(run + [str(loaders)], capture_output=True, text=True)
    assert "mutually exclusive with shuffle" in failing.stderr
    lint("--fix", tmp_path)
    for path in (loaders, restore):
        result = subprocess.run(run + [str(path)], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
    assert lint(tmp_path).exit_code == 0
