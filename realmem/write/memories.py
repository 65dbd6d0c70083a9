"""Direct operations on memories: add, edit, forget, move, reinforce.

Each builds the events for one change and hands them to ``Realmem.emit``.  The remember
gate decides *whether* to write; these functions are *how* a write happens.

A change to an existing memory is decided under the write lease on the version it reads
there, and appended with that version expected: two edits of different fields both survive
(the second is decided on the first's result), and a memory forgotten meanwhile answers
"not found" instead of coming back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from realmem.stores import frames, ids, paths
from realmem.errors import ChangedMeanwhile, NotFound, RealmemError
from realmem.events import types as ev
from realmem.events.types import Key
from realmem.stores.project import GLOBAL, default_path, store_kind
from realmem.projections.state import Memory
from realmem.write import observe

if TYPE_CHECKING:  # for annotations only: nothing here constructs one
    from realmem.app import Realmem

MAX_CAPTION = 200
MAX_CONTENT = 8000


def union_paths(a: list[str], b: list[str], store: str) -> list[str]:
    """Both path scopes in ``store``'s frame; the whole store absorbs everything."""
    whole = default_path(store)
    a = a or [whole]
    b = b or [whole]
    if whole in a or whole in b:
        return [whole]
    return list(dict.fromkeys([*a, *b]))


def validate(caption: str, content: str) -> tuple[str, str]:
    caption = " ".join((caption or "").split())
    content = (content or "").strip()
    if not caption:
        raise RealmemError("caption is empty: give a one-line summary of the fact")
    if not content:
        raise RealmemError("content is empty: give the fact itself")
    for name, text in (("caption", caption), ("content", content)):  # any entry point: CLI, rpc, MCP, worker
        if "\x00" in text:
            raise RealmemError(f"{name} contains a NUL character")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise RealmemError(f"{name} holds a lone surrogate, which is not valid Unicode") from None
    if len(caption) > MAX_CAPTION:
        raise RealmemError(f"caption is {len(caption)} characters; keep it under {MAX_CAPTION}")
    if len(content) > MAX_CONTENT:
        raise RealmemError(f"content is {len(content)} characters; split it into facts under {MAX_CONTENT}")
    return caption, content


def place(app: Realmem, scope: str | None, raw_paths: list[str] | None) -> tuple[str, list[str]]:
    """The store a new fact goes to and its paths in that store's frame.

    A path outside the project makes the fact global (spec: "Path scopes")."""
    store = app.store_for_scope(scope)
    if not raw_paths:  # no paths: the root of the chosen store (spec: "Path scopes")
        return store, ["~" if store == GLOBAL else "."]
    root = app.project.root if app.project is not None else None
    try:
        kind, stored = paths.convert_paths(list(raw_paths or []), cwd=app.cwd, root=root, home=frames.user_home())
    except paths.PathError as exc:
        raise RealmemError(f"bad path: {exc}") from None
    if kind == paths.GLOBAL and store != GLOBAL:
        return GLOBAL, stored
    if store == GLOBAL and kind == paths.PROJECT:
        stored = paths.reexpress(stored, from_kind=paths.PROJECT, to_kind=paths.GLOBAL, root=root, home=frames.user_home())
    return store, stored


def add(app: Realmem, caption: str, content: str, *, store: str, stored_paths: list[str], source: str,
        decision: int | None = None, mem_id: str | None = None) -> Memory:
    caption, content = validate(caption, content)
    mem_id = mem_id or ids.new_id()
    fields = app.new_fields(store, mem_id, caption, content, stored_paths)
    app.emit([ev.MemoryAdded(store, mem_id, fields, source, decision)])
    mem = app.memory((store, mem_id))
    assert mem is not None
    return mem


def current(app: Realmem, key: Key, version: int | None = None) -> Memory:
    """The memory as it is now (call under the write lease), its file observed first if it
    changed on disk (``observe.before_write``); ``version``: the one the caller decided on,
    refused if the memory changed since."""
    outside = observe.before_write(app, [key])
    m = app.memory(key)
    if m is None:
        if key in outside:
            raise NotFound(_deleted_outside(key))
        raise NotFound(f"memory {ids.short(key[1])} not found: it no longer exists (forgotten or moved)")
    if version is not None and m.last_seq != version:
        where = "its file changed outside realmem" if key in outside else "it changed meanwhile"
        raise ChangedMeanwhile(f"memory {ids.short(key[1])}: {where}; nothing was written, "
                               "look at it again and retry")
    return m


