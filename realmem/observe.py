"""Noticing fact files changed outside realmem (hand edits, git pull, another clone).

A scan compares each store directory with the memories table and records what differs as
``FileObserved`` / ``FileProblem`` events carrying the file's content, so the change is
projected (and replayable) like any other.  A bad file is reported, never fatal.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from realmem import ids, memories
from realmem.events import types as ev
from realmem.events.store import now_iso
from realmem.projections import files
from realmem.safety import scan_memory

if TYPE_CHECKING:
    from realmem.app import Realmem
    from realmem.project import Project

logger = structlog.get_logger("realmem.observe")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def scan_stores(app: "Realmem", stores: list[str] | None = None) -> list[ev.Envelope]:
    """Scan the visible stores; returns the events recorded."""
    out: list[ev.Envelope] = []
    for store in stores or app.visible_stores():
        with app.lock.hold(app.config["gate.lockWaitSeconds"]):
            app.catch_up_files()
            events, seen = _scan_store(app, store)
            if events:
                out.extend(app.emit(events))
            with app.conn:
                _remember_stats(app, store, seen)
    return out


def _remember_stats(app: "Realmem", store: str, seen: dict[str, tuple[int, int] | None]) -> None:
    """Record the size/mtime of files the scan read and accepted (None: forget the entry), so
    the next scan skips them; files realmem writes itself are recorded by ``emit``."""
    for name, st in seen.items():
        if st is None:
            app.conn.execute("DELETE FROM file_stats WHERE store=? AND file=?", (store, name))
        else:
            app.conn.execute(
                "INSERT INTO file_stats VALUES (?,?,?,?) ON CONFLICT(store, file) DO UPDATE SET "
                "mtime_ns=excluded.mtime_ns, size=excluded.size", (store, name, *st))


def _scan_store(app: "Realmem", store: str) -> tuple[list[ev.Event], dict[str, tuple[int, int] | None]]:
    d = app.store_dir(store)
    known = {r[0]: (r[1], r[2]) for r in app.conn.execute("SELECT id, file, text FROM memories WHERE store=?", (store,))}
    by_file = {f: mem_id for mem_id, (f, _) in known.items()}
    stats = {r[0]: (r[1], r[2]) for r in app.conn.execute("SELECT file, mtime_ns, size FROM file_stats WHERE store=?", (store,))}
    problems = {r[0]: r[1] for r in app.conn.execute("SELECT file, digest FROM problems WHERE store=?", (store,))}
    events: list[ev.Event] = []
    seen_ids: dict[str, str] = {}
    fine: set[str] = set()  # names that read as a fact this time
    new_stats: dict[str, tuple[int, int] | None] = {}
    if not d.is_dir():
        entries: list[os.DirEntry[str]] = []
    else:
        entries = sorted((e for e in os.scandir(d) if e.name.endswith(".md") and not e.name.startswith(".")),
                         key=lambda e: (e.name not in by_file, e.name))
    root = d.resolve() if d.is_dir() else d

    def problem(name: str, kind: str, message: str, line: int | None, digest: str) -> None:
        if problems.get(name) != digest:
            events.append(ev.FileProblem(store, name, kind, message, line, digest))
            logger.warning("fact file problem", store=store, file=name, problem=kind, line=line)

    for entry in entries:
        name = entry.name
        if entry.is_symlink():
            target = Path(entry.path).resolve()
            if not target.is_relative_to(root):
                problem(name, "symlink-escape", f"{name} links outside the store ({target}); ignored", None, _digest(str(target)))
                continue
        try:
            st = entry.stat()
        except OSError as exc:
            problem(name, "unreadable", f"cannot read {name}: {exc.strerror}", None, _digest(str(exc)))
            continue
        mem_id = by_file.get(name)
        stamp = (st.st_mtime_ns, st.st_size)
        if mem_id is not None and stats.get(name) == stamp:
            seen_ids[mem_id] = name
            fine.add(name)
            continue
        if st.st_size > files.MAX_FILE_BYTES:
            problem(name, "unreadable", f"{name} is larger than {files.MAX_FILE_BYTES} bytes; ignored", None, _digest(str(st.st_size)))
            continue
        try:
            with open(entry.path, encoding="utf-8") as fh:
                text = fh.read()
        except (OSError, UnicodeDecodeError) as exc:
            problem(name, "unreadable", f"cannot read {name}: {exc}", None, _digest(repr(exc)))
            if mem_id is not None:
                seen_ids[mem_id] = name  # keep the last good version
            continue
        try:
            parsed = files.parse(text)
        except files.FactFileError as exc:
            problem(name, "malformed", f"{name}: {exc}", exc.line, _digest(text))
            if mem_id is not None:
                seen_ids[mem_id] = name
            continue
        if parsed.id is None:
            parsed_id = ids.new_id()  # a hand-written fact: adopt it with a fresh id
            now = now_iso()
            text = files.render(id=parsed_id, caption=parsed.caption, paths=parsed.paths or [memories.default_path(store)],
                                created=parsed.created or now, updated=parsed.updated or now,
                                content=parsed.content, previous=text)
            parsed = files.parse(text)
        assert parsed.id is not None
        if parsed.id in seen_ids:
            problem(name, "duplicate-id", f"{name} repeats the id of {seen_ids[parsed.id]}; ignored", 2, _digest(text))
            continue
        seen_ids[parsed.id] = name
        fine.add(name)
        current = known.get(parsed.id)
        if current is not None and current == (name, text):
            new_stats[name] = stamp
            continue
        now = now_iso()
        fields = ev.Fields(parsed.caption, parsed.content, parsed.paths or [memories.default_path(store)],
                           parsed.created or now, parsed.updated or now, name, text)
        result, _, _ = scan_memory(parsed.caption, parsed.content)
        quarantine = None if result.ok else result.reason()
        events.append(ev.FileObserved(store, parsed.id, "changed" if current else "added", fields, quarantine))
        new_stats[name] = stamp
        if quarantine:
            logger.warning("fact file quarantined", store=store, file=name, reason=quarantine)
    for mem_id, (name, _) in known.items():
        if mem_id not in seen_ids:
            events.append(ev.FileObserved(store, mem_id, "deleted"))
            new_stats[name] = None
    present = {e.name for e in entries}
    handled = {e.file for e in events if isinstance(e, ev.FileProblem)}
    handled.update(e.fields.file for e in events if isinstance(e, ev.FileObserved) and e.fields is not None)
    handled.update(known[e.id][0] for e in events if isinstance(e, ev.FileObserved) and e.fields is None)
    for name in problems:
        if name not in handled and (name not in present or name in fine):
            events.append(ev.FileProblem(store, name, "resolved", f"{name} is gone or readable again", None, ""))
    return events, new_stats


def migrate_path_store(app: "Realmem", project: "Project") -> None:
    """After the first commit, move personal memories from the path key to the git key."""
    old_store = f"personal:{project.path_key}"
    rows = app.conn.execute("SELECT id FROM memories WHERE store=?", (old_store,)).fetchall()
    if not rows:
        return
    new_store = project.personal_store
    events: list[ev.Event] = []
    taken = app.taken_names(new_store)
    for (mem_id,) in rows:
        mem = app.memory((old_store, mem_id))
        assert mem is not None
        name = mem.file if mem.file not in taken else files.file_name(mem.caption, mem_id, taken)
        taken.add(name)
        fields = ev.Fields(mem.caption, mem.content, mem.paths, mem.created, mem.updated, name, mem.text)
        events.append(ev.MemoryMoved(old_store, mem_id, new_store, fields, "project-key"))
    app.emit(events)
    logger.info("personal memories re-keyed", old=old_store, new=new_store, count=len(events))
    old_dir = app.store_dir(old_store)
    try:
        (old_dir / "project.json").unlink(missing_ok=True)
        old_dir.rmdir()
    except OSError:
        pass
