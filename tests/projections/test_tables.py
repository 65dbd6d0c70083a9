"""Reading many memory rows without holding a large store in memory (projections/tables.py)."""

from __future__ import annotations

from pathlib import Path

from realmem.write import memories
from realmem.app import Realmem
from realmem.write.attached import open_attached
from realmem.events import types as ev
from realmem.projections import tables


def _add(app: Realmem, caption: str, scope: str, paths: list[str] | None = None):  # type: ignore[no-untyped-def]
    store, stored = memories.place(app, scope, paths)
    return memories.add(app, caption, f"{caption}.", store=store, stored_paths=stored, source="add")


def test_iter_memories_streams_the_visible_rows_and_path_scoped_ones(home: Path, repo: Path) -> None:
    (repo / "src").mkdir(exist_ok=True)
    with open_attached(home, repo) as app:
        wide = _add(app, "Use uv", "shared")
        scoped = _add(app, "Src uses ruff", "shared", [str(repo / "src")])
        glob = _add(app, "Prefer ripgrep", "global")
        hidden = _add(app, "Quarantined one", "shared", [str(repo / "src")])
        with app.conn:
            app.conn.execute("UPDATE memories SET quarantined='secret' WHERE id=?", (hidden.id,))
        stores = app.visible_stores()
        assert {m.id for m in tables.iter_memories(app.conn, stores)} == {wide.id, scoped.id, glob.id}
        assert {m.id for m in tables.iter_memories(app.conn, stores, path_scoped=True)} == {scoped.id}
        assert {m.id for m in tables.iter_memories(app.conn, stores, path_scoped=True, include_quarantined=True)} \
            == {scoped.id, hidden.id}
        assert sorted(m.id for m in tables.iter_memories(app.conn, stores)) == \
            sorted(m.id for m in app.memories())


def test_memories_by_key_reads_many_rows_at_once_and_leaves_out_missing_keys(home: Path, repo: Path) -> None:
    with open_attached(home, repo) as app:
        made = [_add(app, f"Fact number {i}", "shared" if i % 2 else "global") for i in range(7)]
        keys = [ev.Key(m.store, m.id) for m in made]
        wrong_store = ev.Key("global" if made[1].store != "global" else made[1].store + "x", made[1].id)
        found = tables.memories_by_key(app.conn, [*keys, wrong_store, ev.Key("global", "no-such-id")])
        assert set(found) == set(keys)
        for k in keys:
            assert found[k] == app.memory(k)
