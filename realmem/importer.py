"""/realmem import: the agent splits AGENTS.md / CLAUDE.md into facts through realmem_remember.

``begin`` records which files are being imported and returns the instruction for the agent;
``finish`` marks them imported only if facts were actually stored since (so a failed or
refused import never hides a context file from the prompt).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from realmem.app import Realmem, RealmemError
from realmem.events import types as ev
from realmem.prompt import file_hash

CONTEXT_NAMES = ("AGENTS.md", "CLAUDE.md")
STORED = (ev.MemoryAdded, ev.MemoryEdited, ev.Reinforced)


def candidates(app: Realmem) -> list[Path]:
    dirs = [app.cwd]
    if app.project is not None and app.project.root != app.cwd:
        dirs.append(app.project.root)
    found = []
    for d in dirs:
        for name in CONTEXT_NAMES:
            p = d / name
            if p.is_file() and p not in found:
                found.append(p)
    return found


def begin(app: Realmem, files: list[str]) -> dict[str, Any]:
    paths = [(app.cwd / f).resolve() for f in files] if files else candidates(app)
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise RealmemError(f"not a file: {', '.join(missing)}")
    if not paths:
        return {"prompt": None, "files": [], "text": "No AGENTS.md or CLAUDE.md here to import."}
    key = app.project.key if app.project else None
    app.emit([ev.ImportStarted(key, [str(p) for p in paths])])
    blocks = "\n\n".join(f"<file path=\"{p}\">\n{p.read_text(encoding='utf-8', errors='replace')}\n</file>"
                         for p in paths)
    prompt = (
        "Import these context files into realmem, which replaces them. Split them into small, "
        "self-contained facts and store each with realmem_remember: caption = one-line summary, "
        "content = the fact with exact commands and names, paths = the files or directories it is "
        "about (omit for project-wide facts), scope = shared for team knowledge (the default), "
        "personal for this machine only, global for the user's general preferences. Skip "
        "boilerplate and anything already known. When done, say how many facts you stored.\n\n" + blocks
    )
    return {"prompt": prompt, "files": [str(p) for p in paths],
            "text": f"Importing {', '.join(p.name for p in paths)}: the agent is splitting them into facts."}


def finish(app: Realmem) -> dict[str, Any]:
    key = app.project.key if app.project else None
    row = app.conn.execute(
        "SELECT seq, payload FROM events WHERE type='import_started' AND session IS ? ORDER BY seq DESC LIMIT 1",
        (app.session,)).fetchone()
    if row is None:
        return {"text": "No import is in progress.", "imported": []}
    started, files = row[0], json.loads(row[1])["files"]
    done = app.conn.execute("SELECT count(*) FROM events WHERE type='context_imported' AND seq > ?", (started,)).fetchone()[0]
    if done:
        return {"text": "This import was already finished.", "imported": []}
    stored = app.conn.execute(
        f"SELECT count(*) FROM events WHERE seq > ? AND session IS ? AND type IN "
        f"({','.join('?' * len(STORED))})", (started, app.session, *[t.TYPE for t in STORED])).fetchone()[0]
    if not stored:
        return {"text": "No facts were stored, so the context files stay in the prompt. Run /realmem import again.",
                "imported": []}
    events = []
    for f in files:
        p = Path(f)
        if p.is_file():
            events.append(ev.ContextImported(f, key, file_hash(p.read_text(encoding="utf-8", errors="replace")), stored))
    app.emit(events)
    names = ", ".join(Path(e.path).name for e in events)
    return {"text": f"Imported {names} ({stored} facts stored). realmem now replaces them in the prompt.",
            "imported": [e.path for e in events]}
