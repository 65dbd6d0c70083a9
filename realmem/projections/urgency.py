"""How urgent a memory's path note is: the judged score, what a judgement is valid for, and the
tier a score is shown at.  Read by path notes and manage, written by the gate and the worker."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any

from realmem.config import Config
from realmem.events.types import Key
from realmem.projections import queries


def urgency_key(memory: Any) -> str:
    """What an urgency judgement is valid for: sha256 of the content plus the JSON paths.

    Accepts a Memory (or anything with ``content`` and ``paths``)."""
    return urgency_key_of(memory.content, memory.paths)


def urgency_key_of(content: str, paths: Sequence[str]) -> str:
    payload = content.strip() + "\n" + json.dumps(list(paths), ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def tier(score: float | None, high: float, mid: float) -> str:
    """How a path note is shown: full content (High), caption with id (Mid, or not judged
    yet) or only counted (Low)."""
    if score is None:
        return "caption"
    if score >= high:
        return "full"
    return "caption" if score >= mid else "count"


def urgency_tier(score: float | None, cfg: Config) -> str:
    """The same tier named by urgency level: high / mid / low under the current thresholds."""
    shown = tier(score, float(cfg["pathNotes.high"]), float(cfg["pathNotes.mid"]))
    return {"full": "high", "caption": "mid", "count": "low"}[shown]


def urgency_scores(app: Any, items: Iterable[tuple[Key, str]]) -> dict[Key, float | None]:
    """The urgency score of each (memory key, its current ``urgency_key``), or None when the
    memory was never judged or was judged on other content or paths."""
    items = list(items)
    judged = queries.urgency_scores(app.conn, [key for key, _ in items])
    return {key: row[1] if (row := judged.get(key)) and row[0] == current else None for key, current in items}


TIER_SHOWN = {"high": "full content", "mid": "caption with id", "low": "only counted"}
