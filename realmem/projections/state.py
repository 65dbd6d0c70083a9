"""The projection reducer: a pure function folding events into in-memory state.

The same ``apply`` serves live updates (load the rows an event touches, apply, save them)
and replay (fold the whole log into an empty state, save everything), so the two can never
disagree.  Tables mirror these dicts one to one (``projections/tables.py``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

from realmem.events import types as ev
from realmem.events.types import Key, content_hash, record_repr

if TYPE_CHECKING:
    from realmem.events.types import Envelope


@attrs.define(repr=False)
class Memory:
    """A memory as the projections hold it: the fields it was written with (``ev.Fields``, the
    same record the events carry, so nothing is copied field by field) plus what the log adds."""

    __repr__ = record_repr

    store: str
    id: str
    fields: ev.Fields
    hash: str
    source: str
    quarantined: str | None
    last_seq: int

    # The written fields read as the memory's own (``m.caption``) at the many call sites.
    @property
    def caption(self) -> str:
        return self.fields.caption

    @property
    def content(self) -> str:
        return self.fields.content

    @property
    def paths(self) -> list[str]:
        return self.fields.paths

    @property
    def created(self) -> str:
        return self.fields.created

    @property
    def updated(self) -> str:
        return self.fields.updated

    @property
    def file(self) -> str:
        return self.fields.file

    @property
    def text(self) -> str:
        return self.fields.text


@attrs.define(repr=False)
class Counter:
    __repr__ = record_repr

    used_count: int = 0
    path_inject_count: int = 0


@attrs.define(repr=False)
class Urgency:
    __repr__ = record_repr

    valid_for: str
    score: float
    probabilities: dict[str, float]
    confidence: float | None
    source: str


@attrs.define(repr=False)
class Store:
    __repr__ = record_repr

    store: str
    kind: str
    project_key: str | None
    root: str | None
    dir: str


@attrs.define(repr=False)
class Pending:
    __repr__ = record_repr

    candidate_id: str
    project_key: str | None
    cwd: str
    payload: dict[str, Any]
    reason: str
    attempts: int
    next_try: str
    queued_seq: int


@attrs.define(repr=False)
class Imported:
    __repr__ = record_repr

    path: str
    project_key: str | None
    hash: str
    facts: int
    time: str


@attrs.define(repr=False)
class Problem:
    __repr__ = record_repr

    store: str
    file: str
    problem: str
    message: str
    line: int | None
    digest: str


@attrs.define(repr=False)
class State:
    __repr__ = record_repr

    memories: dict[Key, Memory] = attrs.Factory(dict)
    counters: dict[Key, Counter] = attrs.Factory(dict)
    urgency: dict[Key, Urgency] = attrs.Factory(dict)
    missing: dict[Key, dict[str, str | None]] = attrs.Factory(dict)
    stores: dict[str, Store] = attrs.Factory(dict)
    pending: dict[str, Pending] = attrs.Factory(dict)
    imported: dict[str, Imported] = attrs.Factory(dict)
    problems: dict[tuple[str, str], Problem] = attrs.Factory(dict)


def _memory(store: str, mem_id: str, f: ev.Fields, source: str, seq: int, quarantined: str | None = None) -> Memory:
    return Memory(store, mem_id, f, content_hash(f.caption, f.content), source, quarantined, seq)


def _drop(state: State, key: Key) -> None:
    state.memories.pop(key, None)
    state.counters.pop(key, None)
    state.urgency.pop(key, None)
    state.missing.pop(key, None)


def _clear_problems_for(state: State, store: str, file: str) -> None:
    state.problems.pop((store, file), None)


def _written(state: State, e: ev.MemoryAdded | ev.MemoryEdited, env: Envelope) -> None:
    key = Key(e.store, e.id)
    old = state.memories.get(key)
    source = e.source if isinstance(e, ev.MemoryAdded) else e.reason
    quarantined = old.quarantined if old is not None and isinstance(e, ev.MemoryEdited) else None
    state.memories[key] = _memory(e.store, e.id, e.fields, source, env.seq, quarantined)
    counter = state.counters.setdefault(key, Counter())
    if isinstance(e, ev.MemoryEdited):
        counter.used_count += e.used_delta
        missing = state.missing.get(key)
        if missing:
            kept = {p: s for p, s in missing.items() if p in e.fields.paths}
            if kept:
                state.missing[key] = kept
            else:
                state.missing.pop(key)
    _clear_problems_for(state, e.store, e.fields.file)


def _forgotten(state: State, e: ev.MemoryForgotten, env: Envelope) -> None:
    _drop(state, Key(e.store, e.id))


def _moved(state: State, e: ev.MemoryMoved, env: Envelope) -> None:
    src, dst = Key(e.store, e.id), Key(e.to_store, e.id)
    old = state.memories.get(src)
    counter = state.counters.get(src, Counter())
    urgency = state.urgency.get(src)
    _drop(state, src)
    state.memories[dst] = _memory(e.to_store, e.id, e.fields, old.source if old else "move", env.seq,
                                  old.quarantined if old else None)
    state.counters[dst] = Counter(counter.used_count, counter.path_inject_count)
    if urgency is not None:
        state.urgency[dst] = urgency


def _observed(state: State, e: ev.FileObserved, env: Envelope) -> None:
    key = Key(e.store, e.id)
    if e.change == "deleted" or e.fields is None:
        # A file gone is an absent memory, not a forgotten one: a branch switched away and back
        # (or a pull undone) brings the same id back with the use counts and urgency it had.
        # Absent, it is not served and nothing counts for it; only a forget drops them.
        old = state.memories.pop(key, None)
        state.missing.pop(key, None)
        if old is not None:
            _clear_problems_for(state, e.store, old.file)
    else:
        state.memories[key] = _memory(e.store, e.id, e.fields, "observed", env.seq, e.quarantine)
        state.counters.setdefault(key, Counter())  # an absent memory's, kept since its file went
        _clear_problems_for(state, e.store, e.fields.file)


def _file_problem(state: State, e: ev.FileProblem, env: Envelope) -> None:
    if e.problem == "resolved":  # the file is gone or fine again
        state.problems.pop((e.store, e.file), None)
    else:
        state.problems[(e.store, e.file)] = Problem(e.store, e.file, e.problem, e.message, e.line, e.digest)


def _approved(state: State, e: ev.MemoryApproved, env: Envelope) -> None:
    mem = state.memories.get(Key(e.store, e.id))
    if mem is not None:
        mem.quarantined = None


def _reinforced(state: State, e: ev.Reinforced, env: Envelope) -> None:
    key = Key(e.store, e.id)
    if key in state.memories:
        state.counters.setdefault(key, Counter()).used_count += 1


def _recalled(state: State, e: ev.RecallHit, env: Envelope) -> None:
    for key in e.keys():
        if key in state.memories:
            state.counters.setdefault(key, Counter()).used_count += 1


def _notes_shown(state: State, e: ev.PathNotesShown, env: Envelope) -> None:
    for key in e.keys():
        if key in state.memories:
            state.counters.setdefault(key, Counter()).path_inject_count += 1


def _urgency_judged(state: State, e: ev.UrgencyJudged, env: Envelope) -> None:
    key = Key(e.store, e.id)
    if key in state.memories:
        state.urgency[key] = Urgency(e.valid_for, e.score, dict(e.probabilities), e.confidence, e.source)


def _paths_checked(state: State, e: ev.PathsChecked, env: Envelope) -> None:
    key = Key(e.store, e.id)
    if key in state.memories:
        if e.missing:
            state.missing[key] = dict(e.missing)
        else:
            state.missing.pop(key, None)


def _store_registered(state: State, e: ev.StoreRegistered, env: Envelope) -> None:
    state.stores[e.store] = Store(e.store, e.kind, e.project_key, e.root, e.dir)


def _queued(state: State, e: ev.CandidateQueued, env: Envelope) -> None:
    state.pending[e.candidate_id] = Pending(
        e.candidate_id, e.project_key, e.cwd, dict(e.candidate), e.reason, 0, e.next_try, env.seq
    )


def _retried(state: State, e: ev.CandidateRetried, env: Envelope) -> None:
    p = state.pending.get(e.candidate_id)
    if p is not None:
        p.attempts += 1
        p.reason = e.reason
        p.next_try = e.next_try


def _candidate_moved(state: State, e: ev.CandidateMoved, env: Envelope) -> None:
    p = state.pending.get(e.candidate_id)
    if p is not None:
        p.project_key, p.cwd = e.project_key, e.cwd
        p.payload = {**p.payload, "project_key": e.project_key, "cwd": e.cwd}


def _done(state: State, e: ev.CandidateDone, env: Envelope) -> None:
    state.pending.pop(e.candidate_id, None)


def _imported(state: State, e: ev.ContextImported, env: Envelope) -> None:
    state.imported[e.path] = Imported(e.path, e.project_key, e.hash, e.facts, env.time)


def _audit_only(state: State, e: ev.Event, env: Envelope) -> None:
    """Decided, ImportStarted and ImportEnded are audit records: they change no projection."""


@functools.cache
def reducers() -> dict[type[ev.Event], Callable[[State, Any, Envelope], None]]:
    """Each event type's reducer (a function: the event classes are made on first use)."""
    return {
        ev.MemoryAdded: _written,
        ev.MemoryEdited: _written,
        ev.MemoryForgotten: _forgotten,
        ev.MemoryMoved: _moved,
        ev.FileObserved: _observed,
        ev.FileProblem: _file_problem,
        ev.MemoryApproved: _approved,
        ev.Reinforced: _reinforced,
        ev.RecallHit: _recalled,
        ev.PathNotesShown: _notes_shown,
        ev.UrgencyJudged: _urgency_judged,
        ev.PathsChecked: _paths_checked,
        ev.StoreRegistered: _store_registered,
        ev.CandidateQueued: _queued,
        ev.CandidateRetried: _retried,
        ev.CandidateMoved: _candidate_moved,
        ev.CandidateDone: _done,
        ev.ContextImported: _imported,
        ev.Decided: _audit_only,
        ev.ImportStarted: _audit_only,
        ev.ImportEnded: _audit_only,
    }


def apply(state: State, env: Envelope) -> None:
    """Fold one event into ``state``, through the reducer of its type.  Must stay pure and
    deterministic: replay depends on it."""
    reducers()[type(env.event)](state, env.event, env)


@functools.cache
def small_tables() -> dict[str, tuple[type[ev.Event], ...]]:
    """Which small, whole-table parts of the state an event type can change."""
    return {
        "stores": (ev.StoreRegistered,),
        "pending": (ev.CandidateQueued, ev.CandidateRetried, ev.CandidateMoved, ev.CandidateDone),
        "imported": (ev.ContextImported,),
        "problems": (ev.FileProblem, ev.FileObserved, ev.MemoryAdded, ev.MemoryEdited),
    }
