"""--model-parallel: two devices per process, tested end to end on CPU."""

import pytest
import torch
from helpers import (
    SMALL_SYNTHETIC,
    assert_same_weights,
    final_model,
    import_generated,
    train,
    train_alone,
)

ONE_EPOCH = ["--epochs", "1", *SMALL_SYNTHETIC]


@pytest.fixture
def layout(projects):
    return import_generated(projects("mp", model_parallel=True), "model_parallel")


@pytest.mark.parametrize("gpus", [2, 4, 8])
def test_local_rank_r_owns_gpus_2r_and_2r_plus_1(layout, gpus):
    processes = layout.processes_per_node(gpus)
    assert processes == gpus // 2
    assert [layout.stage_devices(r, processes, gpus) for r in range(processes)] == [
        (f"cuda:{2 * r}", f"cuda:{2 * r + 1}") for r in range(processes)
    ]


def test_one_gpu_is_refused_unless_shared(layout):
    with pytest.raises(
        layout.LayoutError, match="needs 2 GPUs per process and this node has 1"
    ):
        layout.stage_devices(0, 1, 1)
    assert layout.processes_per_node(1, share_gpu=True) == 1
    assert layout.stage_devices(0, 1, 1, share_gpu=True) == ("cuda:0", "cuda:0")


@pytest.mark.parametrize(("gpus", "processes"), [(2, 2), (4, 3), (8, 5)])
def test_more_processes_than_gpu_pairs_is_refused(layout, gpus, processes):
    with pytest.raises(layout.LayoutError, match=f"start at most {gpus // 2}"):
        layout.stage_devices(0, processes, gpus)


def test_cpu_puts_both_stages_on_cpu(layout):
    assert layout.stage_devices(1, 2, 0) == ("cpu", "cpu")
    assert layout.processes_per_node(0) == 2


@pytest.mark.parametrize("model", ["mlp", "cnn", "resnet18"])
def test_split_puts_stages_on_two_devices_and_keeps_layer_names(projects, model):
    data = "synthetic" if model == "mlp" else "fakedata"
    project = projects("launch", model_parallel=True, data=data, model=model)
    models = import_generated(project, "model")
    layout = import_generated(project, "model_parallel")
    config = import_generated(project, "config").Config()
    whole = models.build_model(config, 5 if model == "mlp" else 10)
    names = list(whole.state_dict())
    # "meta" stands in for a second device: the split must move stage 1 only.
    split = layout.TwoStageSequential(whole, models.SPLIT_AT, ("cpu", "meta"))
    devices = [layer_device(layer) for layer in split if layer_device(layer)]
    assert devices == sorted(devices, key=["cpu", "meta"].index)
    assert {"cpu", "meta"} == set(devices)
    assert list(split.state_dict()) == names


def layer_device(layer):
    parameters = list(layer.parameters())
    return parameters[0].device.type if parameters else None


def test_mp_mode_split_model_equals_one_process_with_twice_the_batch(
    projects, tmp_path
):
    project = projects("mp", model_parallel=True)
    data = ["--train-size", "256", "--eval-size", "64", "--epochs", "2"]
    metrics, _ = train(project, tmp_path / "two", *data, "--batch-size", "8")
    assert metrics["world_size"] == 2 and metrics["replicas_in_sync"]
    train(project, tmp_path / "one", *data, "--batch-size", "16", nprocs=1)
    assert_same_weights(final_model(tmp_path / "two"), final_model(tmp_path / "one"))


def test_launch_mode_split_model_resumes_like_an_uninterrupted_run(projects, tmp_path):
    """In one process: two processes of split models are the mp test's."""
    project = projects("launch", model_parallel=True)
    train_alone(project, tmp_path / "resumed", "--epochs", "1")
    metrics, _ = train_alone(project, tmp_path / "resumed", "--epochs", "2")
    assert metrics["world_size"] == 1 and metrics["epochs"] == 2
    train_alone(project, tmp_path / "straight", "--epochs", "2")
    assert_same_weights(
        final_model(tmp_path / "resumed"), final_model(tmp_path / "straight")
    )
    state = torch.load(metrics["checkpoint"], weights_only=True)
    assert {tensor.device.type for tensor in state["model"].values()} == {"cpu"}


def test_split_checkpoint_loads_into_the_unsplit_model(projects, tmp_path):
    split_project = projects("launch", model_parallel=True)
    metrics, _ = train(split_project, tmp_path, *ONE_EPOCH, nprocs=1)
    unsplit = projects("launch")
    config = import_generated(unsplit, "config").Config()
    whole = import_generated(unsplit, "model").build_model(config, 5)
    whole.load_state_dict(torch.load(metrics["checkpoint"], weights_only=True)["model"])


class Residual(torch.nn.Module):
    """A user's own model: its forward adds a residual the split would skip."""

    def __init__(self):
        super().__init__()
        self.inner = torch.nn.Linear(4, 4)
        self.outer = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.outer(x + self.inner(x))


class ScaledSequential(torch.nn.Sequential):
    """A Sequential with a parameter of its own, outside every layer."""

    def __init__(self):
        super().__init__(torch.nn.Linear(4, 4), torch.nn.Linear(4, 4))
        self.scale = torch.nn.Parameter(torch.ones(()))


@pytest.mark.parametrize(
    "model, message",
    [
        (Residual, "build_model returned a Residual whose forward would never run"),
        (ScaledSequential, "and scale belong to no layer, so would not train"),
    ],
)
def test_a_model_the_split_would_change_is_refused(projects, model, message):
    project = projects("launch", model_parallel=True)
    layout = import_generated(project, "model_parallel")
    config = import_generated(project, "config")
    with pytest.raises(config.ConfigError, match=message):
        layout.TwoStageSequential(model(), 1, ("cpu", "cpu"))
