"""Session start: one short notification with everything the user should know now (gathered
here as ``Findings``, worded by ``interface.render.session_notification``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from realmem.gate import availability
from realmem.read import missing, prompt
from realmem.write import gitignore, observe
from realmem.app import Realmem
from realmem.interface import render
from realmem.jobs.queue import ensure_worker
from realmem.logs import get_logger
from realmem.projections import queries

logger = get_logger("realmem.interface.session")


@attrs.define
class Findings:
    """What the session-start notification tells, as values (``render.session_notification``)."""

    gitignore: str | None = None     # git ignores the shared store: the warning, with its fix
    missing: int = 0                 # memories pointing at paths that no longer exist
    stripped: list[str] = attrs.Factory(list)  # imported context files, as the user knows them
    rekeyed: dict[str, Any] | None = None      # the project key moved: from, to, count
    queued: int = 0
    no_judge: str | None = None      # queued with nothing to judge them here: how to get a judge
    failed: list[str] = attrs.Factory(list)    # the reasons of the candidates no longer retried
    refused: list[str] = attrs.Factory(list)   # store entries refused (a planted symlink), and why
    conflicts: list[str] = attrs.Factory(list)  # fact files with an unresolved merge conflict
    unreadable: int = 0


def start(app: Realmem) -> dict[str, Any]:
    f = Findings()
    f.gitignore = gitignore.store_warning(app.project.root, app.home) if app.project is not None else None
    f.missing = missing.check(app)
    stripped = prompt.stripped_files(app)
    # Pi's own startup list still shows them under [Context]; say they are not in the prompt.
    f.stripped = [_display(app, p) for p in stripped]
    f.rekeyed = observe.rekeyed(app, app.project) if app.project is not None else None
    if f.rekeyed is not None and app.project is not None:
        # Told once: the user may wonder why personal facts moved, or where they had gone.
        (app.store_dir(app.project.personal_store) / observe.REKEYED_FILE).unlink(missing_ok=True)
    key = app.project.key if app.project else None
    f.queued = queries.queued_count(app.conn, key)
    if f.queued and availability.judge(app.config) is None:
        f.no_judge = availability.missing(app.config)  # a CLI without Pi, no endpoint: say how to get a judge
    f.failed = queries.failed(app.conn, key)
    f.refused = queries.escape_messages(app.conn, app.visible_stores())
    f.conflicts = _conflict_files(app, queries.conflict_files(app.conn, app.visible_stores()))
    f.unreadable = queries.unreadable_count(app.conn)
    try:
        if app.config["worker.autostart"]:  # off (REALMEM_WORKER_AUTOSTART=0): the user runs `realmem worker`
            ensure_worker(app)
    except Exception as exc:  # a missing worker must never stop a session
        logger.warning("could not start the worker", error=str(exc))
    warn = f.gitignore or f.failed or f.refused or f.conflicts or f.unreadable
    return {
        "notification": render.session_notification(f),
        "level": "warning" if warn else "info",
        "project": {"root": str(app.project.root), "key": app.project.key} if app.project else None,
        "queued": f.queued, "missing": f.missing, "gitignore": f.gitignore, "stripped": stripped,
    }


def conflict_note(app: Realmem, conflicts: list[tuple[str, str]]) -> str:
    """"Unresolved merge conflict in <files>: ...", the files as paths the user can open."""
    return render.conflict_note(_conflict_files(app, conflicts))


def _conflict_files(app: Realmem, conflicts: list[tuple[str, str]]) -> list[str]:
    return [_display(app, str(app.store_dir(store) / name)) for store, name in conflicts]


def _display(app: Realmem, path: str) -> str:
    """A context file as the user knows it: relative to the cwd when under it."""
    p = Path(path)
    return str(p.relative_to(app.cwd)) if p.is_relative_to(app.cwd) else str(p)
