"""The remember gate's decision trace: what it saw, asked and decided, as typed records.

The gate fills a ``GateTrace`` while it runs; the ``Decided`` event stores it as plain JSON
(``dump``, with a ``version`` field), and ``load`` reads it back for ``realmem audit`` and
``realmem debug``.  A trace from before the schema was typed (no ``version``: the dict the
gate used to build by hand) is converted on load, so old logs still explain their decisions.

Field names follow that old dict, so a v1 trace reads like the old one plus ``version``.
Every field has a default: a trace written by an older release that lacked a section still
loads (cattrs ignores keys it does not know, so a newer trace loads too).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    import cattrs

TRACE_VERSION = 1


@attrs.define
class CandidateTrace:
    """The candidate as it was offered (secrets masked or redacted) and where it would go."""

    id: str = ""
    caption: str = ""
    content: str = ""
    scope: str | None = None           # as asked; None lets the judge decide
    paths: list[str] = attrs.Factory(list)
    user_requested: bool = False
    source: str = "remember"
    retry: bool = False
    store: str | None = None
    scope_used: str | None = None
    stored_paths: list[str] | None = None
    hash: str | None = None
    scope_source: str | None = None    # explicit | judge


@attrs.define
class Finding:
    category: str = ""
    kind: str = ""


@attrs.define
class SafetyTrace:
    ok: bool = True
    reason: str = ""
    findings: list[Finding] = attrs.Factory(list)


@attrs.define
class DuplicateTrace:
    id: str = ""
    store: str = ""
    caption: str = ""
    widen_impossible: str | None = None


@attrs.define
class EmbeddingTrace:
    configured: bool = False
    status: str = ""                   # ok | down | not-configured
    cached: bool | None = None
    dims: int | None = None
    error: str | None = None
    note: str | None = None


@attrs.define
class NeighbourTrace:
    """One neighbour found by BM25 and/or KNN, with its per-modality ranks and fused score."""

    id: str = ""
    store: str = ""
    scope: str = ""
    caption: str = ""
    paths: list[str] = attrs.Factory(list)
    cos: float | None = None
    cos_rank: int | None = None
    bm25: float | None = None
    bm25_rank: int | None = None
    rrf: float = 0.0
    judged: bool = False               # shown to the judge


@attrs.define
class NeighbourSources:
    bm25: int = 0
    knn: int = 0


@attrs.define
class AnswerTrace:
    """One judge answer, combined over shards: a choice, a score or a P(true)."""

    type: str = ""                     # choice | score | noul
    choice: str | None = None
    p: float | None = None
    score: float | None = None
    normalized: float | None = None
    probabilities: dict[str, float] = attrs.Factory(dict)
    confidence: float | None = None


@attrs.define
class JudgeTrace:
    configured: bool = False
    judge: str | None = None           # semif | chat:<model>: who answered
    usage: dict[str, float] = attrs.Factory(dict)  # tokens as the endpoint counted them
    error: str | None = None
    model: str | None = None
    requests: int | None = None
    state: str | None = None
    questions: dict[str, Any] = attrs.Factory(dict)   # exactly as sent on the wire
    raw: dict[str, Any] = attrs.Factory(dict)         # exactly as the judge answered
    answers: dict[str, AnswerTrace] = attrs.Factory(dict)


@attrs.define
class Pick:
    """The judge's pick of a neighbour for one question, and whether it cleared its threshold."""

    id: str | None = None
    p: float = 0.0
    confident: bool = False


@attrs.define
class GateDetails:
    """The judge's answers as the decision rules read them, and the thresholds they used."""

    judge_action: str = "add"
    covered_by: Pick = attrs.Factory(Pick)
    conflict_with: Pick = attrs.Factory(Pick)
    merge_with: Pick = attrs.Factory(Pick)
    importance: float | None = None
    durable: float = 1.0
    unsafe: float = 0.0
    user_requested: bool = False
    thresholds: dict[str, float] = attrs.Factory(dict)


