"""A generated project's checkpoint.save (temp file, fsync, atomic rename,
pruning) against a plain torch.save of the same state, and against torch.save
followed by an fsync (what durability alone costs): ResNet-18 with SGD
momentum buffers, alternating, median of the rounds.

    python checkpoint_save.py PACKAGE SCRATCH ROUNDS OUT   (PACKAGE importable)
"""

import importlib
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import workloads


def trained_state():
    model = workloads.build_model("resnet18")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    images, labels = workloads.tensors(8)
    torch.nn.functional.cross_entropy(model(images), labels).backward()
    optimizer.step()  # creates the momentum buffers
    return {"model": model.state_dict(), "optimizer": optimizer.state_dict()}


def timed(save, *arguments):
    started = time.perf_counter()
    save(*arguments)
    return time.perf_counter() - started


def save_and_fsync(state, path):
    with open(path, "wb") as file:
        torch.save(state, file)
        file.flush()
        os.fsync(file.fileno())


def main(package, scratch, rounds, out):
    checkpoint = importlib.import_module(f"{package}.checkpoint")
    state = trained_state()
    folder = Path(scratch) / "checkpoints"
    plain, durable, generated = [], [], []
    for step in range(1, rounds + 1):
        plain.append(timed(torch.save, state, Path(scratch) / "plain.pt"))
        durable.append(timed(save_and_fsync, state, Path(scratch) / "durable.pt"))
        generated.append(timed(checkpoint.save, state, folder, step, 2))
    size = (Path(scratch) / "plain.pt").stat().st_size
    result = {
        "torch_save": statistics.median(plain),
        "torch_save_and_fsync": statistics.median(durable),
        "generated_save": statistics.median(generated),
        "megabytes": size / 2**20,
    }
    Path(out).write_text(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])
