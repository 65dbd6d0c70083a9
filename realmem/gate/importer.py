"""/realmem import: the agent splits AGENTS.md / CLAUDE.md into facts through realmem_remember.

``begin`` records which files are being imported and returns the instruction for the agent;
``finish`` marks them imported only if facts were actually stored since (so a failed or
refused import never hides a context file from the prompt).

A context file goes to the chat model whole, so one whose real path leaves the project (or,
for the global one, the user's Pi directory) is not read: a committed ``AGENTS.md`` linked to
``~/.ssh/id_ed25519`` would send the key.  ``screen`` decides it, for both import paths.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from collections.abc import Callable
from typing import Any

from realmem.app import Realmem, RealmemError
from realmem.events import types as ev
from realmem.logs import get_logger
from realmem.stores import imported as imported_mark
from realmem.stores.pidir import is_global_context, pi_dir
from realmem.stores.project import SCOPES
from realmem.read.prompt import file_hash, imported
from realmem.words import count
from realmem.clients.errors import EndpointError
from realmem.clients.errors import EndpointUnavailable
from realmem.clients.chat import chat_client
from realmem.gate.remember import Outcome, remember

# The gate's actions after which the fact is in a store.
KEPT_ACTIONS = (ev.Action.ADD, ev.Action.EDIT, ev.Action.MERGE, ev.Action.REINFORCE, ev.Action.WIDEN)

CONTEXT_NAMES = ("AGENTS.md", "CLAUDE.md")
logger = get_logger(__name__)
STORED = (ev.MemoryAdded, ev.MemoryEdited, ev.Reinforced)


def default_scope(app: Realmem, path: Path) -> str | None:
    """The scope a fact from ``path`` gets when none is given: global for the global file,
    shared for a project's file, the judge's choice outside a project."""
    return "global" if is_global_context(path) else "shared" if app.project is not None else None


def refusal(app: Realmem, path: Path) -> str | None:
    """Why the context file ``path`` (as named: its links not resolved) is not read, or None.
    Named inside the project (no project: the cwd) or the Pi directory, its real path must stay
    there; named elsewhere, it must not be a link leading out of both."""
    named = Path(os.path.abspath(path))
    try:
        real = named.resolve(strict=True)
    except (OSError, RuntimeError) as exc:  # a symlink loop (RuntimeError on Python 3.11)
        return f"{named} cannot be resolved ({exc})"
    bounds = [(app.project.root if app.project else app.cwd, "the project"), (pi_dir(), "your Pi directory")]
    within = [(b.resolve(), label) for b, label in bounds if named.is_relative_to(b) or named.is_relative_to(b.resolve())]
    if within:
        bound, label = within[0]
        if real.is_relative_to(bound):
            return None
        return f"{named.name} is not read: it is a symlink to {real}, outside {label}"
    if real == named or any(real.is_relative_to(b.resolve()) for b, _ in bounds):
        return None
    return f"{named.name} is not read: it is a symlink to {real}, outside the project"


def screen(app: Realmem, paths: list[Path]) -> tuple[list[Path], list[str]]:
    """(the files that may be read, why each other one is not)."""
    kept, refused = [], []
    for p in paths:
        why = refusal(app, p)
        if why is None:
            kept.append(p)
        else:
            refused.append(why)
    return kept, refused


def named_files(app: Realmem, files: list[str]) -> list[Path]:
    """The files the user named, absolute but with their links kept (``screen`` judges them)."""
    return [Path(os.path.abspath(app.cwd / f)) for f in files]


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
    own = pi_dir() / "AGENTS.md"  # last: the project's own files first
    if own.is_file() and own not in found:
        found.append(own)
    return found


def unchanged(app: Realmem, paths: list[Path]) -> list[Path]:
    """The files already imported and unchanged since: importing them again would only repeat facts."""
    return [p for p in paths if imported(app, str(p), p.read_text(encoding="utf-8", errors="replace"))]


def already_text(paths: list[Path], command: str) -> str:
    names = ", ".join(p.name for p in paths)
    verb = "is" if len(paths) == 1 else "are"
    return f"{names} {verb} already imported and unchanged since; nothing to do ({command} --force imports again)."


def _instruction(app: Realmem, path: Path, number: int, of: int) -> str:
    """The agent's instruction for one file: facts from a project's context file go to the
    shared store unless the agent says otherwise, and a sub-directory's file is about that
    directory (the defaults ``remember_defaults`` applies while the import runs)."""
    where = _file_dir(app, path)
    about = (f"paths default to {where} (this file's directory); give narrower ones where a fact is about "
             f"particular files" if where else "paths = the files or directories it is about (omit for "
             "project-wide facts)")
    part = f" (file {number} of {of}; the others follow one at a time)" if of > 1 else ""
    scopes = ("This is the user's global context file, read in every project: leave scope out, so each "
              "fact is stored global; use scope shared only for a fact about this project alone."
              if is_global_context(path) else
              "Leave scope out for team knowledge: it is stored shared, for everyone who clones the project. "
              "Use scope personal for this machine only, global only for the user's general preferences.")
    return (
        f"Import this context file into realmem, which replaces it{part}. Split it into small, "
        "self-contained facts and store each with realmem_remember: caption = one-line summary, "
        f"content = the fact with exact commands and names, {about}. {scopes} Skip boilerplate and "
        "anything already known. When done, say how many facts you stored.\n\n"
        f"<file path=\"{path}\">\n{path.read_text(encoding='utf-8', errors='replace')}\n</file>"
    )


def _file_dir(app: Realmem, path: Path) -> str | None:
    """A context file's directory relative to the project root, when it is below the root."""
    if app.project is None or not path.parent.is_relative_to(app.project.root) or path.parent == app.project.root:
        return None
    return path.parent.relative_to(app.project.root).as_posix()


