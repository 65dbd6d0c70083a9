"""Replay: the tables and fact files are a pure function of the event log.

A hypothesis property drives random sequences of writes, counter touches and hand edits
through the real application, then proves ``replay.check`` finds no difference and that
``replay.replay`` reproduces every table row and every fact file byte for byte.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from realmem.storage import db
from realmem.write import memories
from realmem.app import Realmem, RealmemError
from realmem.events import log
from realmem.events import types as ev
from realmem.write.attached import open_attached
from realmem.write.observe import scan_stores
from realmem.stores.project import GLOBAL, forget_cache
from realmem.projections import files, index, projector, replay

TABLES = {
    "memories": "store, id, caption, content, paths, created, updated, file, text, hash, source, quarantined, last_seq",
    "counters": "store, id, used_count, path_inject_count",
    "urgency": "store, id, valid_for, score, probabilities, confidence, source",
    "missing_paths": "store, id, path, suggested",
    "stores": "store, kind, project_key, root, dir",
    "problems": "store, file, problem, message, line, digest",
}


def snapshot_tables(app: Realmem) -> dict[str, list[tuple]]:
    return {t: app.conn.execute(f"SELECT {c} FROM {t} ORDER BY {c}").fetchall() for t, c in TABLES.items()}


def fts_rows(app: Realmem) -> list[tuple]:
    return app.conn.execute("SELECT m.store, m.id, f.caption, f.body FROM memories_fts f "
                            "JOIN memories m ON m.rowid = f.rowid ORDER BY 1, 2").fetchall()


def snapshot_files(app: Realmem) -> dict[str, bytes]:
    out = {}
    for store in app.visible_stores():
        d = app.store_dir(store)
        if d.is_dir():
            for p in sorted(d.glob("*.md")):
                out[str(p)] = p.read_bytes()
    return out


def assert_replay_identical(app: Realmem) -> None:
    report = replay.check(app)
    assert report.differences == []
    tables_before, fts_before, files_before = snapshot_tables(app), fts_rows(app), snapshot_files(app)
    # every memory's file holds exactly its text, and there is no stray file
    expected = {str(app.store_dir(m.store) / m.file): m.text.encode() for m in app.memories(include_quarantined=True)}
    assert files_before == expected
    rep = replay.replay(app)
    assert rep.files_written == 0 and rep.files_deleted == 0
    assert snapshot_tables(app) == tables_before
    assert fts_rows(app) == fts_before
    assert snapshot_files(app) == files_before
    assert replay.check(app).differences == []


# --- the property ---------------------------------------------------------------------------

WORDS = ["deploy", "数据库", "マイグレーション", "테스트", "usedCount", "key: value", "# hash", "- dash", "yes",
         "2026-01-01", "'q'", "CI", "pnpm test:e2e", "ünïcödé"]
text = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join)
content = st.lists(text, min_size=1, max_size=3).map("\n\n".join)
scope = st.sampled_from(["shared", "personal", "global"])
raw_paths = st.sampled_from([None, ["src"], ["src/db/*.sql", "README.md"], ["~/notes"], ["/opt/elsewhere"]])
pick = st.integers(min_value=0, max_value=50)

ops = st.one_of(
    st.tuples(st.just("add"), scope, text, content, raw_paths),
    st.tuples(st.just("edit"), pick, st.one_of(st.none(), text), st.one_of(st.none(), content), st.booleans()),
    st.tuples(st.just("forget"), pick),
    st.tuples(st.just("reinforce"), pick),
    st.tuples(st.just("move"), pick, scope),
    st.tuples(st.just("touch"), st.lists(pick, min_size=1, max_size=3), st.booleans()),
    st.tuples(st.just("hand-edit"), pick, content),
)


def _keys(app: Realmem) -> list[tuple[str, str]]:
    return sorted((m.store, m.id) for m in app.memories(include_quarantined=True))


def run_op(app: Realmem, op: tuple) -> None:
    kind = op[0]
    keys = _keys(app)
    if kind == "add":
        _, sc, caption, body, rp = op
        store, stored = memories.place(app, sc, rp)
        memories.add(app, caption, body, store=store, stored_paths=stored, source="add")
        return
    if not keys:
        return
    if kind == "edit":
        _, i, caption, body, repath = op
        key = keys[i % len(keys)]
        new_paths = memories.edit_paths_from_input(app, key, ["src/other"]) if repath and key[0] != GLOBAL else None
        memories.edit(app, key, caption=caption, content=body, stored_paths=new_paths)
    elif kind == "forget":
        memories.forget(app, [keys[op[1] % len(keys)]])
    elif kind == "reinforce":
        memories.reinforce(app, keys[op[1] % len(keys)])
    elif kind == "move":
        key = keys[op[1] % len(keys)]
        try:
            memories.move(app, key, app.store_for_scope(op[2]))
        except RealmemError:
            pass  # a global path outside the project cannot move into it
    elif kind == "touch":
        hits = sorted({keys[i % len(keys)] for i in op[1]})
        if op[2]:
            app.emit([ev.PathNotesShown(hits, [str(app.cwd / "src")], "read")])
        else:
            app.emit([ev.RecallHit(hits)])
    elif kind == "hand-edit":
        m = app.memory(keys[op[1] % len(keys)])
        path = app.store_dir(m.store) / m.file
        head, _, _ = m.text.partition("\n---\n")
        path.write_text(head + "\n---\n\n" + op[2] + "\n", encoding="utf-8")
        scan_stores(app)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(steps=st.lists(ops, min_size=1, max_size=15))
def test_random_histories_replay_to_identical_tables_and_files(repo: Path, steps: list[tuple]) -> None:
    shutil.rmtree(repo / ".pi", ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="realmem-prop-") as tmp:
        forget_cache()
        app = open_attached(Path(tmp) / "home", repo)
        try:
            for op in steps:
                run_op(app, op)
            assert_replay_identical(app)
        finally:
            app.close()
        # a fresh process view (open + scan) agrees too and records nothing new
        app = open_attached(Path(tmp) / "home", repo)
        try:
            last = log.last_seq(app.conn)
            assert replay.check(app).differences == []
            scan_stores(app)
            assert log.last_seq(app.conn) == last
        finally:
            app.close()


# --- healing ---------------------------------------------------------------------------------


def add(app: Realmem, caption: str, body: str, scope: str = "shared", paths: list[str] | None = None):
    store, stored = memories.place(app, scope, paths)
    return memories.add(app, caption, body, store=store, stored_paths=stored, source="add")


def set_files_seq(home: Path, seq: int) -> None:
    conn = db.connect(home / "realmem.sqlite")
    conn.execute("UPDATE projection_state SET seq=? WHERE name='files'", (seq,))
    conn.close()


def test_catch_up_files_heals_files_that_lag_the_log(home: Path, repo: Path) -> None:
    with open_attached(home, repo) as app:
        a = add(app, "Build with make", "make all", "shared")
        b = add(app, "Test with pytest", "pytest -q", "personal")
        seq_before_edit = app.projection_seq("files")
        b2 = memories.edit(app, (b.store, b.id), content="pytest -q -x")
        c = add(app, "Forgotten fact", "gone soon", "shared")
        before_forget = app.projection_seq("files")
        memories.forget(app, [(c.store, c.id)])
        path_a = app.store_dir(a.store) / a.file
        path_b = app.store_dir(b.store) / b.file
        path_c = app.store_dir(c.store) / c.file
        text_c = c.text
    # Simulate a crash after the table commit, before the file step of the last writes:
    # the file of a is gone, b still has its pre-edit text, c was never deleted.
    path_a.unlink()
    path_b.write_text(b.text, encoding="utf-8")
    path_c.write_text(text_c, encoding="utf-8")
    set_files_seq(home, min(seq_before_edit, before_forget) - 2)
    with open_attached(home, repo) as app:
        assert app.projection_seq("files") == app.projection_seq("tables")
        assert path_a.read_text(encoding="utf-8") == a.text
        assert path_b.read_text(encoding="utf-8") == b2.text
        assert not path_c.exists()
        # the scan saw nothing to observe: the files were healed from the log first
        assert not [e for e in log.read(app.conn) if isinstance(e.event, (ev.FileObserved, ev.FileProblem))]
        assert app.memory((c.store, c.id)) is None
        assert replay.check(app).differences == []


def test_catch_up_files_keeps_a_hand_made_file_that_reuses_a_forgotten_name(home: Path, repo: Path) -> None:
    with open_attached(home, repo) as app:
        c = add(app, "Temporary note", "will be forgotten", "shared")
        seq = app.projection_seq("files")
        memories.forget(app, [(c.store, c.id)])
        path = app.store_dir(c.store) / c.file
    path.write_text("---\ncaption: Temporary note\n---\n\nA different, hand-written fact.\n", encoding="utf-8")
    set_files_seq(home, seq - 1)
    with open_attached(home, repo) as app:
        assert path.is_file()
        mems = app.memories([app.project.shared_store])
        assert [m.content for m in mems] == ["A different, hand-written fact."]
        assert mems[0].id != c.id
        assert replay.check(app).differences == []


def test_catch_up_files_removes_a_moved_memorys_file_from_the_store_it_left(home: Path, repo: Path) -> None:
    with open_attached(home, repo) as app:
        add(app, "Run the linter", "personal copy", "personal")  # takes the name in personal
        m = add(app, "Run the linter", "ruff check .", "shared")
        seq = app.projection_seq("files")
        moved = memories.move(app, (m.store, m.id), app.project.personal_store)
        assert moved.file != m.file  # the destination name had to differ
        src = app.store_dir(m.store) / m.file
    src.write_text(m.text, encoding="utf-8")  # crash before the move's file step
    set_files_seq(home, seq)
    with open_attached(home, repo) as app:
        assert not src.exists()
        assert app.memory((m.store, m.id)) is None  # not observed back into the shared store
        assert app.memory((moved.store, moved.id)) is not None
        assert replay.check(app).differences == []


def test_tables_lagging_the_log_are_caught_up_on_open(home: Path, repo: Path) -> None:
    """An event appended without its table step (e.g. by an older version) is applied when a
    process opens the store, before anything reads the tables."""
    with open_attached(home, repo) as app:
        a = add(app, "Cache lives in .cache", "rm -rf .cache to reset", "shared")
        with db.transaction(app.conn):
            log.append(app.conn, ev.Reinforced(a.store, a.id))
    with open_attached(home, repo) as app:
        assert app.counters((a.store, a.id)) == (1, 0)
        assert app.projection_seq("tables") == log.last_seq(app.conn)
        assert replay.check(app).differences == []


def test_check_reports_tampered_tables_and_files(home: Path, repo: Path) -> None:
    with open_attached(home, repo, scan=False) as app:
        a = add(app, "Ports are 3000 and 5432", "web on 3000, db on 5432", "shared")
        assert replay.check(app).differences == []
        app.conn.execute("UPDATE counters SET used_count=41 WHERE id=?", (a.id,))
        diffs = replay.check(app).differences
        assert any(d.startswith("counters:") for d in diffs)
        app.conn.execute("UPDATE counters SET used_count=0 WHERE id=?", (a.id,))
        (app.store_dir(a.store) / a.file).write_text(a.text + "tampered\n", encoding="utf-8")
        diffs = replay.check(app).differences
        assert diffs == [f"file differs from the log: {app.store_dir(a.store) / a.file}"]
        replay.replay(app)
        assert (app.store_dir(a.store) / a.file).read_text(encoding="utf-8") == a.text
        assert replay.check(app).differences == []


def test_replay_rebuilds_everything_from_an_emptied_projection(home: Path, repo: Path) -> None:
    with open_attached(home, repo) as app:
        a = add(app, "数据库迁移使用 alembic", "运行 alembic upgrade head", "shared", ["src/db"])
        b = add(app, "Prefer uv over pip", "uv pip install -r requirements.txt", "global")
        memories.reinforce(app, (a.store, a.id))
        app.emit([ev.PathNotesShown([(a.store, a.id)], [str(repo / "src/db")], "read")])
        tables_before, fts_before, files_before = snapshot_tables(app), fts_rows(app), snapshot_files(app)
        with db.transaction(app.conn):
            for t in ("memories", "counters", "memories_fts"):
                app.conn.execute(f"DELETE FROM {t}")
        for p in files_before:
            Path(p).unlink()
        assert replay.check(app).differences != []
        rep = replay.replay(app)
        assert rep.memories == 2 and rep.files_written == 2
        assert snapshot_tables(app) == tables_before
        assert fts_rows(app) == fts_before
        assert snapshot_files(app) == files_before
        assert app.counters((a.store, a.id)) == (1, 1) and app.memory((GLOBAL, b.id)) is not None


def test_replay_reads_only_files_whose_stamp_is_not_the_one_it_recorded(home: Path, repo: Path,
                                                                        monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A settled file still showing the size and mtime realmem recorded for it holds its text
    (the scan trusts the same stamp): replay does not read it again.  A file whose stamp
    changed is read and, when it differs, rewritten, even a hand edit of the same size."""
    reads: list[str] = []
    real = files.read_regular

    def counted(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        reads.append(str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(files, "read_regular", counted)
    with open_attached(home, repo) as app:
        a = add(app, "Use uv", "Run uv sync.", "shared")
        b = add(app, "Prefer ruff", "Run ruff check.", "global")
        monkeypatch.setattr(projector, "SETTLED_NS", 10**18)  # nothing is settled: every file is read
        reads.clear()
        assert replay.replay(app).files_written == 0 and len(reads) == 2
        monkeypatch.setattr(projector, "SETTLED_NS", 0)  # everything written before now is settled
        reads.clear()
        assert replay.replay(app).files_written == 0 and reads == []
        path = app.store_dir(b.store) / b.file
        st = path.stat()
        path.write_text(b.text.replace("ruff", "RUFF"), encoding="utf-8")  # same size
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - 10**10))
        reads.clear()
        rep = replay.replay(app)
        assert rep.files_written == 1 and reads == [str(path)]
        assert path.read_text(encoding="utf-8") == b.text
        reads.clear()
        assert replay.replay(app).files_written == 0 and reads == []  # the rewrite's stamp was recorded
        assert (app.store_dir(a.store) / a.file).read_text(encoding="utf-8") == a.text
        assert replay.check(app).differences == []


