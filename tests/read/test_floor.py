"""The floors' cache: kept while the space's vectors are unchanged, calibrated again when the
index has grown by a tenth."""

from __future__ import annotations

from pathlib import Path

import pytest

from realmem.fakes.embeddings import fake_embedding
from realmem.projections import index, queries
from realmem.read import floor
from realmem.storage import db
from realmem.write import memories
from realmem.write.attached import open_attached

DIMS = 32


def test_floors_are_kept_while_the_vectors_are_and_grow_with_the_space(
        home: Path, repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(floor, "_cache", {})
    app = open_attached(home, repo)
    try:
        def add(n: int, start: int) -> None:
            added = []
            for i in range(start, start + n):
                store_id, paths = memories.place(app, "shared", [])
                added.append(memories.add(app, f"fact {i} about topic {i % 7}", f"content {i} words {i % 5}",
                                          store=store_id, stored_paths=paths, source="add"))
            with db.transaction(app.conn):
                index.set_space(app.conn, "floor-space", DIMS)
                for m in added:
                    index.cache_put(app.conn, m.hash, "floor-space", fake_embedding(f"{m.caption}\n\n{m.content}", DIMS))

        add(20, 0)
        embedded, counted = [], []
        real_size = queries.space_size
        monkeypatch.setattr(queries, "space_size", lambda conn, fp: counted.append(fp) or real_size(conn, fp))

        def embed(text: str) -> list[float]:
            embedded.append(text)
            return fake_embedding(text, DIMS)

        first = floor.floors(app.conn, "", embed)
        assert first is not None and embedded and counted  # calibrated on the captions
        embedded.clear(), counted.clear()
        assert floor.floors(app.conn, "", embed) == first
        assert not embedded and not counted  # same stamp: neither calibrated nor counted

        add(1, 20)  # a vector write stamps the space; 21 is within a tenth (and two) of 20
        assert floor.floors(app.conn, "", embed) == first
        assert counted and not embedded
        embedded.clear(), counted.clear()
        assert floor.floors(app.conn, "", embed) == first and not counted  # the new stamp is kept

        add(10, 21)  # past a tenth: calibrated again
        floor.floors(app.conn, "", embed)
        assert embedded
    finally:
        app.close()
