"""The two workloads every pattern in the side-by-side benchmark trains, and the
timing every pattern reports in the same way.

small_cnn: the seed's style of model, 32x32x3 images, 10 classes, batch 64 per
process. resnet18: torchvision's ResNet-18 at 32x32 (11 M parameters: far more
gradient traffic per sample), batch 32 per process. The data is in memory
(random images, fixed seed), so the figures measure the training loop and the
gradient exchange, not image decoding.
"""

import contextlib
import gc
import json
import os
import socket
import time

import torch
import torch.distributed as dist

# Imported before any process group exists, as the generated distributed.py
# does: DDP imports it lazily otherwise, its defaults then hold the default
# group for good, and gloo's threads outliving destroy_process_group abort the
# process as it exits ("terminate called without an active exception").
import torch.distributed.nn.functional  # noqa: F401
from torch import nn

CLASSES = 10
IMAGE_SHAPE = (3, 32, 32)
BATCH_PER_PROCESS = {"small_cnn": 64, "resnet18": 32}


def small_cnn():
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(64 * 8 * 8, 128),
        nn.ReLU(),
        nn.Linear(128, CLASSES),
    )


def resnet18():
    from torchvision.models import resnet18 as build

    return build(num_classes=CLASSES)


MODELS = {"small_cnn": small_cnn, "resnet18": resnet18}


def build_model(workload):
    torch.manual_seed(0)
    return MODELS[workload]()


def tensors(samples, seed=0):
    generator = torch.Generator().manual_seed(seed)
    images = torch.rand(samples, *IMAGE_SHAPE, generator=generator)
    labels = torch.randint(CLASSES, (samples,), generator=generator)
    return images, labels


def dataset(samples, seed=0):
    return torch.utils.data.TensorDataset(*tensors(samples, seed))


class StepClock:
    """Rank 0's view of a run: the wall-clock time of the first optimizer step
    and the samples/s of each window of `window` steps. The first window holds
    the warm-up, so the steady rate is the median of the others."""

    def __init__(self, samples_per_step, window, out_path=None):
        self.samples_per_step = samples_per_step
        self.window = window
        self.out_path = out_path
        self.steps = 0
        self.first_step_time = None
        self.window_started = None
        self.rates = []

    def step_done(self):
        now = time.perf_counter()
        self.steps += 1
        if self.steps == 1:
            self.first_step_time = time.time()
            self.window_started = now
        elif (self.steps - 1) % self.window == 0:
            seconds = now - self.window_started
            self.rates.append(self.window * self.samples_per_step / seconds)
            self.window_started = now

    def save(self):
        if self.out_path:
            record = {"first_step_time": self.first_step_time, "rates": self.rates}
            with open(self.out_path, "w") as out:
                json.dump(record, out)


def clock_from_env(samples_per_step):
    """The clock a pattern script uses: BENCH_OUT is where rank 0 writes it."""
    window = int(os.environ.get("BENCH_WINDOW", "10"))
    return StepClock(samples_per_step, window, os.environ.get("BENCH_OUT"))


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def process_group(backend, rank, world, port):
    """A loopback process group, destroyed while the interpreter is whole (DDP's
    reducer holds it from reference cycles: collect them first)."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group(backend, rank=rank, world_size=world)
    try:
        yield
    finally:
        gc.collect()
        dist.destroy_process_group()
