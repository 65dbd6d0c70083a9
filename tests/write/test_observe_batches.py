"""Observing a `git pull`'s fact files: each file read once, appended in batches that are each
atomic, secrets among them quarantined, and a scan killed between batches healed by the next.

Kills use the test-only ``REALMEM_TEST_FAULT`` hook (realmem/faults.py) in a real `realmem
scan` process; nothing is timed."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import apsw
import pytest

from conftest import fake_secret
from helpers.factreads import read_in_scan
from realmem.events import types as ev
from realmem.storage import db
from realmem.stores import ids
from realmem.write import factfiles, observe
from realmem.write.attached import open_attached
from realmem.projections import files

WAIT = 300


def pull(d: Path, count: int, *, tag: str = "pulled", every_bare: int = 10) -> None:
    """``count`` fact files as a pull brings them; one in ``every_bare`` hand-written without an id."""
    d.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        text = files.render(id=ids.new_id(), caption=f"{tag} fact {i}", paths=["."], created="2026-01-01T00:00:00.000Z",
                            updated="2026-01-01T00:00:00.000Z", content=f"A teammate's note number {i}.")
        if i % every_bare == 0:
            text = "---\n" + text.split("\n", 2)[2]  # no id line
        (d / f"{tag}-{i}.md").write_text(text, encoding="utf-8")


def shared_dir(home: Path, repo: Path) -> Path:
    with open_attached(home, repo, scan=False) as app:
        return app.store_dir(app.project.shared_store)  # type: ignore[union-attr]


def scan_cli(home: Path, repo: Path, **env: str) -> int:
    full = {**os.environ, "REALMEM_HOME": str(home), "REALMEM_WORKER_AUTOSTART": "false", **env}
    return subprocess.run([sys.executable, "-m", "realmem.interface.cli", "--home", str(home), "--cwd", str(repo), "scan"],
                          capture_output=True, text=True, env=full, timeout=WAIT).returncode


def assert_projected(home: Path, repo: Path, tag: str, count: int) -> None:
    """Every file is exactly one memory whose file holds its id; replay agrees."""
    from realmem.projections import replay
    with open_attached(home, repo, scan=False) as app:
        rows = app.conn.execute("SELECT id, file, text FROM memories WHERE caption LIKE ?", (f"{tag} fact %",)).fetchall()
        assert len(rows) == count
        assert len({r[1] for r in rows}) == count
        d = app.store_dir(app.project.shared_store)  # type: ignore[union-attr]
        for mem_id, name, text in rows:
            on_disk = (d / name).read_text(encoding="utf-8")
            assert on_disk == text and files.parse(on_disk).id == mem_id
        assert app.conn.execute("SELECT count(*) FROM problems").fetchone()[0] == 0
        assert replay.check(app).differences == []


def test_a_scan_larger_than_a_batch_projects_every_file(home: Path, repo: Path) -> None:
    d = shared_dir(home, repo)
    count = observe.EMIT_BATCH + 30
    pull(d, count)
    with open_attached(home, repo, scan=False) as app:
        events = observe.scan_stores(app)
    assert len(events) == count
    assert_projected(home, repo, "pulled", count)
    with open_attached(home, repo, scan=False) as app:
        assert observe.scan_stores(app) == []  # nothing is read twice into the log


def test_each_batch_records_the_stats_of_its_files_with_its_events(home: Path, repo: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Once a batch is in, another process finds none of its files left to read (session start
    counts what is left this way): the stats are written in the batch's transaction."""
    d = shared_dir(home, repo)
    pull(d, observe.EMIT_BATCH + 30)
    left: list[int] = []
    with open_attached(home, repo, scan=False) as app:
        real = app.emit

        def emit(events: list, **kw: object) -> list:
            out = real(events, **kw)  # type: ignore[arg-type]
            with open_attached(home, repo, scan=False) as other:
                left.append(observe.backlog(other))
            return out

        monkeypatch.setattr(app, "emit", emit)
        observe.scan_stores(app)
    assert left == [30, 0]


