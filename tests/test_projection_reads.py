"""Reads of the projection tables live in ``realmem/projections/`` (named functions in
``projections/queries.py``); no other module writes a SELECT on a projection table, except the
hot paths and module-owned reads listed in ``ALLOWED`` with the reason each stays.

The check reads every string literal (implicitly joined pieces and f-strings count as one)
that holds a SELECT and names the tables after its FROM and JOIN.  ``ALLOWED`` is kept exact:
a module that stops reading a table must leave the list too, so the list only shrinks.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "realmem"

# Tables the projector builds from the events (the FTS shadow tables and the vector tables are
# the index's).  Not projections: events (the log), locks and lease_generations (the lease),
# meta, schema_version (storage), agent_sessions/agent_shown (agents/sessions: the hook clients' state)
# and tree_summaries (jobs/tree.py's answer cache): each is read by the module that owns it.
PROJECTION_TABLES = {
    "memories", "counters", "pending", "urgency", "missing_paths", "store_sizes", "problems", "file_stats",
    "embeddings", "fts_tokens", "imported_files", "projection_state", "stores",
    "memories_fts", "memories_fts_data", "memories_fts_docsize", "memories_fts_vocab",
    "memories_fts_row", "memories_fts_col", "memories_vec", "memories_bin",
    "{index.VEC_TABLE}", "{index.BIN_TABLE}", "{vocab}",
}

OWNERS = ("projections", "events", "storage")

# module -> projection tables it still reads itself, and why.
ALLOWED: dict[str, set[str]] = {
    # Hot paths: recall, the FTS/vector search (its SQL is tied to the index's own tables and
    # plans) and path notes; each query is shaped for one call site and its indexes.
    "read/recall.py": {"memories", "counters"},
    "read/search.py": {"memories", "memories_fts", "memories_fts_data", "memories_fts_docsize",
                       "{vocab}", "embeddings", "{index.VEC_TABLE}", "{index.BIN_TABLE}"},
    "read/pathnotes.py": {"memories"},
    # The gate's exact-duplicate lookup by hash (the remember hot path).
    "gate/remember.py": {"memories"},
    # The writer's counter upsert (INSERT ... SELECT FROM memories): a write, not a read.
    "app.py": {"memories"},
    # Not yet moved (named as such in the report).
    "interface/bench.py": {"memories"},
}

_TABLE = re.compile(r"\b(?:FROM|JOIN)\s+(\{[\w.]+\}|\w+)", re.IGNORECASE)


def _sql_strings(tree: ast.AST, source: str) -> list[str]:
    """The source lines of every string literal holding a SELECT (lines, not exact segments:
    ast.get_source_segment re-splits the file per call, which is slow over the whole tree)."""
    lines = source.splitlines()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            text = "\n".join(lines[node.lineno - 1:node.end_lineno])
            if re.search(r"\bSELECT\b", text):
                found.append(text)
    return found


def projection_reads(path: Path) -> set[str]:
    source = path.read_text(encoding="utf-8")
    tables: set[str] = set()
    for sql in _sql_strings(ast.parse(source), source):
        tables.update(t for t in _TABLE.findall(sql) if t in PROJECTION_TABLES)
    return tables


def test_the_check_sees_reads() -> None:
    assert {"pending", "problems", "missing_paths", "urgency", "counters"} <= \
        projection_reads(ROOT / "projections" / "queries.py")
    assert "memories_fts" in projection_reads(ROOT / "read" / "search.py")


def test_projection_reads_live_in_projections() -> None:
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.split("/")[0] in OWNERS:
            continue
        tables = projection_reads(path)
        if tables:
            found[rel] = tables
    assert found == ALLOWED
