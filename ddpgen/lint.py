"""`ddpgen lint`: DDP pitfalls found statically in any training script.

The standard `ast` module only; torch is never imported. Each rule prefers
silence to a guess: a case it cannot tell apart is not reported.
The rules, with bad and fixed code, are in docs/lint.md.
"""

import ast
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from ddpgen.errors import UsageError

COLLECTIVES = {
    "barrier", "all_reduce", "broadcast", "all_gather", "all_gather_object",
    "all_gather_into_tensor", "broadcast_object_list", "reduce", "reduce_scatter",
    "reduce_scatter_tensor", "gather", "gather_object", "scatter",
    "scatter_object_list", "all_to_all", "all_to_all_single", "monitored_barrier",
}  # fmt: skip
DISTRIBUTED_MARKERS = {"init_process_group", "DistributedDataParallel", "get_rank"}
RANK_WORDS = re.compile(r"rank|is_main|main_process|is_master|master_process")
NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z0-9, ]+))?", re.IGNORECASE)


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    col: int
    code: str
    message: str

    def text(self):
        return f"{self.path}:{self.line}:{self.col}: {self.code} {self.message}"


@dataclass(frozen=True)
class Rule:
    code: str
    message: str
    check: object
    default: bool = True


def dotted(node):
    """'torch.distributed.barrier' for the expression, or '' when not a name."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def last_name(call):
    return dotted(call.func).rsplit(".", 1)[-1]


def keyword(call, name):
    return next((k.value for k in call.keywords if k.arg == name), None)


def is_true(node):
    return isinstance(node, ast.Constant) and node.value is True


def is_false(node):
    return isinstance(node, ast.Constant) and node.value is False


class Module:
    """A parsed file with the questions the rules ask about it."""

    def __init__(self, tree, path):
        self.tree, self.path = tree, path
        self.parents = {}
        for parent in ast.walk(tree):
            for child in ast.iter_child_nodes(parent):
                self.parents[child] = parent
        self.calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
        self.functions = {}
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions.setdefault(node.name, node)

    def ancestors(self, node):
        while node in self.parents:
            node = self.parents[node]
            yield node

    def calls_named(self, *names):
        return [call for call in self.calls if last_name(call) in names]

    def attribute_used(self, name):
        return any(
            isinstance(n, ast.Attribute) and n.attr == name for n in ast.walk(self.tree)
        ) or any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(self.tree))

    @cached_property
    def distributed(self):
        names = {dotted(n).rsplit(".", 1)[-1] for n in ast.walk(self.tree)}
        imports = {
            alias.name
            for n in ast.walk(self.tree)
            if isinstance(n, (ast.Import, ast.ImportFrom))
            for alias in n.names
        }
        return bool(names & DISTRIBUTED_MARKERS) or "torch.distributed" in imports

    def finding(self, node, rule, detail=""):
        message = rule.message + (f" ({detail})" if detail else "")
        return Finding(self.path, node.lineno, node.col_offset + 1, rule.code, message)

    # Rank conditions

    def rank_branch(self, node, loose=False):
        """The `if` (test on the rank) whose body or orelse holds node, and
        which of the two: (if_node, branch list) or None."""
        child = node
        for parent in self.ancestors(node):
            if isinstance(parent, ast.If) and is_rank_test(parent.test, loose):
                if child in parent.body:
                    return parent, parent.body
                if child in parent.orelse:
                    return parent, parent.orelse
            if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return None
            child = parent
        return None

    def guarded(self, node):
        """Under a rank condition, or after an early `if <rank test>: return`."""
        if self.rank_branch(node, loose=True):
            return True
        function = self.enclosing_function(node)
        if function is None:
            return False
        if any(RANK_WORDS.search(ast.unparse(d)) for d in function.decorator_list):
            return True  # @rank_zero_only and the like
        for statement in function.body:
            if statement.lineno >= node.lineno:
                break
            if (
                isinstance(statement, ast.If)
                and is_rank_test(statement.test, loose=True)
                and any(isinstance(s, (ast.Return, ast.Raise)) for s in statement.body)
            ):
                return True
        return False

    def enclosing_function(self, node):
        return next(
            (
                a
                for a in self.ancestors(node)
                if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef))
            ),
            None,
        )

    def references(self, function):
        """Every use of a module function's name other than its definition."""
        return [
            n
            for n in ast.walk(self.tree)
            if (isinstance(n, ast.Name) and n.id == function.name)
            or (
                isinstance(n, ast.Attribute)
                and n.attr == function.name
                and not dotted(n).startswith("torch.")
            )
        ]


