"""/realmem manage: the memory list with its glyphs, filtered as you type or searched."""

from __future__ import annotations

from typing import Any

from realmem import ids, recall
from realmem.app import Realmem
from realmem.pathnotes import WHOLE, tier, urgency_tiers
from realmem.project import store_kind

GLYPHS = {"full": "●", "caption": "◐", "count": "○", None: "?"}


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
    scores = urgency_tiers(app, [(m.store, m.id) for m in mems])
    missing = {(s, i) for s, i in app.conn.execute("SELECT DISTINCT store, id FROM missing_paths")}
    high, mid = float(app.config["pathNotes.high"]), float(app.config["pathNotes.mid"])
    out = []
    for m in mems:
        key = (m.store, m.id)
        used, injected = app.counters(key)
        specific = any(p not in WHOLE for p in m.paths)
        score = scores[key]
        out.append({
            "id": ids.short(m.id), "caption": m.caption, "scope": store_kind(m.store), "paths": m.paths,
            "used_count": used, "path_inject_count": injected,
            "urgency": score, "glyph": (GLYPHS[tier(score, high, mid)] if score is not None else "?") if specific else " ",
            "missing": key in missing, "quarantined": m.quarantined,
        })
    if not (query and semantic):
        out.sort(key=lambda r: (-r["used_count"], r["caption"]))
    return out
