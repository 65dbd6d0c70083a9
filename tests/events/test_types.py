"""Event and projection-state records print as attrs would print them, though attrs does not
generate their __repr__ (start-up time)."""

from __future__ import annotations

import attrs

from realmem.events import types as ev
from realmem.projections import state


def _attrs_repr(obj: object) -> str:
    """The repr attrs generates for the same fields: a copy of the class with attrs' own."""
    cls = type(obj)
    twin = attrs.make_class(cls.__qualname__, [a.name for a in attrs.fields(cls)], repr=True)
    return repr(twin(*(getattr(obj, a.name) for a in attrs.fields(cls))))


def test_records_print_as_attrs_prints_them() -> None:
    fields = ev.Fields("Caption", "Body with 'quotes'", ["src/a.py", "."], "t1", "t2", "caption.md", "text")
    samples = [
        fields,
        ev.MemoryAdded("shared:/repo", "id-1", fields, "add"),
        ev.RecallHit([ev.Key("shared:/repo", "id-1")]),
        ev.Envelope(7, "2026-01-01T00:00:00.000Z", 42, None, ev.MemoryForgotten("s", "i", "forget")),
        state.Memory("s", "i", fields, "hash", "add", None, 12),
        state.Counter(2, 3),
        state.Pending("c", "p", "/cwd", {"caption": "x"}, "judge-unavailable", 1, "2026-01-02", 5),
    ]
    for obj in samples:
        assert repr(obj) == _attrs_repr(obj)
    assert repr(ev.MemoryAdded("s", "i", fields, "add")).startswith("MemoryAdded(store='s', id='i', fields=Fields(")
