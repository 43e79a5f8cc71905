"""`ddpgen lint`: each rule's positive and negative cases, the CLI contract,
the flake8 plugin, the seed's scripts and every generated project."""

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from ddpgen.cli import main
from ddpgen.lint import RULES, chosen_rules, lint_source

ROOT = Path(__file__).resolve().parents[1]
CASES = Path(__file__).parent / "lint_cases"
DIST = "import torch\nimport torch.distributed as dist\n"


def normalized(source):
    """Dedent a case written as DIST + an indented block."""
    if source.startswith(DIST):
        return DIST + textwrap.dedent(source[len(DIST) :])
    return textwrap.dedent(source)


def codes(source, select=("DDP",)):
    rules = chosen_rules(list(select), [])
    return [f.code for f in lint_source(normalized(source), "x.py", rules)]


# (rule, source that must be reported, sources that must not)
RULE_CASES = {
    "DDP001": (
        """
        sampler = DistributedSampler(train_set)
        loader = DataLoader(train_set, sampler=sampler)
        for epoch in range(3):
            for batch in loader:
                pass
        """,
        [
            """
            sampler = DistributedSampler(train_set)
            for epoch in range(3):
                sampler.set_epoch(epoch)
            """,
            """
            eval_sampler = DistributedSampler(val_set, shuffle=False)
            for batch in DataLoader(val_set, sampler=eval_sampler):
                pass
            """,
        ],
    ),
    "DDP002": (
        """
        sampler = DistributedSampler(train_set)
        loader = DataLoader(train_set, shuffle=True, sampler=sampler)
        """,
        [
            "loader = DataLoader(train_set, sampler=DistributedSampler(train_set))",
            "loader = DataLoader(train_set, shuffle=True)",
        ],
    ),
    "DDP003": (
        DIST + """
        def save(model):
            torch.save(model.state_dict(), "model.pt")
        def train():
            dist.init_process_group("gloo")
            save(model)
        """,
        [
            DIST + """
            def train():
                dist.init_process_group("gloo")
                if dist.get_rank() == 0:
                    torch.save(model.state_dict(), "model.pt")
            """,
            DIST + """
            def save(model, rank):
                if rank != 0:
                    return
                torch.save(model.state_dict(), "model.pt")
            """,
            DIST + """
            def save(model):
                torch.save(model.state_dict(), "model.pt")
            def train(rank):
                if rank == 0:
                    save(model)
            """,
            "import torch\ntorch.save(model.state_dict(), 'model.pt')\n",  # no DDP
            DIST + """
            class Trainer:
                def _save_checkpoint(self, epoch):
                    torch.save(self.model.module.state_dict(), "checkpoint.pt")
                def train(self, epochs):
                    for epoch in range(epochs):
                        if self.gpu_id == 0 and epoch % self.save_every == 0:
                            self._save_checkpoint(epoch)
            """,  # the rank under another name (pytorch/examples' multigpu.py)
        ],
    ),
    "DDP003 periodic": (
        DIST + """
        for step in range(steps):
            if step % 100 == 0:
                torch.save(model.state_dict(), "model.pt")
        """,
        [],
    ),
    "DDP004": (
        DIST + "state = torch.load('model.pt')\n",
        [
            DIST + "state = torch.load('model.pt', map_location='cpu')\n",
            "import torch\nstate = torch.load('model.pt')\n",  # no DDP
        ],
    ),
    "DDP005": (
        DIST + """
        if dist.get_rank() == 0:
            dist.barrier()
        """,
        [
            DIST + """
            if rank == 0:
                dist.broadcast(tensor, src=0)
            else:
                dist.broadcast(tensor, src=0)
            """,
            DIST + """
            if rank == 0:
                print("saved")
            dist.barrier()
            """,
            DIST + """
            def save(state):
                dist.barrier()

            if rank == 0:
                checkpoint.save(state)  # another module's save
            """,
        ],
    ),
    "DDP006": (
        "parser.add_argument('--local_rank', type=int, default=0)\n",
        [
            "parser.add_argument('--local-rank', '--local_rank', type=int)\n",
            """
            parser.add_argument('--local_rank', type=int, default=0)
            mp.spawn(worker, nprocs=2)
            """,
        ],
    ),
    "DDP007": (
        DIST + "dist.init_process_group('nccl')\n",
        [
            DIST
            + "torch.cuda.set_device(local_rank)\ndist.init_process_group('nccl')\n",
            DIST + "dist.init_process_group('nccl', device_id=device)\n",
            DIST + "dist.init_process_group('gloo')\n",
        ],
    ),
    "DDP008": (
        DIST + "rank = dist.get_rank()\ntorch.cuda.set_device(rank)\n",
        [
            DIST
            + "torch.cuda.set_device(dist.get_rank() % torch.cuda.device_count())\n",
            DIST
            + "local_rank = int(os.environ['LOCAL_RANK'])\nmodel.cuda(local_rank)\n",
        ],
    ),
    "DDP009": (
        DIST + """
        ddp_model = DistributedDataParallel(model)
        loss = loss_fn(ddp_model.module(inputs), targets)
        loss.backward()
        """,
        [
            DIST + """
            ddp_model = DistributedDataParallel(model)
            loss_fn(ddp_model(inputs), targets).backward()
            with torch.no_grad():
                check = ddp_model.module(inputs)
            """,
        ],
    ),
    "DDP010": (
        DIST + """
        ddp_model = DistributedDataParallel(model)
        torch.save(ddp_model.state_dict(), "m.pt")
        model.load_state_dict(torch.load("m.pt", map_location="cpu"))
        """,
        [
            DIST + """
            ddp_model = DistributedDataParallel(model)
            torch.save(ddp_model.module.state_dict(), "m.pt")
            model.load_state_dict(torch.load("m.pt", map_location="cpu"))
            """,
        ],
    ),
    "DDP011": (
        DIST + "dist.init_process_group('gloo')\n",
        [DIST + "dist.init_process_group('gloo')\ndist.destroy_process_group()\n"],
    ),
    "DDP012": (
        DIST + """
        model = DistributedDataParallel(net)
        for step, batch in enumerate(loader):
            loss_fn(model(batch)).backward()
            if (step + 1) % accumulation == 0:
                optimizer.step()
        """,
        [
            DIST + """
            model = DistributedDataParallel(net)
            for step, batch in enumerate(loader):
                last = (step + 1) % accumulation == 0
                with contextlib.nullcontext() if last else model.no_sync():
                    loss_fn(model(batch)).backward()
                if (step + 1) % accumulation == 0:
                    optimizer.step()
            """,
        ],
    ),
}


