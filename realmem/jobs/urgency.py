"""Background path-urgency judging (spec: "Urgency is judged when the memory is remembered.
For hand-written or edited memories it is judged in the background ... re-judged whenever the
content or paths change").

A memory needs a judgement when it has specific paths (not just "." / "~") and its urgency
row is missing or was judged for other content or paths (``valid_for != urgency_key``).
"""

from __future__ import annotations

from pathlib import Path

from realmem.clients import EndpointError, EndpointUnavailable
from realmem.events import types as ev
from realmem.events.types import Key
from realmem.gate.judge import judge_urgency, specific_paths
from realmem.projections.urgency import urgency_key
from realmem.jobs.embed import open_home
from realmem.projections.state import Memory
from realmem.logs import get_logger
from realmem.projections import queries

log = get_logger("realmem.jobs.urgency")


def stale(app) -> list[Key]:  # type: ignore[no-untyped-def]
    """Memories with specific paths whose urgency is missing or stale: their keys, the rows
    streamed past (a list of whole memories was every fact of a large store)."""
    return [Key(m.store, m.id) for m, valid_for in queries.memories_with_urgency(app.conn)
            if specific_paths(m.paths) and valid_for != urgency_key(m)]


def judge_one(app, m: Memory, *, source: str = "background") -> bool:  # type: ignore[no-untyped-def]
    """Judge one memory and record it; False if it changed meanwhile (skipped)."""
    answer = judge_urgency(app.config, m.caption, m.content, m.paths)
    # The judgement records the content+paths key it is valid for, so a memory edited
    # meanwhile (here or by hand, seen by a later scan) is simply judged again.
    now = app.memory((m.store, m.id))
    if now is None or urgency_key(now) != urgency_key(m):
        return False
    app.emit([ev.UrgencyJudged(m.store, m.id, urgency_key(m), answer.score, dict(answer.probabilities),
                               answer.confidence, source, {"path_urgency": dict(answer.raw)})])
    return True


def run_urgency(home: Path) -> int:
    """Judge every stale memory; returns how many were judged."""
    app = open_home(home)
    done = 0
    try:
        if not app.config["semif.url"]:
            return 0
        for key in stale(app):
            m = app.memory(key)  # read when judged: one forgotten or moved to the store root meanwhile is left
            if m is None or not specific_paths(m.paths):
                continue
            try:
                if judge_one(app, m):
                    done += 1
            except (EndpointUnavailable, EndpointError) as exc:
                log.warning("urgency.failed", error=str(exc))
                break
        return done
    finally:
        app.close()

