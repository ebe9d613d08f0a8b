"""Mutation testing of the duplicate rule, the canonical form and the lifecycle's guards.

Not a test (too slow for CI's run). Run from the repository root::

    python bench/mutation.py                 # every target, 2 workers
    python bench/mutation.py --only machine  # one group; --list shows the mutants only
    python bench/mutation.py --rerun out.txt  # only what survived in a run saved to out.txt

Each mutant changes one thing in one target function (a comparison, a boolean
operator, a constant, an arithmetic operator, a call replaced by its argument,
a condition negated, a statement removed) and runs the group's selected tests
(example tests first, stopping at the first failure) under the ``mutation`` hypothesis profile (fixed seed
``--hypothesis-seed``, no example database, sized for 2 cores). A mutant is
killed when the tests fail (or time out); the score is killed / non-equivalent,
and the equivalent mutants are listed in ``EQUIVALENT`` below with why.

Why a small AST mutator here rather than mutmut or cosmic-ray: both mutate
whole modules (``valid_unicode``, the predicate registry, the table compiler
and their many irrelevant mutants come along), mutmut 3 runs the whole suite
once for coverage (20 minutes on these machines) and rewrites the package into
a ``mutants/`` copy whose trampolines wrap ``GUARDS``' lambdas, and
cosmic-ray needs a session database and one process start per mutant. This
script mutates only the named functions, collects the tests once and forks
one child per mutant, which swaps the mutant's code into the imported function
(a mutant costs its tests, not an interpreter start and a collection), needs
nothing beyond the test extra, and gives the same mutants in the same order on
every run.
"""

from __future__ import annotations

import argparse
import ast
import copy
import os
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SEED = "20261123"

_DUPLICATE_TESTS = [
    "tests/engine/test_duplicate_laws.py",
    "tests/engine/test_canonical.py",
    "tests/engine/test_duplicate_properties.py",
    "tests/engine/test_duplicate_kit.py",
    "tests/engine/test_duplicate_conversations.py",
]
_MACHINE_TESTS = [
    "tests/engine/test_lifecycle_guards.py",
    "tests/engine/test_state.py",
    "tests/engine/test_machine.py",
    "tests/engine/test_conversation_rules.py",
    "tests/engine/test_duplicate_conversations.py",
]

#: group -> (module, [target functions or top-level assignments], tests run against its mutants)
TARGETS: dict[str, tuple[str, list[str], list[str]]] = {
    "duplicates": ("turnlog.engine.tools.duplicates", ["_flat_and_plain", "call_key", "is_duplicate",
                                         "check_duplicate"], _DUPLICATE_TESTS),
    "canonical": ("turnlog.engine.model.canonical", ["canonical_value", "canonical_bytes"], _DUPLICATE_TESTS),
    "machine": ("turnlog.engine.model.machine", ["_distinct_ids", "GUARDS", "next_state"], _MACHINE_TESTS),
    "state": ("turnlog.engine.model.state", ["StateBuilder._register", "StateBuilder._rejected"],
              [*_DUPLICATE_TESTS, "tests/engine/test_lifecycle_guards.py"]),
}

#: mutant id -> why it cannot be told apart from the original by any test (behaviour is equal)
EQUIVALENT: dict[str, str] = {
    # the fast path is an optimisation: sending more arguments down the slow path keys them alike
    "duplicates:call_key:if _flat_and_plain(arguments): -> <removed>":
        "no fast path: canonical_json gives the same text for flat ASCII arguments",
    "duplicates:call_key:'\\x02' -> '\\x00'":
        "a repr key starts {' or {<non-str>, canonical JSON starts {\" or is {}: never equal",
    "canonical:canonical_value:isinstance(value, bool) or value is None -> value is None":
        "booleans then reach the int branch, which returns them unchanged",
    "canonical:canonical_value:k != key and canonical_value(k) == norm -> canonical_value(k) == norm":
        "the earlier of two colliding keys always comes first in iteration, never key itself",
    "machine:_distinct_ids:len(ids) < 2 or len(set(ids)) == len(ids) -> len(set(ids)) == len(ids)":
        "the length check is a shortcut: 0 or 1 ids are always distinct",
    "machine:_distinct_ids:2 -> 0": "len(ids) < 0 is never true: the shortcut is gone, not the rule",
}


