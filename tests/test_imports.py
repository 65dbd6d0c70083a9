"""realmem's own imports form layers, with no cycle.

Every import of a realmem module counts, at the top of a module or inside a function (a lazy
import only hides a cycle until the function runs); imports under ``if TYPE_CHECKING:`` do not
run and do not count.  A layer may import its own layer and the ones below it:

0. base: ``storage/`` (SQLite, the lease, atomic files), ``stores/`` (projects, path frames, ids),
   ``errors``, ``config``, ``logs``, ``words``, ``frontend``, the endpoint clients and fakes, and
   ``gate.safety`` (a pure scanner with no realmem imports, which the logs use to redact)
1. ``events/``: the log and the event types
2. ``projections/``: what the events build
3. ``app``: the writer (append and project)
4. use cases: ``gate/``, ``read/``, ``write/``, ``jobs/``
5. ``interface/`` and ``agents/``: the CLI, the rpc child, the command layer, the agents' servers

``KNOWN`` lists the edges that still break this and is kept exact: removing one from the code
without removing it here fails too, so the list only shrinks.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "realmem"

BASE = {"realmem", "errors", "words", "config", "logs", "frontend", "gate.safety"}
BASE_PACKAGES = {"storage", "stores", "clients", "fakes"}
USE_CASES = {"gate", "read", "write", "jobs"}

# Upward edges and cycles that remain, each to be removed by the step named.
KNOWN_UPWARD = {
    ("app", "write.observe"),  # Realmem.open scans the stores: the scan becomes a use case its callers run
}
KNOWN_CYCLES = [
    # The queue's retry task runs the worker's retry_due, and the worker follows (policy) and
    # takes the queue's Huey: retry_due moves out of the worker module with the package moves.
    {"jobs.policy", "jobs.queue", "jobs.worker"},
]


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts) or "realmem"


MODULES = {module_name(p): p for p in ROOT.rglob("*.py")}


def _type_checking_only(node: ast.If) -> bool:
    return isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def imports_of(path: Path) -> set[str]:
    """The realmem modules ``path`` imports when it runs (names without the ``realmem.`` prefix)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking_only(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "realmem")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] == "realmem":
            for a in node.names:
                sub = f"{node.module}.{a.name}"  # `from realmem.x import y` may name a module y
                found.add(sub if module_name_of(sub) in MODULES else node.module)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return {module_name_of(m) for m in found} - {module_name(path)}


def module_name_of(dotted: str) -> str:
    return dotted.removeprefix("realmem.") if dotted != "realmem" else "realmem"


GRAPH = {name: {m for m in imports_of(path) if m in MODULES} for name, path in MODULES.items()}


def layer(name: str) -> int:
    top = name.split(".")[0]
    if name in BASE or top in BASE_PACKAGES:
        return 0
    if top == "events":
        return 1
    if top == "projections":
        return 2
    if name == "app":
        return 3
    if top in USE_CASES:
        return 4
    assert top in ("interface", "agents", "__main__"), f"{name}: put it in a package the layers know"
    return 5


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_graph_is_read() -> None:
    assert {"events.log", "events.types", "projections.state"} <= GRAPH["projections.replay"]
    assert "gate.remember" in GRAPH["jobs.worker"]  # an import inside a function counts
    assert "app" not in GRAPH["jobs.queue"]  # one under `if TYPE_CHECKING:` does not


def test_no_import_cycle() -> None:
    found = sorted(cycles(GRAPH), key=sorted)
    assert found == sorted(KNOWN_CYCLES, key=sorted)


def test_no_upward_import() -> None:
    upward = {(a, b) for a, deps in GRAPH.items() for b in deps if layer(b) > layer(a)}
    assert upward == KNOWN_UPWARD


def test_the_checks_catch_what_they_are_for() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
    assert layer("projections.files") < layer("app") < layer("gate.remember") < layer("interface.cli")
