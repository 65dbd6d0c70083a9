"""The writes that follow missing paths (read/missing.py finds them): prune-paths drops the
paths that no longer exist, and a suggested new location from git's renames replaces one."""

from __future__ import annotations

from realmem.app import Realmem, RealmemError
from realmem.projections import queries
from realmem.projections.state import Memory
from realmem.read.missing import prune_plan
from realmem.write import memories


def prune(app: Realmem) -> list[tuple[Memory, list[str], list[str]]]:
    """Drop paths that no longer exist; a memory whose paths are all gone is deleted."""
    plan = prune_plan(app)
    for m, _, kept in plan:
        if kept:
            memories.edit(app, (m.store, m.id), stored_paths=kept, reason="prune-paths")
        else:
            memories.forget(app, [(m.store, m.id)], reason="prune-paths")
    return plan


def apply_suggestion(app: Realmem, key: tuple[str, str], path: str) -> Memory:
    row = queries.suggested_path(app.conn, key, path)
    if row is None or not row[0]:
        raise RealmemError(f"no suggested location for {path}")
    m = app.memory(key)
    assert m is not None
    new_paths = [row[0] if p == path else p for p in m.paths]
    return memories.edit(app, key, stored_paths=new_paths, reason="missing-path")