@dataclass(frozen=True)
class Mutant:
    """One change: ``index`` is the node's place in the target's walk, ``op`` the change."""

    group: str
    target: str
    index: int
    op: str
    before: str
    after: str

    @property
    def id(self) -> str:
        return f"{self.group}:{self.target}:{self.before} -> {self.after}"


# --- generating mutants -------------------------------------------------------------------

_SWAP_CMP = {ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Lt: ast.LtE, ast.LtE: ast.Lt,
             ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.In: ast.NotIn, ast.NotIn: ast.In,
             ast.Is: ast.IsNot, ast.IsNot: ast.Is}
_SWAP_BIN = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult}
_SEPARATORS = ("\x00", "\x01", "\x02")


def _find(tree: ast.Module, target: str) -> ast.AST:
    scope: list[ast.stmt] = tree.body
    *outer, name = target.split(".")
    for cls in outer:
        scope = next(n for n in scope if isinstance(n, ast.ClassDef) and n.name == cls).body
    for node in scope:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return node
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return node
    raise LookupError(f"no {target} in the module")


def _nodes(root: ast.AST) -> Iterator[ast.AST]:
    """The target's nodes in a fixed order, skipping docstrings and ``raise`` messages."""
    body = getattr(root, "body", None)
    skip: set[int] = set()
    if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and isinstance(
            getattr(body[0], "value", None), ast.Constant):
        skip.update(id(n) for n in ast.walk(body[0]))
    for node in ast.walk(root):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Raise):
            skip.update(id(n) for n in ast.walk(node.exc) if node.exc is not None)
        yield node


def _changes(node: ast.AST) -> Iterator[tuple[str, ast.AST | None]]:
    """``(op, replacement)`` for one node; ``None`` replacement removes a statement."""
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            if type(op) in _SWAP_CMP:
                new = copy.deepcopy(node)
                new.ops[i] = _SWAP_CMP[type(op)]()
                yield "compare", new
    elif isinstance(node, ast.BoolOp):
        new = copy.deepcopy(node)
        new.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        yield "boolop", new
        for i in range(len(node.values)):  # one operand dropped
            rest = [copy.deepcopy(v) for j, v in enumerate(node.values) if j != i]
            yield "operand", rest[0] if len(rest) == 1 else ast.BoolOp(op=node.op, values=rest)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield "not", copy.deepcopy(node.operand)
    elif isinstance(node, ast.BinOp) and type(node.op) in _SWAP_BIN:
        new = copy.deepcopy(node)
        new.op = _SWAP_BIN[type(node.op)]()
        yield "binop", new
    elif isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool):
            yield "constant", ast.Constant(not value)
        elif isinstance(value, int):
            yield "constant", ast.Constant(value + 1)
            if value:
                yield "constant", ast.Constant(0)
        elif isinstance(value, str):
            if value in ("NFC", "NFD", "NFKC", "NFKD"):
                for form in ("NFC", "NFKC", "NFD"):
                    if form != value:
                        yield "constant", ast.Constant(form)
            elif value in _SEPARATORS:
                for other in _SEPARATORS:
                    if other != value:
                        yield "constant", ast.Constant(other)
            elif value:
                yield "constant", ast.Constant(value + "X")
    elif isinstance(node, ast.Call) and node.args and not node.keywords:
        yield "call", copy.deepcopy(node.args[-1])
    elif isinstance(node, (ast.IfExp, ast.If, ast.While)):
        new = copy.deepcopy(node)
        new.test = ast.UnaryOp(op=ast.Not(), operand=new.test)
        yield "negate", new
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.Expr, ast.If, ast.For, ast.Raise,
                         ast.Delete)):
        yield "delete", None


def _describe(node: ast.AST, replacement: ast.AST | None) -> tuple[str, str]:
    before = ast.unparse(node).splitlines()[0][:90]
    after = "<removed>" if replacement is None else ast.unparse(replacement).splitlines()[0][:90]
    return before, after


