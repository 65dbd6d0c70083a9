"""The five model-facing tools (recall, remember, status, list, forget): one function each,
returning ``{"text", "details"}``.  Every front end that offers them to a model (the rpc child
for Pi, the MCP server for other agents) calls these, so wording and ranking live once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from realmem.interface import status as status_mod
from realmem.interface import render
from realmem.read import freshness, recall as recall_mod
from realmem.stores import ids
from realmem.write import memories
from realmem.app import Realmem, RealmemError
from realmem.errors import NotFound
from realmem.words import count


def run_recall(app: Realmem, *, queries: Sequence[str] = (), paths: Sequence[str] = (), id_values: Sequence[str] = (),
               page: int = 1, scope: str | None = None, recent_paths: Sequence[str] = (),
               later: Callable[[Callable[[], None]], None] | None = None) -> tuple[Any, dict[Any, str]]:
    """The recall page and the freshness flag of each memory on it (the CLI shows more of both).
    The params are the registry's recall params; ``later``: see recall.recall (the rpc child
    appends the hit after its answer)."""
    res = recall_mod.recall(app, queries=list(queries), raw_paths=list(paths), id_values=list(id_values), page=page,
                            scope=scope, recent_paths=list(recent_paths), later=later)
    return res, freshness.flags_text(app, [i.memory for i in res.items])


def recall(app: Realmem, **query: Any) -> dict[str, Any]:
    """The model's recall page; ``query``: ``run_recall``'s params."""
    res, stale = run_recall(app, **query)
    # The relevance check's trace (judge, latency, tokens) goes with the page: what it cost.
    return {"text": render.recall_text(res, stale), "details": page_details(res) | {"relevance": res.relevance}}


def remember(app: Realmem, **fact: Any) -> dict[str, Any]:
    """The gate's decision on ``fact`` (the gate's remember params), as the model sees it."""
    from realmem.gate.remember import remember as remember_mod  # lazy: the gate's rules load slowly; recall needs none
    from realmem.gate.importer import remember_defaults  # lazy: as above

    defaults = remember_defaults(app)
    if defaults is not None:  # a fact of a context file being imported: shared, about the file's directory
        # The user ran the import: its facts are theirs, as in the headless import.
        fact |= {"scope": fact.get("scope") or defaults[0], "paths": fact.get("paths") or defaults[1],
                 "source": "import", "user_requested": True}
    out = remember_mod(app, **fact)
    return {"text": render.outcome_text(out), "details": {
        "decision": out.action, "queued": out.queued, "warnings": render.outcome_notes(out),
        "id": ids.short(out.memory.id) if out.memory else None}}


def status(app: Realmem) -> dict[str, Any]:
    info = status_mod.gather(app)
    return {"text": render.status_text(info), "details": info}


def listing(app: Realmem, **page: Any) -> dict[str, Any]:
    """One page of every memory; ``page``: recall.listing's params."""
    res = recall_mod.listing(app, **page)
    return {"text": render.list_text(res), "details": page_details(res)}


def forget(app: Realmem, id_values: Sequence[str]) -> dict[str, Any]:
    keys, errors = [], []
    for v in id_values:
        try:
            keys.append(app.resolve(v))
        except RealmemError as exc:
            errors.append(str(exc))
    if keys:
        keys, missing = memories.forget(app, keys)
        errors.extend(missing)
    done = [f"Forgot {count(len(keys), 'memory')}: "
            + ", ".join(ids.short(k.id) for k in keys)] if keys else []
    text = "\n".join(done + errors) or "Nothing forgotten."
    if errors:  # an unknown id is an error in every front end; the text says what was forgotten anyway
        raise NotFound(text)
    return {"text": text, "details": {"forgotten": [ids.short(k.id) for k in keys], "errors": errors}}


def page_details(res: Any) -> dict[str, Any]:
    return {"items": [render.memory_json(i.memory, i.used_count) for i in res.items],
            "page": res.page, "pages": res.pages, "total": res.total}
