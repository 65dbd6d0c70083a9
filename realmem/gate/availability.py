"""Which judge can decide a remember now, and if none, why and how to get one.

System One (``semif.url``) when it is set; otherwise, with ``judge.fallback = chat``, a chat
model: ``rewriter.url``, an MCP client's sampling, or Pi's model through the adapter's bridge.
The gate, the worker, status and session start all ask here, so they agree.  Light on
purpose: status and the rpc child's per-call follow import it, and it loads no client.
"""

from __future__ import annotations

from realmem.config import Config
from realmem.frontend import set_in
from realmem.clients import bridge


def judge(cfg: Config) -> str | None:
    """``"semif"``, ``"chat"`` or None (no judge can decide now).  A front end's own model (MCP
    sampling) lives only during its call: the gate asks it there (``chat_client``), and the
    background, which this answers for, cannot."""
    if cfg["semif.url"]:
        return "semif"
    if cfg["judge.fallback"] == "chat" and (cfg["rewriter.url"] or bridge.live(cfg.home) is not None):
        return "chat"
    return None


def missing(cfg: Config) -> str:
    """Why no judge can decide, with the fix (for a queued remember, status and session start)."""
    if cfg["judge.fallback"] != "chat":
        return f"no judge is set: set semif.url, or judge.fallback to chat, {set_in()}"
    return (f"no judge is reachable: set semif.url (a System One endpoint) or rewriter.url (a chat model) "
            f"{set_in()}, or remember from a Pi session, whose own model judges")
