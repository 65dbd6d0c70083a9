"""The Pi model bridge as the core finds it: the adapter serves Pi's current model as an
OpenAI-compatible endpoint on loopback and publishes ``REALMEM_HOME/bridge/<pid>.json``
(``{url, token, pid}``; live = its pid is alive).  Light on purpose: status reads it.
"""

from __future__ import annotations

import json
from pathlib import Path

from realmem.storage.lock import pid_alive


def live(home: Path) -> tuple[str, str] | None:
    """(url, token) of the newest live Pi model bridge, or None."""
    d = home / "bridge"
    best: tuple[float, str, str] | None = None
    try:
        entries = list(d.glob("*.json"))
    except OSError:
        return None
    for f in entries:
        try:
            data = json.loads(f.read_text(encoding="utf-8"))
            mtime = f.stat().st_mtime
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict):
            continue
        url, token, pid = data.get("url"), data.get("token"), data.get("pid")
        if not isinstance(url, str) or not url or not isinstance(pid, int) or not pid_alive(pid):
            continue
        if best is None or mtime > best[0]:
            best = (mtime, url, str(token or ""))
    return (best[1], best[2]) if best else None
