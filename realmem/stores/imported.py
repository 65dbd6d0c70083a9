"""The shared store's record of imported context files: ``.pi/realmem/.imported``.

A machine records its imports in its own log, but a teammate who pulls the shared facts that
replace AGENTS.md must not get the file in the prompt as well. So an import whose facts went
to the shared store is also written beside them (committed with them): one line per file,
``<sha256 of its content> <path relative to the project root>``. A clone strips a file whose
content still has that hash. The store's scan reads ``*.md`` only, so this file is no fact.
"""

from __future__ import annotations

import os
from pathlib import Path

from realmem.storage.fsutil import atomic_write_text

MARKER = ".imported"


def _marker(root: Path) -> Path:
    return root / ".pi" / "realmem" / MARKER


def marks(root: Path) -> dict[str, str]:
    """relative path -> content hash, as committed; {} when absent or unreadable."""
    try:
        text = _marker(root).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    out = {}
    for line in text.splitlines():
        digest, _, rel = line.partition(" ")
        if len(digest) == 64 and rel:
            out[rel] = digest
    return out


def relative(root: Path, path: Path) -> str | None:
    """``path`` relative to the project root, or None outside it."""
    p = Path(os.path.abspath(path))
    return p.relative_to(root).as_posix() if p.is_relative_to(root) else None


def mark(root: Path, path: Path, digest: str) -> None:
    """Record ``path`` (inside ``root``) as imported with content ``digest``; a no-op when the
    shared store does not exist or is linked out of the project (nothing of it to commit)."""
    rel = relative(root, path)
    store = root / ".pi" / "realmem"
    if rel is None or not store.is_dir() or store.is_symlink() or not os.path.realpath(store).startswith(
            os.path.realpath(root) + os.sep):
        return
    current = marks(root)
    if current.get(rel) == digest:
        return
    current[rel] = digest
    atomic_write_text(_marker(root), "".join(f"{h} {r}\n" for r, h in sorted(current.items())))
