"""The user's commands (show, edit, move, approve, forget, reindex, embed, retry, debug,
prune-paths): one function each, returning ``{"text", "details"}``.

The CLI (click) and the rpc child both call these, so the glue and the wording of a command
live once; the front ends only parse arguments, ask for confirmation and print.  The five
model-facing tools have the same shape and live in ``realmem.interface.tools``.  Failures are raised as
``realmem.errors`` classes, whose code each front end reports.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from realmem import frontend
from realmem.interface import manage
from realmem.read import embedder, missing, render
from realmem.storage import db
from realmem.stores import ids
from realmem.write import memories
from realmem.app import Realmem, RealmemError
from realmem.clients.errors import EndpointError, EndpointUnavailable
from realmem.projections import index
from realmem.gate.remember import remember, render_trace, retry as retry_queued
from realmem.words import count

Result = dict[str, Any]


def show(app: Realmem, id_value: str) -> Result:
    key = app.resolve(id_value)
    m = app.memory(key)
    assert m is not None  # resolve only answers keys of memories that exist
    details = manage.detail(app, key)
    stale = details["stale"]["text"] if details["stale"] else None
    return {"text": render.memory_block(m, details["used_count"], stale), "details": details}


def edit(app: Realmem, id_value: str, *, caption: str | None = None, content: str | None = None,
         paths: Sequence[str] | None = None) -> Result:
    key = app.resolve(id_value)
    stored = memories.edit_paths_from_input(app, key, list(paths)) if paths is not None else None
    m = memories.edit(app, key, caption=caption, content=content, stored_paths=stored, reason="manual")
    return {"text": f"Edited [{ids.short(m.id)}] {m.caption}", "details": render.memory_json(m, *app.counters(key))}


def move(app: Realmem, id_value: str, scope: str) -> Result:
    key = app.resolve(id_value)
    m = memories.move(app, key, app.store_for_scope(scope))
    return {"text": f"Moved [{ids.short(m.id)}] to {m.store.split(':')[0]}",
            "details": render.memory_json(m, *app.counters((m.store, m.id)))}


def approve(app: Realmem, id_value: str) -> Result:
    key = app.resolve(id_value)
    memories.approve(app, key)
    return {"text": f"Approved {ids.short(key.id)}; it is visible to the model again.",
            "details": {"id": ids.short(key.id)}}


def apply_suggested_path(app: Realmem, id_value: str, path: str) -> Result:
    m = missing.apply_suggestion(app, app.resolve(id_value), path)
    return {"text": f"Paths of [{ids.short(m.id)}] now {', '.join(m.paths)}", "details": {"paths": list(m.paths)}}


def prune_paths(app: Realmem, *, apply: bool) -> Result:
    """The plan (``apply=False``) or the pruning itself: drop paths that no longer exist and
    delete the memories left with none."""
    plan = missing.prune(app) if apply else missing.prune_plan(app)
    changes = [{"id": ids.short(m.id), "caption": m.caption, "gone": gone, "kept": kept, "delete": not kept}
               for m, gone, kept in plan]
    verb = "Pruned" if apply else "Would prune"
    lines = [f"{verb} {count(len(plan), 'memory')}:" if plan else "No memory points at a missing path."]
    lines += [f"  [{c['id']}] {c['caption']}: drop {', '.join(c['gone'])}" + (" (delete)" if c["delete"] else "")
              for c in changes]
    return {"text": "\n".join(lines), "details": {"changes": changes}}


def reindex(app: Realmem) -> Result:
    with app.write_lease(), db.transaction(app.conn):
        n = index.rebuild_fts(app.conn)
        index.prune_embeddings(app.conn)
        v = index.rebuild_vectors(app.conn)
    return {"text": f"Reindexed {count(n, 'memory')}; {count(v, 'vector')} indexed.",
            "details": {"memories": n, "vectors": v}}


def embed(app: Realmem, progress: Callable[[int, int], None] | None = None) -> Result:
    if embedder.client(app) is None:
        raise RealmemError(f"no embedding endpoint is set ({frontend.settings_hint('embedding.url')})")
    try:
        n = embedder.embed_missing(app, progress=progress)
    except (EndpointUnavailable, EndpointError) as exc:
        raise RealmemError(f"embedding failed: {exc}") from None
    return {"text": f"Embedded {count(n, 'memory')}.", "details": {"embedded": n}}


def retry(app: Realmem, progress: Callable[[int, int], None] | None = None) -> Result:
    outs = retry_queued(app, force=True, progress=progress)
    return {"text": "\n".join(o.text for o in outs) or "Nothing queued for this project.",
            "details": {"outcomes": [{"action": o.action, "text": o.text} for o in outs]}}


def debug(app: Realmem, *, caption: str, content: str, scope: str | None = None, paths: Sequence[str] = (),
          user_requested: bool = False, write: bool = False) -> Result:
    """The remember path with its full trace; writes nothing unless ``write``."""
    out = remember(app, caption, content, scope=scope, paths=list(paths), user_requested=user_requested,
                   source="debug", dry_run=not write)
    return {"text": render_trace(out),
            "details": {"action": out.action, "text": out.text, "trace": out.trace, "written": write}}
