"""`python -m PKG.doctor`, the generated preflight check, run as users run it:
under torchrun, with its own processes (mp), and alone with a rank missing.
(Under srun: tests/test_slurm.py.)"""

import json
import os
import socket
import subprocess
import time

import pytest
from helpers import (
    PYTHON,
    TORCHRUN,
    child_env,
    free_port,
    import_generated,
    package,
    run,
)

FAST = ["--device", "cpu", "--max-mib", "1"]


def assert_healthy_report(result, ranks):
    assert result.returncode == 0, result.output[-3000:]
    out = result.stdout
    assert "torch " in out and "backend: gloo" in out and "/dev/shm:" in out
    assert "TORCH_DISTRIBUTED_DEBUG=(unset)" in out
    devices = " ".join(f"{rank}=cpu" for rank in range(ranks))
    assert f"ranks: {ranks} on 1 host(s); devices: {devices}" in out
    sizes = [line.split()[0:2] for line in out.splitlines() if "GB/s" in line]
    assert sizes[0] == ["4", "B"] and sizes[-1] == ["1", "MiB"]
    assert "ok: every rank joined and all_reduce works" in out


@pytest.mark.parametrize("mode", ["launch", "mp"])
def test_doctor_under_torchrun(projects, mode):
    """An mp project's doctor under an external launcher checks the launcher's
    ranks (it starts none of its own): one report, one table."""
    project = projects(mode)
    command = TORCHRUN + ["--standalone", "--nproc-per-node", "2"]
    command += ["-m", f"{package(project)}.doctor", *FAST]
    result = run(command, cwd=project, timeout=120)
    assert_healthy_report(result, ranks=2)
    assert result.stdout.count("ranks: ") == 1, result.stdout
    assert result.stdout.count("ok: every rank joined") == 1


def test_doctor_starts_its_own_processes_in_mp_mode(projects):
    project = projects("mp", model_parallel=True)
    command = [PYTHON, "-m", f"{package(project)}.doctor", "--nprocs", "2", *FAST]
    result = run(command, cwd=project, timeout=120)
    assert_healthy_report(result, ranks=2)
    assert "layout: 2 processes, 2 on this node; rank 0 uses cpu" in result.stdout


def test_doctor_names_the_rank_that_never_joins(projects):
    project = projects("launch")
    env = child_env(RANK=0, WORLD_SIZE=2, MASTER_ADDR="127.0.0.1")
    env["MASTER_PORT"] = str(free_port())
    started = time.monotonic()
    command = [PYTHON, "-m", f"{package(project)}.doctor", "--timeout", "3", *FAST]
    result = run(command, cwd=project, env=env, check=False, timeout=120)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "missing rank(s) 1 of 2: not joined within 3s (--timeout); "
        "check that every node started and can reach 127.0.0.1"
    )
    assert time.monotonic() - started < 60