def constants(node):
    """The constants of `0`, `-1` or `[-1, 0]`, as a set."""
    items = node.elts if isinstance(node, (ast.List, ast.Tuple, ast.Set)) else [node]
    return {ast.literal_eval(item) for item in items if is_number(item)}


def is_number(node):
    try:
        return isinstance(ast.literal_eval(node), int)
    except ValueError:
        return False


def only_tells_distributed(test):
    """`local_rank == -1`, `!= -1` or `"RANK" in os.environ`: the same on every
    rank of a job (-1 is the launchers' "not distributed"), so not a
    condition on the rank."""
    compares = [n for n in ast.walk(test) if isinstance(n, ast.Compare)]
    return bool(compares) and all(
        is_launcher_check(node, c) for node in compares for c in node.comparators
    )


def is_launcher_check(compare, comparator):
    if constants(comparator) == {-1}:
        return True
    return isinstance(compare.left, ast.Constant) and dotted(comparator) == "os.environ"


def is_rank_test(test, loose=False):
    """A condition on the rank. Loose also takes `<name> == 0` (a rank under
    another name, like gpu_id): right for "is this write guarded?", too vague
    for "do all ranks reach this collective?"."""
    if only_tells_distributed(test):
        return False
    if RANK_WORDS.search(ast.unparse(test).lower()):
        return True
    return loose and any(
        isinstance(node, ast.Compare)
        and isinstance(node.left, (ast.Name, ast.Attribute))
        and any(isinstance(op, (ast.Eq, ast.NotEq)) for op in node.ops)
        and any(isinstance(c, ast.Constant) and c.value == 0 for c in node.comparators)
        for node in ast.walk(test)
    )


# The rules


EVALUATION_WORDS = re.compile(r"val|eval|test")


def set_epoch_never_called(module, rule):
    if not any(isinstance(n, (ast.For, ast.While)) for n in ast.walk(module.tree)):
        return
    named = sampler_assignments(module)
    name_of = {id(call): name for name, call in named.items()}
    receivers = {
        dotted(call.func.value)
        for call in module.calls_named("set_epoch")
        if isinstance(call.func, ast.Attribute)
    }
    # `loader.sampler.set_epoch(epoch)` may be any sampler: stay silent.
    unknown_receiver = bool(receivers - set(named)) or (
        module.attribute_used("set_epoch") and not receivers
    )
    for call in module.calls_named("DistributedSampler"):
        if is_false(keyword(call, "shuffle")) or is_evaluation_sampler(call, name_of):
            continue  # an evaluation's order does not matter
        name = name_of.get(id(call))
        if unknown_receiver or (name is None and receivers) or name in receivers:
            continue
        yield module.finding(call, rule)


def is_evaluation_sampler(call, name_of):
    words = [name_of.get(id(call), ""), *(dotted(arg) for arg in call.args[:1])]
    return any(EVALUATION_WORDS.search(word.lower()) for word in words)


def shuffle_with_sampler(module, rule):
    samplers = sampler_names(module)
    for call in module.calls_named("DataLoader"):
        sampler = keyword(call, "sampler")
        if sampler is None or not is_true(keyword(call, "shuffle")):
            continue
        is_distributed = (
            isinstance(sampler, ast.Call) and last_name(sampler) == "DistributedSampler"
        ) or dotted(sampler) in samplers
        if is_distributed:
            yield module.finding(call, rule)


def sampler_calls(value):
    """The DistributedSampler calls an assigned value may be: `DistributedSampler(d)`,
    or either side of `DistributedSampler(d) if distributed else None`."""
    options = [value.body, value.orelse] if isinstance(value, ast.IfExp) else [value]
    return [
        option
        for option in options
        if isinstance(option, ast.Call) and last_name(option) == "DistributedSampler"
    ]


def sampler_assignments(module):
    """{name: DistributedSampler call} of the samplers assigned to a name."""
    return {
        name: call
        for name, nodes in assignments(module).items()
        for node in nodes
        for call in sampler_calls(node.value)
    }


def sampler_names(module):
    return set(sampler_assignments(module))


def save_on_every_rank(module, rule):
    if not module.distributed:
        return
    for call in module.calls_named("save"):
        if dotted(call.func) != "torch.save" or module.guarded(call):
            continue
        function = module.enclosing_function(call)
        if function is None:
            yield module.finding(call, rule)
            continue
        uses = module.references(function)
        unguarded = [use for use in uses if not module.guarded(use)]
        if unguarded:
            detail = f"through {function.name}()" if uses else ""
            yield module.finding(call, rule, detail)


