"""Opening the writer for a working directory with its stores attached: the one way a
process gets an app it can work in (``realmem.interface.entry`` builds the front ends' way
in on it; the background jobs, which sit below the front ends, call it directly)."""

from __future__ import annotations

from pathlib import Path

from realmem.app import Realmem
from realmem.write import observe


def open_attached(home: str | Path | None = None, cwd: str | Path | None = None, *, session: str | None = None,
                  scan: bool = True) -> Realmem:
    """``Realmem.open`` and ``observe.attach``: what a command needs to work in ``cwd``."""
    return observe.attach(Realmem.open(home, cwd, session=session), scan=scan)
