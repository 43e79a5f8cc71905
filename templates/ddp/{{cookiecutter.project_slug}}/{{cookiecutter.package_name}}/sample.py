"""Text from a run's newest checkpoint.

    python -m {{ cookiecutter.package_name }}.sample RUN_DIR --prompt "ROMEO:" --tokens 200

The checkpoint carries the model's settings and the vocabulary it was trained
with, so nothing else is needed; CPU by default, --device cuda for a GPU.
"""

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import torch

from .checkpoint import newest_loadable
from .config import Config, ConfigError
from .model import build_model
from .tokens import Vocabulary


def main(argv=None):
    args = parse_args(argv)
    try:
        text = sample(args)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    print(text)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", help="the --run-dir of a training run")
    parser.add_argument("--prompt", default="\n", help="text to continue")
    parser.add_argument("--tokens", type=int, default=200, help="tokens to add")
    parser.add_argument(
        "--temperature", type=float, default=0.8, help="below 1: safer choices"
    )
    parser.add_argument(
        "--top-k", type=int, default=0, help="sample among the K likeliest; 0 = all"
    )
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.tokens < 1 or args.temperature <= 0 or args.top_k < 0:
        parser.error("--tokens must be >= 1, --temperature > 0 and --top-k >= 0")
    return args


def sample(args):
    state = newest_state(Path(args.run_dir))
    config = saved_config(state)
    vocabulary = Vocabulary.from_state(state["vocabulary"])
    model = build_model(config, len(vocabulary))
    model.load_state_dict(state["model"])
    model.to(args.device).eval()
    prompt = torch.as_tensor(vocabulary.encode(args.prompt), dtype=torch.long)
    torch.manual_seed(args.seed)
    tokens = generate(model, prompt[None].to(args.device), args, config.block_size)
    return vocabulary.decode(tokens[0].tolist())


def newest_state(run_dir):
    settings = run_dir / "config.json"
    saved = json.loads(settings.read_text()) if settings.exists() else {}
    folder = Path(saved.get("checkpoint_dir") or run_dir / "checkpoints")
    path, state = newest_loadable(folder)
    if path is None:
        raise ConfigError(f"no checkpoint in {folder}: train into {run_dir} first")
    return state


def saved_config(state):
    """The training settings saved in the checkpoint (unknown keys dropped)."""
    known = {spec.name for spec in dataclasses.fields(Config)}
    return Config(**{k: v for k, v in state["config"].items() if k in known})


@torch.no_grad()
def generate(model, tokens, args, block_size):
    """Append args.tokens tokens, each drawn from the model's distribution over
    the next token given the last block_size ones."""
    for _ in range(args.tokens):
        logits = model(tokens[:, -block_size:])[:, -1, :] / args.temperature
        if args.top_k:
            kth = torch.topk(logits, min(args.top_k, logits.shape[-1])).values[:, -1:]
            logits = logits.masked_fill(logits < kth, -float("inf"))
        next_token = torch.multinomial(torch.softmax(logits, dim=-1), 1)
        tokens = torch.cat([tokens, next_token], dim=1)
    return tokens


if __name__ == "__main__":
    main()
