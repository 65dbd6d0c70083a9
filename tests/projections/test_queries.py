"""The named projection reads (``realmem.projections.queries``) against a real store: events
are appended through the writer, the projector fills the tables, and each read answers from
them."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from realmem.app import Realmem
from realmem.events import types as ev
from realmem.projections import files, queries, replay
from realmem.read import freshness
from realmem.read.freshness import epoch
from realmem.stores import ids
from realmem.write import memories
from realmem.write.attached import open_attached


@pytest.fixture
def app(home: Path, repo: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Realmem]:
    monkeypatch.setenv("REALMEM_WORKER_AUTOSTART", "0")
    a = open_attached(home, repo, session="s1")
    yield a
    a.close()


def _queue(app: Realmem, cid: str, key: str | None, next_try: str, payload: dict | None = None) -> None:
    app.emit([ev.CandidateQueued(cid, key, str(app.cwd), payload or {"caption": cid}, "judge down", next_try)])


def test_pending_reads(app: Realmem) -> None:
    key = app.project.key
    assert queries.queued_count(app.conn, key) == 0
    assert not queries.any_due_by(app.conn, "9999-01-01T00:00:00.000Z")
    _queue(app, "c1", key, "2020-01-01T00:00:00.000Z")
    _queue(app, "c2", key, "2999-01-01T00:00:00.000Z", {"caption": "c2", "user_requested": True})
    _queue(app, "c3", None, "2020-06-01T00:00:00.000Z")
    _queue(app, "c4", "path:/elsewhere", "2020-06-01T00:00:00.000Z")

    assert queries.queued_count(app.conn, key) == 2
    assert queries.queued_count(app.conn, None) == 1  # IS ?: the None key counts its own
    assert queries.pending_for(app.conn, key) == [("c1", "2020-01-01T00:00:00.000Z"),
                                                  ("c2", "2999-01-01T00:00:00.000Z")]
    assert [cid for cid, _ in queries.pending_for(app.conn, None)] == ["c3"]
    assert queries.pending_ids(app.conn, "path:/elsewhere") == ["c4"]
    assert queries.any_due_by(app.conn, "2020-01-01T00:00:00.000Z")
    assert not queries.any_due_by(app.conn, "2019-12-31T23:59:59.999Z")

    due = queries.pending_due(app.conn, "2021-01-01T00:00:00.000Z", force=False)
    assert [(c, k, a) for c, k, _, a in due] == [("c1", key, 0), ("c3", None, 0), ("c4", "path:/elsewhere", 0)]
    assert [r[0] for r in queries.pending_due(app.conn, "2000-01-01T00:00:00.000Z", force=True)] == \
        ["c1", "c2", "c3", "c4"]
    assert any('"user_requested": true' in p for p in queries.pending_payloads(app.conn))
    assert len(queries.pending_payloads(app.conn)) == 4

    entry = queries.pending_entry(app.conn, "c1")
    assert entry is not None and entry[1] == "2020-01-01T00:00:00.000Z" and '"caption": "c1"' in entry[0]
    assert queries.pending_attempts(app.conn, "c1") == 0
    assert queries.is_pending(app.conn, "c1")

    app.emit([ev.CandidateRetried("c1", "still down", "2030-01-01T00:00:00.000Z")])
    assert queries.pending_attempts(app.conn, "c1") == 1
    app.emit([ev.CandidateDone("c1", "written")])
    assert queries.pending_entry(app.conn, "c1") is None
    assert queries.pending_attempts(app.conn, "c1") is None
    assert not queries.is_pending(app.conn, "c1")
    assert queries.queued_count(app.conn, key) == 1


def test_problem_reads(app: Realmem) -> None:
    shared = app.store_for_scope("shared")
    stores = app.visible_stores()
    assert queries.problems(app.conn, stores) == []
    app.emit([ev.FileProblem(shared, "bad.md", "malformed", "no frontmatter", 3, "d1"),
              ev.FileProblem(shared, "", "store-escape", "the store is a symlink out of the project", None, "d2"),
              ev.FileProblem("elsewhere-store", "x.md", "unreadable", "permission denied", None, "d3")])
    assert sorted(queries.problems(app.conn, stores)) == [
        (shared, "", "store-escape", "the store is a symlink out of the project", None),
        (shared, "bad.md", "malformed", "no frontmatter", 3)]
    assert queries.escape_messages(app.conn, stores) == ["the store is a symlink out of the project"]
    assert queries.escape_messages(app.conn, ["elsewhere-store"]) == []
    assert queries.unreadable_count(app.conn) == 2  # every store, escapes left out


def test_missing_counter_urgency_and_store_reads(app: Realmem) -> None:
    shared = app.store_for_scope("shared")
    m = memories.add(app, "Build notes", "About src/a.py.", store=shared, stored_paths=["src/a.py"], source="add")
    n = memories.add(app, "Other notes", "About lib/b.py.", store=shared, stored_paths=["lib/b.py"], source="add")
    key, other = (m.store, m.id), (n.store, n.id)
    assert queries.store_counts(app.conn, shared) == (2, 0)
    q_id = ids.new_id()
    text = files.render(id=q_id, caption="Token", paths=["."], created="2026-01-01T00:00:00.000Z",
                        updated="2026-01-01T00:00:00.000Z", content="A pasted token.")
    app.emit([ev.FileObserved(shared, q_id, "added", ev.Fields("Token", "A pasted token.", ["."], "2026-01-01T00:00:00.000Z",
                                                               "2026-01-01T00:00:00.000Z", "token.md", text), "secret")])
    assert queries.store_counts(app.conn, shared) == (3, 1)  # the quarantined one counted in both
    assert queries.store_counts(app.conn, "elsewhere-store") == (0, 0)

    app.emit([ev.PathsChecked(m.store, m.id, {"src/a.py": "src/new/a.py", "src/gone.py": None})])
    assert queries.missing_count(app.conn, app.visible_stores()) == 1  # memories, not paths
    assert queries.missing_count(app.conn, ["elsewhere-store"]) == 0
    assert queries.missing_keys(app.conn) == {key}
    assert queries.missing_paths(app.conn, key) == {"src/a.py": "src/new/a.py", "src/gone.py": None}
    assert queries.missing_paths(app.conn, other) == {}
    assert queries.suggested_path(app.conn, key, "src/a.py") == ("src/new/a.py",)
    assert queries.suggested_path(app.conn, key, "src/gone.py") == (None,)
    assert queries.suggested_path(app.conn, key, "README.md") is None

    assert queries.urgency_row(app.conn, key) is None
    assert queries.urgency_score(app.conn, key) is None
    app.emit([ev.UrgencyJudged(m.store, m.id, "v1", 0.75, {"high": 0.75, "low": 0.25}, 0.5, "debug")])
    assert queries.urgency_score(app.conn, key) == ("v1", 0.75)
    row = queries.urgency_row(app.conn, key)
    assert row is not None and (row[0], row[2], row[3], row[4]) == (0.75, 0.5, "debug", "v1")

    assert queries.all_counters(app.conn)[key] == (0, 0)  # a counters row is made with the memory
    app.emit([ev.RecallHit([key]), ev.PathNotesShown([key, other], ["src/a.py"], "read")])
    counts = queries.all_counters(app.conn)
    assert counts[key] == (1, 1) and counts[other] == (0, 1)


def test_most_used_store_wide_orders_used_then_recent(app: Realmem) -> None:
    """The prompt's captions: store-wide memories only, most used first, then the never-used
    ones most recently updated first, cut at the limit across both."""
    shared = app.project.shared_store  # type: ignore[union-attr]
    memories.add(app, "Scoped", "About src/a.py.", store=shared, stored_paths=["src/a.py"], source="add")
    old = memories.add(app, "Old whole", "Use make.", store=shared, stored_paths=["."], source="add")
    new = memories.add(app, "New whole", "Use make -j.", store=shared, stored_paths=["."], source="add")
    used = memories.add(app, "Used whole", "Use just.", store=shared, stored_paths=["."], source="add")
    app.emit([ev.RecallHit([(used.store, used.id)])])

    def top(n: int) -> list[str]:
        return [r[1] for r in queries.most_used_store_wide(app.conn, [shared], n)]

    unused = sorted(sorted([old, new], key=lambda m: m.id), key=lambda m: m.updated, reverse=True)
    assert top(5) == [used.id, *(m.id for m in unused)]
    assert top(1) == [used.id] and len(top(2)) == 2
    app.emit([ev.RecallHit([(old.store, old.id)])] * 2)
    assert top(5)[:2] == [old.id, used.id]


def test_memory_reads(app: Realmem) -> None:
    shared = app.store_for_scope("shared")
    m = memories.add(app, "Build notes", "About src/a.py.", store=shared, stored_paths=["src/a.py"], source="add")
    n = memories.add(app, "Whole project", "Use make.", store=shared, stored_paths=["."], source="add")
    key = (m.store, m.id)
    assert queries.memory(app.conn, key) == m
    assert queries.memory(app.conn, (shared, "no-such-id")) is None
    assert {x.id for x in queries.memories_in(app.conn, [shared])} == {m.id, n.id}
    assert sorted(queries.memory_keys(app.conn, [shared], include_quarantined=False)) == sorted([key, (n.store, n.id)])
    assert queries.file_used_by_other(app.conn, shared, m.file, n.id)
    assert not queries.file_used_by_other(app.conn, shared, m.file, m.id)
    assert queries.file_names(app.conn, shared) == {m.file, n.file}
    assert queries.file_names(app.conn, shared, exclude=m.id) == {n.file}
    assert queries.counters(app.conn, key) == (0, 0)
    app.emit([ev.RecallHit([(n.store, n.id)]), ev.RecallHit([(n.store, n.id)])])
    assert queries.counters(app.conn, (n.store, n.id)) == (2, 0)
    assert [r[1] for r in queries.most_used_store_wide(app.conn, [shared], 5)] == [n.id]  # store-wide only
    assert queries.path_counts(app.conn, [shared]) == [('["src/a.py"]', 1)]
    assert queries.path_scoped_oldest_update(app.conn, [shared]) == (epoch(m.updated), [])  # n is store-wide
    assert {(x.id, v) for x, v in queries.memories_with_urgency(app.conn)} == {(m.id, None), (n.id, None)}
    app.emit([ev.UrgencyJudged(m.store, m.id, "v1", 0.5, {}, None, "debug")])
    assert (m.id, "v1") in {(x.id, v) for x, v in queries.memories_with_urgency(app.conn)}
    assert {i for _, i in queries.unembedded(app.conn, "no-space")} == {m.id, n.id}
    assert queries.imported_hash(app.conn, "/nowhere/AGENTS.md") is None
    assert queries.imported_paths(app.conn) == []
    assert shared in {s for s, _, _ in queries.store_locations(app.conn)}


def _recount(app: Realmem) -> dict[str, tuple[int, int, int]]:
    """store_sizes as a fresh count of the rows would make it (stores with no memory absent)."""
    rows = app.conn.execute("SELECT m.store, count(*), count(m.quarantined), (SELECT count(DISTINCT p.id) FROM "
                            "missing_paths p WHERE p.store = m.store) FROM memories m GROUP BY m.store")
    return {s: (n, q, f) for s, n, q, f in rows}


def _kept(app: Realmem) -> dict[str, tuple[int, int, int]]:
    return {s: (n, q, f) for s, n, q, f in app.conn.execute("SELECT * FROM store_sizes")}


def test_store_sizes_follow_every_change(app: Realmem) -> None:
    """Status reads the per-store counts the projector keeps: after each kind of change (add,
    quarantine, flag, unflag, edit, move, forget, delete of the file) and after a replay they
    equal a fresh count of the rows."""
    from realmem.projections import replay

    shared, personal = app.store_for_scope("shared"), app.store_for_scope("personal")
    m = memories.add(app, "Build notes", "About src/a.py.", store=shared, stored_paths=["src/a.py"], source="add")
    n = memories.add(app, "Other notes", "About lib/b.py.", store=shared, stored_paths=["lib/b.py"], source="add")
    steps: list[list[ev.Event]] = []
    q_id = ids.new_id()
    when = "2026-01-01T00:00:00.000Z"
    text = files.render(id=q_id, caption="Token", paths=["."], created=when, updated=when, content="A pasted token.")
    steps.append([ev.FileObserved(shared, q_id, "added", ev.Fields("Token", "A pasted token.", ["."], when, when,
                                                                    "token.md", text), "secret")])
    steps.append([ev.PathsChecked(m.store, m.id, {"src/a.py": None, "src/b.py": None})])
    steps.append([ev.PathsChecked(n.store, n.id, {"lib/b.py": "lib/c.py"})])
    steps.append([ev.PathsChecked(m.store, m.id, {})])  # its paths are back
    steps.append([ev.FileObserved(shared, q_id, "changed", ev.Fields("Token", "Now harmless.", ["."], when, when,
                                                                      "token.md", text), None)])
    for events in steps:
        app.emit(events)
        assert _kept(app) == _recount(app)
    memories.edit(app, (m.store, m.id), content="About src/a.py and more.")
    assert _kept(app) == _recount(app)
    app.emit([ev.MemoryMoved(n.store, n.id, personal, app.memory((n.store, n.id)).fields, "scope")])  # type: ignore[union-attr]
    assert _kept(app) == _recount(app)
    assert queries.store_counts(app.conn, personal)[0] == 1
    memories.forget(app, [(m.store, m.id)])
    app.emit([ev.FileObserved(shared, q_id, "deleted")])
    assert _kept(app) == _recount(app)
    assert queries.store_counts(app.conn, shared) == (0, 0)

    replay.replay(app)
    assert _kept(app) == _recount(app)
    assert replay.check(app).differences == []


def test_store_sizes_migration_counts_an_existing_database(app: Realmem) -> None:
    """A database from before the counts were kept gets them from its rows when it migrates."""
    from realmem.storage import db

    shared = app.store_for_scope("shared")
    m = memories.add(app, "Build notes", "About src/a.py.", store=shared, stored_paths=["src/a.py"], source="add")
    memories.add(app, "Other notes", "About lib/b.py.", store=shared, stored_paths=["lib/b.py"], source="add")
    app.emit([ev.PathsChecked(m.store, m.id, {"src/a.py": None})])
    expected = _recount(app)
    with db.transaction(app.conn):  # back to schema 15
        app.conn.execute("DROP TABLE store_sizes")
        app.conn.execute("CREATE INDEX memories_quarantined ON memories(store) WHERE quarantined IS NOT NULL")
        app.conn.execute("DELETE FROM schema_version WHERE version = 16")
    db.apply_migrations(app.conn)
    assert _kept(app) == expected == {shared: (2, 0, 1)}


@contextlib.contextmanager
def _traced(app: Realmem) -> Iterator[list[tuple[str, tuple]]]:
    """The statements run on the app's connection inside the block, with their arguments."""
    statements: list[tuple[str, tuple]] = []

    def trace(cursor: object, sql: str, bindings: object) -> bool:
        statements.append((sql, tuple(bindings or ())))  # type: ignore[arg-type]
        return True

    app.conn.exec_trace = trace
    try:
        yield statements
    finally:
        app.conn.exec_trace = None