def test_every_rule_has_cases():
    assert {case.split()[0] for case in RULE_CASES} == {rule.code for rule in RULES}


@pytest.mark.parametrize("case", sorted(RULE_CASES))
def test_rule_reports_its_pitfall(case):
    assert case.split()[0] in codes(RULE_CASES[case][0])


@pytest.mark.parametrize(
    "code, negative",
    [
        (code, negative)
        for code, (_, negatives) in RULE_CASES.items()
        for negative in negatives
    ],
)
def test_rule_stays_quiet_on_the_fixed_code(code, negative):
    assert code not in codes(negative)


def test_ddp010_is_opt_in():
    assert "DDP010" not in codes(RULE_CASES["DDP010"][0], select=())


def test_ddp008_follows_the_assignment_that_reaches_each_use():
    """microsoft/LoRA's examples/NLG/src/gpu.py: one function calls the global
    rank `local_rank` on one platform and the real local rank on the others.
    Only the first is reported; a name only ever set in a branch, or set from
    itself in a cycle, is resolved without looping."""
    source = DIST + """
    def setup(args):
        if args.platform == "local":
            local_rank = dist.get_rank()
            torch.cuda.set_device(local_rank)
        elif args.platform == "philly":
            local_rank = args.local_rank
            torch.cuda.set_device(local_rank)
        else:
            local_rank = int(os.environ["LOCAL_RANK"])
            torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)

    def cycle():
        a = b
        b = a
        torch.cuda.set_device(a)
    """
    rules = chosen_rules(["DDP008"], [])
    found = lint_source(normalized(source), "gpu.py", rules)
    assert [(f.code, f.line) for f in found] == [("DDP008", 7)]


def test_ddp012_sees_the_amp_step_through_the_scaler():
    """jingyaogong/minimind's trainer/train_pretrain.py: accumulation steps on
    a DDP model, the optimizer stepped through a GradScaler, no no_sync."""
    source = DIST + """
    model = DistributedDataParallel(model)
    for step, batch in enumerate(loader):
        scaler.scale(model(batch).loss / accumulation).backward()
        if step % accumulation == 0:
            scaler.step(optimizer)
            scaler.update()
    """
    assert codes(source) == ["DDP012"]
    fixed = source.replace(
        "        scaler.scale(",
        "        model.require_backward_grad_sync = step % accumulation == 0\n"
        "        scaler.scale(",
    )
    assert codes(fixed) == []


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
    """Each of 31 functions holds the accumulation pitfall: every one is found
    (the file parses, so every rule runs). Speed is not asserted here."""
    case = normalized(RULE_CASES["DDP012"][0])
    source = "\n".join(
        f"def train_{index}():\n" + textwrap.indent(case, "    ") for index in range(31)
    )
    assert source.count("\n") >= 300
    findings = lint_source(source, "x.py", chosen_rules(["DDP"], []))
    assert [finding.code for finding in findings] == ["DDP012"] * 31, findings


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


