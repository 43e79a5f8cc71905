"""One rule for a user's mistake in a generated project: one line saying what
is wrong, printed once (not once per rank), exit 2, no traceback, nothing
trained. Two real multi-process runs show the rule end to end; the other
mistakes are shown to raise the error the rule handles (ConfigError)."""

import importlib
import socket
import sys

import pytest
import torch
from helpers import PYTHON, import_generated, package, run, train


def assert_one_line(result, start, end=""):
    lines = result.stderr.splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.output
    assert lines[0].startswith(f"error: {start}") and lines[0].endswith(end)


def test_another_models_checkpoint_is_one_line_from_two_processes(mp, tmp_path):
    path = tmp_path / "other.pt"
    other_model = {"hidden.weight": torch.zeros(64, 8)}
    torch.save({"model": other_model, "epoch": 1, "step": 8, "rng": []}, path)
    for key in ("optimizer", "scheduler", "scaler"):
        state = torch.load(path, weights_only=True) | {key: {}}
        torch.save(state, path)
    _, result = train(mp, tmp_path, "--resume", path, check=False)
    assert_one_line(
        result,
        f"{path} holds another model's weights (",
        "resume a checkpoint of this model, or start fresh with --resume none",
    )
    assert "Missing key(s) in state_dict" in result.stderr
    assert not (tmp_path / "checkpoints").exists()


def test_a_file_that_is_no_checkpoint_is_one_line(mp, tmp_path):
    junk = tmp_path / "junk.pt"
    junk.write_text("not a checkpoint")
    _, result = train(mp, tmp_path, "--resume", junk, check=False)
    assert_one_line(
        result,
        f"--resume {junk}: cannot load checkpoint: not a checkpoint saved by "
        "torch.save (UnpicklingError: Weights only load failed)",
    )


@pytest.fixture
def generated(mp):
    return lambda module: import_generated(mp, module)


def test_cuda_without_a_gpu(generated):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    config = generated("config")
    with pytest.raises(config.ConfigError, match="^--device cuda: no CUDA device"):
        generated("distributed").visible_gpus("cuda")


def test_a_port_in_use(generated):
    config = generated("config")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        settings = config.parse_args(["--master-addr", "127.0.0.1"])
        settings.master_port = port
        with pytest.raises(
            config.ConfigError, match=f"^cannot listen on 127.0.0.1:{port} "
        ):
            generated("spawn").host_store(settings)


def test_class_folders_without_images(projects, tmp_path):
    project = projects("mp", data="imagefolder", model="cnn")
    for label in ("cat", "dog"):
        (tmp_path / label).mkdir()
    config = import_generated(project, "config")
    message = f"^{tmp_path}: Found no valid file for the classes cat, dog"
    with pytest.raises(config.ConfigError, match=message):
        import_generated(project, "data").image_folder(tmp_path, None)


def test_a_config_file_that_is_not_utf8(generated, tmp_path, capsys):
    settings = tmp_path / "settings.yaml"
    settings.write_bytes(b"lr: 0.1\n\xff\xfe\n")
    with pytest.raises(SystemExit) as exit_info:
        generated("config").parse_args(["--config", str(settings)])
    assert exit_info.value.code == 2
    assert (
        capsys.readouterr()
        .err.splitlines()[-1]
        .endswith(f"error: --config {settings}: not UTF-8 text (byte 8)")
    )


@pytest.mark.parametrize("tracker, package", [("wandb", "wandb"), ("mlflow", "mlflow")])
def test_a_missing_tracker_package(projects, monkeypatch, tracker, package):
    """Found by every rank before training (MetricsLog checks it)."""
    project = projects("mp", tracker=tracker)
    tracking = import_generated(project, "tracking")
    for name in [package, *[m for m in sys.modules if m.startswith(package + ".")]]:
        monkeypatch.setitem(sys.modules, name, None)  # importing it raises ImportError
    try:
        importlib.reload(tracking)
        config = import_generated(project, "config")
        with pytest.raises(
            config.ConfigError,
            match=f"^the {tracker} tracker needs the {package} package: pip install",
        ):
            import_generated(project, "metrics").MetricsLog("run", enabled=False)
    finally:
        monkeypatch.undo()
        importlib.reload(tracking)


@pytest.mark.parametrize("mode", ["launch", "mp"])
def test_the_doctor_without_a_gpu_for_device_cuda(projects, mode):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    project = projects(mode)
    command = [PYTHON, "-m", f"{package(project)}.doctor", "--device", "cuda"]
    nprocs = ["--nprocs", "2"] if mode == "mp" else []
    result = run(command + nprocs, project, check=False)
    assert_one_line(result, "--device cuda: no CUDA device is visible")
