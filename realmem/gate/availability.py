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


def chat_reachable(cfg: Config, *, own_model: bool = False) -> bool:
    """A chat model can be asked: ``own_model`` is a front end's own (MCP sampling)."""
    return own_model or bool(cfg["rewriter.url"]) or bridge.live(cfg.home) is not None


def judge(cfg: Config, *, own_model: bool = False) -> str | None:
    """``"semif"``, ``"chat"`` or None (no judge can decide now)."""
    if cfg["semif.url"]:
        return "semif"
    if cfg["judge.fallback"] == "chat" and chat_reachable(cfg, own_model=own_model):
        return "chat"
    return None


def missing(cfg: Config) -> str:
    """Why no judge can decide, with the fix (for a queued remember, status and session start)."""
    if cfg["judge.fallback"] != "chat":
        return f"no judge is set: set semif.url, or judge.fallback to chat, {set_in()}"
    return (f"no judge is reachable: set semif.url (a System One endpoint) or rewriter.url (a chat model) "
            f"{set_in()}, or remember from a Pi session, whose own model judges")