def mutants(group: str) -> list[Mutant]:
    """Every mutant of ``group``, in a fixed order."""
    module, targets, _ = TARGETS[group]
    tree = ast.parse(_source(module))
    out = []
    for target in targets:
        for index, node in enumerate(_nodes(_find(tree, target))):
            for op, replacement in _changes(node):
                before, after = _describe(node, replacement)
                if before != after:
                    out.append(Mutant(group, target, index, f"{op}", before, after))
    seen: dict[str, int] = {}
    unique = []
    for m in out:  # the same text changed the same way twice: number the repeats
        n = seen[m.id] = seen.get(m.id, 0) + 1
        unique.append(m if n == 1 else Mutant(m.group, m.target, m.index, m.op, m.before,
                                              f"{m.after}  [#{n}]"))
    return unique


def _source(module: str) -> str:
    return (ROOT / (module.replace(".", "/") + ".py")).read_text(encoding="utf-8")


class _Remove(ast.NodeTransformer):
    def __init__(self, node: ast.AST, replacement: ast.AST | None) -> None:
        self.node, self.replacement = node, replacement

    def generic_visit(self, node: ast.AST) -> ast.AST:
        for field, value in ast.iter_fields(node):
            if isinstance(value, list) and self.node in value:
                i = value.index(self.node)
                if self.replacement is None:
                    value[i] = ast.Pass()
                else:
                    value[i] = self.replacement
            elif value is self.node:
                setattr(node, field, self.replacement if self.replacement is not None
                        else ast.Pass())
        return super().generic_visit(node)


def mutated_source(m: Mutant) -> str:
    """The module's source with mutant ``m`` applied."""
    module, _, _ = TARGETS[m.group]
    tree = ast.parse(_source(module))
    node = list(_nodes(_find(tree, m.target)))[m.index]
    changes = [r for op, r in _changes(node) if _describe(node, r)[1] == m.after.split("  [#")[0]]
    _Remove(node, changes[0]).visit(tree)
    ast.fix_missing_locations(tree)
    return ast.unparse(tree)


# --- running mutants ----------------------------------------------------------------------


def _apply(m: Mutant) -> None:
    """Put mutant ``m`` into the already imported module, where every caller will run it.

    The mutated module runs in a scratch namespace; each target function then
    takes the mutant's code (``__code__``), so references held elsewhere (``from
    .duplicates import call_key``, ``_APPLY``'s methods) run it too. A mutated
    ``GUARDS`` replaces the dict's lambdas and the lifecycle table is compiled
    again, as at import. A mutant whose module cannot even import raises here.
    """
    import importlib

    module = importlib.import_module(TARGETS[m.group][0])
    scratch = {"__name__": module.__name__, "__package__": module.__package__,
               "__file__": module.__file__}
    exec(compile(mutated_source(m), module.__file__, "exec"), scratch)  # noqa: S102
    *outer, name = m.target.split(".")
    old, new = module.__dict__, scratch
    for cls in outer:
        old, new = vars(old[cls]), vars(new[cls])
    if name == "GUARDS":
        module.GUARDS.clear()
        module.GUARDS.update(scratch["GUARDS"])
        module._bind_guards()
        module.TABLE = module._compile()
        module._FAST.clear()
        for (state, tag), candidates in module.TABLE.items():
            module._FAST.setdefault(tag, {})[state.value] = candidates
    else:
        old[name].__code__ = new[name].__code__


def _child(m: Mutant | None, items: list) -> None:
    try:  # die with the parent (Linux): an interrupted run leaves no orphans
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)
    except (OSError, AttributeError):
        pass
    sys.stdout.flush()
    if not os.environ.get("MUTATION_DEBUG"):
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
    from _pytest.runner import runtestprotocol

    if m is not None:
        try:
            _apply(m)
        except Exception:  # noqa: BLE001 - the mutated module does not import: killed
            os._exit(3)
    for i, item in enumerate(items):
        reports = runtestprotocol(item, nextitem=items[i + 1] if i + 1 < len(items) else None,
                                  log=False)
        if any(r.failed for r in reports):
            if os.environ.get("MUTATION_DEBUG"):
                print(item.nodeid, [str(r.longrepr)[-3000:] for r in reports if r.failed])
            os._exit(1)
    os._exit(0)


def _start(m: Mutant | None, items: list) -> int:
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        try:
            _child(m, items)
        finally:
            os._exit(99)
    return pid