def test_a_scans_batches_are_checkpointed_into_the_database_once_at_the_end(
        home: Path, repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Between a scan's batches the database file is left alone (in WAL mode only a
    checkpoint writes it), even with every commit past the autocheckpoint threshold; at the end
    the whole log is checkpointed, the threshold is what it was, and the grown WAL file is cut
    back to the size limit once it restarts."""
    d = shared_dir(home, repo)
    monkeypatch.setattr(observe, "EMIT_BATCH", 10)
    monkeypatch.setattr(db, "WAL_SIZE_LIMIT", 16 << 10)
    pull(d, 35)
    digests: list[str] = []
    with open_attached(home, repo, scan=False) as app:
        db_file = Path(app.conn.filename)
        app.conn.execute("PRAGMA wal_autocheckpoint=1")  # every commit would checkpoint
        real = app.emit

        def emit(events: list, **kw: object) -> list:
            out = real(events, **kw)  # type: ignore[arg-type]
            digests.append(hashlib.sha256(db_file.read_bytes()).hexdigest())
            return out

        monkeypatch.setattr(app, "emit", emit)
        before = hashlib.sha256(db_file.read_bytes()).hexdigest()
        assert len(observe.scan_stores(app)) == 35
        assert digests == [before] * 4
        assert app.conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1
        busy, frames, done = app.conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        assert busy == 0 and frames == done
        assert hashlib.sha256(db_file.read_bytes()).hexdigest() != before
        app.emit([ev.RecallHit([])])  # the next write restarts the WAL, cut to the limit, with its own few pages
        assert os.path.getsize(f"{db_file}-wal") < 96 << 10  # uncut: over 500 KB
    assert_projected(home, repo, "pulled", 35)


def test_a_scans_tokens_go_to_the_cache_in_one_transaction_at_its_end(home: Path, repo: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The batches index their memories at once, but the token cache (keyed by a hash: each
    batch's inserts would touch most of its index) is written once, after the last batch;
    a text two files share is tokenized once."""
    from realmem.projections import index, tokenize
    d = shared_dir(home, repo)
    monkeypatch.setattr(observe, "EMIT_BATCH", 10)
    pull(d, 35)
    (d / "again-33.md").write_text(files.render(id=ids.new_id(), caption="pulled fact 33", paths=["."],
                                                created="2026-01-01T00:00:00.000Z", updated="2026-01-01T00:00:00.000Z",
                                                content="A teammate's note number 33."), encoding="utf-8")  # pulled-33's fact, another id
    tokenized: list[str] = []
    real_text = tokenize.index_text
    monkeypatch.setattr(index, "index_text", lambda text: tokenized.append(text) or real_text(text))
    with open_attached(home, repo, scan=False) as app:
        written: list[int] = []  # fts_tokens rows inserted, per committed transaction
        inserted = [0]
        app.conn.set_update_hook(lambda op, _db, table, _rowid: inserted.__setitem__(0, inserted[0] + (table == "fts_tokens")))

        def committed() -> bool:
            written.append(inserted[0])
            inserted[0] = 0
            return False

        app.conn.set_commit_hook(committed)
        assert len(observe.scan_stores(app)) == 36
        app.conn.set_commit_hook(None)
        app.conn.set_update_hook(None)
        assert [n for n in written if n] == [35]  # one text is in two files
        keys = {k for (k,) in app.conn.execute("SELECT key FROM fts_tokens")}
        for caption, content, paths in app.conn.execute("SELECT caption, content, paths FROM memories"):
            assert index._token_key(caption, content + "\n" + " ".join(json.loads(paths))) in keys
        hits = app.conn.execute("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH 'teammate'").fetchone()[0]
        assert hits == 36
    assert tokenized.count("pulled fact 33") == 1


