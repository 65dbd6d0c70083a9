"""realmem's own imports form layers, with no cycle.

Every import of a realmem module counts, at the top of a module or inside a function (a lazy
import only hides a cycle until the function runs); imports under ``if TYPE_CHECKING:`` do not
run and do not count.  A layer may import its own layer and the ones below it:

0. base: ``storage/`` (SQLite, the lease, atomic files), ``stores/`` (projects, path frames, ids),
   ``errors``, ``config``, ``logs``, ``words``, ``frontend``, ``gcpause`` (the collector paused
   for bulk work), the endpoint clients and fakes, and
   ``gate.safety`` (a pure scanner with no realmem imports but its confusables table, which the logs use to redact)
1. ``events/``: the log and the event types
2. ``projections/``: what the events build
3. ``app``: the writer (append and project)
4. use cases, in this order: ``read/`` (recall, path notes, freshness), ``write/`` (direct
   writes and the store scan), ``gate/`` (the remember path, import, rewriting), ``jobs/`` (the
   background work)
5. ``interface/`` and ``agents/``: the CLI, the rpc child, the command layer, the agents' servers

``KNOWN`` lists the edges that still break this and is kept exact: removing one from the code
without removing it here fails too, so the list only shrinks.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "realmem"

BASE = {"realmem", "errors", "words", "config", "logs", "frontend", "gcpause", "gate.safety", "gate.confusables"}
BASE_PACKAGES = {"storage", "stores", "clients", "fakes"}
USE_CASES = ("read", "write", "gate", "jobs")  # each may import those before it

# Upward edges and cycles that remain, each to be removed by the step named: none are left.
KNOWN_UPWARD: set[tuple[str, str]] = set()
KNOWN_CYCLES: list[set[str]] = []


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
        return 4 + USE_CASES.index(top)
    assert top in ("interface", "agents", "__main__"), f"{name}: put it in a package the layers know"
    return 4 + len(USE_CASES)


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
    assert {"projections.files", "storage.lock"} <= GRAPH["projections.projector"]
    assert "jobs.retry" in GRAPH["jobs.queue"]  # an import inside a function counts
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
    assert layer("read.recall") < layer("write.memories") < layer("gate.remember") < layer("jobs.worker")


# Tests share helpers through tests/helpers/ (``from helpers.rpc_child import Child``), never by
# importing another test module: that runs the other module's tests' set-up at import time and
# only works when its folder happens to be on sys.path.
TESTS = Path(__file__).resolve().parent


def imported_test_modules(source: str) -> set[str]:
    """The ``test_*`` modules ``source`` imports, at any depth (``from test_rpc import Child``,
    ``import test_cli``, ``from . import test_mcp``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module] if node.module else [a.name for a in node.names]
        else:
            continue
        found.update(n for n in names if n.split(".")[-1].startswith("test_") or n.split(".")[0].startswith("test_"))
    return found


def test_no_test_module_imports_another() -> None:
    files = sorted(TESTS.rglob("*.py"))
    assert TESTS / "interface" / "test_rpc.py" in files and TESTS / "helpers" / "rpc_child.py" in files
    offenders = {str(p.relative_to(TESTS)): sorted(imported_test_modules(p.read_text(encoding="utf-8")))
                 for p in files}
    assert {p: m for p, m in offenders.items() if m} == {}


def test_the_test_import_check_catches_them() -> None:
    assert imported_test_modules("from test_rpc import Child\nimport test_cli as c\n") == {"test_rpc", "test_cli"}
    assert imported_test_modules("from . import test_mcp\nfrom helpers.rpc_child import Child\n") == {"test_mcp"}
    assert imported_test_modules("def f():\n    from interface.test_safety import expand\n") == {"interface.test_safety"}


def _unexplained_lazy_imports(path: Path) -> list[int]:
    """Lines of in-function imports of realmem modules with no comment saying why they are
    there (on the line, or in the comment block right above it)."""
    src = path.read_text(encoding="utf-8")
    lines = src.splitlines()
    found = []
    for fn in ast.walk(ast.parse(src)):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "realmem" \
                    or isinstance(node, ast.Import) and any(a.name.split(".")[0] == "realmem" for a in node.names):
                above = lines[node.lineno - 2].strip() if node.lineno >= 2 else ""
                if "#" not in lines[node.end_lineno - 1] and not above.startswith("#"):
                    found.append(node.lineno)
    return found


def test_imports_sit_at_the_top_unless_a_comment_says_why() -> None:
    """An import inside a function hides the module's dependencies; the ones kept are there for
    start-up time (the CLI's commands, the rpc child's methods, httpx and the rule file behind
    `realmem status`) and say so."""
    unexplained = {name: lines for name, path in MODULES.items() if (lines := _unexplained_lazy_imports(path))}
    assert unexplained == {}


def test_the_lazy_import_check_catches_a_bare_one(tmp_path: Path) -> None:
    mod = tmp_path / "m.py"
    mod.write_text("def f():\n    from realmem import app\n\n\ndef g():\n    from realmem import db  # lazy: start-up\n"
                   "\n\ndef h():\n    # Imported here: start-up.\n    from realmem import ids\n", encoding="utf-8")
    assert _unexplained_lazy_imports(mod) == [2]
