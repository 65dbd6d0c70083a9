"""realmem_status / `realmem status`: what is stored, queued and configured, and what is wrong
(``gather``; ``interface.render.status_text`` words it)."""

from __future__ import annotations

from typing import Any

from realmem.gate import availability
from realmem.write import gitignore
from realmem.app import Realmem
from realmem.jobs.queue import worker_status
from realmem.clients import bridge
from realmem.stores.project import store_kind
from realmem.projections import queries

def gather(app: Realmem) -> dict[str, Any]:
    stores = []
    for store in app.visible_stores():
        n = queries.store_counts(app.conn, store)
        stores.append({"store": store, "scope": store_kind(store), "dir": str(app.store_dir(store)),
                       "memories": n[0], "quarantined": n[1]})
    key = app.project.key if app.project else None
    queued = queries.queued_count(app.conn, key)
    failed = queries.failed(app.conn, key)
    problems = [{"store": s, "file": f, "problem": p, "message": m, "line": ln}
                for s, f, p, m, ln in queries.problems(app.conn, app.visible_stores())]
    missing = queries.missing_count(app.conn, app.visible_stores())
    endpoints = {name: {"url": app.config[f"{name}.url"] or None, "model": app.config[f"{name}.model"] or "(auto)"}
                 for name in ("semif", "embedding", "rewriter")}
    # Without rewriter.url, rewrites go to Pi's current model through the adapter's bridge.
    endpoints["rewriter"]["bridge"] = not endpoints["rewriter"]["url"] and bridge.live(app.home) is not None
    # Without embedding.url, the bundled model embeds (embedding.local); status never loads it.
    local = app.config["embedding.local"]
    endpoints["embedding"]["local"] = None if endpoints["embedding"]["url"] or local == "off" else local
    judge = availability.judge(app.config)  # "semif", "chat" or None
    warning = gitignore.store_warning(app.project.root, app.home) if app.project is not None else None
    return {
        "home": str(app.home),
        "project": {"root": str(app.project.root), "key": app.project.key} if app.project else None,
        "stores": stores, "queued": queued, "failed": failed, "problems": problems, "missing_paths": missing,
        "endpoints": endpoints, "judge": judge, "no_judge": None if judge else availability.missing(app.config),
        "gitignore": warning, "worker": worker_status(app),
        "events": app.conn.execute("SELECT coalesce(max(seq),0) FROM events").fetchone()[0],
    }
