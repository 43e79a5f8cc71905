"""Beyond one machine and surviving faults: loopback only, every run bounded."""

import json
import os
import pickle
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
import torch
from helpers import (
    PYTHON,
    SMALL_SYNTHETIC,
    STEPS_PER_EPOCH,
    TORCHRUN,
    assert_same_weights,
    checkpoints,
    child_env,
    final_model,
    free_port,
    kill_group,
    package,
    run,
    step_records,
    train,
)

INJECT = Path(__file__).parent / "faults" / "inject.py"
SLOW = pytest.mark.slow  # make test-slow (CI): make test takes the path elsewhere


def cpu_flags(workdir, *flags):
    return [
        "--device",
        "cpu",
        "--run-dir",
        workdir,  # checkpoints in workdir/checkpoints
        *SMALL_SYNTHETIC,
        *flags,
    ]


def torchrun_with_fault(project, workdir, fault, step, *flags, restarts=0, once=False):
    command = TORCHRUN + ["--standalone", "--nproc-per-node", "2"]
    command += ["--max-restarts", restarts, INJECT, *cpu_flags(workdir, *flags)]
    dying_rank = 0 if fault == "kill-in-save" else 1  # rank 0 alone saves
    env = child_env(
        FAULT=fault,
        FAULT_STEP=step,
        FAULT_ONCE=workdir / "fault-once" if once else "",
        FAULT_RANK=dying_rank,
    )
    return run(command, cwd=project, env=env, check=False, timeout=300)


# 1. Multi-node files and the commands the README gives


STAND_IN = """#!/bin/bash
# Records how the script called it; `scontrol show hostnames` names the head node.
if [ "$(basename "$0")" = scontrol ]; then echo n1; exit 0; fi
echo "OMP_NUM_THREADS=$OMP_NUM_THREADS" > "$RECORD.env"
printf '%s\\0' "$@" > "$RECORD"
"""


