"""Claude Code hooks: what the Pi adapter does around each session and tool call, in Claude
Code's documented hook JSON.

- ``SessionStart`` (source ``startup``, ``resume``, ``clear`` or ``compact``): the
  ``<realmem>`` section as ``hookSpecificOutput.additionalContext``.  It is computed once per
  Claude Code session id and stored, so every later SessionStart of that session gets the same
  bytes (the prompt cache depends on it), as the Pi snapshot entry does.  ``compact`` and
  ``clear`` drop what the model has seen, so the session's shown path notes are forgotten and
  show again.
- ``PostToolUse``: ``<realmem-path-notes>`` for the paths in ``tool_input``, by the same
  path-note code as the Pi adapter, once per session (shown ids kept per session id in the
  database).

Each handler takes the hook's input object and returns the output object, or None when the
hook has nothing to say (the hook then prints nothing).
"""

from __future__ import annotations

import time
from typing import Any

from realmem.interface import session
from realmem.read import pathnotes, prompt
from realmem.storage import db
from realmem.app import Realmem
from realmem.write.observe import scan_stores

AGENT = "claude-code"
SESSION_DAYS = 30  # a session id unseen this long is dropped with its shown ids
OWN_TOOLS = "mcp__realmem__"  # realmem's own MCP tools: no notes about itself


def actor(session_id: str | None) -> str:
    return f"{AGENT}#{session_id}" if session_id else AGENT


def _context(event: str, text: str) -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


def session_start(app: Realmem, hook: dict[str, Any]) -> dict[str, Any]:
    sid = str(hook.get("session_id") or "")
    source = str(hook.get("source") or "startup")
    now = time.time()
    notice = None
    if source in ("startup", "resume"):  # a new or resumed session: look at the stores as the Pi adapter does
        scan_stores(app)
        notice = session.start(app)["notification"]
    row = app.conn.execute("SELECT section FROM agent_sessions WHERE agent=? AND session=?", (AGENT, sid)).fetchone()
    with db.transaction(app.conn):
        if row is None:
            section = prompt.section(app)
            app.conn.execute("INSERT INTO agent_sessions VALUES (?,?,?,?,?,?)",
                             (AGENT, sid, str(app.cwd), section, now, now))
            app.conn.execute(
                "DELETE FROM agent_shown WHERE agent=? AND session IN (SELECT session FROM agent_sessions "
                "WHERE agent=? AND seen < ?)", (AGENT, AGENT, now - SESSION_DAYS * 86400))
            app.conn.execute("DELETE FROM agent_sessions WHERE agent=? AND seen < ?", (AGENT, now - SESSION_DAYS * 86400))
        else:
            section = row[0]
            app.conn.execute("UPDATE agent_sessions SET seen=? WHERE agent=? AND session=?", (now, AGENT, sid))
        if source in ("compact", "clear"):  # the notes left the context with the old messages
            app.conn.execute("DELETE FROM agent_shown WHERE agent=? AND session=?", (AGENT, sid))
    out = _context("SessionStart", section)
    if notice:
        out["systemMessage"] = notice
    return out


def post_tool_use(app: Realmem, index: pathnotes.NoteIndex, hook: dict[str, Any]) -> dict[str, Any] | None:
    tool = str(hook.get("tool_name") or "")
    if tool.startswith(OWN_TOOLS):
        return None
    sid = str(hook.get("session_id") or "")
    shown = [r[0] for r in app.conn.execute("SELECT id FROM agent_shown WHERE agent=? AND session=?", (AGENT, sid))]
    notes = pathnotes.path_notes(app, index, tool_name=tool, tool_input=hook.get("tool_input"), shown=shown)
    if notes.shown:
        with db.transaction(app.conn):
            app.conn.executemany("INSERT OR IGNORE INTO agent_shown VALUES (?,?,?)",
                                 [(AGENT, sid, i) for i in notes.shown])
    return _context("PostToolUse", notes.text) if notes.text else None
