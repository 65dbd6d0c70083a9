"""Jobs follow the log: which background work each event calls for.

The follower keeps its own position in the log (the ``jobs`` row of ``projection_state``).
``follow`` reads the events after it, maps each to the work it calls for (embed a memory's
new text, judge the urgency of its paths, retry a queued candidate), sends Huey the wake-ups
and advances the position in one transaction: if a wake-up cannot be sent the position stays
and the next ``follow`` tries again.  A crash after the send and before the commit only sends
a wake-up twice, which costs nothing (each task re-derives its work from the database).

Every front end follows after a command (rpc child, CLI, MCP and hook servers) and a running
worker follows between tasks, so any writer, in any process (remember, edit, move, an outside
file change seen by a scan, import, consolidate, the worker's own retries), gets its work
queued within a moment; a starting worker re-derives everything from the database.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import apsw

from realmem.storage import db
from realmem.config import Config
from realmem.events import log
from realmem.events import types as ev
from realmem.gate import availability
from realmem.jobs import queue
from realmem.projections import index, projector, queries
from realmem.projections.urgency import urgency_key
from realmem.logs import get_logger

if TYPE_CHECKING:
    from realmem.app import Realmem

logger = get_logger("realmem.jobs")

POSITION = "jobs"
# The stored type names of the events that can call for work: a memory's text or paths changed,
# or a candidate was queued.  Names, not classes: every command asks whether its events call for
# work, and most append none, so the event classes need not be made (test_policy checks them).
WORK_TYPES = ("memory_added", "memory_edited", "memory_moved", "file_observed", "candidate_queued",
              "candidate_retried")
KINDS = ("embed", "urgency", "retry")
# Events that call for nothing (a path note shown after every tool call) move the position only
# now and then, so following after each call stays a read.
ADVANCE_AFTER = 1000


def position(conn: apsw.Connection) -> int:
    return projector.position(conn, POSITION)


def _set_position(conn: apsw.Connection, seq: int) -> None:
    conn.execute("INSERT INTO projection_state(name, seq) VALUES (?,?) "
                 "ON CONFLICT(name) DO UPDATE SET seq=excluded.seq", (POSITION, seq))


def possible_work(config: Config) -> set[str]:
    """The kinds of work the configured endpoints allow (none without an endpoint)."""
    return (({"embed"} if config.embedding_enabled() else set()) | ({"urgency"} if config["semif.url"] else set())
            | ({"retry"} if availability.judge(config) else set()))


def work_for(conn: apsw.Connection, config: Config, events: Iterable[ev.Event], possible: set[str]) -> set[str]:
    """The kinds of work ``events`` call for, given what is already done: a memory whose vector
    is cached needs no embedding, one whose urgency is valid for its content and paths no
    judgement; nothing is asked of an endpoint that is not configured (``possible``, the
    caller's ``possible_work``).  Stops reading ``events`` once every possible kind is wanted."""
    from realmem.gate import judge  # lazy: it loads the endpoint clients (httpx); `realmem status` must not
    wanted: set[str] = set()
    fingerprint = index.active_fingerprint(conn) if "embed" in possible else None
    for e in events:
        if wanted == possible:
            break
        if isinstance(e, (ev.CandidateQueued, ev.CandidateRetried)):
            if "retry" in possible:
                wanted.add("retry")
            continue
        store = e.to_store if isinstance(e, ev.MemoryMoved) else e.store
        m = queries.memory(conn, (store, e.id))
        if m is None:  # deleted, or changed again and moved on since: a later event says so
            continue
        if "embed" in possible and (not fingerprint or index.cache_get(conn, m.hash, fingerprint) is None):
            wanted.add("embed")
        if "urgency" in possible and judge.specific_paths(m.paths):
            urgency = queries.urgency_score(conn, (m.store, m.id))
            if urgency is None or urgency[0] != urgency_key(m):
                wanted.add("urgency")
    return wanted


def follow(conn: apsw.Connection, home: Path, config: Config) -> set[str]:
    """Queue the work the events after the follower's position call for and advance it; returns
    the kinds of work sent.  Only reads unless an event since calls for work."""
    since, until = position(conn), log.last_seq(conn)
    if until <= since:
        return set()
    relevant = conn.execute(f"SELECT 1 FROM events WHERE seq > ? AND type IN ({','.join('?' * len(WORK_TYPES))}) "
                            "LIMIT 1", (since, *WORK_TYPES)).fetchone()
    if relevant is None and until - since < ADVANCE_AFTER:
        return set()
    with db.transaction(conn):
        since, until = position(conn), log.last_seq(conn)  # again: another process may have followed
        # Streamed, and not read at all when no endpoint is configured: a first follow after a
        # large import would otherwise decode every fact of the log at once.
        possible = possible_work(config)  # once: with the chat judge it reads the bridge files
        events = (env.event for env in log.read(conn, since, until=until, types=WORK_TYPES)) \
            if possible else iter(())
        wanted = work_for(conn, config, events, possible)
        for kind in KINDS:
            if kind in wanted and not queue.enqueue(home, kind):
                raise queue.EnqueueFailed(kind)  # roll the position back: the next follow sends it
        _set_position(conn, until)
    return wanted


def follow_app(app: "Realmem") -> set[str]:
    """``follow`` for a front end's app; starts a worker when work was sent.  Never fails the
    command that came before it: the worker re-derives whatever a failure here left."""
    try:
        wanted = follow(app.conn, app.home, app.config)
        if wanted and app.config["worker.autostart"]:
            queue.ensure_worker(app)
        return wanted
    except Exception as exc:
        logger.warning("jobs.follow_failed", error=f"{type(exc).__name__}: {exc}")
        return set()
