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
from realmem.gate.judge import judge_urgency, specific_paths, urgency_key
from realmem.jobs.embed import open_home
from realmem.projections.state import Memory
from realmem.projections.tables import MEMORY_COLS, memory_from_row
from realmem.logs import get_logger

log = get_logger("realmem.jobs.urgency")


def stale(app) -> list[Memory]:  # type: ignore[no-untyped-def]
    """Memories with specific paths whose urgency is missing or stale."""
    cols = ", ".join("m." + c.strip() for c in MEMORY_COLS.split(","))
    rows = app.conn.execute(
        f"SELECT {cols}, u.valid_for FROM memories m LEFT JOIN urgency u ON u.store = m.store AND u.id = m.id "
        "WHERE m.quarantined IS NULL")
    out = []
    for row in rows:
        m = memory_from_row(row[:-1])
        if specific_paths(m.paths) and row[-1] != urgency_key(m):
            out.append(m)
    return out


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
        for m in stale(app):
            try:
                if judge_one(app, m):
                    done += 1
            except (EndpointUnavailable, EndpointError) as exc:
                log.warning("urgency.failed", error=str(exc))
                break
        return done
    finally:
        app.close()

