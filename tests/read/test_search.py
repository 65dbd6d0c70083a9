"""Hybrid retrieval: the vector index over the embeddings cache, the binary prefilter, RRF."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from realmem.read import search, vectors as copies
from realmem.storage import db
from realmem.write import memories
from realmem.app import Realmem
from realmem.write.attached import open_attached
from realmem.projections import index

DIMS = 64


def _unit(rng: random.Random) -> list[float]:
    v = [rng.gauss(0, 1) for _ in range(DIMS)]
    n = math.sqrt(sum(x * x for x in v))
    return [x / n for x in v]


def _cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b))


@pytest.fixture
def store(home: Path, repo: Path) -> tuple[Realmem, dict[tuple[str, str], list[float]]]:
    """300 memories with random unit vectors in the cache of an active space."""
    app = open_attached(home, repo)
    rng = random.Random(7)
    vectors = {}
    for i in range(300):
        store_id, paths = memories.place(app, "shared", [])
        m = memories.add(app, f"fact number {i}", f"content {i}", store=store_id, stored_paths=paths, source="add")
        vectors[(m.store, m.id)] = (m.hash, _unit(rng))
    with db.transaction(app.conn):
        index.set_space(app.conn, "test-space", DIMS)
        for h, v in vectors.values():
            index.cache_put(app.conn, h, "test-space", v)
    yield app, {k: v for k, (_, v) in vectors.items()}
    app.close()


@pytest.fixture(params=["vec0", "copy"])
def exact(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both exact scans: vec0's, and the matrix product over the process's copy."""
    monkeypatch.setattr(copies, "MIN_VECTORS", 1 if request.param == "copy" else 10**9)
    monkeypatch.setattr(copies, "_held", {})
    return str(request.param)


def _copied(app: Realmem, exact: str) -> None:
    """The copy path really served the search (or really did not)."""
    assert (copies._held.get(app.conn.filename, ("", None))[1] is not None) == (exact == "copy")


def test_exact_knn_orders_by_cosine(store, exact: str) -> None:  # type: ignore[no-untyped-def]
    app, vectors = store
    q = _unit(random.Random(1))
    got = search.knn(app.conn, q, app.visible_stores(), 10)
    expected = sorted(vectors, key=lambda k: -_cos(q, vectors[k]))[:10]
    assert [k for k, _ in got] == expected
    for key, sim in got:
        assert sim == pytest.approx(_cos(q, vectors[key]), abs=1e-4)
    _copied(app, exact)


