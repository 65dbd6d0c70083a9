"""The gate's neighbour search on stores large enough that its shortcuts matter: BM25 over the
candidate's rarest words and a KNN that filters other projects' memories after vec0."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from realmem.app import Realmem
from realmem.events import log
from realmem.events import types as ev
from realmem.gate import remember
from realmem.projections import files, index, replay
from realmem.read import search, vectors
from realmem.storage import db
from realmem.stores import ids
from realmem.write.attached import open_attached

from conftest import make_repo

# Common words every memory draws from: each of them matches a large share of the store.
COMMON = ("build test deploy docker postgres migration schema cache redis queue worker api auth token "
          "config env release branch commit lint format type check bundle webpack vite node python "
          "rust cargo module import export route handler request response timeout retry").split()
DIMS = 32
SPACE = "test-space"


def _unit(rng: random.Random) -> list[float]:
    v = [rng.gauss(0, 1) for _ in range(DIMS)]
    n = math.sqrt(sum(x * x for x in v))
    return [x / n for x in v]


def _fill(app: Realmem, store: str, texts: list[tuple[str, str]], rng: random.Random
          ) -> dict[tuple[str, str], list[float]]:
    """Append one MemoryAdded per (caption, content) with a random cached vector, then replay
    (thousands of memories through the full remember path would take minutes)."""
    now = "2026-01-01T00:00:00.000Z"
    taken: set[str] = set()
    events = []
    for caption, content in texts:
        mem_id = ids.new_id()
        name = files.file_name(caption, mem_id, taken)
        taken.add(name)
        text = files.render(id=mem_id, caption=caption, paths=["."], created=now, updated=now, content=content)
        events.append(ev.MemoryAdded(store, mem_id, ev.Fields(caption, content, ["."], now, now, name, text), "test"))
    vectors = {}
    with db.transaction(app.conn):
        for e in events:
            log.append(app.conn, e)
            v = _unit(rng)
            index.cache_put(app.conn, ev.content_hash(e.fields.caption, e.fields.content), SPACE, v)
            vectors[(e.store, e.memory_id)] = v
        index.set_space(app.conn, SPACE, DIMS)
    replay.replay(app)
    return vectors


def _common_text(rng: random.Random, i: int) -> tuple[str, str]:
    words = rng.sample(COMMON, 12)
    return f"{words[0]} {words[1]} uses {words[2]} ({i})", " ".join(words[3:]) + "."


@pytest.mark.parametrize("rare", [True, False], ids=["with-rare-words", "common-words-only"])
def test_near_duplicate_finds_its_twin_among_thousands_sharing_common_words(home: Path, repo: Path,
                                                                            rare: bool) -> None:
    with open_attached(home, repo, scan=False) as app:
        key, cand = _twin_among_common(app, random.Random(11), rare)
        got = search.bm25(app.conn, cand, app.visible_stores(), 254, max_terms=remember.BM25_TERMS)
        full = search.bm25(app.conn, cand, app.visible_stores(), 254)
        assert [k for k, _ in got][:1] == [key]
        assert [k for k, _ in full][:1] == [key]
        assert len(got) == 254  # the common words still bring related memories along


def _twin_among_common(app: Realmem, rng: random.Random, rare: bool) -> tuple[tuple[str, str], str]:
    """3000 memories of common words and a twin (with two rare words, or none); returns the
    twin's key and a candidate restating it with one word changed."""
    assert app.project is not None
    store = app.project.shared_store
    texts = [_common_text(rng, i) for i in range(3000)]
    extra = "zephyrine quokkaflux " if rare else ""
    twin = (f"redis cache uses worker {extra}timeout",
            "Run the queue retry handler before deploy; the schema migration needs the token.")
    texts.insert(1234, twin)
    _fill(app, store, texts, rng)
    key = next(k for k, (c, _) in zip(_keys(app, store), texts) if c == twin[0])
    return key, f"{twin[0]}\n{twin[1].replace('before', 'ahead of')}"


def _keys(app: Realmem, store: str) -> list[tuple[str, str]]:
    """The store's memory keys in insertion order."""
    return [(store, i) for (i,) in app.conn.execute("SELECT id FROM memories WHERE store=? ORDER BY rowid", (store,))]


