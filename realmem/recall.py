"""Recall: hybrid search ranked by path, then use, then relevance (spec: realmem_recall).

Recall ranks, never filters, by path: memories about the given (or recently touched) paths
come first, project-wide ones next, those about other areas last; within each class the
most used first, then the most relevant.  A returned memory counts as a recall hit.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence

import attrs

from realmem import embedder, memories, paths, search
from realmem.app import Realmem, RealmemError
from realmem.events import types as ev
from realmem.events.types import Key
from realmem.projections.state import Memory

CANDIDATES = 50  # most relevant matches considered before path/use ordering
RELEVANCE_CUT = 0.5  # fused (RRF) score below this share of the best is noise, not a match
WHOLE = {".", "~"}


@attrs.define
class Item:
    memory: Memory
    used_count: int
    path_class: int  # 0 about the focus paths, 1 store-wide, 2 other areas
    relevance: float


@attrs.define
class Result:
    items: list[Item]
    page: int
    pages: int
    total: int
    focus: list[str]
    errors: list[str] = attrs.Factory(list)


def stores_for(app: Realmem, scope: str | None) -> list[str]:
    return [app.store_for_scope(scope)] if scope else app.visible_stores()


def _abs_focus(app: Realmem, raw: Sequence[str]) -> list[str]:
    out = []
    for p in raw:
        try:
            out.append(paths.normalize_input(p, cwd=app.cwd, home=memories.user_home()))
        except paths.PathError as exc:
            raise RealmemError(f"bad path {p!r}: {exc}") from None
    return out


def _about(pattern: str, focus: str) -> bool:
    """The focus lies at or under the pattern, or the pattern names something inside the focus
    (a path below it, or a glob such as src/**/*.sql reaching into a focus directory)."""
    if paths.matches(pattern, focus) or paths.matches(focus, pattern):
        return True
    return os.path.isdir(focus) and paths.overlap([pattern], [focus])


def path_class(m: Memory, patterns: list[str], focus: list[str]) -> int:
    if any(p in WHOLE for p in m.paths):
        return 1
    if focus and any(_about(pat, f) for pat in patterns for f in focus):
        return 0
    return 2


def recall(app: Realmem, *, queries: Sequence[str] = (), raw_paths: Sequence[str] = (), id_values: Sequence[str] = (),
           page: int = 1, scope: str | None = None, recent_paths: Sequence[str] = (), page_size: int | None = None,
           count_hits: bool = True, embed: Callable[[Realmem, str], list[float] | None] = embedder.embed_query) -> Result:
    """``embed`` turns a query into a vector (the configured embeddings endpoint by default;
    the benchmark passes a local one so service time stays out of the measurement)."""
    stores = stores_for(app, scope)
    size = page_size or int(app.config["recall.pageSize"])
    given_focus = _abs_focus(app, raw_paths)
    focus = given_focus or list(recent_paths)
    errors: list[str] = []
    relevance: dict[Key, float] = {}
    chosen: list[Key] = []

    for value in id_values:
        try:
            chosen.append(app.resolve(value, stores, include_quarantined=False))
        except RealmemError as exc:
            errors.append(str(exc))

    queries = [q for q in queries if q and q.strip()]
    if queries:
        bm, kn = [], []
        for q in queries:
            bm.append(search.bm25(app.conn, q, stores, 200))
            vec = embed(app, q)
            if vec is not None:
                kn.append(search.knn(app.conn, vec, stores, CANDIDATES))
        hits = search.fuse(bm, kn, limit=CANDIDATES)
        # Vector search always returns neighbours, however far; keep only real matches so
        # that ordering by path and use never lifts an unrelated memory to the top.
        floor = hits[0].rrf * RELEVANCE_CUT if hits else 0.0
        for hit in hits:
            if hit.rrf >= floor:
                relevance[hit.key] = hit.rrf
    elif given_focus and not id_values:
        # paths alone: the memories attached to (or below) those paths
        for m in app.memories(stores):
            pats = memories.absolute_paths(app, m)
            if any(p not in WHOLE for p in m.paths) and path_class(m, pats, given_focus) == 0:
                relevance[(m.store, m.id)] = 0.0

    items: list[Item] = []
    seen: set[Key] = set()
    for key in chosen:
        m = app.memory(key)
        if m is not None and key not in seen:
            seen.add(key)
            items.append(Item(m, app.counters(key)[0], -1, math.inf))
    ranked: list[Item] = []
    for key, rel in relevance.items():
        if key in seen:
            continue
        m = app.memory(key)
        if m is None:
            continue
        ranked.append(Item(m, app.counters(key)[0], path_class(m, memories.absolute_paths(app, m), focus), rel))
    ranked.sort(key=lambda i: (i.path_class, -i.used_count, -i.relevance, i.memory.id))
    items.extend(ranked)

    total = len(items)
    pages = max(1, math.ceil(total / size))
    page = max(1, min(page, pages))
    shown = items[(page - 1) * size: page * size]
    if count_hits and shown:
        app.emit([ev.RecallHit([(i.memory.store, i.memory.id) for i in shown])])
        for i in shown:
            i.used_count += 1
    return Result(shown, page, pages, total, focus, errors)


def listing(app: Realmem, *, page: int = 1, scope: str | None = None, page_size: int | None = None) -> Result:
    """Every memory, sorted by path then most used (realmem_list)."""
    stores = stores_for(app, scope)
    size = page_size or int(app.config["list.pageSize"])
    counts = dict(((s, i), u) for s, i, u in app.conn.execute("SELECT store, id, used_count FROM counters"))
    items = [Item(m, counts.get((m.store, m.id), 0), 0 if m.paths and not set(m.paths) <= WHOLE else 1, 0.0)
             for m in app.memories(stores)]
    items.sort(key=lambda i: (i.path_class, i.memory.paths, -i.used_count, i.memory.caption))
    total = len(items)
    pages = max(1, math.ceil(total / size))
    page = max(1, min(page, pages))
    return Result(items[(page - 1) * size: page * size], page, pages, total, [])
