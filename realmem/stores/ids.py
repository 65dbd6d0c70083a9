"""Memory ids: UUIDv7, shown to models as 22-character base64url (spec: "Keys")."""

from __future__ import annotations

import base64
import functools
import os
import threading
import time
import uuid
from collections.abc import Iterable

from realmem.errors import Error

_lock = threading.Lock()
_last_ms = 0
_seq = 0


def new_uuid7() -> uuid.UUID:
    """RFC 9562 UUIDv7 with a 12-bit monotonic counter within the same millisecond."""
    global _last_ms, _seq
    with _lock:
        ms = time.time_ns() // 1_000_000
        if ms <= _last_ms:
            _seq += 1
            if _seq > 0xFFF:
                _last_ms += 1
                _seq = 0
            ms = _last_ms
        else:
            _last_ms, _seq = ms, int.from_bytes(os.urandom(2), "big") & 0x3FF
        rand_b = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
        value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | _seq << 64 | 0b10 << 62 | rand_b
        return uuid.UUID(int=value)


def new_id() -> str:
    """A fresh memory id in canonical form (the form stored in files and the database)."""
    return str(new_uuid7())


@functools.lru_cache(maxsize=8192)  # a path note shortens every candidate's id to match the shown ones
def short(canonical: str) -> str:
    """Canonical UUID -> 22-character base64url (no padding)."""
    # The hex digits straight to bytes, not through uuid.UUID's parsing: the
    # gate shortens up to 254 neighbour ids per candidate.
    raw = bytes.fromhex(canonical.replace("-", "")) if len(canonical) == 36 else uuid.UUID(canonical).bytes
    if len(raw) != 16:
        raise ValueError(f"not a UUID: {canonical!r}")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def canonical(value: str) -> str | None:
    """Full id in either form -> canonical UUID string, or None if it is not a full id."""
    v = value.strip()
    if len(v) == 22:
        try:
            return str(uuid.UUID(bytes=base64.urlsafe_b64decode(v + "==")))
        except (ValueError, TypeError):
            return None
    try:
        return str(uuid.UUID(v))
    except ValueError:
        return None


class IdError(Error, LookupError):
    """An id that matches nothing, or a prefix that matches several memories."""

    def __init__(self, message: str, candidates: list[str] | None = None) -> None:
        super().__init__(message)
        self.candidates = candidates or []


def resolve(value: str, known: Iterable[str]) -> str:
    """Resolve a canonical id, a short id or a unique prefix of either against ``known``.

    Raises IdError when nothing matches or a prefix is ambiguous (listing the candidates).
    """
    known = list(known)
    full = canonical(value)
    if full is not None:
        if full in known:
            return full
        raise IdError(f"no memory with id {value}")
    v = value.strip()
    if not v:
        raise IdError("empty id")
    hits = [k for k in known if short(k).startswith(v) or k.startswith(v.lower())]
    if len(hits) == 1:
        return hits[0]
    if not hits:
        raise IdError(f"no memory with id or prefix {v}")
    shown = sorted(short(h) for h in hits)
    raise IdError(f"ambiguous id prefix {v}: matches {', '.join(shown[:10])}", shown)
