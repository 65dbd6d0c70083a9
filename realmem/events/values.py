"""The values events carry: a memory's address (``Key``), its written ``Fields``, its
content hash, and the gate's ``Action`` vocabulary.

Kept apart from the event classes (``events/catalog.py``), which are slow
to make: a command that only reads the projections (``realmem status``) needs these alone.
"""

from __future__ import annotations

import enum
import hashlib
from typing import NamedTuple

import attrs


class Key(NamedTuple):
    """A memory's address.  A plain ``(store, id)`` tuple compares and hashes equal, so rows
    read from SQLite can be looked up without conversion."""

    store: str
    id: str


def content_hash(caption: str, content: str) -> str:
    """sha256(caption + content): the exact-duplicate and embedding-cache key."""
    return hashlib.sha256((caption.strip() + "\n" + content.strip()).encode("utf-8")).hexdigest()


class Action(enum.StrEnum):
    """What the remember gate (and consolidation) decided for a candidate.  A ``StrEnum``: it
    is stored, compared and formatted as its plain value, so logs read the same as before."""

    ADD = "add"
    EDIT = "edit"
    MERGE = "merge"
    REINFORCE = "reinforce"
    WIDEN = "widen"
    REJECT = "reject"
    REFUSE = "refuse"
    QUEUE = "queue"
    CONSOLIDATE_FORGET = "consolidate-forget"
    CONSOLIDATE_COVERED = "consolidate-covered"
    CONSOLIDATE_SUPERSEDE = "consolidate-supersede"
    CONSOLIDATE_MERGE = "consolidate-merge"
    CONSOLIDATE_REVISE = "consolidate-revise"
    CONSOLIDATE_PATHS = "consolidate-paths"


def record_repr(self: object) -> str:
    """``Name(field=value, ...)``, as attrs would write it.  The event classes and the
    projection state's records are made without attrs' generated __repr__: generating it was a
    third of the cost of making each class."""
    values = ", ".join(f"{a.name}={getattr(self, a.name)!r}" for a in attrs.fields(type(self)))
    return f"{type(self).__qualname__}({values})"


@attrs.frozen(repr=False)
class Fields:
    """A memory as it is written: the parsed frontmatter and body plus the exact file text."""

    __repr__ = record_repr

    caption: str
    content: str
    paths: list[str]
    created: str
    updated: str
    file: str
    text: str
