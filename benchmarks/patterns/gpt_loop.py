"""A plain one-file GPT training loop, as nanoGPT's train.py runs on one CPU
process: random windows, AdamW, warm-up and cosine decay, clipping. It trains
the generated project's own model (its model.py), so the comparison measures
the loop, not the model.

    python gpt_loop.py PROJECT CORPUS --steps 2000 --seed 0 --out result.json
    python gpt_loop.py PROJECT CORPUS --evaluate RUN_DIR --out result.json

Each final model is measured twice: the mean loss over the whole validation
split, and nanoGPT's estimate_loss (20 batches of 12 random windows), the
measure nanoGPT's reported 1.88 comes from, under ten sampling seeds.
--evaluate measures a generated project's run (its newest checkpoint) so.
"""

import argparse
import importlib
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("project", type=Path)
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=12)
    parser.add_argument("--eval-every", type=int, default=250)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--evaluate", type=Path, help="a generated run to measure")
    parser.add_argument("--out", type=Path, required=True)
    return parser.parse_args()


def settings(package):
    """The generated project's defaults: nanoGPT's CPU configuration."""
    return importlib.import_module(f"{package}.config").Config()


def lr_at(step, config, steps):
    """nanoGPT's get_lr: linear warm-up, cosine decay to min_lr."""
    warmup = 100
    if step < warmup:
        return config.lr * (step + 1) / (warmup + 1)
    progress = min(1.0, (step - warmup) / (steps - warmup))
    return config.min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (
        config.lr - config.min_lr
    )


def batch(tokens, block_size, batch_size, generator):
    starts = torch.randint(len(tokens) - block_size, (batch_size,), generator=generator)
    rows = [
        torch.from_numpy(tokens[s : s + block_size + 1].astype(np.int64))
        for s in starts
    ]
    stacked = torch.stack(rows)
    return stacked[:, :-1], stacked[:, 1:]


@torch.no_grad()
def validation_loss(model, tokens, block_size):
    """Mean loss over every non-overlapping window of the validation split."""
    model.eval()
    count = (len(tokens) - 1) // block_size
    total = 0.0
    for first in range(0, count, 64):
        starts = range(first, min(first + 64, count))
        rows = [
            torch.from_numpy(
                tokens[s * block_size : s * block_size + block_size + 1].astype(
                    np.int64
                )
            )
            for s in starts
        ]
        stacked = torch.stack(rows)
        logits = model(stacked[:, :-1])
        losses = F.cross_entropy(
            logits.transpose(1, 2), stacked[:, 1:], reduction="none"
        )
        total += float(losses.mean(dim=1).sum())
    model.train()
    return total / count


@torch.no_grad()
def nanogpt_estimates(model, tokens, block_size, seeds=range(10)):
    """nanoGPT's estimate_loss on the validation split: the mean of 20 batches
    of 12 windows at random offsets, once per sampling seed."""
    model.eval()
    estimates = []
    for seed in seeds:
        generator = torch.Generator().manual_seed(seed)
        losses = []
        for _ in range(20):
            inputs, targets = batch(tokens, block_size, 12, generator)
            losses.append(
                float(F.cross_entropy(model(inputs).transpose(1, 2), targets))
            )
        estimates.append(sum(losses) / len(losses))
    model.train()
    return estimates


def measured(model, val, config):
    return {
        "eval_loss": validation_loss(model, val, config.block_size),
        "nanogpt_estimates": nanogpt_estimates(model, val, config.block_size),
    }


def evaluate_run(args, package, vocabulary, val):
    """A generated run's newest checkpoint, measured as the plain loop's model."""
    sample = importlib.import_module(f"{package}.sample")
    model_module = importlib.import_module(f"{package}.model")
    state = sample.newest_state(args.evaluate)
    config = sample.saved_config(state)
    assert state["vocabulary"] == vocabulary.state(), "another corpus's run"
    model = model_module.build_model(config, len(vocabulary))
    model.load_state_dict(state["model"])
    args.out.write_text(json.dumps(measured(model, val, config), indent=2))


def main():
    args = parse_args()
    sys.path.insert(0, str(args.project))
    package = next(p.parent.name for p in args.project.glob("*/tokens.py"))
    tokens_module = importlib.import_module(f"{package}.tokens")
    model_module = importlib.import_module(f"{package}.model")
    config = settings(package)
    folder = args.out.parent / "plain-tokens"
    tokens_module.prepare(args.corpus, folder, "char")
    train, val, vocabulary = tokens_module.load(folder)
    if args.evaluate:
        return evaluate_run(args, package, vocabulary, val)
    torch.manual_seed(args.seed)
    model = model_module.build_model(config, len(vocabulary))
    matrices = [p for p in model.parameters() if p.ndim >= 2]
    vectors = [p for p in model.parameters() if p.ndim < 2]
    optimizer = torch.optim.AdamW(
        [
            {"params": matrices, "weight_decay": config.weight_decay},
            {"params": vectors, "weight_decay": 0.0},
        ],
        lr=config.lr,
        betas=(0.9, config.beta2),
        foreach=True,
    )
    generator = torch.Generator().manual_seed(1000 + args.seed)
    curve, seconds = [], 0.0
    for step in range(args.steps):
        started = time.perf_counter()
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, config, args.steps)
        inputs, targets = batch(train, config.block_size, args.batch_size, generator)
        loss = model_module.loss_fn(model(inputs), targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.clip_grad_norm)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        seconds += time.perf_counter() - started
        if (step + 1) % args.eval_every == 0 or step + 1 == args.steps:
            eval_loss = validation_loss(model, val, config.block_size)
            curve.append({"step": step + 1, "eval_loss": eval_loss})
    result = {
        "steps": args.steps,
        "seed": args.seed,
        "train_seconds": seconds,
        "tokens_per_second": args.steps * args.batch_size * config.block_size / seconds,
        **measured(model, val, config),
        "curve": curve,
    }
    args.out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
