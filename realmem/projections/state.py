"""The projection reducer: a pure function folding events into in-memory state.

The same ``apply`` serves live updates (load the rows an event touches, apply, save them)
and replay (fold the whole log into an empty state, save everything), so the two can never
disagree.  Tables mirror these dicts one to one (``projections/tables.py``).
"""

from __future__ import annotations

from typing import Any

import attrs

from realmem.events import types as ev
from realmem.events.types import Envelope, Key
from realmem.projections.files import content_hash


@attrs.define
class Memory:
    store: str
    id: str
    caption: str
    content: str
    paths: list[str]
    created: str
    updated: str
    file: str
    text: str
    hash: str
    source: str
    quarantined: str | None
    last_seq: int


@attrs.define
class Counter:
    used_count: int = 0
    path_inject_count: int = 0


@attrs.define
class Urgency:
    valid_for: str
    score: float
    probabilities: dict[str, float]
    confidence: float | None
    source: str


@attrs.define
class Store:
    store: str
    kind: str
    project_key: str | None
    root: str | None
    dir: str


@attrs.define
class Pending:
    candidate_id: str
    project_key: str | None
    cwd: str
    payload: dict[str, Any]
    reason: str
    attempts: int
    next_try: str
    queued_seq: int


@attrs.define
class Imported:
    path: str
    project_key: str | None
    hash: str
    facts: int
    time: str


@attrs.define
class Problem:
    store: str
    file: str
    problem: str
    message: str
    line: int | None
    digest: str


@attrs.define
class State:
    memories: dict[Key, Memory] = attrs.Factory(dict)
    counters: dict[Key, Counter] = attrs.Factory(dict)
    urgency: dict[Key, Urgency] = attrs.Factory(dict)
    missing: dict[Key, dict[str, str | None]] = attrs.Factory(dict)
    stores: dict[str, Store] = attrs.Factory(dict)
    pending: dict[str, Pending] = attrs.Factory(dict)
    imported: dict[str, Imported] = attrs.Factory(dict)
    problems: dict[tuple[str, str], Problem] = attrs.Factory(dict)


def _memory(store: str, mem_id: str, f: ev.Fields, source: str, seq: int, quarantined: str | None = None) -> Memory:
    return Memory(
        store=store, id=mem_id, caption=f.caption, content=f.content, paths=list(f.paths),
        created=f.created, updated=f.updated, file=f.file, text=f.text,
        hash=content_hash(f.caption, f.content), source=source, quarantined=quarantined, last_seq=seq,
    )


def _drop(state: State, key: Key) -> None:
    state.memories.pop(key, None)
    state.counters.pop(key, None)
    state.urgency.pop(key, None)
    state.missing.pop(key, None)


def _clear_problems_for(state: State, store: str, file: str) -> None:
    state.problems.pop((store, file), None)


def apply(state: State, env: Envelope) -> None:
    """Fold one event into ``state``.  Must stay pure and deterministic: replay depends on it."""
    e, seq = env.event, env.seq
    if isinstance(e, (ev.MemoryAdded, ev.MemoryEdited)):
        key = (e.store, e.id)
        old = state.memories.get(key)
        source = e.source if isinstance(e, ev.MemoryAdded) else e.reason
        quarantined = old.quarantined if old is not None and isinstance(e, ev.MemoryEdited) else None
        state.memories[key] = _memory(e.store, e.id, e.fields, source, seq, quarantined)
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
    elif isinstance(e, ev.MemoryForgotten):
        _drop(state, (e.store, e.id))
    elif isinstance(e, ev.MemoryMoved):
        src, dst = (e.store, e.id), (e.to_store, e.id)
        old = state.memories.get(src)
        counter = state.counters.get(src, Counter())
        urgency = state.urgency.get(src)
        _drop(state, src)
        state.memories[dst] = _memory(e.to_store, e.id, e.fields, old.source if old else "move", seq,
                                      old.quarantined if old else None)
        state.counters[dst] = Counter(counter.used_count, counter.path_inject_count)
        if urgency is not None:
            state.urgency[dst] = urgency
    elif isinstance(e, ev.FileObserved):
        key = (e.store, e.id)
        if e.change == "deleted" or e.fields is None:
            old = state.memories.get(key)
            _drop(state, key)
            if old is not None:
                _clear_problems_for(state, e.store, old.file)
        else:
            state.memories[key] = _memory(e.store, e.id, e.fields, "observed", seq, e.quarantine)
            state.counters.setdefault(key, Counter())
            _clear_problems_for(state, e.store, e.fields.file)
    elif isinstance(e, ev.FileProblem):
        if e.problem == "resolved":  # the file is gone or fine again
            state.problems.pop((e.store, e.file), None)
        else:
            state.problems[(e.store, e.file)] = Problem(e.store, e.file, e.problem, e.message, e.line, e.digest)
    elif isinstance(e, ev.MemoryApproved):
        mem = state.memories.get((e.store, e.id))
        if mem is not None:
            mem.quarantined = None
    elif isinstance(e, ev.Reinforced):
        key = (e.store, e.id)
        if key in state.memories:
            state.counters.setdefault(key, Counter()).used_count += 1
    elif isinstance(e, ev.RecallHit):
        for store, mem_id in e.hits:
            if (store, mem_id) in state.memories:
                state.counters.setdefault((store, mem_id), Counter()).used_count += 1
    elif isinstance(e, ev.PathNotesShown):
        for store, mem_id in e.hits:
            if (store, mem_id) in state.memories:
                state.counters.setdefault((store, mem_id), Counter()).path_inject_count += 1
    elif isinstance(e, ev.UrgencyJudged):
        if (e.store, e.id) in state.memories:
            state.urgency[(e.store, e.id)] = Urgency(e.valid_for, e.score, dict(e.probabilities), e.confidence, e.source)
    elif isinstance(e, ev.PathsChecked):
        key = (e.store, e.id)
        if key in state.memories:
            if e.missing:
                state.missing[key] = dict(e.missing)
            else:
                state.missing.pop(key, None)
    elif isinstance(e, ev.StoreRegistered):
        state.stores[e.store] = Store(e.store, e.kind, e.project_key, e.root, e.dir)
    elif isinstance(e, ev.CandidateQueued):
        state.pending[e.candidate_id] = Pending(
            e.candidate_id, e.project_key, e.cwd, dict(e.candidate), e.reason, 0, e.next_try, seq
        )
    elif isinstance(e, ev.CandidateRetried):
        p = state.pending.get(e.candidate_id)
        if p is not None:
            p.attempts += 1
            p.reason = e.reason
            p.next_try = e.next_try
    elif isinstance(e, ev.CandidateMoved):
        p = state.pending.get(e.candidate_id)
        if p is not None:
            p.project_key, p.cwd = e.project_key, e.cwd
            p.payload = {**p.payload, "project_key": e.project_key, "cwd": e.cwd}
    elif isinstance(e, ev.CandidateDone):
        state.pending.pop(e.candidate_id, None)
    elif isinstance(e, ev.ContextImported):
        state.imported[e.path] = Imported(e.path, e.project_key, e.hash, e.facts, env.time)
    # Decided and ImportStarted are audit records only: no projection.


# Which small, whole-table parts of the state an event type can change.
SMALL_TABLES: dict[str, tuple[type[ev.Event], ...]] = {
    "stores": (ev.StoreRegistered,),
    "pending": (ev.CandidateQueued, ev.CandidateRetried, ev.CandidateMoved, ev.CandidateDone),
    "imported": (ev.ContextImported,),
    "problems": (ev.FileProblem, ev.FileObserved, ev.MemoryAdded, ev.MemoryEdited),
}
