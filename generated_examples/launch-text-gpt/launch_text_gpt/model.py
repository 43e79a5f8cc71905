"""The model and its loss: a decoder-only transformer (GPT); replace with yours.

Pre-LayerNorm blocks of causal self-attention (PyTorch's fused
scaled_dot_product_attention) and an MLP, with the token embedding tied to the
output layer, as in GPT-2 and nanoGPT; no biases in the linear layers and norms
(nanoGPT's default: a little better and faster). It is an nn.Sequential of named layers
(embedding, blocks, final norm, head), so it splits over two devices as it is.
"""

import math
from collections import OrderedDict

import torch
from torch import nn
from torch.nn import functional as F


def build_model(config, vocab_size):
    blocks = OrderedDict(
        (f"block{index}", Block(config)) for index in range(config.n_layer)
    )
    model = nn.Sequential(
        OrderedDict(
            embedding=Embedding(vocab_size, config),
            **blocks,
            norm=nn.LayerNorm(config.n_embd, bias=False),
            head=nn.Linear(config.n_embd, vocab_size, bias=False),
        )
    )
    model.head.weight = model.embedding.tokens.weight  # tied: fewer parameters
    initialise(model, config.n_layer)
    return model


class Embedding(nn.Module):
    """Token plus learned position embeddings, then dropout."""

    def __init__(self, vocab_size, config):
        super().__init__()
        self.tokens = nn.Embedding(vocab_size, config.n_embd)
        self.positions = nn.Embedding(config.block_size, config.n_embd)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, tokens):
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        return self.dropout(self.tokens(tokens) + self.positions(positions))


class Block(nn.Module):
    """x + attention(norm(x)), then x + mlp(norm(x)): pre-LayerNorm."""

    def __init__(self, config):
        super().__init__()
        self.norm1 = nn.LayerNorm(config.n_embd, bias=False)
        self.attention = CausalSelfAttention(config)
        self.norm2 = nn.LayerNorm(config.n_embd, bias=False)
        self.mlp = nn.Sequential(
            nn.Linear(config.n_embd, 4 * config.n_embd, bias=False),
            nn.GELU(),
            nn.Linear(4 * config.n_embd, config.n_embd, bias=False),
            nn.Dropout(config.dropout),
        )

    def forward(self, x):
        x = x + self.attention(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        if config.n_embd % config.n_head:
            raise ValueError("--n-embd must be a multiple of --n-head")
        self.heads = config.n_head
        self.qkv = nn.Linear(config.n_embd, 3 * config.n_embd, bias=False)
        self.out = nn.Linear(config.n_embd, config.n_embd, bias=False)
        self.dropout = config.dropout
        self.out_dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        batch, length, width = x.shape
        q, k, v = self.qkv(x).split(width, dim=2)
        q, k, v = (
            t.view(batch, length, self.heads, -1).transpose(1, 2) for t in (q, k, v)
        )
        # One fused kernel (flash attention on GPUs); no mask tensor is built.
        y = F.scaled_dot_product_attention(
            q,
            k,
            v,
            dropout_p=self.dropout if self.training else 0.0,
            is_causal=True,
        )
        y = y.transpose(1, 2).contiguous().view(batch, length, width)
        return self.out_dropout(self.out(y))


def initialise(model, n_layer):
    """GPT-2's initialisation: N(0, 0.02), and the projections back into the
    residual stream scaled down by sqrt(2 * layers) so it does not grow."""
    for name, parameter in model.named_parameters():
        if parameter.ndim < 2:
            continue  # the norms' weights keep their 1s
        residual = name.endswith(("attention.out.weight", "mlp.2.weight"))
        std = 0.02 / math.sqrt(2 * n_layer) if residual else 0.02
        nn.init.normal_(parameter, mean=0.0, std=std)


def parameter_count(model):
    """Parameters that do work per token: the position table is a look-up."""
    total = sum(p.numel() for p in model.parameters())
    return total - model.embedding.positions.weight.numel()


def flops_per_token(model, config):
    """Training FLOPs per token as the PaLM paper counts them: 6N for the
    weights' forward and backward, 12 * layers * width * context for attention."""
    attention = 12 * config.n_layer * config.n_embd * config.block_size
    return 6 * parameter_count(model) + attention


def loss_fn(outputs, targets):
    """Mean cross-entropy of every next-token prediction."""
    return F.cross_entropy(outputs.flatten(0, 1), targets.flatten())


METRICS = ("loss",)


def batch_metrics(outputs, targets):
    """Sums over the batch; evaluation adds them up over ranks and divides.
    Every window has --block-size tokens, so the mean over windows is the
    mean over tokens."""
    per_token = F.cross_entropy(
        outputs.float().transpose(1, 2), targets, reduction="none"
    )
    return {"loss": per_token.mean(dim=1).sum()}
