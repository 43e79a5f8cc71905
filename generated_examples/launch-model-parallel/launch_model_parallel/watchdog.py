"""The project's own watchdog, sooner than --dist-timeout.

A rank whose training loop makes no optimizer step for --watchdog-factor times
its median step time, and at least --watchdog-floor seconds, writes why into
RUN_DIR/debug (every thread's stack in rank-N.stacks, its collectives and
rank-N.error, as a failed collective does; forensics.py) and ends the job:
its peers' next collective fails, so they write theirs too. Evaluation and
checkpoint saves are not watched: their time is not a step's.
`python -m PACKAGE.doctor why RUN_DIR` reads what the ranks wrote.
"""

import faulthandler
import os
import statistics
import sys
import threading
import time
from collections import deque
from contextlib import contextmanager
from pathlib import Path

from .forensics import stacks_file, write_failure

MEASURED_STEPS = 10  # before the first limit: a median of fewer is noise
STACKS_MARK = "the watchdog ended the job; the stacks then:\n"
STALLED_EXIT = 1


class Stalled(Exception):
    """No optimizer step for longer than the watchdog's limit."""


class Watchdog:
    def __init__(self, config, placement):
        self.factor, self.floor_s = config.watchdog_factor, config.watchdog_floor
        self.folder, self.rank = Path(config.run_dir) / "debug", placement.rank
        self.step_seconds = deque(maxlen=1000)
        self.last_step = None  # monotonic time of the newest step, while armed
        self.thread = None

    def stepped(self):
        now = time.monotonic()
        if self.last_step is not None:
            self.step_seconds.append(now - self.last_step)
        self.last_step = now

    @contextmanager
    def armed(self):
        """Watch the steps of this block (the first one's clock starts here)."""
        if self.factor > 0 and self.thread is None:
            self.thread = threading.Thread(target=self._watch, daemon=True)
            self.thread.start()
        self.last_step = time.monotonic()
        try:
            yield
        finally:
            self.last_step = None

    @contextmanager
    def paused(self):
        """Not a step's time (an evaluation mid-epoch): the clock restarts after."""
        self.last_step = None
        try:
            yield
        finally:
            self.last_step = time.monotonic()

    def limit_s(self):
        if len(self.step_seconds) < MEASURED_STEPS:
            return None
        return max(self.floor_s, self.factor * statistics.median(self.step_seconds))

    def _watch(self):
        poll_s = min(1.0, max(self.floor_s, 0.1) / 10)
        while True:
            time.sleep(poll_s)
            last_step, limit = self.last_step, self.limit_s()
            if last_step is not None and limit is not None:
                idle = time.monotonic() - last_step
                if idle > limit:
                    self._end_the_job(idle)

    def _end_the_job(self, idle):
        median = statistics.median(self.step_seconds)
        stalled = Stalled(
            f"no optimizer step for {idle:.1f} s (median step {median:.3g} s x "
            f"--watchdog-factor {self.factor:g}, --watchdog-floor {self.floor_s:g})"
        )
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(stacks_file(self.folder, self.rank), "a") as stream:
            stream.write(STACKS_MARK)
            stream.flush()  # before faulthandler writes to the descriptor
            faulthandler.dump_traceback(stream, all_threads=True)
        write_failure(self.folder, self.rank, stalled)
        print(
            f"rank {self.rank}: watchdog: {stalled}; wrote its stacks and "
            f"collectives to {self.folder}, ending the job",
            file=sys.stderr,
            flush=True,
        )
        os._exit(STALLED_EXIT)  # the main thread may never return to Python
