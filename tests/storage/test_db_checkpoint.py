"""``db.one_checkpoint`` inside an outer transaction, where SQLite refuses a checkpoint (a
scan's batches between checkpoints: tests/write/test_observe_batches.py), and the checkpoint
made behind the caller on a thread (``db.Checkpoints``)."""

from __future__ import annotations

import os
from pathlib import Path

from realmem.storage import db


def test_one_checkpoint_inside_an_open_transaction_leaves_it_to_the_outer_commit(tmp_path: Path) -> None:
    conn = db.connect(tmp_path / "t.sqlite", migrate=False)
    conn.execute("CREATE TABLE t(x)")
    conn.execute("PRAGMA wal_autocheckpoint=1")
    with db.transaction(conn):
        with db.one_checkpoint(conn):
            conn.execute("INSERT INTO t VALUES (1)")
        assert conn.execute("PRAGMA wal_autocheckpoint").fetchone() == (1,)
    busy, frames, done = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    assert (busy, frames) == (0, done) and conn.execute("SELECT x FROM t").fetchall() == [(1,)]
    conn.close()


def _main_file_bytes(path: Path) -> int:
    """The database file's own size, the WAL aside: what checkpoints copied into it.  (Not its
    rows: read on its own, ignoring the WAL, the file is only consistent when no checkpoint has
    copied part of a later WAL since, and that read failed on a loaded machine.)"""
    return path.stat().st_size


def test_checkpoint_behind_copies_the_batches_and_keeps_the_callers_connection_from_taking_it(tmp_path: Path) -> None:
    """``one_checkpoint(conn, behind)``: the batches' checkpoint is made by ``behind``; until it
    is done the caller's own commits make none (autocheckpoint 0), then its setting is back."""
    path = tmp_path / "t.sqlite"
    conn = db.connect(path, migrate=False)
    conn.execute("CREATE TABLE t(x)")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    before = _main_file_bytes(path)
    with db.Checkpoints(conn) as behind:
        with db.one_checkpoint(conn, behind):
            for _ in range(3):
                with db.transaction(conn):
                    conn.executemany("INSERT INTO t VALUES (?)", [(os.urandom(512),) for _ in range(2000)])
        assert conn.execute("PRAGMA wal_autocheckpoint").fetchone() == (0,)
        with db.transaction(conn):  # a commit while it runs
            conn.execute("INSERT INTO t VALUES (1)")
    assert conn.execute("PRAGMA wal_autocheckpoint").fetchone() == (1000,)
    assert before < 64 << 10 and _main_file_bytes(path) >= 6000 * 512  # the batches reached the database file
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (6001,)
    conn.close()


def test_a_checkpoint_that_fails_is_logged_and_raises_nothing(tmp_path: Path) -> None:
    """The WAL still holds every commit: the next checkpoint copies them."""
    db.Checkpoints._run(str(tmp_path / "missing" / "t.sqlite"))  # cannot even be opened
