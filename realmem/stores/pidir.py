"""Where Pi keeps the user's own files: its agent directory and the global AGENTS.md in it."""

from __future__ import annotations

import os
from pathlib import Path


def pi_dir() -> Path:
    """The user's Pi directory (``PI_CODING_AGENT_DIR`` moves it, as it moves Pi's)."""
    moved = os.environ.get("PI_CODING_AGENT_DIR")
    return Path(os.path.expanduser(moved)) if moved else Path.home() / ".pi" / "agent"


def is_global_context(path: Path) -> bool:
    """The global context file, in Pi's context for every project."""
    return Path(os.path.abspath(path)) == Path(os.path.abspath(pi_dir() / "AGENTS.md"))