def test_binary_prefilter_reranks_exactly(store, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    app, vectors = store
    assert index.has_binary(app.conn)
    monkeypatch.setattr(search, "PREFILTER_MIN", 1)  # take the large-space path on a small store
    monkeypatch.setattr(copies, "MIN_VECTORS", 10**9)  # a space the copy would hold is scanned exactly
    rng = random.Random(2)
    overlaps = []
    for _ in range(20):
        q = _unit(rng)
        got = search.knn(app.conn, q, app.visible_stores(), 10)
        sims = [s for _, s in got]
        assert sims == sorted(sims, reverse=True)  # re-ranked by exact cosine
        for key, sim in got:
            assert sim == pytest.approx(_cos(q, vectors[key]), abs=1e-4)
        exact = set(sorted(vectors, key=lambda k: -_cos(q, vectors[k]))[:10])
        overlaps.append(len(exact & {k for k, _ in got}) / 10)
    # A 4x shortlist by hamming distance keeps most true neighbours of dense vectors.
    assert sum(overlaps) / len(overlaps) >= 0.6


def test_edited_memory_is_found_by_its_new_vector_only(store, exact: str) -> None:  # type: ignore[no-untyped-def]
    app, vectors = store
    key = next(iter(vectors))
    old = vectors[key]
    m = memories.edit(app, key, content="something else entirely")
    assert search.knn(app.conn, old, app.visible_stores(), 1)[0][0] != key  # old vector no longer maps to it
    new = _unit(random.Random(99))
    with db.transaction(app.conn):
        index.cache_put(app.conn, m.hash, "test-space", new)
    assert search.knn(app.conn, new, app.visible_stores(), 1)[0][0] == key
    with db.transaction(app.conn):
        assert index.prune_embeddings(app.conn) == 1  # the edited memory's old vector
    assert index.rebuild_vectors(app.conn) == 300
    _copied(app, exact)


def test_the_copy_follows_other_connections_and_forgets_rolled_back_writes(store, exact: str) -> None:  # type: ignore[no-untyped-def]
    app, vectors = store
    key = next(iter(vectors))
    m = memories.edit(app, key, content="edited elsewhere")
    near = search.knn(app.conn, vectors[key], app.visible_stores(), 1)[0][0]
    assert near != key
    new = _unit(random.Random(5))
    other = db.connect(app.conn.filename)  # another process's write, as the worker embeds
    try:
        with db.transaction(other):
            index.cache_put(other, m.hash, "test-space", new)
    finally:
        other.close()
    assert search.knn(app.conn, new, app.visible_stores(), 1)[0][0] == key
    ghost = _unit(random.Random(6))
    with pytest.raises(RuntimeError), db.transaction(app.conn):
        index.cache_put(app.conn, m.hash, "test-space", ghost)
        assert search.knn(app.conn, ghost, app.visible_stores(), 1)[0][0] == key  # seen inside it
        raise RuntimeError("roll back")
    got = search.knn(app.conn, new, app.visible_stores(), 1)[0]
    assert got[0] == key and got[1] == pytest.approx(1.0, abs=1e-4)  # the committed vector again
    _copied(app, exact)


def test_a_long_lived_space_is_copied_by_its_count_not_its_largest_rowid(store, monkeypatch: pytest.MonkeyPatch
                                                                          ) -> None:  # type: ignore[no-untyped-def]
    """Every edit caches a new vector under a new rowid, and pruning the old one leaves a gap:
    a store edited for long has a largest rowid far past its count.  The copy (and the choice
    of the binary prefilter) go by the count."""
    app, vectors = store
    monkeypatch.setattr(copies, "_held", {})
    monkeypatch.setattr(copies, "MIN_VECTORS", 1)
    monkeypatch.setattr(copies, "MAX_BYTES", 400 * DIMS * 4)  # room for 400 vectors
    monkeypatch.setattr(search, "PREFILTER_MIN", 400)
    rng = random.Random(11)
    for key in list(vectors)[:200]:
        m = memories.edit(app, key, content=f"edited {key[1]}")
        vectors[key] = _unit(rng)
        with db.transaction(app.conn):
            index.cache_put(app.conn, m.hash, "test-space", vectors[key])
    with db.transaction(app.conn):
        assert index.prune_embeddings(app.conn) == 200
    assert search._vectors(app.conn) >= 500  # the largest rowid: past both limits
    q = _unit(random.Random(12))
    got = search.knn(app.conn, q, app.visible_stores(), 10)
    assert [k for k, _ in got] == sorted(vectors, key=lambda k: -_cos(q, vectors[k]))[:10]
    _copied(app, "copy")
    held = copies._held[app.conn.filename][1]
    assert held is not None and len(held.rowids) == 300


def test_changing_the_space_clears_cache_and_index(store, exact: str) -> None:  # type: ignore[no-untyped-def]
    app, _ = store
    with db.transaction(app.conn):
        assert index.set_space(app.conn, "other-space", 32)
    assert app.conn.execute("SELECT count(*) FROM embeddings").fetchone()[0] == 0
    assert search.knn(app.conn, [1.0] + [0.0] * 31, app.visible_stores(), 5) == []


def test_rrf_fuses_ranks() -> None:
    a, b, c = ("s", "a"), ("s", "b"), ("s", "c")
    hits = search.fuse([[(a, -3.0), (b, -2.0)]], [[(b, 0.9), (c, 0.8)]], k=60)
    assert [h.key for h in hits] == [b, a, c]  # b is in both lists
    top = hits[0]
    assert (top.bm25_rank, top.cos_rank) == (2, 1)
    assert top.rrf == pytest.approx(1 / 62 + 1 / 61)


def test_replay_and_reindex_keep_the_word_counts_true_on_an_open_connection(home: Path, repo: Path) -> None:
    """Replay and reindex drop the FTS5 index and make it again: a connection that counted
    words before (its fts5vocab view, its cached document frequencies) counts the new index."""
    from realmem.interface import commands
    from realmem.projections import replay

    with open_attached(home, repo, scan=False) as app:
        store = app.store_for_scope("shared")
        a = memories.add(app, "Quokka notes", "The quokka build runs twice.", store=store, stored_paths=["."],
                         source="add")
        memories.add(app, "Other notes", "Lint before release.", store=store, stored_paths=["."], source="add")
        assert search._frequencies(app.conn, ["quokka", "lint"])[1] == {"quokka": 1, "lint": 1}
        replay.replay(app)
        assert search._frequencies(app.conn, ["quokka", "lint"])[1] == {"quokka": 1, "lint": 1}
        memories.forget(app, [(a.store, a.id)])
        replay.replay(app)
        assert search._frequencies(app.conn, ["quokka", "lint"])[1] == {"quokka": 0, "lint": 1}
        assert [k for k, _ in search.bm25(app.conn, "lint release", app.visible_stores(), 5)]
        commands.reindex(app)
        assert search._frequencies(app.conn, ["quokka", "lint"]) == (1, {"quokka": 0, "lint": 1})
        assert replay.check(app).differences == []
