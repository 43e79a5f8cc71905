{%- if cookiecutter.model == "gpt" -%}
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


{%- if cookiecutter.model_parallel %}


def split_at(model):
    """Stage 1's first layer: the embedding and the first half of the blocks
    on the first device, the other half, the norm and the head on the second."""
    blocks = sum(isinstance(layer, Block) for layer in model)
    return 1 + blocks // 2
{%- endif %}


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
{%- else -%}
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
{%- elif cookiecutter.data == "cifar10" %}

from .data import CHANNELS, IMAGE_SIZE
{%- else %}

from .data import CHANNELS
{%- endif %}
{%- if cookiecutter.model_parallel %}

# Stage 1 starts at this layer: about half the compute on each device.
SPLIT_AT = {{ {"mlp": 2, "cnn": 2, "resnet18": 6}[cookiecutter.model] }}
{%- endif %}


def build_model(config, outputs):
{%- if cookiecutter.model == "mlp" %}
    return nn.Sequential(
        OrderedDict(
            hidden=nn.Linear(FEATURES, 32),
            activation=nn.ReLU(),
            output=nn.Linear(32, outputs),
        )
    )
{%- elif cookiecutter.model == "cnn" %}
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
{%- else %}
    # The layers of torchvision's ResNet-18 in order, under its own names, so
    # its weights load as they are (no pretrained download here).
    net = resnet18(weights=None, num_classes=outputs)
    fit_stem_to_image_size(net, {{ "IMAGE_SIZE" if cookiecutter.data == "cifar10" else "config.image_size" }})
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
{%- if cookiecutter.model == "cnn" %}


def conv_block(inputs, outputs):
    return nn.Sequential(
        nn.Conv2d(inputs, outputs, 3, padding=1, bias=False),  # BatchNorm adds one
        nn.BatchNorm2d(outputs),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(2),
    )
{%- elif cookiecutter.model == "resnet18" %}


def fit_stem_to_image_size(net, image_size):
    """ResNet's ImageNet stem shrinks the image 4x before layer1, which leaves
    a 32 px image 1 px wide at layer4. As the CIFAR ResNets do, small images
    keep their resolution: a 3x3 stride-1 stem, and no max-pool up to 32 px."""
    if image_size > 64:
        return
    net.conv1 = nn.Conv2d(CHANNELS, 64, 3, stride=1, padding=1, bias=False)
    if image_size <= 32:
        net.maxpool = nn.Identity()
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
{%- endif %}
