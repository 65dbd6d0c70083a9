"""An in-process copy of the active space's vectors, for exact KNN by one matrix product.

vec0's exact scan of 10k 896-dimension vectors costs 20-30 ms a query on these machines; the
same scan as a numpy matrix-vector product costs about 1 ms.  The copy is read once per
process and again only when the vectors change: every write to the vector index stamps a new
random ``vec.generation`` in the index's meta table (``index.touch_vectors``), in the writer's
transaction, so a reader sees the stamp that goes with the vectors its snapshot holds, and a
rolled-back write leaves a stamp no copy can have kept.  A reload costs a read of every vector
(about 40 ms at 10k), once per change.  Spaces past ``MAX_BYTES`` stay in
vec0 (the rpc child's memory budget holds the model too).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

import apsw
import attrs

from realmem.projections import index, queries
from realmem.storage import db

if TYPE_CHECKING:
    import numpy as np

MAX_BYTES = 48 * 1024 * 1024  # about 13k vectors of 896 float32 dimensions
MIN_VECTORS = 2_000  # below, vec0's scan costs a few ms: not worth numpy's import and a copy


@attrs.frozen
class Copy:
    generation: str
    rowids: np.ndarray   # int64, one per row
    unit: np.ndarray     # float32 rows of norm 1; a zero vector stays zero
    valid: np.ndarray    # bool: rows that have a direction (cosine is undefined for zero)


# Per database, what its space held at a stamp: the copy, or None when it was counted out (too
# few or too many vectors to copy), so a space is counted once per stamp.
_held: dict[str, tuple[str, Copy | None]] = {}
_lock = threading.Lock()


def copy(conn: apsw.Connection, dims: int) -> Copy | None:
    """The active space's vectors (of ``dims``, the index's) as the snapshot of ``conn`` holds
    them; None when there is no stamp, or fewer than ``MIN_VECTORS`` or more than ``MAX_BYTES``
    of them.  They are counted once per stamp, not taken from the largest rowid: rowids only
    grow (every edit caches a new vector), so a long-lived store's largest rowid can be far
    past its count."""
    if not dims:
        return None
    with _lock, db.transaction(conn, immediate=False):  # one snapshot; one thread loads at a time
        generation = index.vector_stamp(conn)
        if generation is None:
            return None  # written before the stamps: vec0 serves it until a change stamps one
        known = _held.get(conn.filename)
        if known is not None and known[0] == generation:
            return known[1]
        _held.pop(conn.filename, None)  # the old copy's memory first: the peak is one copy
        n, rows = queries.space_vectors(conn, index.active_fingerprint(conn) or "", dims)
        held = _load(generation, n, rows, dims) if MIN_VECTORS <= n and n * dims * 4 <= MAX_BYTES else None
        _held[conn.filename] = (generation, held)
        return held


def _load(generation: str, n: int, rows: Iterator[tuple[int, bytes]], dims: int) -> Copy:
    import numpy as np  # only a process that searches a large space needs it (start-up)
    rowids, unit = np.empty(n, dtype=np.int64), np.empty((n, dims), dtype=np.float32)
    for i, (rowid, blob) in enumerate(rows):
        rowids[i], unit[i] = rowid, np.frombuffer(blob, dtype=np.float32)
    norms = np.linalg.norm(unit, axis=1)
    valid = np.isfinite(norms) & (norms > 0)
    unit /= np.where(valid, norms, 1.0)[:, None]
    unit[~valid] = 0.0
    return Copy(generation, rowids, unit, valid)


def nearest(c: Copy, vector: list[float], k: int) -> list[tuple[int, float]]:
    """The ``k`` rows most similar to ``vector`` by cosine: (embedding rowid, cosine), best first."""
    import numpy as np  # loaded by the copy already; kept out of the module's import for start-up
    q = np.asarray(vector, dtype=np.float32)
    q = q / np.linalg.norm(q)
    sims = np.where(c.valid, c.unit @ q, -np.inf)
    k = min(k, int(c.valid.sum()))
    if k <= 0:
        return []
    top = np.argpartition(-sims, k - 1)[:k] if k < len(sims) else np.arange(len(sims))
    top = top[np.argsort(-sims[top], kind="stable")]
    return [(int(c.rowids[i]), float(sims[i])) for i in top]