def load_without_map_location(module, rule):
    if not module.distributed:
        return
    for call in module.calls_named("load"):
        if dotted(call.func) == "torch.load" and keyword(call, "map_location") is None:
            passes_kwargs = any(k.arg is None for k in call.keywords)
            if len(call.args) < 2 and not passes_kwargs:
                yield module.finding(call, rule)


def collective_calls(module):
    """Local functions that run a collective (directly or one call deep)."""
    direct = {
        name
        for name, function in module.functions.items()
        if any(isinstance(n, ast.Call) and is_collective(n) for n in ast.walk(function))
    }
    indirect = {
        name
        for name, function in module.functions.items()
        if any(calls_local(n, direct) for n in ast.walk(function))
    }
    return direct | indirect


def calls_local(node, names):
    """A call of one of this module's functions, `name(...)` or `self.name(...)`;
    `other_module.name(...)` only shares the name."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Name):
        return func.id in names
    receiver = dotted(func.value) if isinstance(func, ast.Attribute) else ""
    return receiver in ("self", "cls") and func.attr in names


def is_collective(call):
    name = dotted(call.func)
    return last_name(call) in COLLECTIVES and (
        name.startswith(("dist.", "torch.distributed.")) or "." not in name
    )


def rank_zero_side(test, branch_is_body=True):
    """'in' for a branch rank 0 takes (`rank == 0`, `in [-1, 0]`,
    `is_main_process()`), 'out' for one it skips (`!= 0`, `not in [-1, 0]`),
    None when the test says neither."""
    flip = {"in": "out", "out": "in", None: None}
    if not branch_is_body:
        return flip[rank_zero_side(test)]
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return flip[rank_zero_side(test.operand)]
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        sides = {rank_zero_side(value) for value in test.values} - {None}
        return sides.pop() if len(sides) == 1 else None  # `rank == 0 and not x`
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        op, values = test.ops[0], constants(test.comparators[0])
        if 0 in values and isinstance(op, (ast.Eq, ast.In)):
            return "in"
        if 0 in values and isinstance(op, (ast.NotEq, ast.NotIn, ast.Gt)):
            return "out"
        return None
    if re.search(r"main|master", ast.unparse(test).lower()):
        return "in"
    return None


def collective_under_rank_condition(module, rule):
    helpers = collective_calls(module)
    unmatched = []  # (call, name, if_node, side)
    for call in module.calls:
        name = last_name(call)
        if not (is_collective(call) or calls_local(call, helpers)):
            continue
        found = module.rank_branch(call)
        if found is None:
            continue
        if_node, branch = found
        other = if_node.orelse if branch is if_node.body else if_node.body
        if any(
            isinstance(n, ast.Call) and last_name(n) == name
            for statement in other
            for n in ast.walk(statement)
        ):
            continue  # matched in both branches
        side = rank_zero_side(if_node.test, branch is if_node.body)
        unmatched.append((call, name, if_node, side))
    for call, name, if_node, side in unmatched:
        if side and any(
            other_name == name
            and other_side not in (None, side)
            and module.enclosing_function(other) is module.enclosing_function(call)
            for other, other_name, _, other_side in unmatched
        ):
            continue  # rank 0 enters one, the others the other: a pair
        yield module.finding(
            call, rule, f"{name} under `if {ast.unparse(if_node.test)}`"
        )


def underscore_local_rank_only(module, rule):
    if module.calls_named("spawn", "start_processes"):
        return  # the script starts its own workers
    spellings = {
        arg.value
        for call in module.calls_named("add_argument")
        for arg in call.args
        if isinstance(arg, ast.Constant)
    }
    if "--local-rank" in spellings:
        return
    for call in module.calls_named("add_argument"):
        if any(
            isinstance(a, ast.Constant) and a.value == "--local_rank" for a in call.args
        ):
            yield module.finding(call, rule)


def nccl_without_device(module, rule):
    if module.calls_named("set_device"):
        return
    for call in module.calls_named("init_process_group"):
        if any(k.arg is None for k in call.keywords):
            continue  # **kwargs: the backend cannot be read here
        backend = keyword(call, "backend") or (call.args[0] if call.args else None)
        nccl = backend is None or (
            isinstance(backend, ast.Constant) and "nccl" in str(backend.value)
        )
        if nccl and keyword(call, "device_id") is None:
            yield module.finding(call, rule)


def assignments(module):
    """{dotted name: [the assignments to it]}."""
    found = {}
    for node in ast.walk(module.tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for name in filter(None, map(dotted, targets)):
                found.setdefault(name, []).append(node)
    return found


def runs_before(module, assignment, use):
    """Whether `assignment` always runs before `use`: its statement list holds,
    later on, the use or a statement around it."""
    parent = module.parents[assignment]
    for _, block in ast.iter_fields(parent):
        if isinstance(block, list) and any(s is assignment for s in block):
            later = block[[id(s) for s in block].index(id(assignment)) + 1 :]
            around = [use, *module.ancestors(use)]
            return any(s is a for s in later for a in around)
    return False


class GlobalRankNames:
    """Which names hold the global rank where they are used. The last
    assignment that always runs before the use decides; without one (a name
    set in a branch, an attribute set in another method), every assignment of
    the name must be a global rank: a name that holds the local rank on some
    path stays quiet."""

    def __init__(self, module):
        self.module = module
        self.assigned = assignments(module)
        self.resolving = set()  # names met again while resolving: a = b; b = a

    def holds(self, use):
        name = dotted(use)
        if name in self.resolving:
            return False
        self.resolving.add(name)
        try:
            return self.last_assignment_is_global_rank(name, use)
        finally:
            self.resolving.discard(name)

    def last_assignment_is_global_rank(self, name, use):
        candidates = self.assigned.get(name, [])
        before = [a for a in candidates if runs_before(self.module, a, use)]
        if before:
            nearest = max(before, key=lambda a: (a.lineno, a.col_offset))
            return self.is_global_rank(nearest.value)
        return bool(candidates) and all(
            self.is_global_rank(a.value) for a in candidates
        )

    def is_global_rank(self, node):
        if isinstance(node, ast.Call) and last_name(node) == "get_rank":
            return not node.args and dotted(node.func) in (
                "dist.get_rank",
                "torch.distributed.get_rank",
            )
        if isinstance(node, ast.Call) and last_name(node) == "int" and node.args:
            return self.is_global_rank(node.args[0])
        source = ast.unparse(node)
        if re.fullmatch(
            r"os\.environ(\[['\"]RANK['\"]\]|\.get\(['\"]RANK['\"].*\))", source
        ):
            return True
        return bool(dotted(node)) and self.holds(node)


def rank_as_device(module, rule):
    ranks = GlobalRankNames(module)
    for call in module.calls:
        name = last_name(call)
        suspects = []
        if name in ("set_device", "cuda") and call.args:
            suspects.append(call.args[0])
        if name == "device" and len(call.args) == 2:
            suspects.append(call.args[1])
        device_ids = keyword(call, "device_ids")
        if isinstance(device_ids, ast.List):
            suspects.extend(device_ids.elts)
        for suspect in suspects:
            if ranks.is_global_rank(suspect):
                yield module.finding(call, rule, ast.unparse(suspect))
    for node in ast.walk(module.tree):
        if isinstance(node, ast.JoinedStr) and ast.unparse(node).startswith("f'cuda:"):
            values = [v.value for v in node.values if isinstance(v, ast.FormattedValue)]
            if values and ranks.is_global_rank(values[0]):
                yield module.finding(node, rule, ast.unparse(values[0]))


def forward_through_module(module, rule):
    for call in forwards_around_ddp(module):
        yield module.finding(call, rule)


def forwards_around_ddp(module):
    """Training forwards through `ddp_model.module`, directly or through an
    alias (`raw = ddp_model.module; raw(x)`): they skip DDP's all-reduce."""
    if not module.calls_named("backward"):
        return []
    wrapped = assigned_names(module, lambda value: last_name(value) in DDP_NAMES)
    aliases = {
        name
        for name, nodes in assignments(module).items()
        if any(
            isinstance(node.value, ast.Attribute)
            and node.value.attr == "module"
            and dotted(node.value.value) in wrapped
            for node in nodes
        )
    }
    found = []
    for call in module.calls:
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == "forward":
            func = func.value
        through_module = (
            isinstance(func, ast.Attribute)
            and func.attr == "module"
            and dotted(func.value) in wrapped
        )
        if (through_module or dotted(func) in aliases) and not without_grad(
            module, call
        ):
            found.append(call)
    return found