class _Runner:
    """A pytest plugin: collects the tests once, then forks one child per mutant to run them."""

    def __init__(self, todo: list[Mutant], args: argparse.Namespace) -> None:
        self.todo, self.args = todo, args
        self.code = 0

    def _items(self, session, group: str) -> list:  # noqa: ANN001
        files = TARGETS[group][2]
        by_file = {f: [i for i in session.items if i.nodeid.split("::")[0] == f] for f in files}
        items = [item for f in files for item in by_file[f]]
        # example tests first: they kill most mutants in seconds, the properties take minutes
        return sorted(items, key=lambda i: bool(getattr(getattr(i, "obj", None), "hypothesis",
                                                        None)) or "runTest" in i.nodeid)

    def pytest_runtestloop(self, session) -> bool:  # noqa: ANN001
        args, started = self.args, time.monotonic()
        groups = sorted({m.group for m in self.todo})
        for group in groups if not args.no_base else ():
            pid = _start(None, self._items(session, group))  # the unmutated code must pass
            if os.waitpid(pid, 0)[1] != 0:
                print(f"the tests of {group!r} fail without any mutant: fix them first")
                self.code = 2
                return True
        queue = [m for m in self.todo if m.id not in EQUIVALENT]
        running: dict[int, tuple[Mutant, float]] = {}
        killed, survived = [], []
        while queue or running:
            while queue and len(running) < args.jobs:
                m = queue.pop(0)
                running[_start(m, self._items(session, m.group))] = (m, time.monotonic())
            time.sleep(0.02)
            for pid, (m, t0) in list(running.items()):
                done, status = os.waitpid(pid, os.WNOHANG)
                timed_out = not done and time.monotonic() - t0 > args.timeout
                if timed_out:
                    os.kill(pid, signal.SIGKILL)
                    done, status = os.waitpid(pid, 0)
                if not done:
                    continue
                del running[pid]
                (killed if status != 0 else survived).append(m)
                mark = "timeout " if timed_out else "killed  " if status != 0 else "SURVIVED"
                print(f"{mark} {m.id}  ({time.monotonic() - t0:.0f} s)", flush=True)
        equivalent = len([m for m in self.todo if m.id in EQUIVALENT])
        print(f"\nscore: {len(killed)} killed / {len(killed) + len(survived)} non-equivalent "
              f"mutants ({equivalent} equivalent listed; {time.monotonic() - started:.0f} s)")
        for m in survived:
            print(f"  survivor: {m.id}")
        self.code = 1 if survived else 0
        return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(TARGETS), action="append")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per mutant")
    parser.add_argument("--list", action="store_true", help="list the mutants and stop")
    parser.add_argument("--match", help="only mutants whose id contains this text")
    parser.add_argument("--rerun", metavar="FILE",
                        help="only the mutants a previous run's output FILE lists as SURVIVED")
    parser.add_argument("--no-base", action="store_true",
                        help="skip checking that the unmutated code passes the selected tests")
    args = parser.parse_args(argv)
    os.chdir(ROOT)
    sys.path.insert(0, str(ROOT))
    groups = args.only or list(TARGETS)
    todo = [m for g in groups for m in mutants(g)]
    if args.match:
        todo = [m for m in todo if args.match in m.id]
    if args.rerun:
        lines = Path(args.rerun).read_text(encoding="utf-8").splitlines()
        again = {line[len("SURVIVED "):].rsplit("  (", 1)[0] for line in lines
                 if line.startswith("SURVIVED ")}
        todo = [m for m in todo if m.id in again]
    if args.list:
        for m in todo:
            print(("[equivalent] " if m.id in EQUIVALENT else "") + m.id)
        print(f"{len(todo)} mutants")
        return 0
    every = {m.id for g in TARGETS for m in mutants(g)}
    stale = [k for k in EQUIVALENT if k not in every]
    if stale:
        print(f"warning: EQUIVALENT entries that match no mutant: {stale}")
    import pytest

    tests = list(dict.fromkeys(t for g in {m.group for m in todo} for t in TARGETS[g][2]))
    runner = _Runner(todo, args)
    pytest.main(["-q", "-p", "no:cacheprovider", "--hypothesis-profile=mutation",
                 f"--hypothesis-seed={SEED}", *tests], plugins=[runner])
    return runner.code


if __name__ == "__main__":
    sys.exit(main())
