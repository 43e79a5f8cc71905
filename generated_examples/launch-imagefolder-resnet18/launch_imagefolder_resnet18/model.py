"""The model and its loss: replace these with yours.

Keep `build_model` returning an nn.Sequential (or adapt the split point) if you
use model parallelism.
"""

from collections import OrderedDict

import torch
from torch import nn
from torchvision.models import resnet18

from .data import CHANNELS


def build_model(config, outputs):
    # The layers of torchvision's ResNet-18 in order, under its own names, so
    # its weights load as they are (no pretrained download here).
    net = resnet18(weights=None, num_classes=outputs)
    fit_stem_to_image_size(net, config.image_size)
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


def fit_stem_to_image_size(net, image_size):
    """ResNet's ImageNet stem shrinks the image 4x before layer1, which leaves
    a 32 px image 1 px wide at layer4. As the CIFAR ResNets do, small images
    keep their resolution: a 3x3 stride-1 stem, and no max-pool up to 32 px."""
    if image_size > 64:
        return
    net.conv1 = nn.Conv2d(CHANNELS, 64, 3, stride=1, padding=1, bias=False)
    if image_size <= 32:
        net.maxpool = nn.Identity()


loss_fn = nn.CrossEntropyLoss()
METRICS = ("loss", "accuracy")


def batch_metrics(outputs, targets):
    """Sums over the batch; evaluation adds them up over ranks and divides."""
    loss = nn.functional.cross_entropy(outputs.float(), targets, reduction="sum")
    correct = (outputs.argmax(dim=1) == targets).sum()
    return {"loss": loss, "accuracy": correct.to(torch.float64)}