def _plan(app: Realmem, sql: str, args: tuple) -> str:
    return " ".join(str(r[-1]) for r in app.conn.execute("EXPLAIN QUERY PLAN " + sql, args))


def test_session_start_reads_of_path_scoped_memories_never_read_the_memories_table(app: Realmem) -> None:
    """Missing paths, the freshness history, path notes and the prompt's counts ask which
    memories are about paths (and when they were updated) at every session start: they read
    an index holding just those columns, not every fact's text (a quarter of a second each at
    100k memories)."""
    stores = [app.store_for_scope("shared"), app.store_for_scope("personal")]
    memories.add(app, "Build notes", "About src/a.py.", store=stores[0], stored_paths=["src/a.py"], source="add")
    memories.add(app, "Everywhere", "About the repo.", store=stores[0], stored_paths=["."], source="add")
    with _traced(app) as statements:
        scoped = list(queries.path_scoped_paths(app.conn, stores))
        oldest, others = queries.path_scoped_oldest_update(app.conn, stores)
        counts = queries.path_counts(app.conn, stores)
        values = queries.path_scoped_values(app.conn, stores)
        differ = queries.flags_differ(app.conn, {(stores[0], '["src/a.py"]'): {"src/a.py": None}})
    assert [p for _, _, p in scoped] == [p for p, _ in counts] == ['["src/a.py"]'] and oldest is not None and others == []
    assert [v[:3] for v in values] == [(stores[0], '["src/a.py"]', 1)] and [p for _, _, p in differ] == ['["src/a.py"]']
    assert len(statements) == 6
    for sql, args in statements:
        plan = _plan(app, sql, args)
        assert "COVERING INDEX memories_scope" in plan and "SCAN m" not in plan, (sql, plan)


