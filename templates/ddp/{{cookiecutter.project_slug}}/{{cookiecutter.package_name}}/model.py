"""The model and its loss: replace these with yours.

Keep `build_model` returning an nn.Sequential (or adapt the split point) if you
use model parallelism.
"""

from collections import OrderedDict

{% if cookiecutter.data != "synthetic" -%}
import torch
{% endif -%}
from torch import nn
{%- if cookiecutter.model == "resnet18" %}
from torchvision.models import resnet18
{%- endif %}

{%- if cookiecutter.model == "mlp" %}

from .data import FEATURES
{%- elif cookiecutter.model == "cnn" %}

from .data import CHANNELS
{%- endif %}
{%- if cookiecutter.model_parallel %}

# Stage 1 starts at this layer: about half the compute on each device.
SPLIT_AT = {{ {"mlp": 2, "cnn": 6, "resnet18": 6}[cookiecutter.model] }}
{%- endif %}


def build_model(outputs):
{%- if cookiecutter.model == "mlp" %}
    return nn.Sequential(
        OrderedDict(
            hidden=nn.Linear(FEATURES, 32),
            activation=nn.ReLU(),
            output=nn.Linear(32, outputs),
        )
    )
{%- elif cookiecutter.model == "cnn" %}
    return nn.Sequential(
        OrderedDict(
            conv1=nn.Conv2d(CHANNELS, 32, 3, padding=1),
            relu1=nn.ReLU(),
            pool1=nn.MaxPool2d(2),
            conv2=nn.Conv2d(32, 64, 3, padding=1),
            relu2=nn.ReLU(),
            pool2=nn.AdaptiveAvgPool2d(1),
            flatten=nn.Flatten(),
            fc=nn.Linear(64, outputs),
        )
    )
{%- else %}
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
{%- endif %}
{%- if cookiecutter.data == "synthetic" %}


loss_fn = nn.MSELoss()
METRICS = ("loss",)


def batch_metrics(outputs, targets):
    """Sums over the batch; evaluation adds them up over ranks and divides."""
    squared_error = (outputs.float() - targets) ** 2
    return {"loss": squared_error.mean(dim=1).sum()}
{%- else %}


loss_fn = nn.CrossEntropyLoss()
METRICS = ("loss", "accuracy")


def batch_metrics(outputs, targets):
    """Sums over the batch; evaluation adds them up over ranks and divides."""
    loss = nn.functional.cross_entropy(outputs.float(), targets, reduction="sum")
    correct = (outputs.argmax(dim=1) == targets).sum()
    return {"loss": loss, "accuracy": correct.to(torch.float64)}
{%- endif %}
