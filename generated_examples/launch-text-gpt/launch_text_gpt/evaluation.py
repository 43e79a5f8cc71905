"""Evaluation: metrics over the whole evaluation set, each sample counted once."""

import math

import torch

from . import checkpoint
from .agreement import all_reduce_sum
from .model import METRICS, batch_metrics


@torch.no_grad()
def evaluate(model, loader, autocast, devices):
    """The metrics' means over every rank's shard; a collective."""
    input_device, output_device = devices
    model = checkpoint.unwrap(model)  # no DDP: evaluation needs no sync
    model.eval()
    sums = dict.fromkeys(METRICS, 0.0)
    count = 0
    for inputs, targets in loader:
        with autocast():
            outputs = model(inputs.to(input_device, non_blocking=True))
        targets = targets.to(output_device, non_blocking=True)
        for name, value in batch_metrics(outputs, targets).items():
            sums[name] = sums[name] + value
        count += len(targets)
    model.train()
    totals = all_reduce_sum(
        [count] + [float(sums[name]) for name in METRICS], output_device
    )
    samples = int(totals[0])
    metrics = {"eval_samples": samples} | {
        f"eval_{name}": total / samples if samples else None
        for name, total in zip(METRICS, totals[1:], strict=True)
    }
    if samples:
        metrics["eval_perplexity"] = math.exp(metrics["eval_loss"])
    return metrics
