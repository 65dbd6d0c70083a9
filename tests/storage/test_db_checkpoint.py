"""``db.one_checkpoint`` inside an outer transaction, where SQLite refuses a checkpoint (a
scan's batches between checkpoints: tests/write/test_observe_batches.py)."""

from __future__ import annotations

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
