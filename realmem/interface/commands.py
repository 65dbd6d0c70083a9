"""The user's commands (show, edit, move, approve, reindex, embed, retry, debug, prune-paths,
recall, list, remember, scan, manage, consolidate, import, check-paths, the gitignore check
and fix): one function each, returning ``{"text", "details"}`` (and ``failed`` where the CLI
exits 1 after printing).  The settings commands live in ``realmem.interface.settings``, which
the CLI loads without the gate.

The CLI (click) and the rpc child both call these, so the glue and the wording of a command
live once; the front ends only parse arguments, ask for confirmation and print.  The five
model-facing tools have the same shape and live in ``realmem.interface.tools``.  Failures are raised as
``realmem.errors`` classes, whose code each front end reports.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from realmem import frontend
from realmem.interface import manage, session, tools
from realmem.interface import render
from realmem.read import embedder, missing, recall as recall_mod
from realmem.read.escape import inline
from realmem.storage import db
from realmem.stores import frames, ids, paths as paths_mod
from realmem.gate import importer
from realmem.write import gitignore, memories, observe, prune
from realmem.app import Realmem, RealmemError
from realmem.clients.errors import EndpointError, EndpointUnavailable
from realmem.events.trace import dump as dump_trace
from realmem.jobs import consolidate as consolidate_mod
from realmem.projections import index, queries
from realmem.gate.remember import remember as remember_mod, retry as retry_queued
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
    m = prune.apply_suggestion(app, app.resolve(id_value), path)
    return {"text": f"Paths of [{ids.short(m.id)}] now {', '.join(map(inline, m.paths))}",
            "details": {"paths": list(m.paths)}}


def prune_paths(app: Realmem, *, apply: bool) -> Result:
    """The plan (``apply=False``) or the pruning itself: drop paths that no longer exist and
    delete the memories left with none."""
    plan = prune.prune(app) if apply else missing.prune_plan(app)
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
    texts = [render.outcome_text(o) for o in outs]
    return {"text": "\n".join(texts) or "Nothing queued for this project.",
            "details": {"outcomes": [{"action": o.action, "text": t} for o, t in zip(outs, texts)]}}


def debug(app: Realmem, *, write: bool = False, **fact: Any) -> Result:
    """The remember path with its full trace; writes nothing unless ``write``.  ``fact``: the
    gate's remember params."""
    out = remember_mod(app, **fact, source="debug", dry_run=not write)
    assert out.trace is not None  # remember always traces; only a failed retry has none
    text = render.outcome_text(out)
    return {"text": render.render_trace(out.trace, text),
            "details": {"action": out.action, "text": text, "trace": dump_trace(out.trace), "written": write}}


def remember(app: Realmem, **fact: Any) -> Result:
    """`realmem remember` / `realmem add`: the gate's decision, with the action under its own name
    (the model-facing tool calls it ``decision``).  ``fact``: the gate's remember params."""
    out = remember_mod(app, **fact)
    text = render.outcome_text(out)
    return {"text": text, "details": {"action": out.action, "id": ids.short(out.memory.id) if out.memory else None,
                                      "queued": out.queued, "text": text, "warnings": render.outcome_notes(out)}}


def check_paths(app: Realmem, raw: Sequence[str]) -> Result:
    """What each user-typed path names (file, dir, glob, missing, invalid).  A path that names
    nothing is kept (it may be written later), but a typo should not pass silently: the text
    holds one warning line per such path, the add screen asks before saving them."""
    items = [paths_mod.check_input(p, cwd=app.cwd, home=frames.user_home()) for p in raw]
    warnings = [i["warning"] for i in items if i["kind"] == "missing"]
    return {"text": "\n".join(f"warning: {w}" for w in warnings),
            "details": {"items": items, "invalid": [i["warning"] for i in items if i["kind"] == "invalid"],
                        "warnings": warnings}}


def recall(app: Realmem, **query: Any) -> Result:
    """`realmem recall`: the tool's text; details add what the ranking knows (path class,
    freshness flag, errors, notes).  ``query``: ``tools.run_recall``'s params.
    ``details["failed"]``: nothing found for ids, or an error."""
    res, stale = tools.run_recall(app, **query)
    items = [render.memory_json(i.memory, i.used_count) | {"path_class": i.path_class,
                                                           "stale": stale.get((i.memory.store, i.memory.id)),
                                                           "weak": i.weak}
             for i in res.items]
    return {"text": render.recall_text(res, stale),
            "details": {"page": res.page, "pages": res.pages, "total": res.total, "errors": res.errors,
                        "notes": res.notes, "weak": res.weak, "relevance": res.relevance,
                        "message": render.nothing_found(res) if res.weak or not res.items else None,
                        "items": items},
            "failed": not res.items and bool(query.get("id_values") or res.errors)}


def listing(app: Realmem, **page: Any) -> Result:
    """`realmem list`: every memory as a table, sorted by path, then used (``page``:
    recall.listing's params)."""
    res = recall_mod.listing(app, **page)
    if not res.items:
        text = render.nothing_found(res) if res.past_end and res.total else "No memories yet."
    else:
        rows = [[ids.short(i.memory.id), i.memory.store.split(":")[0], ", ".join(i.memory.paths), i.used_count,
                 i.memory.caption] for i in res.items]
        text = (render.table(["id", "scope", "paths", "used", "caption"], rows)
                + f"\npage {res.page} of {res.pages} · {count(res.total, 'memory')}")
    return {"text": text, "details": tools.page_details(res)}