DDP_NAMES = ("DistributedDataParallel", "DDP")


def assigned_names(module, is_wanted_call):
    """Names assigned from a call that is_wanted_call accepts."""
    return {
        name
        for name, nodes in assignments(module).items()
        if any(
            isinstance(node.value, ast.Call) and is_wanted_call(node.value)
            for node in nodes
        )
    }


def without_grad(module, node):
    for ancestor in module.ancestors(node):
        if isinstance(ancestor, ast.With) and any(
            last_name_of(item.context_expr) in ("no_grad", "inference_mode")
            for item in ancestor.items
        ):
            return True
        if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return any(
                last_name_of(d) in ("no_grad", "inference_mode")
                for d in ancestor.decorator_list
            )
    return False


def last_name_of(node):
    if isinstance(node, ast.Call):
        node = node.func
    return dotted(node).rsplit(".", 1)[-1]


def wrapper_state_into_bare_model(module, rule):
    """Saved from the DDP wrapper (keys start with 'module.') and loaded into
    the bare model, or the reverse, in one file."""
    saved_wrapper = saved_bare = False
    for call in module.calls_named("save"):
        source = ast.unparse(call.args[0]) if call.args else ""
        saved_wrapper |= bool(re.search(r"(ddp|wrapped)\w*\.state_dict\(\)", source))
        saved_bare |= ".module.state_dict()" in source
    for call in module.calls_named("load_state_dict"):
        target = (
            ast.unparse(call.func.value) if isinstance(call.func, ast.Attribute) else ""
        )
        into_wrapper = (
            bool(re.search(r"ddp|wrapped", target)) and ".module" not in target
        )
        if saved_wrapper and not into_wrapper and not re.search(r"optim|sched", target):
            yield module.finding(call, rule, "the saved keys start with 'module.'")
        if saved_bare and into_wrapper:
            yield module.finding(call, rule, "the wrapper expects keys with 'module.'")


