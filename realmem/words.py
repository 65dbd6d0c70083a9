"""Counted nouns in user text ("1 memory", "2 memories", "0 facts"), and quoted queries."""

from __future__ import annotations


def count(n: int, singular: str, plural: str | None = None) -> str:
    """``n`` and the noun in the right number; the plural defaults to English's regular forms
    (memory -> memories, fact -> facts).  Give ``plural`` for anything else, e.g. a verb
    agreeing with the noun: count(n, "memory is", "memories are")."""
    if n == 1:
        return f"{n} {singular}"
    if plural is None:
        if singular.endswith("y") and singular[-2:-1] not in tuple("aeiou"):
            plural = singular[:-1] + "ies"
        elif singular.endswith(("s", "x", "ch", "sh")):
            plural = singular + "es"
        else:
            plural = singular + "s"
    return f"{n} {plural}"


def quoted(q: str, width: int = 80) -> str:
    """A query the user gave, in quotes, cut to ``width`` characters."""
    return '"' + (q if len(q) <= width else q[: width - 1] + "…") + '"'