def test_mp_doctor_names_the_missing_node(projects):
    project = projects("mp")
    flags = ["--nnodes", "2", "--node-rank", "0", "--nprocs", "1"]
    flags += ["--master-port", free_port(), "--timeout", "3"]
    command = [PYTHON, "-m", f"{package(project)}.doctor", *flags, *FAST]
    result = run(command, cwd=project, check=False, timeout=120)
    assert result.returncode == 1
    assert "missing rank(s) 1 of 2: not joined within 3s" in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--timeout", "0"], "--timeout and --max-mib must be positive"),
        (["--max-mib", "-1"], "--timeout and --max-mib must be positive"),
        (["--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_doctor_flags_are_checked(projects, flags, message):
    project = projects("launch")
    command = [PYTHON, "-m", f"{package(project)}.doctor", *flags]
    result = run(command, cwd=project, check=False, timeout=60)
    assert result.returncode == 2 and message in result.stderr
    assert "Traceback" not in result.output


def test_doctor_without_master_addr_says_so(projects):
    project = projects("launch")
    env = child_env(RANK=1, WORLD_SIZE=2)
    command = [PYTHON, "-m", f"{package(project)}.doctor", *FAST]
    result = run(command, cwd=project, env=env, check=False, timeout=60)
    assert result.returncode == 1
    assert "WORLD_SIZE=2 but MASTER_ADDR is not set" in result.stderr


def test_doctor_stacks_asks_only_live_ranks_of_this_host(projects, tmp_path, capsys):
    """A rank's record outlives it: a pid now another process's must not get
    SIGUSR1 (its default action ends the process)."""
    stacks = import_generated(projects("launch"), "stacks")
    debug = tmp_path / "debug"
    debug.mkdir()
    gone = subprocess.Popen(["true"])
    gone.wait()
    stranger = subprocess.Popen(["sleep", "60"])
    try:
        here = socket.gethostname()
        records = [f"{here} {stranger.pid} 1", f"{here} {gone.pid} 1", "node7 42 1"]
        for rank, record in enumerate(records):
            (debug / f"rank-{rank}.pid").write_text(record + "\n")
        an_hour_ago = time.time() - 3600  # rank 0 wrote its record before that
        os.utime(debug / "rank-0.pid", (an_hour_ago, an_hour_ago))
        assert stacks.stacks([str(tmp_path)]) == 0
        out = capsys.readouterr().out
        assert stranger.poll() is None  # not signalled
        assert (
            f"  rank 0: not running: pid {stranger.pid} now belongs to a process "
            "started later" in out
        )
        assert f"  rank 1: not running: pid {gone.pid} has exited" in out
        assert "  rank 2: on host node7: run this there" in out
    finally:
        stranger.kill()
        stranger.wait()


def test_a_restarted_rank_drops_its_last_attempts_failure(projects, tmp_path):
    """`doctor why` reads what the last attempt left: a restarted rank's new
    record replaces its old failure files."""
    forensics = import_generated(projects("launch"), "forensics")
    debug = tmp_path / "debug"
    debug.mkdir()
    for name in ("rank-0.error", "collectives-rank-0", "rank-1.error"):
        (debug / name).write_text("from the last attempt\n")
    forensics.forget_last_attempt(tmp_path, 0)
    assert sorted(path.name for path in debug.iterdir()) == [
        "rank-1.error",  # another rank's: it drops its own when it starts
    ]


def test_doctor_why_names_a_failure_the_recorder_did_not_keep(
    projects, tmp_path, capsys
):
    """TORCH_FR_BUFFER_SIZE=0: no collectives, but the failure still counts."""
    why = import_generated(projects("launch"), "why")
    debug = tmp_path / "debug"
    debug.mkdir()
    for rank in (0, 1):
        (debug / f"rank-{rank}.pid").write_text(f"node7 {100 + rank} 1\n")
    failure = {"time": 1.0e9, "error": "RuntimeError: Connection closed by peer"}
    failure |= {"in_collective": True, "raised_at": "pkg/trainer.py:146 in f"}
    (debug / "rank-1.error").write_text(json.dumps(failure))
    assert why.why([str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("  rank 0 (pid 100 on node7): wrote no failure: ")
    assert lines[2] == (
        "  rank 1 (pid 101 on node7): failed in a collective the flight "
        "recorder did not keep (TORCH_FR_BUFFER_SIZE)"
    )
    assert lines[3].startswith("first to fail: rank 1 at ")
    assert lines[3].endswith(": RuntimeError: Connection closed by peer")


@pytest.mark.parametrize("command", ["stacks", "why"])
def test_doctor_of_a_folder_that_is_no_run_is_one_line(projects, tmp_path, command):
    project = projects("launch")
    command = [PYTHON, "-m", f"{package(project)}.doctor", command, tmp_path]
    result = run(command, cwd=project, check=False)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        f"error: no rank wrote {tmp_path}/debug/rank-N.pid: is it a run?\n"
    )