def test_replay_rewrites_a_file_whose_step_a_killed_writer_never_ran(home: Path, repo: Path) -> None:
    """Replay catches nothing up before it rebuilds, so a file the files position has not
    reached is never trusted on its recorded stamp, even one of the right size."""
    with open_attached(home, repo) as app:
        b = add(app, "Test with pytest", "pytest -q", "personal")
        path = app.store_dir(b.store) / b.file
        old = path.read_bytes()
        before_edit = app.projection_seq("files")
        b2 = memories.edit(app, (b.store, b.id), content="pytest -x")
        assert len(b2.text) == len(b.text) and b2.file == b.file
    # A crash after the edit's table commit, before its file step: the file still holds the
    # old text, with the stamp file_stats recorded for it (an hour old, so long settled).
    path.write_bytes(old)
    hour_ago = time.time_ns() - 3600 * 10**9
    os.utime(path, ns=(hour_ago, hour_ago))
    conn = db.connect(home / "realmem.sqlite")
    conn.execute("UPDATE file_stats SET mtime_ns=?, size=? WHERE file=?", (hour_ago, len(old), b.file))
    conn.close()
    set_files_seq(home, before_edit)
    app = Realmem(home, repo)  # no open: nothing is caught up before the replay
    try:
        replay.replay(app)
        assert path.read_text(encoding="utf-8") == b2.text
        assert replay.check(app).differences == []
    finally:
        app.close()