def never_destroyed(module, rule):
    if module.calls_named("destroy_process_group"):
        return
    for call in module.calls_named("init_process_group"):
        yield module.finding(call, rule)


def accumulation_without_no_sync(module, rule):
    if not module.calls_named(*DDP_NAMES) or forwards_around_ddp(module):
        return  # no DDP forward, so no all-reduce to skip (DDP009 says why)
    if module.attribute_used("no_sync") or module.attribute_used(
        "require_backward_grad_sync"
    ):
        return
    optimizers = assigned_names(module, is_optimizer_class)
    reported_loops = set()
    for node in ast.walk(module.tree):
        if not isinstance(node, ast.If) or not any(
            isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod)
            for n in ast.walk(node.test)
        ):
            continue
        loop = enclosing_loop(module, node)
        if loop is None or id(loop) in reported_loops:
            continue  # a flush after the loop is the same accumulation
        if any(
            isinstance(n, ast.Call) and is_optimizer_step(n, optimizers)
            for statement in node.body
            for n in ast.walk(statement)
        ):
            reported_loops.add(id(loop))
            yield module.finding(node, rule)


def enclosing_loop(module, node):
    for ancestor in module.ancestors(node):
        if isinstance(ancestor, (ast.For, ast.While)):
            return ancestor
        if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return None
    return None


OPTIMIZER_CLASSES = re.compile(
    r"^(SGD|Adam\w*|RMSprop|Adagrad|Adadelta|LAMB|Lamb|Lion|Adafactor|LBFGS|NAdam|RAdam)$"
)


def is_optimizer_class(call):
    name = dotted(call.func)
    return ".optim." in f".{name}" or bool(OPTIMIZER_CLASSES.match(last_name(call)))


def is_optimizer_step(call, optimizers=()):
    """optimizer.step(), a step of a variable holding an optimizer (`opt`), or,
    under AMP, scaler.step(optimizer)."""
    if last_name(call) != "step":
        return False
    receiver = dotted(call.func.value) if isinstance(call.func, ast.Attribute) else ""
    names = [receiver, *(dotted(a) for a in call.args)]
    return any("optim" in name.lower() or name in optimizers for name in names)


