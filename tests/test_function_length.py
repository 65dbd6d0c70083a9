"""No function in realmem/ is longer than ``LIMIT`` lines (from its ``def`` line, decorators
left out, to its last line).  A longer one keeps its state in locals and closures that no
reader can hold at once: it becomes a small class with that state on ``self`` and a method
per step (STYLE.md, "State on an object, loops short").

``KNOWN`` lists the functions still past it and is kept exact: one split without being removed
here fails too, so the list only shrinks.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "realmem"
LIMIT = 80

# None is left; none is to be added.
KNOWN: set[str] = set()


def long_functions(source: str, where: str) -> dict[str, int]:
    """``where:qualified name`` -> lines of every function in ``source`` longer than LIMIT;
    a nested function or a method is named through what holds it (``Outer.inner``)."""
    found: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    lines = (child.end_lineno or child.lineno) - child.lineno + 1
                    if lines > LIMIT:
                        found[f"{where}:{name}"] = lines
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return found


def test_no_function_is_over_the_limit() -> None:
    found: dict[str, int] = {}
    for path in sorted(ROOT.rglob("*.py")):
        found.update(long_functions(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix()))
    assert set(found) == KNOWN, {name: found.get(name) for name in set(found) ^ KNOWN}


def test_the_check_counts_what_it_is_for() -> None:
    def body(indent: str) -> str:  # LIMIT - 1 lines: with its def line, a function of LIMIT lines
        return "".join(f"{indent}x{i} = {i}\n" for i in range(LIMIT - 1))

    source = (f"@decorated\ndef short():\n{body('    ')}\n"
              f"class Holder:\n    def long(self):\n{body('        ')}        pass\n"
              f"def outer():\n    def inner():\n{body('        ')}        pass\n    return inner\n")
    assert long_functions(source, "m.py") == {"m.py:Holder.long": LIMIT + 1, "m.py:outer": LIMIT + 3,
                                              "m.py:outer.inner": LIMIT + 1}
