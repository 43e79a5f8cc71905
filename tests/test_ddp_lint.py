"""`ddpgen lint`: each rule's positive and negative cases, the CLI contract,
the flake8 plugin, the seed's scripts and every generated project."""

import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import load_tool

from ddpgen.cli import main
from ddpgen.lint import RULES, chosen_rules, lint_paths, lint_source
from ddpgen.lint.engine import FILES_PER_WORKER

ROOT = Path(__file__).resolve().parents[1]
CASES = Path(__file__).parent / "lint_cases"
DIST = "import torch\nimport torch.distributed as dist\n"
MARKER = re.compile(r"# <- (DDP\d{3})$")
ALL_RULES = chosen_rules(["DDP"], [])  # DDP010 (opt-in) included


def marked_lines(source):
    """{code: the lines whose `# <- CODE` says that rule must report them}."""
    marked = {}
    for number, line in enumerate(source.splitlines(), 1):
        if match := MARKER.search(line):
            marked.setdefault(match.group(1), []).append(number)
    return marked


RULE_CASES = [
    pytest.param(rule.code, source, id=f"{rule.code}-{index}")
    for rule in RULES
    for index, source in enumerate(rule.sources)
]


def test_every_rule_shows_its_pitfall_in_a_case():
    for rule in RULES:
        assert any(rule.code in marked_lines(s) for s in rule.sources), rule.code


@pytest.mark.parametrize("code, source", RULE_CASES)
def test_rule_case(code, source):
    """The rule reports exactly its marked lines, and so does each rule that a
    line of the case is marked for; the case parses."""
    found = lint_source(source, "case.py", ALL_RULES)
    marked = marked_lines(source)
    assert "DDP000" not in {f.code for f in found}, found
    for checked in {code, *marked}:
        lines = [f.line for f in found if f.code == checked]
        assert lines == marked.get(checked, []), (checked, found)


def rule(code):
    return next(r for r in RULES if r.code == code)


def test_ddp010_is_opt_in():
    (reported,) = [s for s in rule("DDP010").sources if marked_lines(s)]
    assert "DDP010" in {f.code for f in lint_source(reported, "x.py", ALL_RULES)}
    default = chosen_rules([], [])
    assert "DDP010" not in {f.code for f in lint_source(reported, "x.py", default)}


def test_docs_rule_sections_are_written_from_the_rule_modules():
    page = ROOT / "docs" / "lint.md"
    current = page.read_text(encoding="utf-8")
    assert current == load_tool("lint_docs").page_text(current), "run `make lint-docs`"
    for rule_ in RULES:
        assert f"## {rule_.title}\n" in current


def lint(*args):
    return CliRunner().invoke(main, ["lint", *map(str, args)])


@pytest.fixture
def files(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "bad.py").write_text(DIST + "state = torch.load('x.pt')\n")
    (tmp_path / "pkg" / "good.py").write_text("x = 1\n")
    (tmp_path / "pkg" / "broken.py").write_text("def (:\n")
    (tmp_path / "notes.txt").write_text("torch.load('x.pt')\n")
    return tmp_path


def test_cli_reports_in_the_concise_form_and_exits_1(files):
    result = lint(files)
    lines = result.output.splitlines()
    assert result.exit_code == 1
    assert f"{files}/pkg/bad.py:3:9: DDP004 torch.load without map_location" in lines[0]
    assert lines[1].startswith(f"{files}/pkg/broken.py:1:5: DDP000 cannot parse")
    assert lines[-1] == "2 findings in 3 files"


def test_cli_clean_exits_0(files):
    result = lint(files / "pkg" / "good.py")
    assert result.exit_code == 0 and result.output == "0 findings in 1 file\n"


def test_cli_json(files):
    result = lint("--format", "json", files / "pkg" / "bad.py")
    assert result.exit_code == 1
    assert json.loads(result.output) == [
        {
            "path": f"{files}/pkg/bad.py",
            "line": 3,
            "col": 9,
            "code": "DDP004",
            "message": "torch.load without map_location loads onto the GPU that "
            "saved it: pass map_location ('cpu', or this rank's device)",
        }
    ]


@pytest.mark.parametrize(
    "flags, exit_code",
    [
        (["--select", "DDP004"], 1),
        (["--select", "DDP00"], 1),
        (["--select", "DDP011"], 0),
        (["--ignore", "DDP004"], 0),
        (["--ignore", "DDP0"], 0),
    ],
)
def test_cli_select_and_ignore(files, flags, exit_code):
    assert lint(*flags, files / "pkg" / "bad.py").exit_code == exit_code