def _schema(app: Realmem) -> list[tuple]:
    return app.conn.execute("SELECT type, name, sql FROM sqlite_master WHERE tbl_name LIKE 'memories%' "
                            "ORDER BY type, name").fetchall()


def test_replay_makes_the_indexes_it_drops_for_its_bulk_load_again_and_keeps_them_on_failure(
        home: Path, repo: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Replay loads the memories without their indexes and FTS5 without merging, in large
    segments: after it, the schema is what it was and FTS5 merges and flushes live writes as
    before; a replay failing half way leaves
    the schema and the tables as they were."""
    with open_attached(home, repo) as app:
        a = add(app, "Prefer uv over pip", "uv pip install -r requirements.txt", "global")
        schema, tables_before = _schema(app), snapshot_tables(app)
        replay.replay(app)
        assert _schema(app) == schema
        config = dict(app.conn.execute("SELECT k, v FROM memories_fts_config WHERE k IN ('automerge', 'hashsize')"))
        assert config == {"automerge": index.FTS_AUTOMERGE, "hashsize": index.FTS_HASHSIZE}
        plan = " ".join(str(r[-1]) for r in app.conn.execute("EXPLAIN QUERY PLAN SELECT id FROM memories WHERE hash=?", ("x",)))
        assert "memories_hash" in plan

        def broken(conn: object) -> int:
            raise RuntimeError("disk full")

        monkeypatch.setattr(index, "index_all", broken)
        try:
            replay.replay(app)
        except RuntimeError:
            pass
        else:
            raise AssertionError("the broken replay went through")
        assert _schema(app) == schema and snapshot_tables(app) == tables_before
        assert app.memory((a.store, a.id)) is not None


def test_replay_renews_its_lease_with_the_tables_and_writes_nothing_once_it_was_taken_over(
        home: Path, repo: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The table transaction carries a fresh heartbeat (the renewal thread waits behind it); a
    lease taken over while the log was folded leaves tables and files as they were."""
    with open_attached(home, repo) as app:
        a = add(app, "Prefer uv over pip", "uv pip install -r requirements.txt", "global")
        other = db.connect(home / "realmem.sqlite")
        real_fold = replay.fold

        def stale_then_fold(conn, progress=None):  # type: ignore[no-untyped-def]
            other.execute("UPDATE locks SET heartbeat=0 WHERE name='write'")
            return real_fold(conn, progress)

        beats: list[float] = []
        real_rebuild = app.projector.rebuild

        def rebuild(*args, **kwargs):  # type: ignore[no-untyped-def]  # right after the tables' commit
            beats.append(other.execute("SELECT heartbeat FROM locks WHERE name='write'").fetchone()[0])
            return real_rebuild(*args, **kwargs)

        monkeypatch.setattr(replay, "fold", stale_then_fold)
        monkeypatch.setattr(app.projector, "rebuild", rebuild)
        replay.replay(app)
        assert len(beats) == 1 and beats[0] > time.time() - 600

        def taken_over_then_fold(conn, progress=None):  # type: ignore[no-untyped-def]
            other.execute("UPDATE locks SET owner='another-process', generation=generation+1 WHERE name='write'")
            return real_fold(conn, progress)

        monkeypatch.setattr(replay, "fold", taken_over_then_fold)
        tables_before = snapshot_tables(app)
        try:
            replay.replay(app)
        except RealmemError as exc:
            assert "lost the write lease" in str(exc)
        else:
            raise AssertionError("a replay went on without its lease")
        assert snapshot_tables(app) == tables_before
        assert app.memory((a.store, a.id)) is not None
        other.close()
