"""/realmem manage: the memory list with its glyphs, filtered as you type or searched."""

from __future__ import annotations

from typing import Any

from realmem.read import freshness, recall
from realmem.stores import ids
from realmem.app import Realmem
from realmem.projections.urgency import tier, urgency_key, urgency_scores
from realmem.read.pathnotes import WHOLE
from realmem.stores.project import store_kind
from realmem.interface.render import memory_json
from realmem.projections import queries

GLYPHS = {"full": "●", "caption": "◐", "count": "○"}
STALE = "Δ"  # its paths changed in git after it was written


def glyph(score: float | None, specific: bool, high: float, mid: float) -> str:
    """● full · ◐ caption · ○ count · ? not judged; blank for store-wide memories (no notes)."""
    if not specific:
        return " "
    return GLYPHS[tier(score, high, mid)] if score is not None else "?"


def items(app: Realmem, *, query: str | None = None, semantic: bool = False) -> list[dict[str, Any]]:
    if query and semantic:
        res = recall.recall(app, queries=[query], page_size=200, count_hits=False)
        mems = [i.memory for i in res.items]
    else:
        mems = app.memories(include_quarantined=True)
        if query:
            q = query.lower()
            mems = [m for m in mems if q in m.caption.lower() or q in m.content.lower()
                    or any(q in p.lower() for p in m.paths)]
    scores = urgency_scores(app, [((m.store, m.id), urgency_key(m)) for m in mems])
    missing = queries.missing_keys(app.conn)
    counts = queries.all_counters(app.conn)
    high, mid = float(app.config["pathNotes.high"]), float(app.config["pathNotes.mid"])
    stale = freshness.flags_text(app, mems)
    out = []
    for m in mems:
        key = (m.store, m.id)
        used, injected = counts.get(key, (0, 0))
        score = scores[key]
        out.append({
            "id": ids.short(m.id), "caption": m.caption, "scope": store_kind(m.store), "paths": m.paths,
            "used_count": used, "path_inject_count": injected,
            "urgency": score, "glyph": glyph(score, any(p not in WHOLE for p in m.paths), high, mid),
            "missing": key in missing, "stale": stale.get(key), "quarantined": m.quarantined,
        })
    if not (query and semantic):
        out.sort(key=lambda r: (-r["used_count"], r["caption"]))
    return out


def detail(app: Realmem, key: tuple[str, str]) -> dict[str, Any]:
    """One memory for `show` (CLI and rpc): its JSON plus path urgency (score, tier under the
    current thresholds, per-level probabilities, confidence, source, whether it is valid for
    the current content and paths) and missing paths with their suggested new location."""
    import json

    m = app.memory(key)
    if m is None:
        raise KeyError(key)
    used, injected = app.counters(key)
    data = memory_json(m, used, injected)
    data["file_path"] = str(app.store_dir(m.store) / m.file)
    specific = any(p not in WHOLE for p in m.paths)
    data["specific"] = specific
    u = queries.urgency_row(app.conn, key)
    high, mid = float(app.config["pathNotes.high"]), float(app.config["pathNotes.mid"])
    if u:
        current = u[4] == urgency_key(m)
        data["urgency"] = {"score": u[0], "probabilities": json.loads(u[1]), "confidence": u[2], "source": u[3],
                           "current": current, "tier": tier(u[0] if current else None, high, mid)}
    else:
        data["urgency"] = None
    score = u[0] if u and data["urgency"]["current"] else None
    data["glyph"] = glyph(score, specific, high, mid)
    data["thresholds"] = {"high": high, "mid": mid}
    data["missing_paths"] = queries.missing_paths(app.conn, key)
    found = freshness.flag(app, m)
    data["stale"] = found.to_json() if found else None
    return data
