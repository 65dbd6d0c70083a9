"""Hybrid retrieval: BM25 over the FTS5 index, cosine KNN over vec0, fused with RRF.

Shared by recall and by the remember gate's neighbour step.  Results are memory keys with
per-modality ranks, so a trace can show cos / BM25 / RRF for each neighbour.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

import attrs
import apsw

from realmem.events.types import Key
from realmem.projections import index, queries
from realmem.projections.tokenize import fts_match, query_units
from realmem.read import vectors

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

RRF_K = 60
T = TypeVar("T")


@attrs.define
class Hit:
    key: Key
    bm25: float | None = None       # FTS5 bm25 (lower is better)
    bm25_rank: int | None = None    # 1-based
    cosine: float | None = None     # similarity, 1 = identical
    cos_rank: int | None = None
    rrf: float = 0.0


def _store_filter(stores: Sequence[str]) -> tuple[str, list[str]]:
    return f"m.store IN ({','.join('?' * len(stores))}) AND m.quarantined IS NULL", list(stores)


def bm25(conn: apsw.Connection, text: str, stores: Sequence[str], limit: int,
         max_terms: int | None = None) -> list[tuple[Key, float]]:
    """The best ``limit`` BM25 matches of ``text``.  With ``max_terms`` only the text's
    ``max_terms`` rarest (highest-idf) topical units are searched (see ``_rarest``)."""
    match = fts_match(text) if max_terms is None else _rarest(conn, text, limit, max_terms)
    if match is None:
        return []
    return [((s, i), score) for s, i, _, score in _top(conn, match, stores, limit)]


def _rarest(conn: apsw.Connection, text: str, limit: int, max_terms: int) -> str | None:
    """The FTS5 expression of the text's ``max_terms`` rarest topical units
    (more only while those match fewer than ``limit`` memories): a memory sharing the text's
    rare words (a near-duplicate) still ranks first, while common words, which match most of
    a large store and make FTS5 score every match, add fewer postings to read.  Past
    ``POSTINGS_BUDGET`` the common ones are split off as in Lucene's CommonTermsQuery
    (see ``_common_terms``)."""
    picked: list[tuple[tuple[str, ...], float, int]] = []
    postings = 0
    for i, unit in enumerate(sorted(_weighted_units(conn, text), key=lambda u: -u[1])):
        # Past the cap only while the rare words match too few memories to fill the list,
        # so a candidate of unique words still brings related memories along.
        if i >= max(1, max_terms) and postings >= limit:
            break
        picked.append(unit)
        postings += unit[2]
    if not picked:
        return None
    if postings > POSTINGS_BUDGET:
        return _common_terms(conn, picked)
    return _match({c for cs, _, _ in picked for c in cs})


# FTS5 scores every memory its query matches (a docsize lookup and the bm25 sum each) and
# cannot skip ahead the way Lucene's block-max WAND does, so a query whose words together
# match more memories than this is narrowed first.
POSTINGS_BUDGET = 10_000


def _common_terms(conn: apsw.Connection, picked: list[tuple[tuple[str, ...], float, int]]) -> str:
    """The query of Lucene's CommonTermsQuery (Elasticsearch's ``cutoff_frequency``) for units
    whose postings together pass ``POSTINGS_BUDGET``, rarest first in ``picked``.

    The rarest units, as many as stay within the budget, decide the match on their own: a
    memory holding none of them holds only words that most memories hold.  When even the
    rarest known unit passes the budget (every word of the text is common), the match is a
    conjunction instead: the rarest units all required, as few as bring the estimated matches
    (words independent) within the budget, and every unit still counted in the score, so the
    memory holding the most of them (a twin) ranks first."""
    rare: list[tuple[str, ...]] = []
    seen = 0
    for cs, _, df in picked:
        if seen + df > POSTINGS_BUDGET:
            break
        rare.append(cs)
        seen += df
    if seen:  # rare words the store knows (a word it never saw matches nothing)
        return _match({c for cs in rare for c in cs})
    n, _ = _frequencies(conn, [])
    known = [(cs, df) for cs, _, df in picked if df]
    required, matches = [], float(n)
    for cs, df in known:
        required.append(cs)
        matches *= df / n
        if matches <= POSTINGS_BUDGET:
            break
    # The required units count twice in the score (in the AND and in the OR): every memory
    # matched holds them all, so that only weighs their frequencies above the others'.
    scored = _match({c for cs, _ in known for c in cs})
    both = " AND ".join(f"({_match(set(cs))})" for cs in required)
    return f"{both} AND ({scored})"


def neighbour_lists(conn: apsw.Connection, reader: Callable[[], apsw.Connection | None] | None, text: str,
                    vector: list[float] | None, stores: Sequence[str], limit: int,
                    max_terms: int) -> tuple[list[tuple[Key, float]], list[tuple[Key, float]]]:
    """The gate's BM25 (rarest ``max_terms`` units) and KNN lists: the same lists ``bm25``
    and ``knn`` give.  In a space of ``PARALLEL_KNN`` vectors or more, the KNN runs on
    another connection while the BM25 ranks here (``knn_beside``); SQLite releases the GIL,
    so each runs on its own core.  ``reader()`` opens that connection only when it is
    wanted; without one (None, or None from it inside a transaction, whose writes other
    connections cannot see) both run here."""
    match = _rarest(conn, text, limit, max_terms)
    kn = knn_beside(conn, reader, vector, stores, limit) if vector else list
    bm = [] if match is None else [((s, i), score) for s, i, _, score in _top(conn, match, stores, limit)]
    return bm, kn()


def knn_beside(conn: apsw.Connection, reader: Callable[[], apsw.Connection | None] | None,
               vector: list[float], stores: Sequence[str], limit: int) -> Callable[[], list[tuple[Key, float]]]:
    """``knn``, already running on the connection ``reader()`` gives when the space holds
    ``PARALLEL_KNN`` vectors or more (so the caller's own search runs meanwhile); call the
    result for the list.  Without that connection it runs on ``conn``, when called."""
    running = beside(reader, knn, vector, stores, limit) if _vectors(conn) >= PARALLEL_KNN else None
    return running or (lambda: knn(conn, vector, stores, limit))


def beside(reader: Callable[[], apsw.Connection | None] | None, work: Callable[..., T], *args: object
           ) -> Callable[[], T] | None:
    """``work(other, *args)``, already running on the search thread with the connection
    ``other = reader()``; call the result for its value.  None when there is no such
    connection (no reader, or None from it inside a transaction, whose writes other
    connections cannot see): the caller runs the work itself."""
    other = reader() if reader is not None else None
    if other is None:
        return None
    return _pool().submit(work, other, *args).result


PARALLEL_KNN = 5_000  # vectors before the KNN (tens of ms) pays for a thread and a second connection


def _vectors(conn: apsw.Connection) -> int:
    return conn.execute("SELECT coalesce(max(rowid), 0) FROM embeddings").fetchone()[0]


@functools.cache
def _pool() -> ThreadPoolExecutor:
    from concurrent.futures import ThreadPoolExecutor  # only a search in a large space needs a thread (start-up)
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="realmem-knn")


def _top(conn: apsw.Connection, match: str, stores: Sequence[str], limit: int) -> list[tuple[str, str, int, float]]:
    """(store, id, rowid, bm25 score) of the best ``limit`` FTS5 matches in ``stores``."""
    where, args = _store_filter(stores)
    # Rank inside FTS5 first, then join: joining every match before sorting costs more than
    # the ranking itself on large stores.  Over-fetch so other projects' hits cannot crowd out
    # the visible ones.  CROSS JOIN keeps the ranked rows the outer loop: left to itself the
    # planner walks every memory of the visible stores to probe them.
    return conn.execute(
        f"SELECT m.store, m.id, f.rowid, f.score FROM (SELECT rowid, bm25(memories_fts, 3.0, 1.0) AS score "
        f"FROM memories_fts WHERE memories_fts MATCH ? ORDER BY score, rowid LIMIT ?) f "
        f"CROSS JOIN memories m ON m.rowid = f.rowid WHERE {where} ORDER BY f.score, f.rowid LIMIT ?",
        (match, limit * 4, *args, limit),
    ).fetchall()


def _weighted_units(conn: apsw.Connection, text: str) -> list[tuple[tuple[str, ...], float, int]]:
    """The topical query units of ``text``: (their covers, idf, document frequency)."""
    units = query_units(text)
    covers = sorted({c for _, cs, topical in units if topical for c in cs})
    if not covers:
        return []
    n, df = _frequencies(conn, covers)
    # A unit weighs what its rarest known form weighs.  A word the store never saw weighs
    # half way between the query's commonest known word and a word of no document: an agent's
    # extra word ("invoice number *format*") must not veto a match on the words the store
    # holds, and a near miss sharing one common word with a memory must not match (on the
    # public set's tune split, half way lets far fewer off-topic questions match than the
    # lightest weight, at the same recall@3).
    freq = [(cs, max((df[c] for c in cs), default=0)) for _, cs, topical in units if topical]
    known = [_idf(n, f) for _, f in freq if f]
    absent = (min(known) + _idf(n, 0)) / 2 if known else _idf(n, 0)
    return [(cs, _idf(n, f) if f else absent, f) for cs, f in freq]


def _match(covers: set[str]) -> str:
    """An FTS5 OR expression of ``covers`` (a cover ending in ``*`` is a prefix query)."""
    # A stem's prefix query already finds the word itself: leaving the word out halves the
    # postings FTS5 reads for it.
    stems = [c[:-1] for c in covers if c.endswith("*")]
    return " OR ".join(('"' + c[:-1].replace('"', '""') + '"*') if c.endswith("*")
                       else ('"' + c.replace('"', '""') + '"') for c in sorted(covers)
                       if c.endswith("*") or not any(c.startswith(st) for st in stems))


@attrs.define
class Lexical:
    key: Key
    bm25: float       # FTS5 bm25 (lower is better)
    coverage: float   # share of the query's topic weight the memory contains, 0..1


def _vocab(conn: apsw.Connection) -> str:
    """A per-connection fts5vocab view of the index: document frequency of each token."""
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.memories_vocab USING fts5vocab(main, 'memories_fts', 'row')")
    return "temp.memories_vocab"


def _idf(n: int, df: int) -> float:
    """BM25's inverse document frequency, smoothed so it stays positive in tiny stores."""
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


_df_cache: dict[str, tuple[bytes, int, dict[str, int]]] = {}


def _frequencies(conn: apsw.Connection, covers: Sequence[str]) -> tuple[int, dict[str, int]]:
    """(documents indexed, document frequency of each cover; a stem counts its most common
    form).  Cached per database until the index changes: FTS5 rewrites its structure record
    (row 10 of its data table) on every write, so that record is the cache's version, with
    the schema's (a replay drops the index and makes it again, and the record starts over)."""
    version = conn.execute("SELECT block FROM memories_fts_data WHERE id = 10").fetchone()
    schema = conn.execute("PRAGMA schema_version").fetchone()[0]
    version = (bytes(version[0]) if version else b"") + b"@" + str(schema).encode()
    cached = _df_cache.get(conn.filename)
    if cached is None or cached[0] != version:
        n = max(1, conn.execute("SELECT count(*) FROM memories_fts_docsize").fetchone()[0])
        cached = _df_cache[conn.filename] = (version, n, {})
    _, n, known = cached
    vocab = None
    for c in covers:
        if c in known:
            continue
        vocab = vocab or _vocab(conn)
        if c.endswith("*"):
            stem = c[:-1]
            row = conn.execute(f"SELECT coalesce(max(doc), 0) FROM {vocab} WHERE term >= ? AND term < ?",
                               (stem, stem + "\U0010ffff")).fetchone()
        else:
            row = conn.execute(f"SELECT doc FROM {vocab} WHERE term = ?", (c,)).fetchone()
        known[c] = row[0] if row else 0
    return n, known


def lexical(conn: apsw.Connection, text: str, stores: Sequence[str], limit: int,
            min_coverage: float = 0.0) -> list[Lexical]:
    """BM25 candidates with their coverage of the query (see docs/recall.md).

    Coverage weighs each query unit (word, or CJK character) by its idf in the index, gives
    function words no weight, and counts a unit as present when the memory holds it, a word
    with its English stem, or a CJK bigram around it.  Memories below ``min_coverage`` may
    be left out: the search only asks FTS5 for the heaviest units, enough that a memory with
    none of them cannot reach it, so common words add no postings to read."""
    weighted = [(cs, w) for cs, w, _ in _weighted_units(conn, text)]
    total = sum(w for _, w in weighted)
    if total <= 0:
        return []
    needed, rest = set(), total
    for cs, w in sorted(weighted, key=lambda u: -u[1]):
        if rest < min_coverage * total * (1 - 1e-9):
            break
        needed.update(cs)
        rest -= w
    rows = _top(conn, _match(needed), stores, limit)
    if not rows:
        return []
    texts = dict(((r, f" {c} {b} ") for r, c, b in conn.execute(
        f"SELECT rowid, caption, body FROM memories_fts WHERE rowid IN ({','.join('?' * len(rows))})",
        [r[2] for r in rows])))
    # A stem is present as the start of a word, any other form as a whole word.
    needles = [(tuple(" " + c[:-1] if c.endswith("*") else " " + c + " " for c in cs), w) for cs, w in weighted]
    out = []
    for s, i, rowid, score in rows:
        body = texts.get(rowid, "")
        got = sum(w for forms, w in needles if any(f in body for f in forms))
        out.append(Lexical((s, i), score, got / total))
    return out


def usable(vector: Sequence[float] | None) -> bool:
    """A query vector KNN can rank by: finite, not all zero (cosine is undefined there)."""
    return bool(vector) and all(math.isfinite(x) for x in vector) and any(x != 0.0 for x in vector)


PREFILTER_MIN = 20_000  # vectors in the space before the binary prefilter pays off
OVERSAMPLE = 4  # shortlist size per wanted result; vec0's cost grows with k, so keep it small
SLACK = 64  # extra rows the exact KNN fetches to absorb rows filtered out after it
KNN_MAX = 4096  # the largest k the KNN asks vec0 for


def knn(conn: apsw.Connection, vector: list[float], stores: Sequence[str], limit: int) -> list[tuple[Key, float]]:
    """Nearest memories by cosine similarity (empty when no vector index exists).

    Small spaces are scanned exactly: by one matrix product over the process's copy of the
    vectors (``read/vectors.py``), or by vec0 when there is none.  Large ones take a shortlist by hamming
    distance from the sign-quantized index (much cheaper at the same k), then
    re-rank that oversampled shortlist exactly by cosine from the cached float vectors."""
    dims = index.vec_dims(conn)
    if not dims or len(vector) != dims or not usable(vector):
        return []
    where, args = _store_filter(stores)
    blob = index.pack(vector)
    # The largest rowid bounds the count from above (rowids only grow): a space it puts under
    # the copy's size needs no look at the copy, and one under the prefilter's no count.
    size = _vectors(conn)
    held = vectors.copy(conn, dims) if size >= vectors.MIN_VECTORS else None
    if held is not None:
        size = len(held.rowids)
    elif size >= PREFILTER_MIN:
        size = queries.space_size(conn, index.active_fingerprint(conn) or "")
    binary = held is None and size >= PREFILTER_MIN and index.has_binary(conn)
    if binary:
        k = max(64, limit * OVERSAMPLE)
        # The exact rerank looks up the memories of the vectors up to the (limit + SLACK)-th
        # nearest only, ties included: a memory row per shortlisted vector cost most of it.
        # When those leave fewer than ``limit`` (other projects' memories), all are looked up.
        rerank = (f"WITH near AS MATERIALIZED (SELECT e.hash AS hash, vec_distance_cosine(e.vector, ?) AS d "
                  f"FROM json_each(?) b CROSS JOIN embeddings e ON e.rowid = b.value), "
                  f"cut AS (SELECT d FROM near ORDER BY d LIMIT 1 OFFSET ?) "
                  f"SELECT m.store, m.id, n.d FROM near n CROSS JOIN memories m ON m.hash = n.hash "
                  f"WHERE n.d <= coalesce((SELECT d FROM cut), n.d) AND {where} ORDER BY n.d, m.store, m.id LIMIT ?")
    else:
        sql = (f"SELECT m.store, m.id, v.distance FROM (SELECT rowid, distance FROM {index.VEC_TABLE} "
               f"WHERE embedding MATCH ? AND k = ?) v CROSS JOIN embeddings e ON e.rowid = v.rowid "
               f"CROSS JOIN memories m ON m.hash = e.hash WHERE {where} ORDER BY v.distance, m.store, m.id LIMIT ?")
        k = limit + SLACK
    # vec0 KNN cannot filter on columns of another table (and a vector's hash may be shared
    # by memories of several stores), so it fetches a few more than wanted and filters after;
    # vec0's cost grows with k, so the shortlist grows only when other projects' or
    # quarantined memories (or cached vectors of edited ones) left it short.  CROSS JOIN
    # keeps vec0's shortlist the outer loop (as in _top).
    while True:
        k = min(KNN_MAX, k)
        if held is not None:
            rows = _memories_of(conn, vectors.nearest(held, vector, k), where, args, limit)
        elif binary:
            shortlist = json.dumps(_hamming_shortlist(conn, blob, k, dims))
            rows = conn.execute(rerank, (blob, shortlist, limit + SLACK - 1, *args, limit)).fetchall()
            if len(rows) < limit:
                rows = conn.execute(rerank, (blob, shortlist, k, *args, limit)).fetchall()
        else:
            rows = conn.execute(sql, (blob, k, *args, limit)).fetchall()
        if len(rows) >= limit or k >= min(KNN_MAX, size):
            break
        k *= 4
    return [((s, i), 1.0 - dist) for s, i, dist in rows if dist is not None and math.isfinite(dist)]


def _memories_of(conn: apsw.Connection, near: list[tuple[int, float]], where: str, args: list[str],
                 limit: int) -> list[tuple[str, str, float]]:
    """(store, id, cosine distance) of the memories in ``stores`` whose vectors are ``near``
    (embedding rowid, cosine), nearest first as the vec0 path orders them."""
    cos = dict(near)
    rows = conn.execute(f"SELECT m.store, m.id, e.rowid FROM json_each(?) b CROSS JOIN embeddings e "
                        f"ON e.rowid = b.value CROSS JOIN memories m ON m.hash = e.hash WHERE {where}",
                        (json.dumps([r for r, _ in near]), *args)).fetchall()
    return sorted(((s, i, 1.0 - cos[r]) for s, i, r in rows), key=lambda t: (t[2], t[0], t[1]))[:limit]


PROBE_K = 16  # the first, cheap look at how near the query's nearest vectors are
CAP_MIN_K = 512  # below it vec0's own pass costs less than a probe and the capped tries


GAPS_KEPT = 8  # recent shortlists whose k-th distance (past the probe's) the first try starts from
_gaps: dict[tuple[str, int], list[int]] = {}


def _hamming_shortlist(conn: apsw.Connection, blob: bytes, k: int, dims: int) -> list[int]:
    """The rowids vec0 returns for the k nearest sign-quantized vectors: the same list as
    ``k = ?`` alone, for a large k in a fraction of the time.

    vec0 picks each chunk's nearest rows by a pass over the chunk per row picked, only among
    rows that pass its distance constraint, so its cost is rows x k without one and rows x
    (rows within it) with one.  A cap at or above the k-th nearest distance returns the very
    same list (every row of it passes, and rows beyond the cap are never picked before them);
    a cap below it returns fewer than k rows, and is raised.  Distances are whole bit counts;
    the cap is raised by the growth the counts so far show, so it lands at or just past the
    k-th distance in a few cheap tries instead of overshooting into thousands of rows.
    Each try costs a pass over every vector, so the first one starts at the median of how far
    past the probe's distance the last shortlists of this database found their k-th: one try, or two, instead of three
    or four (starting at the largest overshot by several bits, which costs more than a try)."""
    knn = f"SELECT rowid, distance FROM {index.BIN_TABLE} WHERE embedding MATCH vec_quantize_binary(?) AND k = ?"
    probe = conn.execute(knn, (blob, k if k < CAP_MIN_K else PROBE_K)).fetchall()
    if len(probe) < PROBE_K or k < CAP_MIN_K:
        return [r for r, _ in probe]  # the probe already is the answer
    # The last cap tried and the rows within it: the probe's farthest distance holds at least
    # PROBE_K rows.
    last_cap, last_n = probe[-1][1], PROBE_K
    gaps = _gaps.setdefault((conn.filename, k), [])
    cap = last_cap + (sorted(gaps)[len(gaps) // 2] if gaps else 2)
    while True:
        rows = conn.execute(knn + " AND distance <= ?", (blob, k, cap)).fetchall()
        if len(rows) >= k or cap >= dims:  # no distance exceeds the bit count: every row passed
            if len(rows) >= k:
                gaps[:] = [*gaps[1 - GAPS_KEPT:], int(rows[-1][1] - probe[-1][1])]
            return [r for r, _ in rows]
        # Rows within the cap grow about geometrically with it near the nearest ones: step by
        # the growth seen so far towards k.  A try short of k costs a few ms, a cap too far
        # thousands of rows more, and growth measured on a few rows is a rough guess (it
        # speeds up further out): from far below the step goes half way.
        if len(rows) > last_n > 0:
            rate = math.log(len(rows) / last_n) / (cap - last_cap)
            step = math.ceil(math.log(k / len(rows)) / rate / (2 if len(rows) * 4 < k else 1))
        else:
            step = 2 * (cap - last_cap)
        last_cap, last_n = cap, len(rows)
        cap += max(1, min(step, 64))


def fuse(bm25_lists: Sequence[list[tuple[Key, float]]], knn_lists: Sequence[list[tuple[Key, float]]],
         *, k: int = RRF_K, limit: int = 254) -> list[Hit]:
    """Reciprocal Rank Fusion of any number of ranked lists; best first."""
    hits: dict[Key, Hit] = {}
    for lst in bm25_lists:
        for rank, (key, score) in enumerate(lst, 1):
            h = hits.setdefault(key, Hit(key))
            if h.bm25_rank is None or rank < h.bm25_rank:
                h.bm25, h.bm25_rank = score, rank
            h.rrf += 1.0 / (k + rank)
    for lst in knn_lists:
        for rank, (key, cos) in enumerate(lst, 1):
            h = hits.setdefault(key, Hit(key))
            if h.cos_rank is None or rank < h.cos_rank:
                h.cosine, h.cos_rank = cos, rank
            h.rrf += 1.0 / (k + rank)
    return sorted(hits.values(), key=lambda h: (-h.rrf, h.key))[:limit]
