"""Which project a directory belongs to, and its stores (spec: "Scopes and storage").

The project key is ``git-<root commit>`` so it survives clones, worktrees and moves; outside
git, or before the first commit, it is ``path-<hash of root>``.
"""

from __future__ import annotations

import enum
import hashlib
import os
import subprocess
from functools import lru_cache
from pathlib import Path

import attrs



class Scope(enum.StrEnum):
    """The three scopes a user or model names; a store's kind is one of them (str-valued, so
    JSON, events and CLI arguments spell them as before)."""

    GLOBAL = "global"
    SHARED = "shared"
    PERSONAL = "personal"


SCOPES = tuple(s.value for s in Scope)  # ("global", "shared", "personal"), the order users see
GLOBAL = Scope.GLOBAL.value


@attrs.frozen
class Project:
    root: Path
    key: str
    is_git: bool

    @property
    def path_key(self) -> str:
        return path_key(self.root)

    @property
    def shared_store(self) -> str:
        return f"shared:{self.root}"

    @property
    def personal_store(self) -> str:
        return f"personal:{self.key}"

    @property
    def shared_dir(self) -> Path:
        return self.root / ".pi" / "realmem"


def path_key(root: Path) -> str:
    return "path-" + hashlib.sha256(str(root).encode("utf-8")).hexdigest()[:16]


def _git(cwd: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10,
                             env=_git_env())
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _git_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("GIT_OPTIONAL_LOCKS", "0")  # read-only queries must not take the index lock
    return env


@lru_cache(maxsize=64)
def _detect(cwd: str) -> tuple[str, str, bool]:
    here = Path(cwd)
    top = _git(here, "rev-parse", "--show-toplevel")
    if top:
        root = Path(top).resolve()
        roots = _git(root, "rev-list", "--max-parents=0", "HEAD")
        if roots:
            # Several root commits (merged histories): the smallest hash is stable and unique.
            return str(root), "git-" + sorted(roots.split())[0], True
        return str(root), path_key(root), True
    # Outside git: the nearest ancestor that already has a shared store, else the cwd itself.
    for d in (here, *here.parents):
        if (d / ".pi" / "realmem").is_dir():
            return str(d), path_key(d), False
    return str(here), path_key(here), False


def detect(cwd: Path) -> Project:
    """The project ``cwd`` belongs to.  Cached per process; ``forget_cache`` after git init/commit."""
    root, key, is_git = _detect(str(Path(cwd).resolve()))
    return Project(Path(root), key, is_git)


def forget_cache() -> None:
    _detect.cache_clear()


def store_kind(store: str) -> str:
    return store.split(":", 1)[0]
