"""DDP over model parallelism: each process owns two devices, one per stage.

On a node with G GPUs, G // 2 processes run; local rank r owns GPUs 2r and 2r+1.
DDP wraps the split model without device_ids: it spans two devices.
"""

import itertools
from collections import OrderedDict

from torch import nn

from .config import ConfigError


class LayoutError(ConfigError):
    """The node's GPUs cannot hold the requested processes."""


def gpus_per_process(share_gpu):
    return 1 if share_gpu else 2


def processes_per_node(gpu_count, share_gpu=False):
    """How many processes a node runs: one per GPU pair (2 on a CPU-only node)."""
    if gpu_count == 0:
        return 2
    return gpu_count // gpus_per_process(share_gpu)


def stage_devices(local_rank, local_world_size, gpu_count, share_gpu=False):
    """The (stage 0, stage 1) devices of the process with this local rank."""
    if gpu_count == 0:
        return "cpu", "cpu"
    per_process = gpus_per_process(share_gpu)
    capacity = gpu_count // per_process
    if capacity == 0:
        raise LayoutError(
            f"model parallel needs 2 GPUs per process and this node has {gpu_count};"
            " pass --share-gpu to put both stages on one GPU"
        )
    if local_world_size > capacity:
        raise LayoutError(
            f"{local_world_size} processes per node need "
            f"{local_world_size * per_process} GPUs and this node has {gpu_count}: "
            f"start at most {capacity} (GPUs // {per_process})"
        )
    first = local_rank * per_process
    return f"cuda:{first}", f"cuda:{first + per_process - 1}"


def check_splittable(model):
    """The split runs the model's layers in order and nothing else: a model
    with its own forward (residuals, activations, reshapes) or its own
    parameters would train as another model, silently."""
    name = type(model).__name__
    if type(model).forward is not nn.Sequential.forward:
        raise ConfigError(
            f"model parallelism splits an nn.Sequential between its layers, but "
            f"build_model returned a {name} whose forward would never run: "
            "return an nn.Sequential of layers that run in order (model.py shows one)"
        )
    own = model.named_parameters(recurse=False), model.named_buffers(recurse=False)
    outside = [key for key, _ in itertools.chain(*own)]
    if outside:
        raise ConfigError(
            f"model parallelism splits {name} between its layers, and "
            f"{', '.join(outside)} belong to no layer, so would not train: "
            "move them into one of its layers"
        )


class TwoStageSequential(nn.Sequential):
    """A Sequential whose layers from `split_at` on live on a second device.

    It keeps the layer names of the unsplit model, so checkpoints load into
    either form.
    """

    def __init__(self, model, split_at, devices):
        check_splittable(model)
        super().__init__(OrderedDict(model.named_children()))
        self.split_at = split_at
        self.devices = devices
        if devices[0] != devices[1]:
            self._untie_across_stages()
        for index, layer in enumerate(self):
            layer.to(devices[1] if index >= split_at else devices[0])

    def _untie_across_stages(self):
        """A weight that both stages share (a GPT's tied embedding and head)
        cannot live on two devices: stage 1 gets its own copy to train."""
        stage0 = nn.ModuleList(list(self)[: self.split_at])
        stage1 = nn.ModuleList(list(self)[self.split_at :])
        shared = {id(parameter) for parameter in stage0.parameters()}
        for module in stage1.modules():
            for name, parameter in list(module.named_parameters(recurse=False)):
                if id(parameter) in shared:
                    setattr(module, name, nn.Parameter(parameter.detach().clone()))

    def forward(self, inputs):
        outputs = inputs.to(self.devices[0])
        for index, layer in enumerate(self):
            if index == self.split_at:
                outputs = outputs.to(self.devices[1])
            outputs = layer(outputs)
        return outputs