def test_knn_never_returns_other_projects_memories_and_meets_the_count(
        home: Path, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(5)
    other = make_repo(tmp_path / "other")
    with open_attached(home, other, scan=False) as b:
        assert b.project is not None
        theirs = _fill(b, b.project.shared_store, [_common_text(rng, i) for i in range(1500)], rng)
    with open_attached(home, repo, scan=False) as a:
        assert a.project is not None
        ours = _fill(a, a.project.shared_store, [_common_text(rng, i) for i in range(300)], rng)
        visible = a.visible_stores()
        assert b.project.shared_store not in visible
        monkeypatch.setattr(vectors, "MIN_VECTORS", 10**9)  # vec0's paths, not the process's copy
        for path_min in (10**9, 1):  # the exact scan, then the binary prefilter
            monkeypatch.setattr(search, "PREFILTER_MIN", path_min)
            for _ in range(5):
                # Aim at the other project: its memories fill vec0's first shortlist.
                q = theirs[rng.choice(list(theirs))]
                keys = [k for k, _ in search.knn(a.conn, q, visible, 254)]
                assert len(keys) == 254 and len(set(keys)) == 254 and set(keys) <= set(ours)
                # Every memory of ours asked for: all of them, not a shortlist's share.
                assert {k for k, _ in search.knn(a.conn, q, visible, 300)} == set(ours)


def _old_knn(app: Realmem, vector: list[float], stores: list[str], limit: int) -> list[tuple[tuple[str, str], float]]:
    """The binary-prefilter KNN as one statement, vec0 asked for the whole shortlist at once:
    the reference the capped shortlist must reproduce."""
    where, args = search._store_filter(stores)
    blob = index.pack(vector)
    size = app.conn.execute("SELECT max(rowid) FROM embeddings").fetchone()[0]
    k = max(64, limit * search.OVERSAMPLE)
    while True:  # a shortlist left short by other projects' memories grows, as knn's does
        k = min(search.KNN_MAX, k)
        rows = app.conn.execute(
            f"SELECT m.store, m.id, vec_distance_cosine(e.vector, ?) AS d FROM "
            f"(SELECT rowid FROM {index.BIN_TABLE} WHERE embedding MATCH vec_quantize_binary(?) AND k = ?) b "
            f"CROSS JOIN embeddings e ON e.rowid = b.rowid CROSS JOIN memories m ON m.hash = e.hash "
            f"WHERE {where} ORDER BY d, m.store, m.id LIMIT ?", (blob, blob, k, *args, limit)).fetchall()
        if len(rows) >= limit or k >= min(search.KNN_MAX, size):
            return [((s, i), 1.0 - d) for s, i, d in rows]
        k *= 4


def test_capped_hamming_shortlist_is_vec0s_own_list(home: Path, repo: Path) -> None:
    """Across chunks and with heavy ties (32 bits: most distances are shared by hundreds of
    vectors), the distance-capped shortlist is exactly the list vec0 gives for ``k`` alone."""
    rng = random.Random(3)
    with open_attached(home, repo, scan=False) as app:
        with db.transaction(app.conn):
            index.set_space(app.conn, SPACE, DIMS)
            for i in range(index.CHUNK * 2 + 500):
                # Every tenth vector repeats an earlier one: equal distances at every cap.
                v = _unit(rng) if i % 10 or i < 10 else index.unpack(app.conn.execute(
                    "SELECT vector FROM embeddings WHERE rowid = ?", (rng.randrange(1, i),)).fetchone()[0])
                index.cache_put(app.conn, f"h{i}", SPACE, v)
        plain = f"SELECT rowid FROM {index.BIN_TABLE} WHERE embedding MATCH vec_quantize_binary(?) AND k = ?"
        search._gaps.clear()
        for i in range(12):
            # Stored vectors (their nearest at distance 0) among random ones: the first try,
            # started from the last queries' k-th distance, lands short of k or past it.
            blob = index.pack(_unit(rng)) if i % 3 else app.conn.execute(
                "SELECT vector FROM embeddings WHERE rowid = ?", (rng.randrange(1, index.CHUNK * 2),)).fetchone()[0]
            for k in (1, search.PROBE_K, 100, search.CAP_MIN_K, 1016, 4096):
                want = [r for (r,) in app.conn.execute(plain, (blob, k))]
                assert search._hamming_shortlist(app.conn, blob, k, DIMS) == want
        assert len(search._gaps[(app.conn.filename, 1016)]) == search.GAPS_KEPT


def test_knn_matches_the_single_statement_shortlist(home: Path, repo: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The gate's KNN neighbours (the binary prefilter, other projects' memories filtered
    after vec0) are the ones the single statement asking vec0 for the whole shortlist gives."""
    rng = random.Random(8)
    other = make_repo(tmp_path / "other")
    with open_attached(home, other, scan=False) as b:
        assert b.project is not None
        theirs = _fill(b, b.project.shared_store, [_common_text(rng, i) for i in range(1500)], rng)
    with open_attached(home, repo, scan=False) as a:
        assert a.project is not None
        ours = _fill(a, a.project.shared_store, [_common_text(rng, i) for i in range(600)], rng)
        monkeypatch.setattr(search, "PREFILTER_MIN", 1)
        monkeypatch.setattr(vectors, "MIN_VECTORS", 10**9)  # vec0's prefilter, not the process's copy
        visible = a.visible_stores()
        for i in range(20):
            # Aimed at theirs (the shortlist must grow) and at ours (the first one suffices).
            q = theirs[rng.choice(list(theirs))] if i % 2 else _unit(rng)
            for limit in (10, 254):
                got = search.knn(a.conn, q, visible, limit)
                assert got == _old_knn(a, q, visible, limit)
                assert len(got) == limit and {k for k, _ in got} <= set(ours)


def test_neighbour_lists_equal_bm25_and_knn_on_one_connection_or_two(home: Path, repo: Path, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """In a large space the gate runs the KNN on a second connection while BM25 ranks on its
    own: the lists are those of ``bm25`` and ``knn`` on one connection, other projects'
    memories (interleaved rowids) still left out; inside a transaction all runs on one."""
    rng = random.Random(23)
    other = make_repo(tmp_path / "other")
    with open_attached(home, other, scan=False) as b:
        assert b.project is not None
        _fill(b, b.project.shared_store, [_common_text(rng, i) for i in range(600)], rng)
    with open_attached(home, repo, scan=False) as a:
        assert a.project is not None
        _fill(a, a.project.shared_store, [_common_text(rng, i) for i in range(900)], rng)
        with open_attached(home, other, scan=False) as b:  # more of theirs after ours
            _fill(b, b.project.shared_store, [_common_text(rng, i) for i in range(600)], rng)
        visible = a.visible_stores()
        asked: list[bool] = []

        def reader() -> object:
            asked.append(True)
            return a.reader()

        for limit in (5, 60, 254):
            words = rng.sample(COMMON, 10)
            text = f"{words[0]} needs {words[1]}\n" + " ".join(words)
            vector = _unit(rng)
            one = (search.bm25(a.conn, text, visible, limit, max_terms=remember.BM25_TERMS),
                   search.knn(a.conn, vector, visible, limit))
            assert len(one[0]) == len(one[1]) == limit
            monkeypatch.setattr(search, "PARALLEL_KNN", 10**9)
            before = len(asked)
            assert search.neighbour_lists(a.conn, reader, text, vector, visible, limit, remember.BM25_TERMS) == one
            assert len(asked) == before  # a small space: no connection asked for
            monkeypatch.setattr(search, "PARALLEL_KNN", 0)
            assert search.neighbour_lists(a.conn, reader, text, vector, visible, limit, remember.BM25_TERMS) == one
            assert len(asked) == before + 1
            with db.transaction(a.conn):  # a reader would not see this transaction's writes
                assert a.reader() is None
                assert search.neighbour_lists(a.conn, a.reader, text, vector, visible, limit,
                                              remember.BM25_TERMS) == one
        assert a._reader is not None
    assert a._reader is None  # closed with the app


def _matched(app: Realmem, match: str) -> set[int]:
    return {r for (r,) in app.conn.execute("SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?", (match,))}


def _holding(app: Realmem, word: str) -> set[int]:
    return _matched(app, f'"{word}"')


@pytest.mark.parametrize("rare", [True, False], ids=["rare-words-decide", "common-words-only"])
def test_past_the_postings_budget_the_twin_still_ranks_first_and_fewer_memories_are_scored(
        home: Path, repo: Path, monkeypatch: pytest.MonkeyPatch, rare: bool) -> None:
    """A candidate whose words together match more memories than FTS5 should score: with rare
    words only those decide the match (common words left out), with common words only the
    rarest are all required; either way the twin ranks first and far fewer memories match."""
    monkeypatch.setattr(search, "POSTINGS_BUDGET", 300)  # each common word matches about 900 of 3000
    with open_attached(home, repo, scan=False) as app:
        key, cand = _twin_among_common(app, random.Random(5), rare)
        match = search._rarest(app.conn, cand, 254, remember.BM25_TERMS)
        assert match is not None
        monkeypatch.setattr(search, "POSTINGS_BUDGET", 10**9)
        plain = search._rarest(app.conn, cand, 254, remember.BM25_TERMS)
        assert plain is not None and len(_matched(app, plain)) > 2000  # the plain OR matches most of the store
        got = search.bm25(app.conn, cand, app.visible_stores(), 254, max_terms=remember.BM25_TERMS)
        monkeypatch.setattr(search, "POSTINGS_BUDGET", 300)
        budgeted = search.bm25(app.conn, cand, app.visible_stores(), 254, max_terms=remember.BM25_TERMS)
        assert [k for k, _ in got][:1] == [k for k, _ in budgeted][:1] == [key]
        matched = _matched(app, match)
        if rare:
            assert matched == _holding(app, "zephyrine") | _holding(app, "quokkaflux")
        else:
            assert 1 <= len(matched) <= 300 * 2  # the estimate assumes words independent
            assert sum(1 for w in ("redis", "cache", "worker", "timeout", "queue", "retry", "handler", "deploy",
                                   "schema", "migration", "token") if matched <= _holding(app, w)) >= 2