def run_sbatch_script(project, tmp_path, gpus, cpus):
    """Run scripts/slurm.sbatch as Slurm would start it, with stand-ins for
    srun and scontrol; return (OMP_NUM_THREADS, srun's arguments)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("srun", "scontrol"):
        (bin_dir / name).write_text(STAND_IN)
        (bin_dir / name).chmod(0o755)
    record = tmp_path / "srun-args"
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "RECORD": str(record),
        "SLURM_SUBMIT_DIR": str(project),
        "SLURM_JOB_NODELIST": "n[1-2]",
        "SLURM_JOB_ID": "4321",
        "SLURM_NNODES": "2",
        "SLURM_NODEID": "0",
        "SLURM_CPUS_PER_TASK": str(cpus),
        **({"SLURM_GPUS_ON_NODE": str(gpus)} if gpus is not None else {}),
    }
    script = project / "scripts" / "slurm.sbatch"
    subprocess.run(["bash", script, "--epochs", "2"], env=env, check=True, timeout=30)
    threads = Path(f"{record}.env").read_text().strip()
    return threads, record.read_text().split("\0")[:-1]


@pytest.mark.parametrize(
    "model_parallel, gpus, cpus, processes, threads",
    [
        (False, 8, 32, 8, 4),
        (False, None, 1, 1, 1),  # a CPU node: Slurm sets no GPU count
        (False, 0, 4, 1, 4),
        (True, 4, 32, 2, 16),
        (True, 1, 8, 1, 8),
        (True, 0, 1, 1, 1),
    ],
)
@pytest.mark.parametrize("mode", ["launch", "mp"])
def test_slurm_script_lays_out_processes_and_threads(
    projects, tmp_path, mode, model_parallel, gpus, cpus, processes, threads
):
    project = projects(mode, model_parallel=model_parallel)
    subprocess.run(
        ["bash", "-n", project / "scripts" / "slurm.sbatch"], check=True, timeout=30
    )
    omp, args = run_sbatch_script(project, tmp_path, gpus, cpus)
    assert omp == f"OMP_NUM_THREADS={threads}"
    assert args[:4] == [
        "--ntasks=2",  # one task per node of the allocation (SLURM_NNODES)
        "--ntasks-per-node=1",
        f"--cpus-per-task={cpus}",
        "--kill-on-bad-exit=1",
    ]
    if mode == "launch":
        assert args[args.index("--nproc-per-node") + 1] == str(processes)
        assert args[args.index("--rdzv-endpoint") + 1] == "n1:24321"
        assert args[args.index("--shutdown-timeout") + 1] == "100"
    else:
        assert args[7:10] == [str(processes), "n1", "24321"]  # after bash -c SCRIPT
    assert args[-2:] == ["--epochs", "2"]


def run_two_nodes(project, workdir, extra_env, *flags, expect_success=True):
    """Two scripts/multinode.sh agents on this machine, one process each;
    returns [(exit code, output)] per node."""
    common = dict(NNODES=2, NPROC_PER_NODE=1, NPROCS=1, **extra_env)
    jobs = []
    for node_rank in range(2):
        env = child_env(NODE_RANK=node_rank, **common)
        command = ["bash", "scripts/multinode.sh", *cpu_flags(workdir, *flags)]
        command += ["--metrics-file", workdir / f"metrics{node_rank}.json"]
        jobs.append(
            subprocess.Popen(
                [str(c) for c in command],
                cwd=project,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
            )
        )
    try:
        outputs = [job.communicate(timeout=240)[0] for job in jobs]
    finally:
        for job in jobs:
            kill_group(job.pid)
    results = [
        (job.returncode, output) for job, output in zip(jobs, outputs, strict=True)
    ]
    if expect_success:
        for code, output in results:
            assert code == 0, output[-4000:]
    return results


def two_node_env(mode):
    if mode == "launch":
        return dict(RDZV_HOST="127.0.0.1", RDZV_PORT=free_port(), RDZV_ID="loopback")
    return dict(MASTER_ADDR="127.0.0.1", MASTER_PORT=free_port())


@pytest.mark.parametrize("mode", ["launch", "mp"])
def test_two_nodes_on_loopback_equal_one_node(projects, tmp_path, mode):
    project = projects(mode)
    readme = (project / "README.md").read_text()
    if mode == "launch":
        assert "NNODES=2 RDZV_HOST=node0 ./scripts/multinode.sh" in readme
    else:
        assert "NNODES=2 NODE_RANK=1 MASTER_ADDR=node0 ./scripts/multinode.sh" in readme
    run_two_nodes(project, tmp_path / "nodes", two_node_env(mode), "--epochs", "2")
    train(project, tmp_path / "one", *SMALL_SYNTHETIC, "--epochs", "2")
    assert_same_weights(final_model(tmp_path / "nodes"), final_model(tmp_path / "one"))


# 3, 4. Elastic restarts


@pytest.mark.fault
@SLOW  # the two-agent restart below takes the same path
def test_elastic_restart_resumes_and_matches_an_uninterrupted_run(projects, tmp_path):
    project = projects("launch")
    kill_at = STEPS_PER_EPOCH + 3  # mid-way through the second epoch
    result = torchrun_with_fault(
        project,
        tmp_path / "killed",
        "kill-at-step",
        kill_at,
        "--epochs",
        "3",
        restarts=1,
        once=True,
    )
    assert result.returncode == 0, result.output[-4000:]
    assert f"resumed from {tmp_path / 'killed' / 'checkpoints'}" in result.stdout
    train(project, tmp_path / "straight", *SMALL_SYNTHETIC, "--epochs", "3")
    assert_same_weights(
        final_model(tmp_path / "killed"), final_model(tmp_path / "straight")
    )


@pytest.mark.fault
def test_two_agents_restart_after_a_killed_worker_and_match(projects, tmp_path):
    """Two torchrun agents (scripts/multinode.sh, c10d on loopback): a worker
    killed mid-epoch on one node restarts both nodes, and the job ends with the
    uninterrupted run's weights."""
    project = projects("launch")
    workdir = tmp_path / "nodes"
    workdir.mkdir()
    fault = dict(
        FAULT="kill-at-step",
        FAULT_STEP=STEPS_PER_EPOCH + 3,
        FAULT_RANK=1,
        FAULT_ONCE=workdir / "fault-once",
        PYTHONPATH=INJECT.parent,
        MAX_RESTARTS=1,
    )
    env = dict(RDZV_HOST="127.0.0.1", RDZV_PORT=free_port(), RDZV_ID="restart")
    results = run_two_nodes(project, workdir, {**env, **fault}, "--epochs", "3")
    assert (workdir / "fault-once").exists()  # the fault happened
    assert sum("resumed from" in output for _, output in results) == 1  # rank 0's
    train(project, tmp_path / "straight", *SMALL_SYNTHETIC, "--epochs", "3")
    assert_same_weights(final_model(workdir), final_model(tmp_path / "straight"))


