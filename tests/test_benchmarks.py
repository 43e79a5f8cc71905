"""The benchmarks run (their figures are recorded in benchmarks/results.md, never
asserted: these machines are shared and noisy). They test the benchmarks' code,
not the product: `make test-bench` runs them (CI does), `make test` does not."""

import json
import re
import sys
from pathlib import Path

import pytest
from helpers import run

pytestmark = pytest.mark.bench

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"


def json_head(stdout):
    """The JSON object a benchmark prints before its table."""
    return json.JSONDecoder().raw_decode(stdout)[0]


@pytest.mark.timeout(900)
def test_side_by_side_measures_every_pattern():
    result = run([sys.executable, BENCHMARKS / "side_by_side.py", "--quick"], ROOT, 850)
    figures = json_head(result.stdout)
    rates = figures["samples_per_second"]["small_cnn"]
    assert set(rates) == {
        "limit",
        "bare_ddp",
        "gen_mp",
        "gen_launch",
        "tutorial",
        "seed",
    }
    assert all(rate > 0 for rate in rates.values()), rates
    assert set(figures["first_step_s"]) == {"seed", "tutorial", "gen_mp", "gen_launch"}
    # Starting Python processes that import torch takes well over 0.5 s: less
    # means a record from an earlier run was taken for this one's.
    assert all(0.5 < s < 600 for s in figures["first_step_s"].values())
    assert all(0.5 < s < 600 for s in figures["resume_to_first_step_s"].values())
    assert set(figures["generated_mp_samples_per_second"]) == {
        "1_processes",
        "2_processes",
    }
    assert figures["checkpoint_save_s"]["megabytes"] > 40  # ResNet-18 + momentum
    table_rows = re.findall(
        r"^\| .+ \| \d+ samples/s \(\d\.\d\dx\) \|$", result.stdout, re.M
    )
    assert len(table_rows) == 6


def test_gpu_benchmark_runs_its_code_on_cpu_processes():
    """The nccl benchmark's code on 2 gloo processes (no GPU is needed to find
    a broken import or a wrong argument)."""
    result = run([sys.executable, BENCHMARKS / "gpu.py", "--cpu-smoke"], ROOT, 280)
    figures = json_head(result.stdout)
    assert figures["world_size"] == 2
    assert figures["single_device_s_per_step"] > 0 and figures["ddp_s_per_step"] > 0
    assert "busbw" in result.stdout and "1 MiB" in result.stdout


def test_gpu_benchmark_without_cuda_says_why_and_succeeds():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present: `make bench-gpu` measures it")
    result = run([sys.executable, BENCHMARKS / "gpu.py"], ROOT, 120)
    assert result.stdout.strip() == (
        "bench-gpu skipped: no CUDA device (torch.cuda.is_available() is False)"
    )


SHAKESPEARE = ROOT.parent / "shared" / "data" / "tinyshakespeare.txt"


@pytest.mark.skipif(
    not SHAKESPEARE.exists(), reason=f"learning.py trains on {SHAKESPEARE}: absent"
)
def test_gpt_speed_pairs_compare_the_same_runs(tmp_path):
    """learning.py --only speed: each pair's ratio is of its own two runs."""
    command = [sys.executable, BENCHMARKS / "learning.py", "--only", "speed"]
    run([*command, "--quick", "--out", tmp_path], ROOT, 280)
    speed = json.loads((tmp_path / "learning.json").read_text())["speed"]
    (pair,) = speed["pairs"]
    assert pair["generated"] > 0 and pair["plain"] > 0
    assert pair["ratio"] == pytest.approx(pair["generated"] / pair["plain"], abs=2e-3)
    assert speed["median_ratio"] == pair["ratio"]


def test_watchdog_cost_compares_alternating_runs():
    result = run(
        [sys.executable, BENCHMARKS / "watchdog_cost.py", "--quick"], ROOT, 280
    )
    figures = json.loads(result.stdout)
    off, on = figures["s_per_step"]["off"], figures["s_per_step"]["on (default)"]
    assert off > 0 and on > 0
    assert figures["on_over_off"] == pytest.approx(on / off)