# The classes of misses and false alarms seen in real scripts (issue 25), each
# a short case written after the script that shows it:
# huggingface/transformers, examples/run_glue.py, commit
# c9439e15e5957491917406933c8ccf07be819016
# (the rank-0-first barrier pair, also under `and not evaluate`; a sampler
# chosen by `... if args.local_rank == -1 else DistributedSampler(...)`).
REAL_SCRIPT_CASES = [
    (
        "rank-0-first barrier pair: each rank enters exactly one barrier",
        """
        def load(args):
            if args.local_rank not in [-1, 0]:
                torch.distributed.barrier()
            data = prepare()
            if args.local_rank == 0:
                torch.distributed.barrier()
            return data
        """,
        [],
    ),
    (
        "the pair under an extra condition the same on every rank",
        """
        def load(args, evaluate=False):
            if args.local_rank not in [-1, 0] and not evaluate:
                torch.distributed.barrier()
            data = prepare()
            if args.local_rank == 0 and not evaluate:
                torch.distributed.barrier()
            return data
        """,
        [],
    ),
    (
        "one half of the pair alone still hangs",
        """
        def load(args):
            if args.local_rank not in [-1, 0]:
                torch.distributed.barrier()
            return prepare()
        """,
        ["DDP005"],
    ),
    (
        "two barriers that both skip rank 0 are no pair",
        """
        def load(args):
            if args.local_rank != 0:
                torch.distributed.barrier()
            if args.local_rank > 0:
                torch.distributed.barrier()
        """,
        ["DDP005", "DDP005"],
    ),
    (
        "a collective under the non-distributed test runs on every rank",
        """
        def sync(args, tensor):
            if args.local_rank != -1:
                dist.all_reduce(tensor)
            if "RANK" in os.environ:
                dist.barrier()
        """,
        [],
    ),
    (
        "a sampler chosen by a condition, then shuffle=True beside it",
        """
        train_sampler = DistributedSampler(train_set) if distributed else None
        loader = DataLoader(train_set, shuffle=True, sampler=train_sampler)
        """,
        ["DDP002"],
    ),
    (
        "set_epoch on another sampler does not reshuffle the training one",
        """
        train_sampler = DistributedSampler(train_set)
        other_sampler = DistributedSampler(other_set)
        for epoch in range(3):
            other_sampler.set_epoch(epoch)
            for batch in DataLoader(train_set, sampler=train_sampler):
                pass
        """,
        ["DDP001"],
    ),
    (
        "set_epoch through the loader may be any sampler: silent",
        """
        train_sampler = DistributedSampler(train_set)
        loader = DataLoader(train_set, sampler=train_sampler)
        for epoch in range(3):
            loader.sampler.set_epoch(epoch)
        """,
        [],
    ),
    (
        "an evaluation sampler's order does not matter",
        """
        def validate(model, val_set):
            val_sampler = DistributedSampler(val_set)
            with torch.no_grad():
                for batch in DataLoader(val_set, sampler=val_sampler):
                    model(batch)
        """,
        [],
    ),
    (
        "an optimizer known by its assignment, not its name",
        """
        model = DDP(net)
        opt = torch.optim.AdamW(model.parameters())
        for i, batch in enumerate(loader):
            model(batch).sum().backward()
            if (i + 1) % accumulation == 0:
                opt.step()
        """,
        ["DDP012"],
    ),
    (
        "an accumulation loop and its leftover flush: one report",
        """
        model = DDP(net)
        for i, batch in enumerate(loader):
            model(batch).sum().backward()
            if (i + 1) % accumulation == 0:
                optimizer.step()
        if len(loader) % accumulation:
            optimizer.step()
        """,
        ["DDP012"],
    ),
    (
        "the forward through an alias of model.module skips the all-reduce",
        """
        model = DDP(net)
        raw = model.module
        for i, batch in enumerate(loader):
            loss = raw(batch).sum()
            loss.backward()
            if (i + 1) % accumulation == 0:
                optimizer.step()
        """,
        ["DDP009"],
    ),
    (
        "torch.load(path, **kwargs) may pass map_location",
        """
        def restore(path, **kwargs):
            return torch.load(path, **kwargs)
        """,
        [],
    ),
]


@pytest.mark.parametrize(
    "source, expected",
    [(source, expected) for _, source, expected in REAL_SCRIPT_CASES],
    ids=[why for why, _, _ in REAL_SCRIPT_CASES],
)
def test_classes_seen_in_real_scripts(source, expected):
    wanted = {"DDP001", "DDP002", "DDP004", "DDP005", "DDP009", "DDP012"}
    source = DIST + "import os\n" + textwrap.dedent(source)
    found = [code for code in codes(source) if code in wanted]
    assert "DDP000" not in codes(source)
    assert found == expected
