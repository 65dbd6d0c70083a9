"""Recall: hybrid search that returns only matches, ranked by path, then use, then relevance
(spec: realmem_recall; the rule and its reasons are in docs/recall.md).

A memory matches a query when it covers enough of the query's words (BM25 side) or when its
vector is close to the query's, both near the query's best and above what unrelated
memories of this store look like (vector side).  Matches are then ordered by path class,
coarse use and fused relevance.  Recall ranks, never filters, by path.  A returned memory
counts as a recall hit.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import attrs

from realmem.read import embedder, floor, relevance, search
from realmem.stores import frames, paths
from realmem.app import Realmem, RealmemError
from realmem.events import types as ev
from realmem.events.types import Key
from realmem.projections import index, tables
from realmem.projections.state import Memory
from realmem.projections.tables import MEMORY_COLS, memory_from_row
from realmem.projections.tokenize import query_units
from realmem.words import quoted

CANDIDATES = 100  # BM25 candidates examined per query
NEIGHBOURS = 30  # vector neighbours examined: vec0's cost grows with k, and few are within COSINE_REL
COVERAGE_MIN = 0.4  # a lexical match holds at least 40% of the query's topic weight (half of it
COVERAGE_MIN_HYBRID = 0.5  # when the vector side also searches: it finds the paraphrases)...
COVERAGE_REL = 0.7  # ...and at least this share of the best-covering memory's coverage
# A vector match is near the query's best neighbour: within COSINE_GAP of the space's spread
# (its strong floor minus its weak floor, read/floor.py) below the best cosine, and either
# CLEAR spreads above the strong floor or, above the weak floor, clear of the query's typical
# neighbour (the mean cosine of neighbours 2 to TYPICAL) by MARGIN spreads: one neighbour
# standing out of the crowd.  CLEAR because a near miss (a question about the project that no
# memory answers) sits just over the floor, which only unrelated questions were calibrated on.
COSINE_GAP = 0.2
CLEAR = 0.25
MARGIN = 1.0
TYPICAL = 10
# Relevance, to rank matches: the cosine in spreads over the weak floor plus LEXICAL_WEIGHT spreads
# for a memory holding every word of the query (docs/recall.md "Order").
LEXICAL_WEIGHT = 0.9
# Plausible beside the vector side: a third of the query's topic weight (its weak floor finds the
# rest); BM25 only: the whole query's best BM25 matches (``_closest``).
WEAK_COVERAGE_HYBRID = 0.33
WEAK_MAX = 3  # weak matches shown when nothing matches
MAX_QUERY = 2000  # characters of one query searched; the rest is ignored (and said so)
WHOLE = {".", "~"}


@attrs.define
class Match:
    """Why a memory matched one query (for the rule's tests and traces)."""
    key: Key
    coverage: float | None = None
    cosine: float | None = None
    score: float = 0.0  # this query's relevance: cosine in spreads over the weak floor, plus coverage
    rrf: float = 0.0  # 1 / (RRF_K + rank by score): what the queries of one call add up
    weak: bool = True  # plausible but not a match: shown only when nothing matches, never a hit


@attrs.define
class Item:
    memory: Memory
    used_count: int
    path_class: int  # 0 about the focus paths, 1 store-wide, 2 other areas
    relevance: float
    weak: bool = False  # plausible, not a match: shown after the matches, never counted as used


@attrs.define
class Result:
    items: list[Item]
    page: int
    pages: int
    total: int
    focus: list[str]
    errors: list[str] = attrs.Factory(list)
    queries: list[str] = attrs.Factory(list)  # the searched queries, for "No memory matches …"
    asked: bool = True  # False when the call gave no query, path or id at all
    notes: list[str] = attrs.Factory(list)  # e.g. a query cut to MAX_QUERY characters
    weak: bool = False  # nothing matched: every item is a weak match, none is a hit
    relevance: list[dict[str, Any]] = attrs.Factory(list)  # System One's checks, one trace a query

    @property
    def past_end(self) -> bool:
        """A page after the last one (or before the first) was asked for."""
        return not 1 <= self.page <= self.pages


def stores_for(app: Realmem, scope: str | None) -> list[str]:
    return [app.store_for_scope(scope)] if scope else app.visible_stores()


def _abs_focus(app: Realmem, raw: Sequence[str]) -> list[str]:
    out = []
    for p in raw:
        try:
            out.append(paths.normalize_input(p, cwd=app.cwd, home=frames.user_home()))
        except paths.PathError as exc:
            from realmem.gate.safety import mask_secrets  # lazily: many regexes, for an error only

            raise RealmemError(f"bad path {mask_secrets(p)!r}: {exc}") from None
    return out


def _about(pattern: str, focus: str) -> bool:
    """The focus lies at or under the pattern, or the pattern names something inside the focus
    (a path below it, or a glob such as src/**/*.sql reaching into a focus directory)."""
    if paths.matches(pattern, focus) or paths.matches(focus, pattern):
        return True
    return os.path.isdir(focus) and paths.overlap([pattern], [focus])


def path_class(app: Realmem, m: Memory, focus: list[str]) -> int:
    return _path_class(app, m.store, m.paths, focus)


def _path_class(app: Realmem, store: str, stored: Sequence[str], focus: list[str]) -> int:
    if any(p in WHOLE for p in stored):
        return 1
    if focus and any(_about(pat, f) for pat in frames.absolute(app, store, list(stored)) for f in focus):
        return 0
    return 2


def _chunks(keys: Sequence[Key]) -> Iterator[list[str]]:
    """The ids of ``keys`` in chunks under SQLite's parameter limit."""
    ids_ = sorted({k[1] for k in keys})
    for start in range(0, len(ids_), 500):
        yield ids_[start:start + 500]


def _uses(app: Realmem, keys: Sequence[Key]) -> dict[Key, tuple[list[str], int]]:
    """Stored paths and used count of each of ``keys`` in one query: all ranking needs (recall
    may match hundreds; only the shown page needs its whole rows)."""
    wanted, out = set(keys), {}
    for chunk in _chunks(keys):
        for store, mem_id, stored, used in app.conn.execute(
                f"SELECT m.store, m.id, m.paths, coalesce(c.used_count, 0) FROM memories m "
                f"LEFT JOIN counters c ON c.store = m.store AND c.id = m.id "
                f"WHERE m.id IN ({','.join('?' * len(chunk))})", chunk):
            if (store, mem_id) in wanted:
                out[Key(store, mem_id)] = (json.loads(stored), used)
    return out


def _rows(app: Realmem, keys: Sequence[Key]) -> dict[Key, Memory]:
    """The memory rows of ``keys`` in one query."""
    wanted, out = set(keys), {}
    for chunk in _chunks(keys):
        for row in app.conn.execute(f"SELECT {MEMORY_COLS} FROM memories WHERE id IN ({','.join('?' * len(chunk))})",
                                    chunk):
            m = memory_from_row(row)
            if (m.store, m.id) in wanted:
                out[Key(m.store, m.id)] = m
    return out


def use_bucket(used: int) -> int:
    """Coarse use: 0, 1-2, 3-6, 7-14, ... so a few extra hits cannot lift a match over
    another, while a fact the agent relies on again and again still rises."""
    return int(math.log2(1 + max(0, used)))


def matches(app: Realmem, query: str, stores: Sequence[str],
            embed: Callable[[Realmem, str], list[float] | None] = embedder.embed_query) -> list[Match]:
    """The memories matching one query by the documented rule, best fused relevance first:
    the strong matches, then the plausible ones (``weak``) that fail the rule."""
    if not any(topical for _, _, topical in query_units(query)):
        return []  # nothing to search for: a vector of punctuation is close to nothing in particular
    # The lexical search needs no vector: it runs on a second connection while the query is
    # embedded (the encoder's matrix products and SQLite both release the GIL), at the coverage
    # the hybrid rule asks for.  Without a vector after all, it runs again at the BM25 rule's.
    hybrid_cov = min(COVERAGE_MIN_HYBRID, WEAK_COVERAGE_HYBRID)
    early = search.beside(app.reader, search.lexical, query, stores, CANDIDATES, hybrid_cov) \
        if _vector_expected(app, embed) else None
    vec = embed(app, query)
    hybrid = search.usable(vec)
    near = search.knn(app.conn, vec, stores, NEIGHBOURS) if hybrid and vec is not None else []
    cov_min = COVERAGE_MIN_HYBRID if hybrid else COVERAGE_MIN
    weak_cov = WEAK_COVERAGE_HYBRID if hybrid else math.inf
    lex = early() if early is not None else None  # waited for even when unused: its connection is the app's
    if lex is None or not hybrid:
        lex = search.lexical(app.conn, query, stores, CANDIDATES, min(cov_min, weak_cov))
    lex.sort(key=lambda h: (-h.coverage, h.bm25))
    best_cov = max((h.coverage for h in lex), default=0.0)
    found: dict[Key, Match] = {}
    covered = {h.key: h.coverage for h in lex}  # also under the weak coverage: it still adds to relevance
    for h in lex:
        strong = h.coverage >= cov_min and h.coverage >= COVERAGE_REL * best_cov
        if strong or h.coverage >= weak_cov:
            m = found.setdefault(h.key, Match(h.key))
            m.coverage, m.weak = h.coverage, not strong
    limits = None
    if not hybrid:
        _closest(app, query, stores, found)
    else:
        c = embedder.client(app)
        limits = floor.floors(app.conn, c.url if c is not None else "", lambda t: embed(app, t)) if near else None
        if near and limits is not None:
            for k, cos in near:
                strong = _vector_strong(cos, near, limits)
                m = found.get(k)
                if m is None:
                    if not strong and cos < limits.weak:
                        continue
                    m = found[k] = Match(k, coverage=covered.get(k), weak=not strong)
                else:
                    m.weak = m.weak and not strong
                m.cosine = cos
    _rank(found, near, limits)
    return sorted(found.values(), key=lambda m: (m.weak, -m.rrf, m.key))


def _vector_expected(app: Realmem, embed: Callable[[Realmem, str], list[float] | None]) -> bool:
    """The query will likely be embedded: the space holds vectors, and an embedder is
    configured (or the caller brings its own, as the benchmark and the evaluation do)."""
    return bool(index.vec_dims(app.conn)) and (embed is not embedder.embed_query or embedder.client(app) is not None)


def _closest(app: Realmem, query: str, stores: Sequence[str], found: dict[Key, Match]) -> None:
    """BM25 only: the best BM25 matches of all the query's words that the rule did not pass
    join ``found`` as weak matches, in BM25's order.  On the public set's tune split a coverage
    cut there (a quarter of the topic weight) lost more right answers than it silenced
    off-topic questions, and coverage-first order ranked the right one lower.  Skipped when
    the matches already fill the places weak matches could take."""
    if len(found) >= WEAK_MAX:
        return
    for h in sorted(search.lexical(app.conn, query, stores, WEAK_MAX + len(found)), key=lambda h: h.bm25):
        if h.key not in found:
            found[h.key] = Match(h.key, coverage=h.coverage)


def _rank(found: dict[Key, Match], near: Sequence[tuple[Key, float]], limits: floor.Floors | None) -> None:
    """Each match's relevance (docs/recall.md "Order"), and its RRF term for this query by it.
    Without a vector scale (no vectors, or an endpoint's unknown model whose floors are infinite
    until the store calibrates) the lexical order stands: coverage, then BM25."""
    ranked = list(found.values())
    if near and limits is not None and math.isfinite(limits.strong) and math.isfinite(limits.weak):
        unseen = min(limits.weak, near[-1][1])  # a memory past the neighbours examined lies below them
        spread = max(limits.strong - limits.weak, 1e-3)
        for m in ranked:
            m.score = ((m.cosine if m.cosine is not None else unseen) - limits.weak) / spread \
                + LEXICAL_WEIGHT * (m.coverage or 0.0)
        ranked.sort(key=lambda m: -m.score)
    for rank, m in enumerate(ranked, 1):
        m.rrf = 1.0 / (search.RRF_K + rank)


def _vector_strong(cos: float, near: Sequence[tuple[Key, float]], limits: floor.Floors) -> bool:
    """A neighbour is a strong vector match by the rule above ``COSINE_GAP`` (docs/recall.md).
    Without the gap every neighbour over the strong floor matched, however far below the best
    one, and a question near many memories of one project matched most of them."""
    spread = max(0.0, limits.strong - limits.weak)
    if cos < near[0][1] - COSINE_GAP * spread:
        return False
    if cos >= limits.strong + CLEAR * spread:
        return True
    others = [c for _, c in near[1:TYPICAL]]
    return bool(others) and cos >= limits.weak and cos - sum(others) / len(others) >= MARGIN * spread


def _checked(app: Realmem, query: str, found: list[Match], checks: list[dict[str, Any]]) -> list[Match]:
    """The first stage's matches, or, when a judge can check them (System One, or the chat judge
    with ``recall.relevance`` chat: read/relevance.py), its best candidates with the judge's
    picks as the matches and the rest weak."""
    chosen = relevance.judge(app) if found else None
    if chosen is None:
        return found
    best = sorted(found, key=lambda m: (-m.rrf, m.key))[:relevance.CANDIDATES]
    rows = _rows(app, [m.key for m in best])
    verdict = relevance.check(chosen, query, [rows[m.key] for m in best if m.key in rows])
    if verdict is None:
        return found  # the judge could not answer: the first stage's rule stands
    checks.append(verdict.trace)
    for m in best:
        m.weak = m.key not in verdict.relevant
    return best


def recall(app: Realmem, *, queries: Sequence[str] = (), raw_paths: Sequence[str] = (), id_values: Sequence[str] = (),
           page: int = 1, scope: str | None = None, recent_paths: Sequence[str] = (), page_size: int | None = None,
           count_hits: bool = True, embed: Callable[[Realmem, str], list[float] | None] = embedder.embed_query,
           later: Callable[[Callable[[], None]], None] | None = None) -> Result:
    """``embed`` turns a query into a vector (the configured embeddings endpoint by default;
    the benchmark and evaluation pass their own).  ``later``: when given, the hit is appended
    by the write it is handed, run after the answer is sent (the returned counts include it)."""
    stores = stores_for(app, scope)
    size = max(1, page_size or int(app.config["recall.pageSize"]))
    given_focus = _abs_focus(app, raw_paths)
    focus = given_focus or list(recent_paths)
    errors: list[str] = []
    notes: list[str] = []
    relevance: dict[Key, float] = {}
    chosen: list[Key] = []

    for value in id_values:
        try:
            chosen.append(app.resolve(value, stores, include_quarantined=False))
        except RealmemError as exc:
            errors.append(str(exc))

    asked = [" ".join(q.split()) for q in queries if q and q.strip()]
    if any(len(q) > MAX_QUERY for q in asked):
        notes.append(f"Searched the first {MAX_QUERY} characters of a longer query.")
        asked = [q[:MAX_QUERY] for q in asked]
    for q in asked:
        if not any(topical for _, _, topical in query_units(q)):
            notes.append(f"{quoted(q)} has no words to search for (only punctuation or common words).")
    weak: dict[Key, float] = {}
    checks: list[dict[str, Any]] = []
    if asked:
        for q in asked:
            for m in _checked(app, q, matches(app, q, stores, embed), checks):
                into = weak if m.weak else relevance
                into[m.key] = into.get(m.key, 0.0) + m.rrf
        # The closest plausible memories fill the first WEAK_MAX places the matches leave,
        # labelled, never counted as used.
        room = 0 if id_values else max(0, WEAK_MAX - len(relevance))
        weak = dict(sorted(((k, v) for k, v in weak.items() if k not in relevance),
                           key=lambda kv: (-kv[1], kv[0]))[:room])
    elif given_focus and not id_values:
        # paths alone: the memories attached to (or below) those paths
        for m in tables.iter_memories(app.conn, stores, path_scoped=True):  # streamed: a large store is not held
            if any(p not in WHOLE for p in m.paths) and path_class(app, m, given_focus) == 0:
                relevance[(m.store, m.id)] = 0.0

    items: list[Item] = []
    seen: set[Key] = set()
    for key in chosen:
        m = app.memory(key)
        if m is not None and key not in seen:
            seen.add(key)
            items.append(Item(m, app.counters(key)[0], -1, math.inf))
    # Rank on paths and counts alone; only the memories of the page shown are read whole.
    # Weak matches come after every match, by relevance alone.
    scores = relevance | weak
    ranked = sorted(_rank_key(key in weak, _path_class(app, key[0], stored, focus), used, scores[key], key)
                    for key, (stored, used) in _uses(app, [k for k in scores if k not in seen]).items())
    res = _page([*items, *ranked], page, size)
    rows = _rows(app, [r[5] for r in res.items if isinstance(r, tuple)])
    res.items = [r if isinstance(r, Item) else Item(rows[r[5]], r[6], r[7], -r[3], weak=r[0]) for r in res.items
                 if isinstance(r, Item) or r[5] in rows]  # a memory forgotten meanwhile is left out
    res.focus, res.errors, res.notes, res.queries = focus, errors, notes, asked
    res.asked = bool(asked or raw_paths or id_values)
    res.relevance = checks
    res.weak = bool(res.items) and not relevance and not chosen
    shown = [i for i in res.items if not i.weak]
    if count_hits and shown:
        hit = ev.RecallHit([(i.memory.store, i.memory.id) for i in shown])
        if later is None:
            app.emit([hit])
        else:
            later(lambda: app.emit([hit]))
        for i in shown:
            i.used_count += 1
    return res


def _rank_key(weak: bool, path_class: int, used: int, relevance: float, key: Key) -> tuple:
    """Matches by path class, coarse use, relevance; weak matches after them by relevance.
    The tail (key, used, path class) rides along for building the items."""
    if weak:
        return (True, 0, 0, -relevance, key[1], key, used, path_class)
    return (False, path_class, -use_bucket(used), -relevance, key[1], key, used, path_class)


def _page(items: Sequence[Any], page: int, size: int) -> Result:
    """One page of ``items``; a page outside 1..pages holds nothing (never another page)."""
    total = len(items)
    pages = max(1, math.ceil(total / size))
    shown = items[(page - 1) * size: page * size] if 1 <= page <= pages else []
    return Result(shown, page, pages, total, [])


def listing(app: Realmem, *, page: int = 1, scope: str | None = None, page_size: int | None = None) -> Result:
    """Every memory, sorted by path then most used (realmem_list)."""
    stores = stores_for(app, scope)
    size = max(1, page_size or int(app.config["list.pageSize"]))
    counts = dict(((s, i), u) for s, i, u in app.conn.execute("SELECT store, id, used_count FROM counters"))
    items = [Item(m, counts.get((m.store, m.id), 0), 0 if m.paths and not set(m.paths) <= WHOLE else 1, 0.0)
             for m in app.memories(stores)]
    items.sort(key=lambda i: (i.path_class, i.memory.paths, -i.used_count, i.memory.caption))
    return _page(items, page, size)