@attrs.define
class DecisionTrace:
    """The rule that fired, with the steps that led to it."""

    action: str = ""
    rule: str = "-"
    target: list[str] | None = None    # [store, id]
    reason: str | None = None
    paths: list[str] | None = None     # a widen's new paths
    steps: list[str] = attrs.Factory(list)
    details: GateDetails | None = None  # None when no judge was asked


@attrs.define
class UrgencyTrace:
    score: float = 0.0
    tier: str = ""
    probabilities: dict[str, float] = attrs.Factory(dict)
    confidence: float | None = None
    would_store: str = ""


@attrs.define
class MemoryText:
    caption: str = ""
    content: str = ""
    paths: list[str] | None = None


@attrs.define
class RewriteTrace:
    """The Edit/Merge rewrite of the target: before, after and the diff."""

    mode: str = ""
    used_fallback: bool = False
    fallback_reason: str | None = None
    old: MemoryText = attrs.Factory(MemoryText)
    new: MemoryText = attrs.Factory(MemoryText)
    diff: str = ""


@attrs.define
class LockHolder:
    pid: int | None = None
    host: str | None = None
    held_for: float | None = None


@attrs.define
class LockTrace:
    timeout: float = 0.0
    holder: LockHolder | None = None


@attrs.define
class GateTrace:
    """Everything the remember gate did for one candidate."""

    version: int = TRACE_VERSION
    candidate: CandidateTrace = attrs.Factory(CandidateTrace)
    dry_run: bool = False
    thresholds: dict[str, float] = attrs.Factory(dict)  # the config values the gate ran with
    safety: SafetyTrace | None = None
    duplicate: DuplicateTrace | None = None
    embedding: EmbeddingTrace | None = None
    neighbours: list[NeighbourTrace] | None = None
    neighbour_sources: NeighbourSources | None = None
    judge: JudgeTrace | None = None
    urgency: UrgencyTrace | None = None
    decision: DecisionTrace | None = None
    rewrite: RewriteTrace | None = None
    replanned: bool = False            # the stores changed while judging: planned again under the lock
    lock: LockTrace | None = None
    timings: dict[str, float] = attrs.Factory(dict)  # seconds spent waiting on outside services
    decided_seq: int | None = None     # the Decided event's seq (set after it is written)


@functools.cache
def _converter() -> "cattrs.Converter":
    # cattrs is imported with the first trace read or written, as in events.types.
    import cattrs

    return cattrs.Converter()


def dump(trace: GateTrace) -> dict[str, Any]:
    """The trace as plain JSON values, as stored in ``Decided.trace`` (the judge's raw answers
    may hold tuples or other values JSON has no type for: they are stored as JSON reads them)."""
    return json.loads(json.dumps(_converter().unstructure(trace), default=str))


def load(data: Mapping[str, Any]) -> GateTrace | None:
    """A stored trace as records, or None when it is not the gate's (consolidation writes its
    own).  A trace without ``version`` is the old hand-built dict, converted first."""
    if "version" not in data:
        if "candidate" not in data:
            return None
        data = _from_v0(data)
    return _converter().structure(dict(data), GateTrace)


# The decision keys the gate's rules added to the old flat "decision" dict; v1 nests them.
_V0_DETAIL_KEYS = tuple(f.name for f in attrs.fields(GateDetails))


def _from_v0(data: Mapping[str, Any]) -> dict[str, Any]:
    """The old untyped trace in v1's shape: the same sections, except that the decision rules'
    inputs (judge_action, picks, scores, thresholds) move from the flat ``decision`` dict into
    ``decision.details``."""
    out = {**data, "version": 0}
    decision = data.get("decision")
    if isinstance(decision, Mapping):
        flat = dict(decision)
        details = {k: flat.pop(k) for k in _V0_DETAIL_KEYS if k in flat}
        if details:
            flat["details"] = details
        out["decision"] = flat
    return out
