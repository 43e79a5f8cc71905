"""The questions the rules ask of a parsed file: names, calls, assignments,
rank conditions, and where a node's text is (for the fixes)."""

import ast
import heapq
import re
from functools import cached_property

from ddpgen.lint.rule import Finding

DISTRIBUTED_MARKERS = {"init_process_group", "DistributedDataParallel", "get_rank"}
RANK_WORDS = re.compile(r"rank|is_main|main_process|is_master|master_process")
DDP_NAMES = ("DistributedDataParallel", "DDP")


def dotted(node):
    """'torch.distributed.barrier' for the expression, or '' when not a name."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def index_tree(tree, parents, index):
    """One walk in ast.walk's order, filling {child: parent} and {node type:
    [(position, node)]}: about twice as fast as ast.walk."""
    nodes = [tree]
    index[type(tree)] = [(0, tree)]
    for parent in nodes:
        for field in parent._fields:
            value = getattr(parent, field, None)
            for child in value if isinstance(value, list) else (value,):
                if isinstance(child, ast.AST):
                    parents[child] = parent
                    index.setdefault(type(child), []).append((len(nodes), child))
                    nodes.append(child)


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
        self.parents, self._indexed, self._of_types = {}, {}, {}
        index_tree(tree, self.parents, self._indexed)
        self.calls = self.nodes_of(ast.Call)
        self._calls_by_name = {}
        for position, call in self._indexed.get(ast.Call, []):
            self._calls_by_name.setdefault(last_name(call), []).append((position, call))
        self.functions = {}
        for node in self.nodes_of(ast.FunctionDef, ast.AsyncFunctionDef):
            self.functions.setdefault(node.name, node)

    def nodes_of(self, *types):
        """The file's nodes of these types, in the order ast.walk gives them."""
        return self._merged(self._indexed, types)

    def calls_named(self, *names):
        return self._merged(self._calls_by_name, names)

    def _merged(self, index, keys):
        if keys not in self._of_types:
            lists = (index.get(key, []) for key in keys)
            self._of_types[keys] = [node for _, node in heapq.merge(*lists)]
        return self._of_types[keys]

    def ancestors(self, node):
        while node in self.parents:
            node = self.parents[node]
            yield node

    def attribute_used(self, name):
        return name in self.identifiers

    @cached_property
    def identifiers(self):
        """Every `name` and `.attribute` in the file."""
        names = {n.id for n in self.nodes_of(ast.Name)}
        return names | {n.attr for n in self.nodes_of(ast.Attribute)}

    @cached_property
    def distributed(self):
        """Uses torch.distributed: names a marker (`get_rank`, `dist.get_rank`,
        not `f().get_rank`) or imports the package."""
        names = self.nodes_of(ast.Name)
        attributes = self.nodes_of(ast.Attribute)
        marked = any(n.id in DISTRIBUTED_MARKERS for n in names) or any(
            n.attr in DISTRIBUTED_MARKERS and dotted(n.value) for n in attributes
        )
        imports = (
            alias.name
            for n in self.nodes_of(ast.Import, ast.ImportFrom)
            for alias in n.names
        )
        return marked or "torch.distributed" in imports

    @cached_property
    def assignments(self):
        return all_assignments(self)

    @cached_property
    def forwards_around_ddp(self):
        """Asked by two rules (DDP009 and DDP012): found once."""
        return training_forwards_around_ddp(self)

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
            for n in self.nodes_of(ast.Name, ast.Attribute)
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
        for name, nodes in module.assignments.items()
        for node in nodes
        for call in sampler_calls(node.value)
    }


def all_assignments(module):
    """{dotted name: [the assignments to it]}."""
    found = {}
    for node in module.nodes_of(ast.Assign, ast.AnnAssign):
        if node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for name in filter(None, map(dotted, targets)):
                found.setdefault(name, []).append(node)
    return found


def assigned_names(module, is_wanted_call):
    """Names assigned from a call that is_wanted_call accepts."""
    return {
        name
        for name, nodes in module.assignments.items()
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


def training_forwards_around_ddp(module):
    """Training forwards through `ddp_model.module`, directly or through an
    alias (`raw = ddp_model.module; raw(x)`): they skip DDP's all-reduce."""
    if not module.calls_named("backward"):
        return []
    wrapped = assigned_names(module, lambda value: last_name(value) in DDP_NAMES)
    aliases = {
        name
        for name, nodes in module.assignments.items()
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


def line_starts(data):
    """Byte offset of each line's start (ast columns count UTF-8 bytes)."""
    offsets, total = [0, 0], 0  # lines count from 1
    for line in data.splitlines(keepends=True):
        total += len(line)
        offsets.append(total)
    return offsets


def start_of(node, starts):
    return starts[node.lineno] + node.col_offset


def end_of(node, starts):
    return starts[node.end_lineno] + node.end_col_offset