def test_each_new_file_is_read_once_per_scan(home: Path, repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pass under the lease reuses what the first pass read when the file is unchanged."""
    d = shared_dir(home, repo)
    pull(d, 12, every_bare=4)
    reads = read_in_scan(monkeypatch)
    with open_attached(home, repo, scan=False) as app:
        assert len(observe.scan_stores(app)) == 12
    assert sorted(reads) == sorted(f"pulled-{i}.md" for i in range(12))
    assert_projected(home, repo, "pulled", 12)


def test_the_pass_under_the_lease_runs_only_when_the_log_moved(home: Path, repo: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing written since the first pass: its events are recorded as they are.  An event
    appended in between (another process's write): the store is scanned again under the lease."""
    d = shared_dir(home, repo)
    passes: list[str] = []
    real = observe._scan_store

    def counting(app: observe.Realmem, store: str, reads: object) -> tuple:
        passes.append(store)
        out = real(app, store, reads)  # type: ignore[arg-type]
        if meddle and len(passes) == 1:
            with open_attached(home, repo, scan=False) as other:
                other.emit([ev.RecallHit([])])
        return out

    monkeypatch.setattr(observe, "_scan_store", counting)
    for meddle, tag, want in ((False, "quiet", 1), (True, "meddled", 2)):
        pull(d, 3, tag=tag)
        passes.clear()
        with open_attached(home, repo, scan=False) as app:
            assert len(observe.scan_stores(app, [app.project.shared_store])) == 3  # type: ignore[union-attr]
        assert len(passes) == want
    assert_projected(home, repo, "quiet", 3)
    assert_projected(home, repo, "meddled", 3)


def test_a_file_changed_after_the_first_read_is_read_again(tmp_path: Path) -> None:
    d = tmp_path / "store"
    d.mkdir()
    path = d / "fact.md"
    path.write_text("first text\n", encoding="utf-8")
    texts: dict[tuple[str, int, int, int], str] = {}
    assert factfiles.read(d, "fact.md", d, None, texts)[1] == "first text\n"
    path.write_text("the second, longer text\n", encoding="utf-8")
    assert factfiles.read(d, "fact.md", d, None, texts)[1] == "the second, longer text\n"


def test_a_secret_in_a_pulled_file_is_quarantined_in_a_batch(home: Path, repo: Path) -> None:
    d = shared_dir(home, repo)
    pull(d, observe.EMIT_BATCH + 5)
    leaked = files.render(id=ids.new_id(), caption="pulled fact leaked", paths=["."], created="2026-01-01T00:00:00.000Z",
                          updated="2026-01-01T00:00:00.000Z",
                          content=f"The deploy token is {fake_secret('ghp_', 36)} for now.")
    (d / "pulled-leaked.md").write_text(leaked, encoding="utf-8")
    with open_attached(home, repo, scan=False) as app:
        observe.scan_stores(app)
        rows = dict(app.conn.execute("SELECT caption, quarantined FROM memories WHERE caption LIKE 'pulled fact %'"))
    assert len(rows) == observe.EMIT_BATCH + 6
    assert rows["pulled fact leaked"] and "secret" in rows["pulled fact leaked"]
    assert sum(q is not None for q in rows.values()) == 1


@pytest.mark.parametrize("step", ["before-commit", "after-commit", "after-file", "before-position"])
def test_a_scan_killed_in_its_first_batch_is_healed_by_the_next(home: Path, repo: Path, step: str) -> None:
    """Killed at a step of its first batch (the other batches never start): what committed is
    kept, hand-written files get their ids exactly once, and the next scan reads the rest."""
    d = shared_dir(home, repo)
    count = observe.EMIT_BATCH + 40
    pull(d, count)
    assert scan_cli(home, repo, REALMEM_TEST_FAULT=step) == -signal.SIGKILL
    with open_attached(home, repo, scan=False) as app:
        committed = app.conn.execute("SELECT count(*) FROM memories WHERE caption LIKE 'pulled fact %'").fetchone()[0]
    assert committed == (0 if step == "before-commit" else observe.EMIT_BATCH)
    assert scan_cli(home, repo) == 0
    assert_projected(home, repo, "pulled", count)


def test_a_scan_killed_before_its_one_flush_is_recorded_is_healed_by_the_next(home: Path, repo: Path) -> None:
    """Killed after its last batch, its files written and flushed but the files' position never
    recorded: every batch is kept, and the next scan (its catch-up writes those files again)
    leaves every fact projected once."""
    d = shared_dir(home, repo)
    count = observe.EMIT_BATCH * 2 + 10
    pull(d, count)
    assert scan_cli(home, repo, REALMEM_TEST_FAULT="scan-flushed") == -signal.SIGKILL
    conn = apsw.Connection(str(home / "realmem.sqlite"))  # as the kill left it: opening a store heals it
    try:
        committed = conn.execute("SELECT count(*) FROM memories WHERE caption LIKE 'pulled fact %'").fetchone()[0]
        at = dict(conn.execute("SELECT name, seq FROM projection_state WHERE name IN ('files', 'tables')"))
    finally:
        conn.close()
    assert committed == count and at.get("files", 0) < at["tables"]
    assert scan_cli(home, repo) == 0
    assert_projected(home, repo, "pulled", count)


def test_a_pull_of_facts_with_ids_flushes_nothing_and_hand_written_ones_are_flushed(
        home: Path, repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch observing files already on disk writes none, so it flushes nothing; hand-written
    facts getting their ids are written and flushed once per scan, however many batches it
    takes, and only then is the files' position recorded.  The flush is of those files (an
    fsync each), never an os.sync of the whole machine's dirty pages."""
    from realmem.projections import projector
    from realmem.storage import fsutil

    flushes: list[list[str]] = []
    positions: list[tuple[int, int]] = []
    conn: list = []
    real = fsutil.flush_written

    def spy(paths):  # type: ignore[no-untyped-def]
        if paths:
            flushes.append(sorted(Path(p).name for p in paths))
            if conn:
                positions.append((projector.position(conn[0], projector.FILES), projector.position(conn[0], "tables")))
        real(paths)

    def no_sync() -> None:
        raise AssertionError("os.sync flushes every process's files")

    monkeypatch.setattr(fsutil, "flush_written", spy)
    monkeypatch.setattr(os, "sync", no_sync)
    d = shared_dir(home, repo)
    pull(d, 40, every_bare=10**9)  # every fact has its id
    with open_attached(home, repo, scan=False) as app:
        assert len(observe.scan_stores(app)) == 40
    assert flushes == []
    pull(d, 40, tag="bare", every_bare=1)  # none has one
    with open_attached(home, repo, scan=False) as app:
        assert len(observe.scan_stores(app)) == 40
    assert flushes == [sorted(f"bare-{i}.md" for i in range(40))]
    assert all(files.parse((d / f"bare-{i}.md").read_text(encoding="utf-8")).id for i in range(40))
    monkeypatch.setattr(observe, "EMIT_BATCH", 100)  # fewer files than flush_written's os.sync threshold
    count = observe.EMIT_BATCH * 2 + 10  # three batches
    pull(d, count, tag="many", every_bare=1)
    with open_attached(home, repo, scan=False) as app:
        conn.append(app.conn)
        assert len(observe.scan_stores(app)) == count
        assert len(flushes) == 2 and len(flushes[1]) == count
        assert positions[0][0] < positions[0][1]  # flushed before the position moved
        assert projector.position(app.conn, projector.FILES) == projector.position(app.conn, "tables")
    assert_projected(home, repo, "many", count)