def test_replay_finds_the_files_it_can_trust_from_an_index_not_the_memory_rows(app: Realmem) -> None:
    """Before a rebuild, replay reads each memory's file name and last event beside the file's
    recorded stamp: from the memories_scope index, never every fact's text (130k memories:
    1.1-1.6 -> 0.6-0.7 s)."""
    store = app.store_for_scope("shared")
    m = memories.add(app, "Build notes", "About src/a.py.", store=store, stored_paths=["src/a.py"], source="add")
    state = replay.fold(app.conn)[0]
    with _traced(app) as statements:
        known = app.projector.known_stamps(state)
    assert list(known) == [(store, m.file)]
    (sql, args), = [(sql, args) for sql, args in statements if "file_stats" in sql]
    plan = _plan(app, sql, args)
    assert "SCAN m USING COVERING INDEX memories_scope" in plan, plan


def test_the_oldest_update_is_read_by_sqlite_where_it_can_and_other_formats_come_to_python(app: Realmem) -> None:
    """The freshness history reaches back to the oldest path-scoped memory: SQLite reads the
    times with a Z (realmem's own), and only the distinct other ones come to Python to be parsed
    (Python reads more formats, and a zone-less time as local)."""
    store = app.store_for_scope("shared")
    times = ["2026-03-01T10:00:00.000Z", "2026-01-01T10:00:00.500Z", "2025-12-31", "2026-02-01T10:00:00+02:00",
             "2025-13-45T10:00:00Z", "2024-01-01T10:00:00.000Z"]
    for i, t in enumerate(times):
        m = memories.add(app, f"Fact {i}", "Body.", store=store, stored_paths=["src/a.py" if i < 5 else "."],
                         source="add")
        app.conn.execute("UPDATE memories SET updated=? WHERE store=? AND id=?", (t, m.store, m.id))
    oldest, others = queries.path_scoped_oldest_update(app.conn, [store])
    assert oldest == epoch("2026-01-01T10:00:00.500Z")  # the store-wide 2024 one has no paths to follow
    assert sorted(others) == ["2025-12-31", "2025-13-45T10:00:00Z", "2026-02-01T10:00:00+02:00"]
    assert freshness._oldest_update(app) == min(epoch("2026-01-01T10:00:00.500Z"), epoch("2025-12-31"))


def test_a_full_scans_reads_of_names_and_stamps_walk_one_btree_each(app: Realmem) -> None:
    """A full scan reads every memory's file name and every file's stamp in its store: each
    is one walk of one b-tree (an index holding the names, file_stats in key order), not a
    table row looked up per memory (migration 019)."""
    store = app.store_for_scope("shared")
    memories.add(app, "Build notes", "About src/a.py.", store=store, stored_paths=["src/a.py"], source="add")
    with _traced(app) as statements:
        names = queries.memory_files(app.conn, store)
        stamps = queries.file_stats(app.conn, store)
    assert list(names.values()) == list(stamps) and len(statements) == 2
    plans = [_plan(app, sql, args) for sql, args in statements]
    assert "COVERING INDEX memories_scope" in plans[0], plans
    assert "USING PRIMARY KEY" in plans[1], plans