def begin(app: Realmem, files: list[str], force: bool = False) -> dict[str, Any]:
    paths = named_files(app, files) if files else candidates(app)
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise RealmemError(f"not a file: {', '.join(missing)}")
    paths, refused = screen(app, paths)
    if refused and files:  # the user named it: refuse the command, read nothing
        raise RealmemError("; ".join(refused))
    if not paths:
        text = "; ".join(refused) + "." if refused else "No AGENTS.md or CLAUDE.md here to import."
        return {"prompt": None, "files": [], "refused": refused, "text": text}
    paths = [p.resolve() for p in paths] if files else paths
    skipped = [] if force else unchanged(app, paths)
    if skipped == paths:
        return {"prompt": None, "files": [], "skipped": [str(p) for p in skipped],
                "text": already_text(skipped, "/realmem import")}
    paths = [p for p in paths if p not in skipped]
    key = app.project.key if app.project else None
    app.emit([ev.ImportStarted(key, [str(p) for p in paths])])
    # One file a run: what the agent stores during a run belongs to that file, so each file is
    # marked imported only when facts from it were stored (``finish`` hands over the next).
    text = f"Importing {', '.join(p.name for p in paths)}: the agent is splitting them into facts."
    if skipped:
        text += f" Skipped {', '.join(p.name for p in skipped)}: already imported and unchanged."
    if refused:
        text += " " + "; ".join(refused) + "."
    return {"prompt": _instruction(app, paths[0], 1, len(paths)), "files": [str(p) for p in paths],
            "skipped": [str(p) for p in skipped], "refused": refused, "text": text}


def _in_progress(app: Realmem) -> tuple[int, list[str], int] | None:
    """(seq, files still to import, how many files the import began with) of this session's
    running import: the latest ImportStarted not followed by an ImportEnded."""
    row = app.conn.execute(
        "SELECT seq, type, payload FROM events WHERE type IN ('import_started', 'import_ended') AND session IS ? "
        "ORDER BY seq DESC LIMIT 1", (app.session,)).fetchone()
    if row is None or row[1] != "import_started":
        return None
    files = json.loads(row[2])["files"]
    first = app.conn.execute(
        "SELECT payload FROM events WHERE type='import_started' AND session IS ? AND seq > coalesce("
        "(SELECT max(seq) FROM events WHERE type='import_ended' AND session IS ?), 0) ORDER BY seq LIMIT 1",
        (app.session, app.session)).fetchone()
    return row[0], files, len(json.loads(first[0])["files"]) if first else len(files)


def remember_defaults(app: Realmem) -> tuple[str, list[str]] | None:
    """(scope, paths) a fact gets, when the agent leaves them out, while this session imports a
    project context file: shared, and the file's directory for a sub-directory's file."""
    running = _in_progress(app)
    if running is None or not running[1]:
        return None
    path = Path(running[1][0])
    scope = default_scope(app, path)
    if scope is None:
        return None
    where = _file_dir(app, path)
    return scope, [where] if where else []


def _mark_shared(app: Realmem, path: Path, digest: str) -> None:
    """Facts from ``path`` went to the shared store: record the import there too, so a
    teammate's clone strips the file once it has pulled them (``stores/imported.py``)."""
    if app.project is not None and not is_global_context(path):
        try:
            imported_mark.mark(app.project.root, path, digest)
        except OSError as exc:  # the import itself is recorded; only teammates miss the strip
            logger.warning("import marker not written", path=str(path), error=str(exc))


