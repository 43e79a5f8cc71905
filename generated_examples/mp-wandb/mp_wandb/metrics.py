"""The run directory's records: config.json and metrics.jsonl, written by global
rank 0 only (other ranks hold a MetricsLog that writes nothing).

metrics.jsonl has one JSON object per line: training records every --log-every
optimizer steps (step, epoch, loss, lr, samples_per_second) and evaluation
records (step, epoch, eval_*). A run that starts at step N first drops the
records past N, as TensorBoard's purge_step does: after a resume the file holds
each step once, in order. The same records go to the tracker
(tracking.py).
"""

import contextlib
import dataclasses
import json
import os
import time
from pathlib import Path

from .tracking import Tracker, check_installed

FILE_NAME = "metrics.jsonl"


class MetricsLog:
    def __init__(self, run_dir, enabled):
        self.path = Path(run_dir) / FILE_NAME
        self.enabled = enabled
        self.tracker = None
        check_installed()

    @contextlib.contextmanager
    def opened(self, config, step):
        """For the run inside the block: save the resolved config, keep the
        records up to `step` and open the tracker."""
        if not self.enabled:
            yield self
            return
        resolved = json.dumps(dataclasses.asdict(config), indent=2) + "\n"
        write_atomically(self.path.with_name("config.json"), resolved)
        kept = [record for record in self.records() if record["step"] <= step]
        write_atomically(self.path, "".join(json.dumps(r) + "\n" for r in kept))
        self.tracker = Tracker(config, step)
        try:
            yield self
        finally:
            self.tracker.close()
            self.tracker = None

    def records(self):
        if not self.path.exists():
            return []
        lines = self.path.read_text().splitlines()
        # A line cut short by a kill is dropped with the records past the start.
        return [json.loads(line) for line in lines if line.endswith("}")]

    def write(self, record):
        if self.enabled:
            with self.path.open("a") as log:
                log.write(json.dumps(record) + "\n")
        if self.tracker is not None:
            self.tracker.log(record)


def write_atomically(path, data):
    """Write text or bytes to a temporary file, then rename it over `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.tmp")
    if isinstance(data, bytes):
        temp.write_bytes(data)
    else:
        temp.write_text(data)
    os.replace(temp, path)


class Throughput:
    """Training samples per second: the clock runs only in the training loop,
    never during evaluation or saves."""

    def __init__(self):
        self.seconds = 0.0  # training time of this run
        self.samples = 0  # of this run, all ranks together
        self._started = None
        self._mark = (0.0, 0)

    def start(self):
        self._started = time.perf_counter()

    def stop(self):
        self.seconds = self.elapsed()
        self._started = None

    def count(self, samples):
        self.samples += samples

    def elapsed(self):
        running = time.perf_counter() - self._started if self._started else 0.0
        return self.seconds + running

    def overall(self):
        return self.samples / self.seconds if self.seconds > 0 else 0.0

    def since_last_call(self):
        """The rate since the previous call (or the run's start)."""
        seconds, samples = self.elapsed(), self.samples
        last_seconds, last_samples = self._mark
        self._mark = (seconds, samples)
        if seconds <= last_seconds:
            return 0.0
        return (samples - last_samples) / (seconds - last_seconds)