def show_text(app: Realmem, id_value: str) -> Result:
    """`realmem show`: the memory with every metadata line (the rpc's ``show`` text is the
    model's memory block)."""
    shown = show(app, id_value)
    d = shown["details"]
    lines = [f"{d['id']}  {d['caption']}",
             f"scope {d['scope']} · paths {', '.join(d['paths'])} · used {d['used_count']} · "
             f"shown {d['path_inject_count']}",
             f"file {d['file_path']}"]
    if d["urgency"]:
        lines.append(f"urgency {d['urgency']['score']:.2f} ({d['urgency']['source']})")
    if d["stale"]:
        lines.append(f"⚠ {d['stale']['text']}")
    if d["quarantined"]:
        lines.append(f"QUARANTINED: {d['quarantined']}")
    return {"text": "\n".join([*lines, "", d["content"]]), "details": d}


def scan(app: Realmem) -> Result:
    """Read every fact file changed outside realmem now."""
    events = observe.scan_stores(app)
    return {"text": f"{count(len(events), 'change')} recorded.", "details": {"changes": len(events)}}


def manage_list(app: Realmem, *, query: str | None = None, semantic: bool = False) -> Result:
    """Memories with urgency glyphs: ● full · ◐ caption · ○ count · ? unjudged; ✗ missing path;
    Δ changed in git since written; Q quarantined."""
    items = manage.items(app, query=query, semantic=semantic)
    rows = [[r["glyph"] + ("✗" if r["missing"] else " ") + (manage.STALE if r["stale"] else " ")
             + ("Q" if r["quarantined"] else " "), r["id"], r["scope"],
             ", ".join(r["paths"]), r["used_count"], r["caption"]] for r in items]
    text = render.table(["", "id", "scope", "paths", "used", "caption"], rows) if rows else "No memories."
    found = queries.conflict_files(app.conn, app.visible_stores())
    conflicts = session.conflict_note(app, found) + "." if found else None  # their memories are not in the list
    return {"text": f"{conflicts}\n{text}" if conflicts else text, "details": {"items": items, "conflicts": conflicts}}


def consolidate(app: Realmem, *, stores: Sequence[str] = (), revise_paths: bool = True,
                progress: Callable[[int, int, str], None] | None = None) -> Result:
    report = consolidate_mod.consolidate(app, stores=list(stores) or None, revise_paths=revise_paths,
                                         progress=progress)
    return {"text": render.consolidation_text(report), "details": render.consolidation_json(report)}


def consolidate_cancelled(app: Realmem, scopes: Sequence[str] = ()) -> Result:
    """The report of a consolidation the user interrupted: nothing was written."""
    report = consolidate_mod.Report([], 0, [app.store_for_scope(s) for s in scopes] or app.visible_stores(),
                                    cancelled=True)
    return {"text": render.consolidation_text(report), "details": render.consolidation_json(report)}


def import_files(app: Realmem, files: Sequence[str], *, force: bool = False,
                 progress: Callable[[int, int, str], None] | None = None) -> Result:
    """`realmem import` without Pi: the chat model splits the files, each fact goes through the
    gate.  ``failed``: files were read but no fact was stored, so nothing is marked imported."""
    rep = importer.import_headless(app, list(files), progress=progress, force=force, word=render.outcome_text)
    lines: list[str] = [r + "." for r in rep["refused"]]
    if rep["skipped"]:
        lines.append(importer.already_text([Path(f) for f in rep["skipped"]], "realmem import"))
        if not rep["outcomes"]:
            return {"text": "\n".join(lines), "details": rep, "failed": False}
    lines += rep["outcomes"]
    if rep["files"]:
        lines.append(f"Imported {', '.join(Path(f).name for f in rep['files'])}: {count(rep['stored'], 'fact')} "
                     f"stored; realmem now replaces {'it' if len(rep['files']) == 1 else 'them'} in the prompt.")
    else:
        lines.append("No facts were stored, so nothing is marked imported.")
    return {"text": "\n".join(lines), "details": rep, "failed": not rep["files"]}


# --- gitignore ----------------------------------------------------------------------------

def gitignore_check(app: Realmem, *, offer_fix: bool = False) -> Result:
    """Whether git ignores the shared store (``.pi/realmem``), by which rule, and the verified
    fix.  The text hints at the fix command, or (``offer_fix``, inside that command) lists the
    lines it would append."""
    if app.project is None:
        return {"text": "Not a git repository: nothing to check.",
                "details": {"ignored": False, "warning": None, "fix": None}}
    st = gitignore.check(app.project.root)
    fix = {"file": st.fix.file, "lines": list(st.fix.lines), "description": st.fix.description} if st.fix else None
    details = {"ignored": st.ignored, "warning": st.warning(), "fix": fix}
    if not app.project.is_git:
        text = "Not a git repository: nothing to check."
    elif not st.ignored:
        text = ".pi/realmem is not ignored by git: shared memories will be committed."
    elif offer_fix and st.fix is not None:
        text = "\n".join([st.warning(hint=False) or "", f"Fix: append to {st.fix.file}:",
                          *(f"  {line}" for line in st.fix.lines)])
    else:
        text = st.warning(hint=not offer_fix) or ""
    return {"text": text, "details": details}


def gitignore_fix(app: Realmem) -> Result:
    """Append the verified fix, so shared memories are committed again."""
    if app.project is None:
        raise RealmemError("not in a project")
    st = gitignore.check(app.project.root)
    if not st.ignored:
        return {"text": ".pi/realmem is not ignored by git; nothing to fix.", "details": {"ignored": False}}
    if st.fix is None:
        raise RealmemError(st.warning() or "no automatic fix found")
    after = gitignore.apply_fix(app.project.root, st.fix)
    return {"text": f"Appended to {st.fix.file}: {', '.join(st.fix.lines)}", "details": {"ignored": after.ignored}}