def finish(app: Realmem) -> dict[str, Any]:
    key = app.project.key if app.project else None
    running = _in_progress(app)
    if running is None:
        last = app.conn.execute("SELECT 1 FROM events WHERE type='import_ended' AND session IS ? LIMIT 1",
                                (app.session,)).fetchone()
        return {"text": "This import was already finished." if last else "No import is in progress.",
                "imported": [], "prompt": None}
    started, files, total = running
    current, rest = Path(files[0]), files[1:]
    stored = app.conn.execute(
        f"SELECT count(*) FROM events WHERE seq > ? AND session IS ? AND type IN "
        f"({','.join('?' * len(STORED))})", (started, app.session, *[t.TYPE for t in STORED])).fetchone()[0]
    events: list[ev.Event] = []
    shared = app.conn.execute(
        f"SELECT count(*) FROM events WHERE seq > ? AND session IS ? AND store IS ? AND type IN "
        f"({','.join('?' * len(STORED))})",
        (started, app.session, app.project.shared_store if app.project else None, *[t.TYPE for t in STORED])).fetchone()[0]
    if stored and current.is_file():
        digest = file_hash(current.read_text(encoding="utf-8", errors="replace"))
        events.append(ev.ContextImported(str(current), key, digest, stored))
        if shared:
            _mark_shared(app, current, digest)
        text = (f"Imported {current.name} ({count(stored, 'fact')} stored). realmem now replaces it in the prompt.")
    elif current.is_file() and unchanged(app, [current]) == [current]:  # a forced re-import of a file realmem replaces
        text = f"No new facts were stored; {current.name} stays imported from the earlier import."
    else:
        text = f"No facts were stored from {current.name}, so it stays in the prompt. Run /realmem import again."
    if rest:
        events.append(ev.ImportStarted(key, rest))
        text += f" Next: {Path(rest[0]).name}."
    else:
        events.append(ev.ImportEnded(key))
    app.emit(events)
    nxt = Path(rest[0]) if rest else None
    return {"text": text, "imported": [str(current)] if stored else [],
            "prompt": _instruction(app, nxt, total - len(rest) + 1, total) if nxt and nxt.is_file() else None}


SPLIT_PROMPT = (
    "Split this project context file into small, self-contained, durable facts for a coding "
    "agent's memory. Skip boilerplate. For each fact give a one-line caption, the content (exact "
    "commands and names), the paths it is about (files or directories relative to the project "
    "root; [] for project-wide facts) and the scope (shared for team knowledge, personal for this "
    "machine only, global for general user preferences). Reply with JSON only: "
    '{"facts": [{"caption": "...", "content": "...", "paths": [], "scope": "shared"}]}'
)


def import_headless(app: Realmem, files: list[str], progress=None,  # type: ignore[no-untyped-def]
                    force: bool = False, *, word: Callable[[Outcome], str]) -> dict[str, Any]:
    """`realmem import` without Pi: the configured chat model (rewriter endpoint, or the Pi
    bridge while a session runs) splits each file; every fact goes through the remember gate.
    Files already imported and unchanged are skipped unless ``force``.  ``word`` words each
    fact's outcome for the report (``interface.render.outcome_text``: the gate holds no wording)."""

    paths = named_files(app, files) if files else candidates(app)
    if not paths:
        raise RealmemError("no AGENTS.md or CLAUDE.md here to import")
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise RealmemError(f"not a file: {', '.join(missing)}")
    paths, refused = screen(app, paths)
    if refused and (files or not paths):
        raise RealmemError("; ".join(refused))
    paths = [p.resolve() for p in paths] if files else paths
    skipped = [] if force else unchanged(app, paths)
    report: dict[str, Any] = {"files": [], "stored": 0, "outcomes": [], "skipped": [str(p) for p in skipped],
                              "refused": refused}
    paths = [p for p in paths if p not in skipped]
    if not paths:
        return report
    client = chat_client(app)
    if not client.configured:
        raise RealmemError("importing without Pi needs a chat model: set rewriter.url (realmem settings set "
                           "rewriter.url URL), or run /realmem import inside Pi")
    key = app.project.key if app.project else None
    try:
        for p in paths:
            text = p.read_text(encoding="utf-8", errors="replace")
            try:
                reply = client.complete_json([{"role": "system", "content": SPLIT_PROMPT},
                                              {"role": "user", "content": f"File {p.name}:\n\n{text}"}])
            except (EndpointUnavailable, EndpointError) as exc:
                raise RealmemError(f"the chat model could not split {p.name}: {exc}") from None
            facts = reply.get("facts")
            if not isinstance(facts, list):  # another shape is the model's mistake, not "no facts"
                raise RealmemError(f'the chat model could not split {p.name}: its reply has no "facts" list')
            facts = [f for f in facts if isinstance(f, dict)]
            stored = shared = 0
            where = _file_dir(app, p)
            for i, f in enumerate(facts, 1):
                try:
                    out = remember(app, str(f.get("caption", "")), str(f.get("content", "")),
                                   scope=f.get("scope") if f.get("scope") in SCOPES else default_scope(app, p),
                                   paths=[str(x) for x in f.get("paths") or []] or ([where] if where else []),
                                   user_requested=True, source="import")
                except RealmemError as exc:  # one malformed fact from the model must not lose the others
                    report["outcomes"].append(f"Skipped a fact from {p.name}: {exc}")
                else:
                    report["outcomes"].append(word(out))
                    stored += out.action in KEPT_ACTIONS
                    shared += out.action in KEPT_ACTIONS and app.project is not None and \
                        out.memory is not None and out.memory.store == app.project.shared_store
                if progress:
                    progress(i, len(facts), p.name)
            if stored:
                app.emit([ev.ContextImported(str(p), key, file_hash(text), stored)])
                if shared:
                    _mark_shared(app, p, file_hash(text))
                report["files"].append(str(p))
            report["stored"] += stored
    finally:
        client.close()
    return report