def start_agent(project, workdir, name, **env):
    """One scripts/multinode.sh agent (one process) in a session of its own."""
    command = ["bash", "scripts/multinode.sh", *cpu_flags(workdir, *ELASTIC)]
    return subprocess.Popen(
        [str(c) for c in command],
        cwd=project,
        env=child_env(**env),
        stdout=(workdir / f"{name}.log").open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def listening(port):
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def trains_on(workdir, world_size):
    try:
        return any(r["world_size"] == world_size for r in step_records(workdir))
    except (FileNotFoundError, json.JSONDecodeError):  # not yet, or mid-write
        return False


# 6 epochs of 8 steps, slowed so that the nodes can come and go mid-run.
ELASTIC = ["--epochs", "6", "--log-every", "1"]  # global batch 32 from the start


@pytest.mark.fault
def test_an_elastic_job_loses_a_node_goes_on_alone_and_grows_back(projects, tmp_path):
    """NNODES=1:2. SIGKILL the group of the agent that does not host the
    rendezvous: the other restarts alone from the newest checkpoint, losing
    the steps since it. A new agent joins at the next round: the running
    worker saves on torchrun's SIGTERM, so growing loses no step."""
    project, workdir = projects("launch"), tmp_path / "nodes"
    workdir.mkdir()
    port = free_port()
    common = dict(NNODES="1:2", NPROC_PER_NODE=1, RDZV_HOST="127.0.0.1")
    common |= dict(RDZV_PORT=port, RDZV_ID="elastic", MAX_RESTARTS=1)
    common |= dict(RDZV_CONF="last_call_timeout=2", PYTHONPATH=INJECT.parent)
    common |= dict(FAULT="none", FAULT_STEP=0, FAULT_STEP_SECONDS=0.25)
    killed_at, killed = 2 * 8 + 3, workdir / "killed-at"
    agents = {"host": start_agent(project, workdir, "host", **common)}
    try:
        wait_for(lambda: listening(port), "the rendezvous host", 60)
        doomed = dict(FAULT="kill-agent-at-step", FAULT_STEP=killed_at)
        doomed |= dict(FAULT_RANK="any", FAULT_LOG=killed)
        agents["lost"] = start_agent(project, workdir, "lost", **common | doomed)
        wait_for(lambda: trains_on(workdir, 1), "training on 1 node", 120)
        alone = time.time() - float(killed.read_text())
        agents["new"] = start_agent(project, workdir, "new", **common)
        for agent in agents.values():
            agent.wait(timeout=240)
    finally:
        for agent in agents.values():
            kill_group(agent.pid)
    logs = {name: (workdir / f"{name}.log").read_text() for name in agents}
    assert agents["lost"].returncode == -signal.SIGKILL, logs["lost"]
    assert agents["host"].returncode == agents["new"].returncode == 0, logs
    records = step_records(workdir)
    assert [r["step"] for r in records] == list(range(1, 49))
    sizes = [r["world_size"] for r in records]
    changes = [size for i, size in enumerate(sizes) if sizes[i - 1 : i] != [size]]
    assert changes == [2, 1, 2], sizes
    shrunk = re.search(r"resumed at step (\d+): 2 -> 1 process,", logs["host"])
    assert int(shrunk[1]) == 2 * 8  # the newest checkpoint: the epoch's end
    stopped = re.search(r"SIGTERM: stopping at step (\d+) to save", logs["host"])
    grown = re.search(
        r"resumed at step (\d+): 1 -> 2 processes,", "".join(logs.values())
    )
    assert stopped and grown and stopped[1] == grown[1], logs
    print(
        f"steps lost: {killed_at - int(shrunk[1])} on the kill, 0 on the growth;"
        f" node lost to 1-node training: {alone:.1f} s"
    )


def test_restarts_on_two_agents_without_a_fresh_store_are_refused(projects, tmp_path):
    """torchrun's shared store across restarts would hang restarted workers."""
    env = child_env(TORCH_DISABLE_SHARE_RDZV_TCP_STORE=0)
    port = free_port()
    agents = [
        subprocess.Popen(
            [str(c) for c in TORCHRUN]
            + ["--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d"]
            + ["--rdzv-endpoint", f"127.0.0.1:{port}", "--max-restarts", "1"]
            + ["train.py", *map(str, cpu_flags(tmp_path / f"node{node}"))],
            cwd=projects("launch"),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        for node in range(2)
    ]
    try:
        outputs = [agent.communicate(timeout=120)[0] for agent in agents]
    finally:
        for agent in agents:
            kill_group(agent.pid)
    assert all(agent.returncode != 0 for agent in agents)
    # Said by global rank 0 alone, once per attempt (torchrun restarts every
    # failed attempt, and --max-restarts 1 makes two).
    said = "".join(outputs).count("TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1")
    assert said in (1, 2), outputs
    assert "distributed.py" not in "".join(outputs)  # a line, not our traceback


@pytest.mark.fault
def test_exhausted_restarts_fail_and_name_the_rank(projects, tmp_path):
    started = time.monotonic()
    result = torchrun_with_fault(
        projects("launch"), tmp_path, "kill-at-step", 2, "--epochs", "3", restarts=1
    )
    assert result.returncode != 0
    assert "rank      : 1 (local_rank: 1)" in result.stderr
    assert "Signal 9 (SIGKILL)" in result.stderr
    assert time.monotonic() - started < 200


def test_torchrun_summary_carries_the_failing_ranks_traceback(projects, tmp_path):
    """train.py's main is wrapped with @record: no `error_file: <N/A>`."""
    result = torchrun_with_fault(projects("launch"), tmp_path, "raise-at-step", 2)
    assert result.returncode != 0
    summary = result.stderr[result.stderr.index("Root Cause") :]
    assert "rank      : 1 (local_rank: 1)" in summary
    assert "error_file: <N/A>" not in summary
    assert "RuntimeError: injected failure after step 2" in summary


def test_a_failing_mp_worker_fails_the_job_naming_it(projects, tmp_path):
    """A failure, not a user's mistake (those exit 2 with their one line)."""
    project = projects("mp")
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    flags = cpu_flags(tmp_path, "--epochs", "1", "--checkpoint-dir", not_a_folder)
    command = [PYTHON, "train.py", "--nprocs", "2", *flags]
    result = run(command, cwd=project, check=False, timeout=120)
    assert result.returncode == 1
    assert f"cannot save a checkpoint in {not_a_folder}" in result.stderr
    assert (
        "worker 0 exited with code 1" in result.stderr
        or "worker 1 exited with code 1" in result.stderr
    )


# No rank waits alone: on two nodes, a rank that failed alone would leave the
# other node's rank in a collective until --dist-timeout (600 s).


@pytest.mark.fault
@pytest.mark.parametrize("mode", ["launch", "mp"])
def test_a_failed_save_on_rank_0_stops_every_node_promptly(projects, tmp_path, mode):
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    started = time.monotonic()
    results = run_two_nodes(
        projects(mode),
        tmp_path,
        two_node_env(mode),
        *("--epochs", "1", "--checkpoint-dir", not_a_folder / "checkpoints"),
        expect_success=False,
    )
    assert all(code != 0 for code, _ in results)
    said = f"rank 0: cannot save a checkpoint in {not_a_folder / 'checkpoints'}"
    assert sum(said in output for _, output in results) >= 1
    assert time.monotonic() - started < 150


@pytest.mark.fault
def test_a_checkpoint_another_node_cannot_read_stops_every_node(projects, tmp_path):
    project = projects("launch")  # the fault is injected where RANK is set
    train(project, tmp_path, *SMALL_SYNTHETIC, "--epochs", "1")
    fault = dict(FAULT="unreadable-on-rank", FAULT_STEP=0, FAULT_RANK=1)
    fault["PYTHONPATH"] = INJECT.parent
    started = time.monotonic()
    results = run_two_nodes(
        project,
        tmp_path,
        {**two_node_env("launch"), **fault},
        *("--epochs", "2"),
        expect_success=False,
    )
    assert all(code != 0 for code, _ in results)
    output = "".join(output for _, output in results)
    assert "rank 1: cannot read " in output
    assert "every node must see the checkpoint folder" in output
    assert time.monotonic() - started < 150


# 5. SIGTERM and Ctrl-C


def start_then_stop(project, command, workdir, stop):
    """Start training; once the first checkpoint is saved, SIGTERM the launcher
    (as Slurm and Kubernetes do) or SIGINT every process (a terminal's Ctrl-C)."""
    process = subprocess.Popen(
        [str(c) for c in command],
        cwd=project,
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output = []
        for line in process.stdout:  # bounded by pytest-timeout
            output.append(line)
            if line.startswith("saved "):
                if stop == "SIGINT":
                    os.killpg(process.pid, signal.SIGINT)
                else:
                    process.send_signal(signal.SIGTERM)
                break
        output.append(process.communicate(timeout=120)[0])
        return process.returncode, "".join(output), process.pid
    finally:
        still_running = group_outlives(process.pid, seconds=10)
        leftovers = subprocess.run(
            ["ps", "-o", "pid,stat,args", "-g", str(process.pid)],
            capture_output=True,
            text=True,
        ).stdout
        kill_group(process.pid)
        assert not still_running, f"processes were left behind:\n{leftovers}"


def group_outlives(pgid, seconds):
    """Whether a process of the group still runs `seconds` after the launcher
    exited. Not at once: multiprocessing's resource tracker, which the mp
    launcher does not wait for, exits only once it reads the launcher's end of
    its pipe close, a moment after the launcher itself (zombies have exited)."""
    deadline = time.monotonic() + seconds
    while True:
        listing = subprocess.run(
            ["ps", "-o", "stat=", "-g", str(pgid)],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.split()
        running = any(not state.startswith("Z") for state in listing)
        if not running or time.monotonic() > deadline:
            return running
        time.sleep(0.1)


@pytest.mark.fault
# SIGTERM takes SIGINT's path in both modes (and Slurm's preemption tests
# send it through the launchers): make test-slow.
@pytest.mark.parametrize("stop", [pytest.param("SIGTERM", marks=SLOW), "SIGINT"])
@pytest.mark.parametrize("mode", ["launch", "mp"])
def test_a_stop_signal_saves_exits_and_the_next_run_resumes(
    projects, tmp_path, mode, stop
):
    project = projects(mode)
    # Long epochs: the stop lands a few steps after the signal, far from the
    # epoch's end however busy the machine is.
    long_epochs = ["--train-size", "4096", "--epochs", "400"]
    flags = cpu_flags(tmp_path, *long_epochs, "--save-every", "1")
    if mode == "launch":
        command = TORCHRUN + [
            "--standalone",
            "--nproc-per-node",
            "2",
            "train.py",
            *flags,
        ]
    else:
        command = [PYTHON, "train.py", "--nprocs", "2", *flags]
    returncode, output, _ = start_then_stop(project, command, tmp_path, stop)
    assert f"{stop}: stopping at step" in output
    if mode == "mp":  # torchrun's agent reports the signal it got itself
        assert returncode == 0, output[-3000:]
        assert "Traceback" not in output and "Error" not in output, output[-3000:]
    assert "KeyboardInterrupt" not in output
    saved_on_sigterm = checkpoints(tmp_path)[-1]
    stopped_at = torch.load(saved_on_sigterm, weights_only=True)["step"]
    assert f"saved {saved_on_sigterm}" in output
    assert stopped_at % (4096 // 32) != 0  # mid-epoch, not an epoch-end save
    metrics, result = train(
        project, tmp_path, *SMALL_SYNTHETIC, *long_epochs, "--max-steps", stopped_at + 1
    )
    assert f"resumed from {saved_on_sigterm}" in result.stdout
    assert metrics["steps"] == stopped_at + 1


def wait_for(condition, what, timeout):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(0.1)


@pytest.mark.fault
def test_sigusr1_writes_a_ranks_stacks_and_training_goes_on(projects, tmp_path):
    """What `kill -USR1` on a hung rank gives: every thread's stack, the
    trainer's frames among them, in RUN_DIR/debug; the run is not disturbed."""
    project = projects("mp")
    long_epochs = ["--train-size", "4096", "--epochs", "400", "--log-every", "1"]
    command = [PYTHON, "train.py", "--nprocs", "2", *cpu_flags(tmp_path, *long_epochs)]
    process = subprocess.Popen(
        [str(c) for c in command],
        cwd=project,
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        lines = iter(process.stdout)  # bounded by pytest-timeout
        next(line for line in lines if line.startswith("step 1 "))
        host, pid, _ = (tmp_path / "debug" / "rank-1.pid").read_text().split()
        assert host == socket.gethostname()
        os.kill(int(pid), signal.SIGUSR1)
        stacks = tmp_path / "debug" / "rank-1.stacks"
        wait_for(lambda: "Current thread" in stacks.read_text(), "the stacks", 60)
        assert "trainer.py" in stacks.read_text(), stacks.read_text()
        # Rank 1 went on: it agrees to the stop and the job exits cleanly.
        process.send_signal(signal.SIGTERM)
        output = process.communicate(timeout=120)[0]
        assert process.returncode == 0, output[-3000:]
        assert "SIGTERM: stopping at step" in output
    finally:
        kill_group(process.pid)


@pytest.mark.fault
def test_doctor_stacks_tells_the_hung_rank_from_the_waiting_one(projects, tmp_path):
    """Rank 1 stops stepping after step 3 (asleep), rank 0 waits for it in a
    collective: `doctor stacks` prints each rank's line of the project; a
    stopped rank is named as silent (exit 1)."""
    project = projects("launch")
    command = TORCHRUN + ["--standalone", "--nproc-per-node", "2", INJECT]
    command += cpu_flags(tmp_path, "--epochs", "100", "--log-every", "1")
    env = child_env(FAULT="hang-at-step", FAULT_STEP=3, FAULT_RANK=1)
    process = subprocess.Popen(
        [str(c) for c in command],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    doctor = [PYTHON, "-m", f"{package(project)}.doctor", "stacks", tmp_path]
    try:
        next(line for line in process.stdout if line.startswith("step 3 "))
        code = re.escape(package(project))
        expected = [  # rank 0 waits in a collective; rank 1 sleeps in the fault
            rf"  rank 0: {code}/\w+\.py:\d+ in \w+ \((backward|all_reduce|wait)\)",
            rf"  rank 1: {code}/trainer\.py:\d+ in _run_epoch \(step_then_hang\)",
        ]
        deadline = time.monotonic() + 60  # until both got there, however busy
        while True:
            result = run(doctor, cwd=project)
            ranks = sorted(result.stdout.splitlines()[1:])
            found = len(ranks) == 2 and all(map(re.fullmatch, expected, ranks))
            if found or time.monotonic() > deadline:
                break
        assert found, result.stdout
        rank_0_pid = int((tmp_path / "debug" / "rank-0.pid").read_text().split()[1])
        os.kill(rank_0_pid, signal.SIGSTOP)
        silent = run([*doctor, "--wait", "2"], cwd=project, check=False)
        assert silent.returncode == 1
        assert "  rank 0: did not answer within 2 s: stopped" in silent.stdout
    finally:
        kill_group(process.pid)


def fault_rank_one(project, workdir, mode, fault, step, *flags, **env):
    """Rank 1 of 2 meets `fault` after optimizer step `step`: the finished job."""
    flags = cpu_flags(workdir, "--epochs", "100", *flags)
    env = child_env(FAULT=fault, FAULT_STEP=step, **env)
    if mode == "launch":
        command = TORCHRUN + ["--standalone", "--nproc-per-node", "2", INJECT]
    else:  # tests/faults/sitecustomize.py injects it into the spawned workers
        command = [PYTHON, "train.py", "--nprocs", "2"]
        env["PYTHONPATH"] = str(INJECT.parent)
    return run(command + flags, cwd=project, env=env, check=False, timeout=300)


def hang_rank_one(project, workdir, mode, step, *flags):
    """Rank 1 of 2 sleeps after optimizer step `step`: (the finished job,
    seconds from the start of the hang to its end)."""
    hang_log = workdir / "hang-started"
    result = fault_rank_one(
        project, workdir, mode, "hang-at-step", step, *flags, FAULT_LOG=hang_log
    )
    return result, time.time() - float(hang_log.read_text())


def doctor_why(project, run_dir):
    """`doctor why`'s screen, and the patterns of its recurring parts."""
    why = run([PYTHON, "-m", f"{package(project)}.doctor", "why", run_dir], cwd=project)
    print(why.stdout)
    code = re.escape(package(project))
    return why.stdout, {
        "code": code,
        "pid": r"\(pid \d+ on [\w.-]+\)",
        "collective": rf"gloo:all_reduce #\d+ \(Float \[\[\d+\]\]\) "
        rf"from {code}/\w+\.py:\d+ in \w+",
        "heading": rf"what each rank left in {re.escape(str(run_dir / 'debug'))}:\n",
    }


@pytest.mark.fault
@pytest.mark.parametrize("mode", ["launch", "mp"])
def test_a_rank_that_raises_is_named_with_the_line_it_raised_at(
    projects, tmp_path, mode
):
    """Rank 1's own code raises after step 5 (a RuntimeError, as a failed
    collective's): `doctor why` tells it from rank 0's failed collective and
    names the line rank 1 raised at, and rank 1 as the first to fail."""
    project = projects(mode)
    result = fault_rank_one(project, tmp_path, mode, "raise-at-step", 5)
    assert result.returncode != 0
    screen, p = doctor_why(project, tmp_path)
    assert re.fullmatch(
        rf"{p['heading']}"
        rf"  rank 0 {p['pid']}: failed in {p['collective']}\n"
        rf"  rank 1 {p['pid']}: raised RuntimeError at {p['code']}/trainer\.py:\d+ "
        rf"in _run_epoch \(step_then_raise\); its last collective {p['collective']}\n"
        r"(never entered \w+ #\d+: rank 1 \(its last #\d+\)\n)?"
        r"first to fail: rank 1 at \d\d:\d\d:\d\d: RuntimeError: injected failure "
        r"after step 5\n",
        screen,
    ), screen


@pytest.mark.fault
@pytest.mark.parametrize("mode", ["launch", "mp"])
def test_a_killed_rank_is_named_as_one_that_wrote_nothing(projects, tmp_path, mode):
    """Rank 1 is SIGKILLed after step 5: it writes nothing; rank 0's next
    collective fails (its peer gone) and `doctor why` says where."""
    project = projects(mode)
    result = fault_rank_one(project, tmp_path, mode, "kill-at-step", 5)
    assert result.returncode != 0
    screen, p = doctor_why(project, tmp_path)
    assert re.fullmatch(
        rf"{p['heading']}"
        rf"  rank 0 {p['pid']}: failed in {p['collective']}\n"
        rf"  rank 1 {p['pid']}: wrote no failure: frozen, killed or stuck outside a "
        r"collective \(while it runs, `doctor stacks` shows where\)\n"
        r"first to fail: rank 0 at \d\d:\d\d:\d\d: RuntimeError: \[.*/gloo/.*\n",
        screen,
    ), screen


@pytest.mark.fault
# mp's launcher is the watchdog test's; the timeout path is launch's.
@pytest.mark.parametrize("mode", ["launch", pytest.param("mp", marks=SLOW)])
def test_a_rank_waiting_on_a_frozen_peer_times_out_and_writes_its_collectives(
    projects, tmp_path, mode
):
    """Rank 1 stops stepping after step 3; rank 0's next collective times out
    after --dist-timeout. Rank 0 writes its flight recorder before it exits
    (the collective it waited in, and the project's line that issued it);
    rank 1 writes nothing; the job ends within --dist-timeout + 60 s, and
    `doctor why` says so on one screen."""
    project = projects(mode)
    result, hung_for = hang_rank_one(project, tmp_path, mode, 3, "--dist-timeout", "10")
    assert result.returncode != 0
    assert hung_for < 10 + 60, hung_for
    assert re.search(r"time(d)? ?out", result.stderr, re.I), result.stderr[-2000:]
    debug = tmp_path / "debug"
    assert not (debug / "collectives-rank-1").exists()  # frozen: wrote nothing
    trace = pickle.loads((debug / "collectives-rank-0").read_bytes())
    last = max(trace["entries"], key=lambda entry: entry["time_created_ns"])
    assert last["profiling_name"].startswith("gloo:"), last
    issued_by = [f"{Path(f['filename']).name}:{f['line']}" for f in last["frames"]]
    assert any(
        re.fullmatch(r"(trainer|agreement)\.py:\d+", place) for place in issued_by
    ), issued_by
    print(f"ended {hung_for:.1f} s into the hang")
    screen, p = doctor_why(project, tmp_path)
    # gloo says "Timed out waiting ..." or "Application timeout ...", as
    # whichever side's timer fires first: both are the timeout.
    assert re.fullmatch(
        rf"{p['heading']}"
        rf"  rank 0 {p['pid']}: failed in {p['collective']}\n"
        rf"  rank 1 {p['pid']}: wrote no failure: frozen, killed or stuck outside a "
        r"collective \(while it runs, `doctor stacks` shows where\)\n"
        r"first to fail: rank 0 at \d\d:\d\d:\d\d: RuntimeError: .*(?i:time).*\n",
        screen,
    ), screen


@pytest.mark.fault
@pytest.mark.parametrize("mode", ["launch", "mp"])
def test_the_watchdog_ends_a_hang_long_before_the_timeout_and_says_where(
    projects, tmp_path, mode
):
    """Rank 1 stops stepping after step 30 (about 4 ms a step). With a 2 s
    floor, each rank's watchdog writes its stacks and collectives and ends the
    job within seconds, not --dist-timeout's 120; `doctor why` names the
    line rank 1 stands on and the collective it never entered."""
    project = projects(mode)
    result, hung_for = hang_rank_one(
        project, tmp_path, mode, 30, "--dist-timeout", "120", "--watchdog-floor", "2"
    )
    assert result.returncode != 0
    print(f"ended {hung_for:.1f} s into the hang")
    assert hung_for < 2 + 30, hung_for
    assert re.search(r"rank 1: watchdog: no optimizer step for", result.stderr)
    screen, p = doctor_why(project, tmp_path)
    code, collective = p["code"], p["collective"]
    assert re.fullmatch(
        rf"{p['heading']}"
        rf"  rank 0 {p['pid']}: (stalled at {code}/trainer\.py:\d+ in \w+ \(\w+\); "
        rf"its last collective|failed in) {collective}\n"
        rf"  rank 1 {p['pid']}: stalled at {code}/trainer\.py:\d+ in _run_epoch "
        rf"\(step_then_hang\); its last collective {collective}\n"
        r"never entered default_pg #(\d+): rank 1 \(its last #\d+\)\n"
        r"first to fail: rank [01] at \d\d:\d\d:\d\d: Stalled: no optimizer step "
        r"for [\d.]+ s \(median step [\d.e-]+ s x --watchdog-factor 20, "
        r"--watchdog-floor 2\)\n",
        screen,
    ), screen


# 6. A kill between the temp file and the rename


@pytest.mark.fault
def test_kill_during_checkpoint_write_keeps_the_previous_one(projects, tmp_path):
    project = projects("launch")
    result = torchrun_with_fault(
        project,
        tmp_path,
        "kill-in-save",
        2 * STEPS_PER_EPOCH,
        "--epochs",
        "3",
        "--save-every",
        "1",
        "--resume",
        "none",
    )
    assert result.returncode != 0
    directory = tmp_path / "checkpoints"
    assert [path.name for path in checkpoints(tmp_path)] == [
        f"checkpoint-{STEPS_PER_EPOCH:09d}.pt"
    ]
    assert (directory / f".checkpoint-{2 * STEPS_PER_EPOCH:09d}.pt.tmp").exists()
    metrics, resumed = train(project, tmp_path, *SMALL_SYNTHETIC, "--epochs", "3")
    assert f"resumed from {checkpoints(tmp_path)[0]}" in resumed.stdout
    assert metrics["steps"] == 3 * STEPS_PER_EPOCH


# 7. Ports


def test_mp_starts_with_the_usual_ports_busy(projects, tmp_path):
    holders = []
    try:
        for port in (29500, 29400, 12355):
            holder = socket.socket()
            try:
                holder.bind(("127.0.0.1", port))
                holder.listen()
                holders.append(holder)
            except OSError:
                holder.close()  # already busy: just as good
        metrics, _ = train(projects("mp"), tmp_path, *SMALL_SYNTHETIC, "--epochs", "1")
        assert metrics["world_size"] == 2
    finally:
        for holder in holders:
            holder.close()


def test_busy_explicit_master_port_fails_fast_naming_it(projects, tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        started = time.monotonic()
        _, result = train(projects("mp"), tmp_path, "--master-port", port, check=False)
    assert result.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr
    assert "choose another --master-port" in result.stderr
    assert time.monotonic() - started < 60


# 8. Uneven inputs


@pytest.mark.parametrize("mode", ["launch", "mp"])
def test_uneven_dataset_never_hangs_a_rank(projects, tmp_path, mode):
    flags = [
        "--train-size",
        "101",
        "--eval-size",
        "37",
        "--batch-size",
        "8",
        "--epochs",
        "2",
    ]
    metrics, _ = train(projects(mode), tmp_path, *flags, timeout=120)
    assert metrics["eval_samples"] == 37
    assert metrics["steps"] == 2 * (51 // 8)  # 101 padded to 51 per rank, full batches


# 9. Bounded waits


def test_a_rank_that_never_arrives_times_out_with_a_message(projects, tmp_path):
    flags = ["--nnodes", "2", "--node-rank", "0", "--master-port", free_port()]
    started = time.monotonic()
    _, result = train(
        projects("mp"),
        tmp_path,
        *flags,
        "--dist-timeout",
        "5",
        nprocs=1,
        check=False,
        timeout=120,
    )
    assert result.returncode == 1
    assert "the 2 ranks did not all join within 5s (--dist-timeout)" in result.stderr
    assert time.monotonic() - started < 90
