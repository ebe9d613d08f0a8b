"""No import circles among turnlog's modules, found statically (the source parsed with ``ast``,
nothing imported).

Every ``import`` and ``from … import`` in a module counts, at module level and deferred inside
a function alike: a deferred import only hides a circle until the function runs (the three
this test was written for, exporter↔otlp, journal's _journal↔_open↔_postgres and
turnlog's _laws↔testing, were all deferred). Imports under ``if TYPE_CHECKING:`` are left
out (they never run). ``from package import name`` depends on the package, and on
``package.name`` when that is a module; a package's lazy re-export table is not an import.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def modules(root: Path, package: str) -> dict[str, tuple[Path, bool]]:
    """Every module under ``root`` (the folder of ``package``, links followed), by dotted name,
    with its file and whether it is a package's ``__init__``."""
    out: dict[str, tuple[Path, bool]] = {}
    for folder, dirs, files in os.walk(root, followlinks=True):
        dirs[:] = [d for d in dirs if not d.startswith((".", "__pycache__"))]
        parts = Path(folder).relative_to(root).parts
        for file in files:
            if not file.endswith(".py"):
                continue
            stem = file[:-3]
            name = ".".join([package, *parts] + ([] if stem == "__init__" else [stem]))
            out[name] = (Path(folder) / file, stem == "__init__")
    return out


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []

    def walk(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                walk(child)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            walk(child)

    walk(tree)
    return found


def import_graph(mods: dict[str, tuple[Path, bool]]) -> dict[str, set[str]]:
    """Which of ``mods`` each of ``mods`` imports."""
    graph: dict[str, set[str]] = {}
    for name, (path, is_package) in mods.items():
        deps: set[str] = set()
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                deps.update(alias.name for alias in node.names)
                continue
            target = node.module or ""
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            deps.add(target)
            deps.update(f"{target}.{alias.name}" for alias in node.names)
        graph[name] = {dep for dep in deps if dep in mods and dep != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_circles_among_turnlog_modules():
    mods = modules(ROOT / "turnlog", "turnlog")
    assert {"turnlog.engine.loop", "turnlog.journal._journal", "turnlog.replay.driver",
            "turnlog.engine.audit", "turnlog.testing"} <= set(mods)  # the links are followed
    graph = import_graph(mods)
    assert "turnlog.journal._journal" in graph["turnlog.journal._open"]  # imports are seen
    found = cycles(graph)
    assert found == [], "import circles:\n" + "\n".join(
        " -> ".join(c) + "\n    " + "; ".join(f"{m} imports {sorted(graph[m] & set(c))}" for m in c)
        for c in found)


def test_the_finder_sees_a_circle_closed_by_a_deferred_import_but_not_by_type_checking(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from ..a import x\n")  # deferred: a circle
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import d\n")
    (pkg / "d.py").write_text("import pkg.c\n")
    graph = import_graph(modules(pkg, "pkg"))
    assert graph["pkg.a"] == {"pkg.sub", "pkg.sub.b"} and graph["pkg.sub.b"] == {"pkg.a"}
    assert graph["pkg.c"] == set() and graph["pkg.d"] == {"pkg.c"}
    assert cycles(graph) == [["pkg.a", "pkg.sub.b"]]
