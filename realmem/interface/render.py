"""Text the model and people read: compact, token-frugal, 22-character ids."""

from __future__ import annotations

from collections.abc import Mapping

from realmem.stores import ids
from realmem.read.escape import inline
from realmem.events.types import Key
from realmem.stores.project import store_kind
from realmem.projections.state import Memory
from realmem.read.recall import Result, nothing_found
from realmem.words import count


def where(m: Memory) -> str:
    paths = ", ".join(inline(p) for p in m.paths if p not in (".", "~"))
    return f"{store_kind(m.store)}" + (f" · {paths}" if paths else "")


def memory_block(m: Memory, used: int | None = None, stale: str | None = None) -> str:
    meta = where(m) + (f" · used {used}" if used else "")
    flag = f"⚠ {stale}\n" if stale else ""
    return f"[{ids.short(m.id)}] {m.caption} ({meta})\n{flag}{m.content}"


def recall_text(r: Result, stale: Mapping[Key, str] | None = None) -> str:
    """Recall as the model reads it: a head with the page, one block per memory (with its
    freshness flag from ``stale``, freshness.flags_text), the next page."""
    if not r.items:
        return "\n".join([nothing_found(r), *r.notes, *r.errors])
    head = f"{count(r.total, 'memory')}, page {r.page} of {r.pages}:"
    if r.weak:
        head = (f"{nothing_found(r)} Closest, as weak matches (they may not answer it; "
                f"check before relying on them):")
    blocks = []
    for n, i in enumerate(r.items):
        if i.weak and not r.weak and (n == 0 or not r.items[n - 1].weak):
            blocks.append("Weaker, possibly related (not counted as used; check before relying on them):")
        blocks.append(memory_block(i.memory, i.used_count, (stale or {}).get((i.memory.store, i.memory.id))))
    body = "\n\n".join(blocks)
    tail = [f"More: page={r.page + 1}."] if r.page < r.pages else []
    return "\n".join([*r.notes, head, "", body, *([""] + tail if tail else []), *r.errors])


def list_text(r: Result) -> str:
    if r.past_end and r.total:
        return nothing_found(r)
    if not r.items:
        return "No memories yet."
    lines = [f"{count(r.total, 'memory')}, page {r.page} of {r.pages} (sorted by path, then used):"]
    for i in r.items:
        lines.append(f"[{ids.short(i.memory.id)}] {i.memory.caption} ({where(i.memory)}"
                     + (f" · used {i.used_count}" if i.used_count else "") + ")")
    if r.page < r.pages:
        lines.append(f"More: page={r.page + 1}.")
    return "\n".join(lines)


def memory_json(m: Memory, used: int = 0, injected: int = 0) -> dict:
    return {
        "id": ids.short(m.id), "uuid": m.id, "caption": m.caption, "content": m.content,
        "scope": store_kind(m.store), "store": m.store, "paths": m.paths, "used_count": used,
        "path_inject_count": injected, "created": m.created, "updated": m.updated, "file": m.file,
        "quarantined": m.quarantined,
    }


def table(headers: list[str], rows: list[list[object]], max_width: int = 60) -> str:
    """A plain aligned table for people scanning a terminal."""
    cells = [[str(h) for h in headers]] + [[_clip(str(c), max_width) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    line = lambda r: "  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip()  # noqa: E731
    return "\n".join([line(cells[0]), line(["─" * w for w in widths]), *[line(r) for r in cells[1:]]])


def _clip(s: str, n: int) -> str:
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 1] + "…"
