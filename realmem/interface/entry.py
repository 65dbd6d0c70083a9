"""The one way in for every front end (the CLI, the rpc child, the MCP server, the hook server).

A front end used to open the project, attach its stores, follow the log after the request and
map a failure to realmem's error itself; ``Entry`` does each once.  A request opens (or reuses,
while the entry keeps its apps warm) the app for a working directory, runs with the caller's
session as actor, is followed by ``policy.follow_app`` whether it succeeded or not (its events
may call for background work either way), and a failure leaves it as the error the user sees:
a read-only, full or damaged home is a ``StorageError`` naming the file.  The front end only
formats that error (exit code, JSON-RPC error, MCP tool error, hook output).

An entry is used by one thread at a time: an apsw connection is not for concurrent use, so a
front end serving on several threads keeps an entry per thread.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

from realmem.app import Realmem
from realmem.config import home_dir
from realmem.storage import db
from realmem.write.attached import open_attached


class Request:
    """One request's use of an entry: the app it opened (lazily: a command that needs none
    opens none, and then nothing is followed)."""

    def __init__(self, entry: "Entry") -> None:
        self.entry = entry
        self.used: Realmem | None = None

    def app(self, cwd: str | Path | None, *, session: str | None = None, scan: bool = False,
            attach: bool = True) -> Realmem:
        self.used = self.entry.app(cwd, session=session, scan=scan, attach=attach)
        return self.used


class Entry:
    """Opens, follows and maps errors for a front end.  ``on_open(app)`` runs once per app
    opened (the MCP server starts a session there).  The apps stay open until ``close``."""

    def __init__(self, home: str | Path | None, *, on_open: Callable[[Realmem], None] | None = None) -> None:
        self.home = home_dir(home)
        self.apps: dict[str, Realmem] = {}
        self.on_open = on_open

    def app(self, cwd: str | Path | None, *, session: str | None = None, scan: bool = False,
            attach: bool = True) -> Realmem:
        """The app for ``cwd`` (opened on first use, its stores attached and with ``scan``
        outside changes recorded; ``attach=False`` appends nothing).  ``session``, when given,
        is the actor of what this request writes; without it the app keeps the last one."""
        key = str(cwd)
        app = self.apps.get(key)
        if app is None:
            app = open_attached(self.home, cwd, scan=scan) if attach else Realmem.open(self.home, cwd)
            self.apps[key] = app
            if self.on_open is not None:
                self.on_open(app)
        if session:
            app.session = session
        return app

    @contextlib.contextmanager
    def request(self, *, follow: bool = True) -> Iterator[Request]:
        """One request: the body opens what it needs with ``req.app(...)``.  A failure leaves
        as ``fault(exc)``; afterwards the app used is followed (``follow=False``: the request
        appends nothing that calls for work, e.g. a hook's path notes)."""
        req = Request(self)
        try:
            yield req
        except Exception as exc:
            err = self.fault(exc)
            if err is exc:
                raise
            raise err from exc
        finally:
            if follow and req.used is not None:
                from realmem.jobs import policy  # lazy: a path note or hello needs none of the jobs' imports
                policy.follow_app(req.used)

    def fault(self, exc: Exception) -> Exception:
        """The error the user sees for ``exc``: a disk or file failure as the ``StorageError``
        naming the file (the database's path when the cause names none), anything else as it
        is (``errors.code_of`` and ``message_of`` then say refusal, usage or bug)."""
        return db.storage_error(exc, self.home / "realmem.sqlite") or exc

    def close(self) -> None:
        for app in self.apps.values():
            app.close()
        self.apps.clear()

    def __enter__(self) -> "Entry":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
