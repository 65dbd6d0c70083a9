"""realmem_status / `realmem status`: what is stored, queued and configured, and what is wrong."""

from __future__ import annotations

from typing import Any

from realmem.gate import availability
from realmem.write import gitignore
from realmem.app import Realmem
from realmem.frontend import hint
from realmem.jobs.queue import worker_status
from realmem.clients import bridge
from realmem.stores.project import store_kind
from realmem.words import count
from realmem.projections import queries

# How status and settings name the rewriter when no chat endpoint of its own is set.
REWRITER_BRIDGE = "Pi's current model (bridge)"
REWRITER_UNSET = "not set: Edit/Merge use a deterministic fallback until Pi runs realmem or rewriter.url is set"


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


def text(info: dict[str, Any]) -> str:
    lines = []
    if info["project"]:
        lines.append(f"Project {info['project']['root']} ({info['project']['key']})")
    for s in info["stores"]:
        q = f", {s['quarantined']} quarantined" if s["quarantined"] else ""
        n, noun = count(s["memories"], "memory").split(" ", 1)  # a table: counts, nouns, dirs each one column
        lines.append(f"  {s['scope']:<8} {n:>5} {noun:<8}{q}  {s['dir']}")
    if info["queued"]:
        lines.append(f"Queued candidates: {info['queued']} (retried automatically; {hint('retry')})")
    if info.get("failed"):
        lines.append(f"Failed candidates: {len(info['failed'])}, kept but no longer retried automatically "
                     f"(fix the setting, then {hint('retry')}):")
        lines.extend(f"  {reason}" for reason in dict.fromkeys(info["failed"]))
    for name, e in info["endpoints"].items():
        if e["url"]:
            shown = f"{e['url']} · {e['model']}"
        elif e.get("bridge"):
            shown = REWRITER_BRIDGE
        elif e.get("local"):
            shown = f"local · {e['local']} (bundled, offline)"
        elif name == "rewriter":
            shown = REWRITER_UNSET
        else:
            shown = "not set"
        lines.append(f"  {name:<9} {shown}")
    if info["judge"] is None:
        why = info["no_judge"]
        lines.append(f"{why[0].upper()}{why[1:]}; new memories are queued until one is.")
    elif info["judge"] == "chat":
        lines.append("Judge: the chat model (semif.url is not set; the rewriter's model judges each remember).")
    w = info["worker"]
    lines.append(f"Worker: {'running (pid ' + str(w['pid']) + ')' if w.get('alive') else 'not running'}")
    if info["missing_paths"]:
        lines.append(f"{count(info['missing_paths'], 'memory points', 'memories point')} at paths that no longer exist "
                     f"({hint('manage, prune-paths', 'manage, realmem prune-paths')}).")
    for p in info["problems"]:
        lines.append(f"Problem: {p['message']}")
    if info["gitignore"]:
        lines.append("Warning: " + info["gitignore"])
    return "\n".join(lines)