def _deleted_outside(key: Key) -> str:
    return (f"memory {ids.short(key[1])} not found: its file was deleted outside realmem (a git pull or "
            "checkout?); nothing was written")


def edit(app: Realmem, key: Key, *, caption: str | None = None, content: str | None = None,
         stored_paths: list[str] | None = None, reason: str = "edit", absorbed: list[str] | None = None,
         used_delta: int = 0, decision: int | None = None, extra: list[ev.Event] | None = None,
         version: int | None = None) -> Memory:
    """Rewrite a memory in place (same id); ``extra`` events commit with it atomically.  Fields
    left None keep their current value, read under the lease, so a concurrent edit of another
    field survives.  ``version``: the caller decided the new text on that version (a rewrite
    or merge), so a newer one refuses instead of losing its change."""
    with app.write_lease():
        old = current(app, key, version)
        caption, content = validate(caption if caption is not None else old.caption,
                                    content if content is not None else old.content)
        fields = app.new_fields(key[0], key[1], caption, content,
                                stored_paths if stored_paths is not None else old.paths, previous=old)
        app.emit([ev.MemoryEdited(key[0], key[1], fields, reason, absorbed or [], used_delta, decision),
                  *(extra or [])], expect={key: old.last_seq})
        mem = app.memory(key)
    assert mem is not None
    return mem


def edit_paths_from_input(app: Realmem, key: Key, raw_paths: list[str]) -> list[str]:
    """Paths given by a user or agent (relative to cwd, ~/, absolute) in the memory's frame."""
    root = app.store_root(key[0])
    kind = frames.frame(key[0])
    out = []
    for raw in raw_paths or []:
        try:
            absolute = paths.normalize_input(raw, cwd=app.cwd, home=frames.user_home())
            out.append(paths.to_store_frame(absolute, kind=kind, root=root, home=frames.user_home()))
        except paths.PathError as exc:
            from realmem.gate.safety import mask_secrets  # lazily: many regexes, for an error only

            raise RealmemError(f"bad path {mask_secrets(raw)!r} for a {store_kind(key[0])} memory: {exc}") from None
    return out or [default_path(key[0])]


def forget(app: Realmem, keys: list[Key], *, reason: str = "forget") -> tuple[list[Key], list[str]]:
    """Forget the memories that still exist; returns (forgotten, "not found" messages)."""
    with app.write_lease():
        outside = observe.before_write(app, keys)  # a file renamed by a pull is deleted under its new name
        gone = [k for k in keys if app.memory(k) is None]
        kept = [k for k in dict.fromkeys(keys) if k not in gone]
        app.emit([ev.MemoryForgotten(store, mem_id, reason) for store, mem_id in kept])
    return kept, [_deleted_outside(k) if k in outside else f"memory {ids.short(k[1])} not found: it was already forgotten"
                  for k in gone]


def reinforce(app: Realmem, key: Key, *, decision: int | None = None) -> None:
    app.emit([ev.Reinforced(key[0], key[1], decision)])


def move(app: Realmem, key: Key, to_store: str, *, reason: str = "move") -> Memory:
    """Move a memory to another store, re-expressing its paths in the target's frame."""
    with app.write_lease():
        old = current(app, key)
        if to_store == key[0]:
            return old
        root = app.store_root(key[0]) or app.store_root(to_store)
        try:
            new_paths = paths.reexpress(old.paths, from_kind=frames.frame(key[0]), to_kind=frames.frame(to_store), root=root,
                                        home=frames.user_home())
        except paths.PathError as exc:
            raise RealmemError(f"cannot move: {exc}") from None
        fields = app.new_fields(to_store, key[1], old.caption, old.content, new_paths, created=old.created,
                                file=None, previous=None)
        app.emit([ev.MemoryMoved(key[0], key[1], to_store, fields, reason)], expect={key: old.last_seq})
        mem = app.memory((to_store, key[1]))
    assert mem is not None
    return mem


def approve(app: Realmem, key: Key) -> None:
    """Release a quarantined memory so the model may see it."""
    with app.write_lease():
        m = current(app, key)
        if m.quarantined is None:
            raise RealmemError(f"memory {ids.short(key[1])} is not quarantined")
        app.emit([ev.MemoryApproved(key[0], key[1])], expect={key: m.last_seq})
