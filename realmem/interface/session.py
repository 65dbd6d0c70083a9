"""Session start: one short notification with everything the user should know now."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from realmem.gate import availability
from realmem.read import missing, prompt
from realmem.write import gitignore, observe
from realmem.app import Realmem
from realmem.frontend import hint
from realmem.jobs.queue import ensure_worker
from realmem.words import count
from realmem.logs import get_logger
from realmem.projections import queries

logger = get_logger("realmem.interface.session")


def start(app: Realmem) -> dict[str, Any]:
    notes: list[str] = []
    level = "info"
    warning = gitignore.store_warning(app.project.root, app.home) if app.project is not None else None
    if warning:
        notes.append(warning)
        level = "warning"
    flagged = missing.check(app)
    if flagged:
        notes.append(f"{count(flagged, 'memory points', 'memories point')} at paths that no longer exist "
                     f"({hint('manage')} shows ✗ and suggested locations; {hint('prune-paths')} drops them).")
    stripped = prompt.stripped_files(app)
    if stripped:
        # Pi's own startup list still shows them under [Context]; say they are not in the prompt.
        notes.append(f"Imported, so not in the prompt: {', '.join(_display(app, p) for p in stripped)} "
                     f"(realmem replaces {'it' if len(stripped) == 1 else 'them'}).")
    moved = observe.rekeyed(app, app.project) if app.project is not None else None
    if moved is not None and app.project is not None:
        # Told once: the user may wonder why personal facts moved, or where they had gone.
        notes.append(f"The project key changed ({moved['from'][:16]}… → {moved['to'][:16]}…: a shallow clone "
                     f"unshallowed, or history rewritten); {count(moved['count'], 'personal memory', 'personal memories')} "
                     "moved with it.")
        (app.store_dir(app.project.personal_store) / observe.REKEYED_FILE).unlink(missing_ok=True)
    key = app.project.key if app.project else None
    queued = queries.queued_count(app.conn, key)
    if queued and availability.judge(app.config) is None:
        # Nothing can judge here (a CLI without Pi, no endpoint): say how to get a judge.
        notes.append(f"{count(queued, 'candidate memory is', 'candidate memories are')} queued for this project: "
                     f"{availability.missing(app.config)}; they are judged and stored then.")
    elif queued:
        notes.append(f"{count(queued, 'candidate memory is', 'candidate memories are')} queued for this project "
                     f"(retried automatically; {hint('retry')}).")
    failed = queries.failed(app.conn, key)
    if failed:
        notes.append(f"{count(len(failed), 'queued candidate', 'queued candidates')} failed and "
                     f"{'is' if len(failed) == 1 else 'are'} no longer retried automatically "
                     f"({failed[-1].removeprefix('failed: ')}); fix the setting, then {hint('retry')}.")
        level = "warning"
    refused = queries.escape_messages(app.conn, app.visible_stores())
    if refused:  # a planted symlink: say what and why, not just "could not be read"
        notes.extend(m[0].upper() + m[1:] + "." for m in refused)
        level = "warning"
    conflicts = queries.conflict_files(app.conn, app.visible_stores())
    if conflicts:  # named: the user has a merge to finish, not a broken file
        notes.append(conflict_note(app, conflicts) + ".")
        level = "warning"
    problems = queries.unreadable_count(app.conn)
    if problems:
        notes.append(f"{count(problems, 'fact file')} could not be read ({hint('status')}).")
        level = "warning"
    try:
        if app.config["worker.autostart"]:  # off (REALMEM_WORKER_AUTOSTART=0): the user runs `realmem worker`
            ensure_worker(app)
    except Exception as exc:  # a missing worker must never stop a session
        logger.warning("could not start the worker", error=str(exc))
    return {
        "notification": ("realmem: " + " ".join(notes)) if notes else None,
        "level": level,
        "project": {"root": str(app.project.root), "key": app.project.key} if app.project else None,
        "queued": queued, "missing": flagged, "gitignore": warning, "stripped": stripped,
    }


def conflict_note(app: Realmem, conflicts: list[tuple[str, str]]) -> str:
    """"Unresolved merge conflict in <files>: ...", the files as paths the user can open."""
    shown = ", ".join(_display(app, str(app.store_dir(store) / name)) for store, name in conflicts)
    return (f"Unresolved merge conflict in {shown}: the last good version is served until "
            f"{'it is' if len(conflicts) == 1 else 'they are'} resolved (edit out the <<<<<<< ======= >>>>>>> markers)")


def _display(app: Realmem, path: str) -> str:
    """A context file as the user knows it: relative to the cwd when under it."""
    p = Path(path)
    return str(p.relative_to(app.cwd)) if p.is_relative_to(app.cwd) else str(p)