RULES = [
    Rule(
        "DDP001",
        "DistributedSampler shuffles, but set_epoch is never called: every epoch "
        "has the same order; call sampler.set_epoch(epoch) before each epoch",
        set_epoch_never_called,
    ),
    Rule(
        "DDP002",
        "DataLoader(shuffle=True) with a DistributedSampler raises ValueError: "
        "drop shuffle=True (the sampler shuffles)",
        shuffle_with_sampler,
    ),
    Rule(
        "DDP003",
        "torch.save runs on every rank: guard it with `if rank == 0:` (every rank "
        "writes the same file at once)",
        save_on_every_rank,
    ),
    Rule(
        "DDP004",
        "torch.load without map_location loads onto the GPU that saved it: pass "
        "map_location ('cpu', or this rank's device)",
        load_without_map_location,
    ),
    Rule(
        "DDP005",
        "collective inside a rank-conditional branch: the other ranks never join "
        "it and the job hangs; call it on every rank",
        collective_under_rank_condition,
    ),
    Rule(
        "DDP006",
        "argparse declares only --local_rank: torch >= 2.0's launcher passes "
        "--local-rank; accept both spellings or read os.environ['LOCAL_RANK']",
        underscore_local_rank_only,
    ),
    Rule(
        "DDP007",
        "NCCL init_process_group with neither torch.cuda.set_device nor device_id=: "
        "the first collectives may all use GPU 0",
        nccl_without_device,
    ),
    Rule(
        "DDP008",
        "the global rank used as a CUDA device index: from the second node on it "
        "names a GPU that does not exist; use the local rank (LOCAL_RANK)",
        rank_as_device,
    ),
    Rule(
        "DDP009",
        "training forward through ddp_model.module skips DDP's gradient "
        "all-reduce: call ddp_model(inputs)",
        forward_through_module,
    ),
    Rule(
        "DDP010",
        "state_dict saved from the DDP wrapper and loaded into the bare model, or "
        "the reverse: the 'module.' key prefixes do not match",
        wrapper_state_into_bare_model,
        default=False,
    ),
    Rule(
        "DDP011",
        "init_process_group without destroy_process_group: destroy the group "
        "before exit so its resources are released",
        never_destroyed,
    ),
    Rule(
        "DDP012",
        "gradient accumulation on a DDP model without no_sync(): every micro-step "
        "all-reduces; run the micro-steps before the last in `with model.no_sync():`",
        accumulation_without_no_sync,
    ),
]
CODES = {rule.code for rule in RULES}


def chosen_rules(select, ignore):
    """Rules by code or prefix: --select (else the default ones), less --ignore."""
    for pattern in select + ignore:
        if not any(code.startswith(pattern) for code in CODES):
            raise UsageError(f"unknown rule {pattern!r}: the rules are DDP001-DDP012")
    chosen = [
        rule
        for rule in RULES
        if (any(rule.code.startswith(p) for p in select) if select else rule.default)
    ]
    return [rule for rule in chosen if not any(rule.code.startswith(p) for p in ignore)]


def lint_source(source, path, rules):
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as error:
        line, col = error.lineno or 1, error.offset or 1
        return [Finding(path, line, col, "DDP000", f"cannot parse: {error.msg}")]
    module = Module(tree, path)
    lines = source.splitlines()
    found = {
        finding
        for rule in rules
        for finding in rule.check(module, rule)
        if not suppressed(finding, lines)
    }
    return sorted(found, key=lambda f: (f.line, f.col, f.code))


def suppressed(finding, lines):
    line = lines[finding.line - 1] if finding.line <= len(lines) else ""
    match = NOQA.search(line)
    if not match:
        return False
    codes = match.group("codes")
    return codes is None or finding.code in {
        c.strip().upper() for c in codes.split(",")
    }


def python_files(paths):
    for path in map(Path, paths):
        if not path.exists():
            raise UsageError(f"{path}: no such file or folder")
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*.py") if p.is_file())
        else:
            yield path


def lint_paths(paths, select=(), ignore=()):
    """(findings, number of files checked)."""
    rules = chosen_rules(list(select), list(ignore))
    findings, files = [], list(python_files(paths))
    for path in files:
        source = path.read_bytes().decode("utf-8", errors="replace")
        findings.extend(lint_source(source, str(path), rules))
    return findings, len(files)


class Flake8Checker:
    """The same rules as a flake8 plugin (entry point flake8.extension: DDP)."""

    name = "ddpgen"
    version = "1"

    def __init__(self, tree, filename="<stdin>"):
        self.tree, self.filename = tree, filename

    def run(self):
        module = Module(self.tree, self.filename)
        for rule in chosen_rules([], []):  # flake8's --select picks among these
            for finding in rule.check(module, rule):
                text = f"{finding.code} {finding.message}"
                yield finding.line, finding.col - 1, text, type(self)