@pytest.mark.parametrize(
    "comment, exit_code",
    [("  # noqa", 0), ("  # noqa: DDP004", 0), ("  # noqa: DDP003", 1), ("", 1)],
)
def test_noqa(tmp_path, comment, exit_code):
    (tmp_path / "a.py").write_text(DIST + f"state = torch.load('x.pt'){comment}\n")
    assert lint(tmp_path / "a.py").exit_code == exit_code


@pytest.mark.parametrize(
    "args, message",
    [
        (["nowhere.py"], "nowhere.py: no such file or folder"),
        (["--select", "XYZ1", "."], "unknown rule 'XYZ1'"),
        ([], "Missing argument 'PATHS...'"),
    ],
)
def test_cli_usage_errors_exit_2_in_one_line(tmp_path, args, message):
    result = CliRunner().invoke(main, ["lint", *args])
    assert result.exit_code == 2 and message in result.output
    assert "Traceback" not in result.output


def test_a_300_line_file_is_linted_whole():
    """Each of 38 functions holds the accumulation pitfall: every one is found
    (the file parses, so every rule runs). Speed is not asserted here."""
    case, *_ = [s for s in rule("DDP012").sources if marked_lines(s)]
    source = "\n".join(
        f"def train_{index}():\n" + textwrap.indent(case, "    ") for index in range(38)
    )
    assert source.count("\n") >= 300
    findings = lint_source(source, "x.py", ALL_RULES)
    assert [finding.code for finding in findings] == ["DDP012"] * 38, findings


def test_many_files_on_two_processes_report_as_one_does(tmp_path):
    """Enough files for a process pool: the same findings, in the same order."""
    sources = [source for rule in RULES for source in rule.sources] * 3
    for index, source in enumerate(sources):
        (tmp_path / f"case_{index:03}.py").write_text(source)
    assert len(sources) >= 2 * FILES_PER_WORKER
    serial, files = lint_paths([tmp_path], ["DDP"], jobs=1)
    parallel, _ = lint_paths([tmp_path], ["DDP"], jobs=2)
    assert files == len(sources) and len(serial) > len(sources) // 2
    assert parallel == serial


def test_lint_never_imports_torch(files):
    code = "import sys; from ddpgen.cli import main\n"
    code += f"sys.argv = ['ddpgen', 'lint', '{files}']\n"
    code += "try:\n    main()\nexcept SystemExit:\n    pass\n"
    code += "assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_seed_scripts_findings():
    """The blog's launch example never calls set_epoch (its known defect)."""
    result = lint(CASES)
    found = {
        (Path(line.split(":")[0]).name, line.split()[1])
        for line in result.output.splitlines()[:-1]
    }
    assert found == {("seed_launch.py", "DDP001")}


def test_generated_examples_and_ddpgen_lint_clean():
    paths = [
        ROOT / "generated_examples",
        ROOT / "ddpgen",
        ROOT / "tools",
        ROOT / "benchmarks",
    ]
    result = lint(*paths)
    assert result.exit_code == 0, result.output


@pytest.mark.skipif(
    not shutil.which("flake8", path=str(Path(sys.executable).parent)),
    reason="flake8 is in the test extra",
)
def test_flake8_plugin_reports_the_same(files):
    flake8 = Path(sys.executable).parent / "flake8"
    result = subprocess.run(
        [flake8, "--select", "DDP", files / "pkg" / "bad.py"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert (
        f"{files}/pkg/bad.py:3:9: DDP004 torch.load without map_location"
        in result.stdout
    )


def test_docs_lint_commands_run_on_a_generated_project(tmp_path, monkeypatch):
    """Every command of docs/lint.md's first block, in a folder shaped like it."""
    source = ROOT / "generated_examples" / "launch"
    shutil.copy(source / "train.py", tmp_path / "train.py")
    for folder in ("my_project", "src"):
        shutil.copytree(source / "launch", tmp_path / folder)
    block = (ROOT / "docs" / "lint.md").read_text().split("```bash\n")[1]
    commands = [
        line.split("  #")[0].strip() for line in block.split("```")[0].splitlines()
    ]
    assert len(commands) == 8
    monkeypatch.chdir(tmp_path)
    for command in commands:
        words = command.split()
        assert words[0] == "ddpgen", command
        result = CliRunner().invoke(main, words[1:], catch_exceptions=False)
        assert result.exit_code == 0, (command, result.output)
        if "--format json" in command:
            assert json.loads(result.output) == []
        if "--format sarif" in command:
            assert json.loads(result.output)["runs"][0]["results"] == []
        if "--format github" in command:
            assert result.output.strip() == ""
