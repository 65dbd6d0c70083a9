"""The append-only event log in SQLite.

``append`` inserts inside the caller's transaction (so an event and the table projections it
drives commit together); ``read`` streams envelopes back in sequence order.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING

import apsw
import orjson

from realmem.events import types as ev

if TYPE_CHECKING:
    from realmem.events.types import Envelope, Event


def now_iso() -> str:
    """UTC time with milliseconds and a Z, the format the fact files use."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


_INSERT = "INSERT INTO events(time, type, memory_id, store, pid, session, payload) VALUES (?,?,?,?,?,?,?)"


def _row(event: Event, t: str, pid: int, session: str | None) -> tuple:
    payload = orjson.dumps(ev.to_payload(event), option=orjson.OPT_NON_STR_KEYS).decode("utf-8")
    return t, event.TYPE, event.memory_id, event.store_id, pid, session, payload


def append(conn: apsw.Connection, event: Event, *, session: str | None = None, time: str | None = None) -> Envelope:
    t = time or now_iso()
    pid = os.getpid()
    conn.execute(_INSERT, _row(event, t, pid, session))
    return ev.Envelope(conn.last_insert_rowid(), t, pid, session, event)


def append_many(conn: apsw.Connection, events: Sequence[Event], *, session: str | None = None) -> list[Envelope]:
    """``append`` for a batch that commits together: one statement, and one time for all."""
    t = now_iso()
    pid = os.getpid()
    seqs = [seq for (seq,) in conn.executemany(_INSERT + " RETURNING seq", [_row(e, t, pid, session) for e in events])]
    return [ev.Envelope(seq, t, pid, session, e) for seq, e in zip(seqs, events, strict=True)]


def _envelope(row: tuple) -> Envelope:
    seq, t, type_name, pid, session, payload = row
    # orjson: decoding payloads is most of replay's fold time (the budget: >= 20k events/s).
    return ev.Envelope(seq, t, pid, session, ev.from_payload(type_name, orjson.loads(payload)))


_COLS = "seq, time, type, pid, session, payload"


def read(conn: apsw.Connection, since: int = 0, *, until: int | None = None,
         types: Sequence[str] | None = None) -> Iterator[Envelope]:
    """Envelopes with seq > since (and <= until; of ``types`` only), in order, decoded one at a
    time as the caller iterates."""
    where, args = "seq > ?", [since]
    if until is not None:
        where, args = where + " AND seq <= ?", [*args, until]
    if types is not None:
        where, args = where + f" AND type IN ({','.join('?' * len(types))})", [*args, *types]
    cur = conn.execute(f"SELECT {_COLS} FROM events WHERE {where} ORDER BY seq", args)
    for row in cur:
        yield _envelope(row)


def for_memory(conn: apsw.Connection, memory_id: str) -> list[Envelope]:
    """Every event naming this memory: its own events plus decisions and hits that touch it."""
    rows = conn.execute(
        f"SELECT {_COLS} FROM events WHERE memory_id = ? OR (type IN ('recall_hit','path_notes_shown') "
        "AND instr(payload, ?) > 0) OR (type = 'memory_edited' AND instr(payload, ?) > 0) ORDER BY seq",
        (memory_id, memory_id, memory_id),
    )
    return [_envelope(r) for r in rows]


def own(conn: apsw.Connection, memory_id: str) -> list[Envelope]:
    """Only the events that name this memory as theirs (uses the memory_id index)."""
    rows = conn.execute(f"SELECT {_COLS} FROM events WHERE memory_id = ? ORDER BY seq", (memory_id,))
    return [_envelope(r) for r in rows]


def get(conn: apsw.Connection, seq: int) -> Envelope | None:
    row = conn.execute(f"SELECT {_COLS} FROM events WHERE seq = ?", (seq,)).fetchone()
    return _envelope(row) if row else None


def last_seq(conn: apsw.Connection) -> int:
    return conn.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()[0]
