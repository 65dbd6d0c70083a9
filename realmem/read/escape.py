"""Escaping text placed inline in the agent's context: memory paths, wherever they are shown.

A path is checked when it comes in (no control character, the safety scan), but a store may
hold one from before those checks, or one a user approved out of quarantine.  Shown raw, a
newline in it ends the line and what follows reads as realmem's own markup (a closing
``</realmem-path-notes>``, a ``<system>`` tag).  So every place that renders a path into a
path note, a recall, the <realmem> section or a gate message passes it through ``inline``:
backslash escapes, as in a Python or JSON string, for the backslash, every character that
is not printable (controls, separators, bidi and invisible format characters) and the angle
brackets that make a tag.  An ordinary path (letters, digits, ``/ . - _ * ? [ ] ~``, spaces,
any script) comes out unchanged.
"""

from __future__ import annotations

import functools

__all__ = ["inline"]

_NAMED = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "<": "\\x3c", ">": "\\x3e"}


def _escape(ch: str) -> str:
    named = _NAMED.get(ch)
    if named is not None:
        return named
    if ch == " " or ch.isprintable():
        return ch
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


@functools.lru_cache(maxsize=4096)  # a path note shows the same few paths on every touch
def inline(text: str) -> str:
    """``text`` safe to place inside one line of the agent's context (see the module)."""
    if text.isprintable() and not any(ch in text for ch in "\\<>"):
        return text  # the common case, one pass
    return "".join(map(_escape, text))
