"""The GPT language-model option (--data text --model gpt) on a corpus every
machine has: a few modules of Python's standard library (issue 22)."""

import json
import sysconfig
from pathlib import Path

import pytest
from helpers import PYTHON, final_model, import_generated, package, run, train

STDLIB = Path(sysconfig.get_paths()["stdlib"])
SMALL_GPT = ["--block-size", "32", "--n-layer", "2", "--n-head", "2", "--n-embd", "32"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """About 45,000 characters: 80 windows of 32 per process and epoch at
    --batch-size 8 on 2 processes."""
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    modules = ("textwrap.py", "bisect.py", "shlex.py")
    path.write_text("".join((STDLIB / name).read_text() for name in modules))
    return path


@pytest.fixture
def gpt(projects):
    return projects("launch", data="text", model="gpt", tracker="none")


def flags(corpus, *extra):
    return ["--data-dir", corpus, *SMALL_GPT, "--batch-size", "8", *extra]


def test_resume_mid_epoch_with_dropout_is_exact(gpt, corpus, tmp_path):
    """A resume restores the window order, the optimizer and every rank's RNG
    (dropout draws from it): the same weights as the uninterrupted run."""
    run_flags = flags(corpus, "--dropout", "0.1", "--epochs", "1")
    train(gpt, tmp_path / "cut", *run_flags, "--max-steps", "5")
    resumed, _ = train(gpt, tmp_path / "cut", *run_flags, "--max-steps", "12")
    straight, _ = train(gpt, tmp_path / "straight", *run_flags, "--max-steps", "12")
    assert resumed["steps"] == straight["steps"] == 12
    expected = final_model(tmp_path / "straight")
    for key, value in final_model(tmp_path / "cut").items():
        assert value.allclose(expected[key], rtol=0, atol=1e-6), key


def test_two_processes_equal_one_at_the_same_global_batch(gpt, corpus, tmp_path):
    common = ["--data-dir", corpus, *SMALL_GPT, "--max-steps", "8", "--epochs", "1"]
    two, _ = train(gpt, tmp_path / "two", *common, "--batch-size", "4")
    one, _ = train(gpt, tmp_path / "one", *common, "--batch-size", "8", nprocs=1)
    assert two["world_size"] == 2 and one["world_size"] == 1
    actual, expected = final_model(tmp_path / "two"), final_model(tmp_path / "one")
    for key, value in actual.items():
        assert value.allclose(expected[key], rtol=0, atol=1e-5), key


def test_validation_counts_each_window_once_and_reports_rates(gpt, corpus, tmp_path):
    metrics, _ = train(
        gpt, tmp_path, *flags(corpus, "--max-steps", "3", "--log-every", "1")
    )
    val_tokens = (tmp_path / "tokens" / "val.bin").stat().st_size // 2  # uint16
    assert metrics["eval_samples"] == (val_tokens - 1) // 32
    assert 1 < metrics["eval_perplexity"] < 1000
    assert metrics["tokens_per_second"] == pytest.approx(
        metrics["samples_per_second"] * 32
    )
    records = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert "tokens_per_second" in json.loads(records[0])


def test_tokenised_once_and_sampled_from_the_checkpoint(gpt, corpus, tmp_path):
    train(gpt, tmp_path, *flags(corpus, "--max-steps", "2"))
    stamp = tmp_path / "tokens" / "train.bin"
    written = stamp.stat().st_mtime_ns
    train(gpt, tmp_path, *flags(corpus, "--max-steps", "4"))
    assert stamp.stat().st_mtime_ns == written  # the resume reused the tokens
    command = [PYTHON, "-m", f"{package(gpt)}.sample", tmp_path]
    result = run([*command, "--prompt", "def ", "--tokens", "40"], gpt)
    assert result.stdout.startswith("def ") and len(result.stdout) >= 44
    bad = run([*command, "--prompt", "\u4e2d\u6587"], gpt, check=False)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.output


@pytest.mark.parametrize(
    "extra",
    [["--amp", "bf16"], ["--amp", "fp16"], ["--grad-accum", "2"]],
    ids=["bf16", "fp16", "grad-accum"],
)
def test_trains_with_amp_and_accumulation(gpt, corpus, tmp_path, extra):
    """AMP in one process (the autocast and the scaler are each rank's own);
    accumulation on two, where no_sync skips real all-reduces."""
    nprocs = 2 if "--grad-accum" in extra else 1
    metrics, _ = train(
        gpt, tmp_path, *flags(corpus, "--max-steps", "4", *extra), nprocs=nprocs
    )
    assert metrics["steps"] == 4 and metrics["replicas_in_sync"]


def test_model_parallel_splits_the_blocks(projects, corpus, tmp_path):
    project = projects("mp", model_parallel=True, data="text", model="gpt")
    metrics, _ = train(project, tmp_path, *flags(corpus, "--max-steps", "4"))
    assert metrics["steps"] == 4 and metrics["replicas_in_sync"]
    layers = import_generated(project, "model")
    config = import_generated(project, "config").Config(n_layer=4)
    assert layers.split_at(layers.build_model(config, 10)) == 1 + 2


@pytest.mark.timeout(600)
def test_compiled_gpt_trains_and_samples(gpt, corpus, tmp_path):
    """torch.compile on CPU (inductor); the checkpoint's keys carry no
    _orig_mod prefix, so sampling loads them into the plain model."""
    metrics, _ = train(
        gpt,
        tmp_path,
        *flags(corpus, "--max-steps", "3", "--compile"),
        nprocs=1,
        timeout=540,
    )
    assert metrics["steps"] == 3
    assert not any(key.startswith("_orig_mod.") for key in final_model(tmp_path))
    command = [PYTHON, "-m", f"{package(gpt)}.sample", tmp_path, "--tokens", "5"]
    assert run(command, gpt).returncode == 0
