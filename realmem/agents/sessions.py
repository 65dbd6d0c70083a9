"""Agent sessions served through hooks: what the Pi adapter does around each session and tool
call, for a client named by ``agent`` (``claude-code``, ``codex``, ``gemini``).  Which hook
event calls which function, and in which JSON shape, is ``realmem.agents.clients``.

- ``session_start``: the ``<realmem>`` section as ``hookSpecificOutput.additionalContext``.
  It is computed once per (agent, session id) and stored, so every later start of that
  session gets the same bytes (the prompt cache depends on it), as the Pi snapshot entry does.
  A ``compact`` or ``clear`` start drops what the model has seen, so the session's shown path
  notes are forgotten and show again.
- ``tool_notes``: ``<realmem-path-notes>`` for the paths a tool touched, by the same
  path-note code as the Pi adapter, once per session (shown ids kept per session id in the
  database).
- ``forget``: a compaction the client reports by its own event; the notes show again.
- ``section_again``: the section once more after such a compaction, for a client that has
  no start event after compacting (Gemini CLI adds it to the next prompt).

Each handler returns the hook's output object, or None when the hook has nothing to say
(the hook then prints nothing).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from realmem.interface import session
from realmem.read import pathnotes, prompt
from realmem.storage import db
from realmem.app import Realmem
from realmem.write.observe import scan_stores

SESSION_DAYS = 30  # a session id unseen this long is dropped with its shown ids
# Kept with the shown note ids: the section is in the context (cleared with them on compaction).
# Memory ids are hex, so this never names a memory.
SECTION_SHOWN = "<section>"


def actor(agent: str, session_id: str | None) -> str:
    return f"{agent}#{session_id}" if session_id else agent


def context(event: str, text: str) -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


def _sid(hook: dict[str, Any]) -> str:
    return str(hook.get("session_id") or "")


def _section(app: Realmem, agent: str, sid: str) -> str:
    """The session's stored section, computed and stored on its first call (inside a transaction)."""
    now = time.time()
    row = app.conn.execute("SELECT section FROM agent_sessions WHERE agent=? AND session=?", (agent, sid)).fetchone()
    if row is not None:
        app.conn.execute("UPDATE agent_sessions SET seen=? WHERE agent=? AND session=?", (now, agent, sid))
        return str(row[0])
    section = prompt.section(app)
    app.conn.execute("INSERT INTO agent_sessions VALUES (?,?,?,?,?,?)", (agent, sid, str(app.cwd), section, now, now))
    old = now - SESSION_DAYS * 86400
    app.conn.execute("DELETE FROM agent_shown WHERE agent=? AND session IN (SELECT session FROM agent_sessions "
                     "WHERE agent=? AND seen < ?)", (agent, agent, old))
    app.conn.execute("DELETE FROM agent_sessions WHERE agent=? AND seen < ?", (agent, old))
    return section


def _shown(app: Realmem, agent: str, sid: str) -> list[str]:
    return [r[0] for r in app.conn.execute("SELECT id FROM agent_shown WHERE agent=? AND session=?", (agent, sid))]


def _mark(app: Realmem, agent: str, sid: str, ids: Iterable[str]) -> None:
    app.conn.executemany("INSERT OR IGNORE INTO agent_shown VALUES (?,?,?)", [(agent, sid, i) for i in ids])


def _unshow(app: Realmem, agent: str, sid: str) -> None:
    app.conn.execute("DELETE FROM agent_shown WHERE agent=? AND session=?", (agent, sid))


def session_start(app: Realmem, agent: str, hook: dict[str, Any], *, event: str = "SessionStart") -> dict[str, Any]:
    sid = _sid(hook)
    source = str(hook.get("source") or "startup")
    notice = None
    if source in ("startup", "resume"):  # a new or resumed session: look at the stores as the Pi adapter does
        scan_stores(app)
        notice = session.start(app)["notification"]
    with db.transaction(app.conn):
        section = _section(app, agent, sid)
        if source in ("compact", "clear"):  # the notes left the context with the old messages
            _unshow(app, agent, sid)
        _mark(app, agent, sid, [SECTION_SHOWN])
    out = context(event, section)
    if notice:
        out["systemMessage"] = notice
    return out


def forget(app: Realmem, agent: str, hook: dict[str, Any]) -> None:
    """The client compacted the session: its path notes and section left the context."""
    with db.transaction(app.conn):
        _unshow(app, agent, _sid(hook))


def section_again(app: Realmem, agent: str, hook: dict[str, Any], *, event: str) -> dict[str, Any] | None:
    """The session's section unless it is in the context already (shown at start, not compacted since)."""
    sid = _sid(hook)
    with db.transaction(app.conn):
        if SECTION_SHOWN in _shown(app, agent, sid):
            return None
        section = _section(app, agent, sid)
        _mark(app, agent, sid, [SECTION_SHOWN])
    return context(event, section)


def tool_notes(app: Realmem, index: pathnotes.NoteIndex, agent: str, hook: dict[str, Any], *, event: str,
               tool_input: Any) -> dict[str, Any] | None:
    """Path notes for ``tool_input`` (the client's input, already mapped to path-like keys)."""
    sid = _sid(hook)
    shown = [i for i in _shown(app, agent, sid) if i != SECTION_SHOWN]
    notes = pathnotes.path_notes(app, index, tool_name=str(hook.get("tool_name") or ""), tool_input=tool_input,
                                 shown=shown)
    if notes.shown:
        with db.transaction(app.conn):
            _mark(app, agent, sid, notes.shown)
    return context(event, notes.text) if notes.text else None
