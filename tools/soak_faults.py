"""Run the fault scenarios many times in a row beside a busy-looping process:
timing bugs show under load. `make soak` (or `python tools/soak_faults.py 20`).

Stops at the first failure and keeps its output; prints the tally either way.
Not part of `make test` (20 rounds take about an hour on 2 cores).
"""

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The scenarios that kill or signal processes mid-run (marked `fault`).
SCENARIOS = ["-m", "fault", "tests/test_faults.py"]
ROUND_TIMEOUT = 1800


def busy_loop():
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def one_round(log):
    command = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider"]
    with open(log, "w") as output:
        result = subprocess.run(
            command + SCENARIOS,
            cwd=ROOT,
            stdout=output,
            stderr=subprocess.STDOUT,
            timeout=ROUND_TIMEOUT,
        )
    return result.returncode == 0


def main(rounds):
    logs = ROOT / "benchmarks" / "work" / "soak"
    logs.mkdir(parents=True, exist_ok=True)
    load = busy_loop()
    passed = 0
    try:
        for number in range(1, rounds + 1):
            started = time.monotonic()
            ok = one_round(logs / f"round-{number}.log")
            seconds = time.monotonic() - started
            print(f"round {number}: {'passed' if ok else 'FAILED'} in {seconds:.0f} s")
            if not ok:
                print(f"output: {logs / f'round-{number}.log'}")
                break
            passed += 1
    finally:
        load.kill()
        load.wait()
    print(f"{passed} of {rounds} rounds passed in a row with a busy loop beside them")
    return 0 if passed == rounds else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 20))
