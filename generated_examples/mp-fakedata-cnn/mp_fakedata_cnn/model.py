"""The model and its loss: replace these with yours.

Keep `build_model` returning an nn.Sequential (or adapt the split point) if you
use model parallelism.
"""

from collections import OrderedDict

import torch
from torch import nn

from .data import CHANNELS


def build_model(config, outputs):
    # Three blocks of conv, BatchNorm and ReLU, each halving the resolution: a
    # sound small-image baseline (BatchNorm lets it train fast at a high lr).
    return nn.Sequential(
        OrderedDict(
            block1=conv_block(CHANNELS, 32),
            block2=conv_block(32, 64),
            block3=conv_block(64, 128),
            pool=nn.AdaptiveAvgPool2d(1),
            flatten=nn.Flatten(),
            fc=nn.Linear(128, outputs),
        )
    )


def conv_block(inputs, outputs):
    return nn.Sequential(
        nn.Conv2d(inputs, outputs, 3, padding=1, bias=False),  # BatchNorm adds one
        nn.BatchNorm2d(outputs),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(2),
    )


loss_fn = nn.CrossEntropyLoss()
METRICS = ("loss", "accuracy")


def batch_metrics(outputs, targets):
    """Sums over the batch; evaluation adds them up over ranks and divides."""
    loss = nn.functional.cross_entropy(outputs.float(), targets, reduction="sum")
    correct = (outputs.argmax(dim=1) == targets).sum()
    return {"loss": loss, "accuracy": correct.to(torch.float64)}
