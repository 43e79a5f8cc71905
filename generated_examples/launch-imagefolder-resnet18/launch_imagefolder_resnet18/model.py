"""The model and its loss: replace these with yours.

Keep `build_model` returning an nn.Sequential (or adapt the split point) if you
use model parallelism.
"""

from collections import OrderedDict

import torch
from torch import nn
from torchvision.models import resnet18


def build_model(outputs):
    # The layers of torchvision's ResNet-18 in order, under its own names, so
    # its weights load as they are (no pretrained download here).
    net = resnet18(weights=None, num_classes=outputs)
    return nn.Sequential(
        OrderedDict(
            conv1=net.conv1,
            bn1=net.bn1,
            relu=net.relu,
            maxpool=net.maxpool,
            layer1=net.layer1,
            layer2=net.layer2,
            layer3=net.layer3,
            layer4=net.layer4,
            avgpool=net.avgpool,
            flatten=nn.Flatten(),
            fc=net.fc,
        )
    )


loss_fn = nn.CrossEntropyLoss()
METRICS = ("loss", "accuracy")


def batch_metrics(outputs, targets):
    """Sums over the batch; evaluation adds them up over ranks and divides."""
    loss = nn.functional.cross_entropy(outputs.float(), targets, reduction="sum")
    correct = (outputs.argmax(dim=1) == targets).sum()
    return {"loss": loss, "accuracy": correct.to(torch.float64)}
