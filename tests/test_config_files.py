"""--config FILE, --print-config, and the settings a checkpoint keeps."""

import dataclasses
import json

import pytest
import torch
import yaml
from helpers import PYTHON, SMALL_SYNTHETIC, checkpoints, import_generated, run, train


@pytest.fixture
def config_module(mp):
    return import_generated(mp, "config")


def parse(config_module, tmp_path, settings, *flags):
    path = tmp_path / "settings.yaml"
    path.write_text(settings if isinstance(settings, str) else yaml.safe_dump(settings))
    return config_module.parse_args(["--config", str(path), *flags])


def last_error_line(capsys):
    return capsys.readouterr().err.splitlines()[-1]


def test_the_file_sets_defaults_and_flags_win(config_module, tmp_path):
    settings = {"lr": 0.1, "epochs": 5, "optimizer": "adamw", "compile": True}
    config = parse(config_module, tmp_path, settings, "--epochs", "7", "--no-compile")
    assert (config.lr, config.epochs, config.optimizer) == (0.1, 7, "adamw")
    assert config.compile is False
    assert config.batch_size == 32  # neither: the default


def test_an_int_is_a_valid_float(config_module, tmp_path):
    assert parse(config_module, tmp_path, {"lr": 1}).lr == 1


@pytest.mark.parametrize(
    "settings, message",
    [
        (
            {"lr_shedule": "cosine"},
            "unknown setting 'lr_shedule' (did you mean 'lr_schedule'?)",
        ),
        (
            {"batch-size": 8},
            "unknown setting 'batch-size' (did you mean 'batch_size'?)",
        ),
        ({"colour": "red"}, "unknown setting 'colour'"),
        ({"epochs": "three"}, "epochs: expected int, got 'three'"),
        ({"epochs": 2.5}, "epochs: expected int, got 2.5"),
        ({"epochs": True}, "epochs: expected int, got True"),
        ({"compile": "yes"}, "compile: expected bool, got 'yes'"),
        ({"optimizer": "adam"}, "optimizer: expected one of adamw, sgd, got 'adam'"),
        ("- lr\n- 0.1\n", "expected setting: value lines"),
        ("lr: [0.1\n", "not valid YAML (line 2)"),
    ],
)
def test_a_bad_file_is_one_line_naming_the_key(
    config_module, tmp_path, capsys, settings, message
):
    with pytest.raises(SystemExit) as exit_info:
        parse(config_module, tmp_path, settings)
    assert exit_info.value.code == 2
    path = tmp_path / "settings.yaml"
    assert last_error_line(capsys).endswith(f"error: --config {path}: {message}")


def test_a_missing_file_is_one_line(config_module, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        config_module.parse_args(["--config", str(tmp_path / "none.yaml")])
    assert exit_info.value.code == 2
    missing = tmp_path / "none.yaml"
    assert last_error_line(capsys).endswith(
        f"error: cannot read --config {missing}: No such file or directory"
    )


def test_bounds_apply_to_file_values(config_module, tmp_path, capsys):
    with pytest.raises(SystemExit):
        parse(config_module, tmp_path, {"max_steps": -1})
    assert last_error_line(capsys).endswith(
        "error: --max-steps must be at least 0 (got -1)"
    )


def test_print_config_round_trips_through_the_file(mp, tmp_path):
    """The printed settings, read back with --config, are the same settings."""
    command = [PYTHON, "train.py", "--config", "configs/example.yaml", "--lr", "0.01"]
    printed = run(command + ["--print-config"], cwd=mp).stdout
    (tmp_path / "printed.yaml").write_text(printed)
    again = run(
        [PYTHON, "train.py", "--config", tmp_path / "printed.yaml", "--print-config"],
        cwd=mp,
    ).stdout
    assert again == printed
    settings = yaml.safe_load(printed)
    assert settings["lr"] == 0.01 and settings["optimizer"] == "adamw"
    config_module = import_generated(mp, "config")
    assert list(settings) == [f.name for f in dataclasses.fields(config_module.Config)]


def test_checkpoints_keep_the_settings_and_a_resume_applies_and_names_changes(
    mp, tmp_path
):
    """A resume that changes --lr trains at the new rate from the next step on
    (the schedule's position kept), and the log names every change, the number
    of processes included."""
    flags = [*SMALL_SYNTHETIC, "--log-every", "1"]
    train(mp, tmp_path, *flags, "--epochs", "1")  # 8 steps, 2 processes
    saved = torch.load(checkpoints(tmp_path)[-1], weights_only=True)["config"]
    assert saved["lr"] == 0.03 and saved["epochs"] == 1
    _, result = train(mp, tmp_path, *flags, "--epochs", "2", "--lr", "0.1", nprocs=1)
    changes = [line for line in result.stdout.splitlines() if "differs" in line]
    assert changes == [
        "setting epochs differs from the checkpoint's: 1 then, 2 now",
        "setting lr differs from the checkpoint's: 0.03 then, 0.1 now",
        "setting nprocs differs from the checkpoint's: 2 then, 1 now",
    ]
    assert (
        "resumed at step 8: 2 -> 1 process, micro-steps 1 -> 2, global batch 32 kept"
    ) in result.stdout.splitlines()
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").open()]
    lr_at = {r["step"]: r["lr"] for r in records if "lr" in r}
    factor = import_generated(mp, "optim").lr_factor("cosine", 3, 64, 0.0)
    assert lr_at[8] == pytest.approx(0.03 * factor(7))
    assert lr_at[9] == pytest.approx(0.1 * factor(8))


def test_a_static_graph_cannot_skip_syncs(config_module, capsys):
    """DDP's static graph breaks no_sync (an internal assert in the reducer)."""
    assert config_module.parse_args(["--grad-accum", "2"]).static_graph == "auto"
    with pytest.raises(SystemExit):
        config_module.parse_args(["--static-graph", "on", "--grad-accum", "2"])
    assert last_error_line(capsys).endswith(
        "error: --static-graph on cannot skip gradient syncs: use --grad-accum 1"
    )


def test_a_printed_config_keeps_the_checkpoint_folder_derived(
    config_module, tmp_path, capsys
):
    """print-config > my.yaml, then --config my.yaml --run-dir fresh: the
    checkpoints go to fresh/checkpoints, never to the first run's folder."""
    with pytest.raises(SystemExit):
        config_module.parse_args(["--run-dir", "first", "--print-config"])
    printed = capsys.readouterr().out
    assert "checkpoints" not in printed
    config = parse(config_module, tmp_path, printed, "--run-dir", "fresh")
    assert str(config.checkpoint_folder) == "fresh/checkpoints"
    pinned = parse(config_module, tmp_path, printed, "--checkpoint-dir", "shared")
    assert str(pinned.checkpoint_folder) == "shared"
