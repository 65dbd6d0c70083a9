"""Event types, as the rest of realmem names them (``from realmem.events import types as ev``).

The values events carry (``Key``, ``Fields``, ``Action``, ``content_hash``) live in
``events/values.py``; the event classes, ``Envelope`` and the payload converter in
``events/catalog.py``, loaded on the first use of one of them.  Making those classes is a
tenth of a command's start-up, and commands that only read the projections never use them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from realmem.events.values import Action, Fields, Key, content_hash, record_repr

if TYPE_CHECKING:
    from realmem.events.catalog import *  # noqa: F403  (for type checkers: the names below)

__all__ = ["Action", "Fields", "Key", "content_hash", "record_repr"]


def __getattr__(name: str) -> Any:
    """The catalog's names (``ev.MemoryAdded``, ``ev.TYPES``, ...), imported on first use and
    then kept here, so later lookups are plain attribute reads.  Thread-safe: the import
    system runs the catalog once."""
    if name.startswith("__"):  # the import system asks for __path__ and the like: not ours
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from realmem.events import catalog  # lazy: making its classes is the start-up time saved

    try:
        value = getattr(catalog, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value
    return value
