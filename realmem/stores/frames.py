"""Where a store's stored paths point: its frame (project-relative or global), the user's home,
and stored paths as the absolute patterns that path notes, recall and freshness match."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING

from realmem.stores import paths
from realmem.stores.project import GLOBAL

if TYPE_CHECKING:  # for annotations only
    from realmem.app import Realmem


def user_home() -> Path:
    return _home(os.environ.get("HOME"))


@functools.lru_cache(maxsize=4)
def _home(_env_home: str | None) -> Path:
    """``Path.home()`` once per value of HOME: a path note asked for it three times."""
    return Path.home()


def frame(store: str) -> str:
    return paths.GLOBAL if store == GLOBAL else paths.PROJECT


def absolute(app: Realmem, store: str, stored: list[str], home: Path | None = None) -> list[str]:
    """Paths in ``store``'s frame as absolute patterns (ones that cannot be expressed are skipped).
    ``home``: the user's home, when a caller resolving many memories looked it up once."""
    root = app.store_root(store)
    home = home or user_home()
    out = []
    for p in stored:
        try:
            out.append(paths.to_absolute(p, kind=frame(store), root=root, home=home))
        except paths.PathError:
            continue
    return out
