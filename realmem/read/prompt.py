"""The <realmem> system-prompt section and the stripping of imported context files.

The adapter computes the section once per session and stores it, so it stays byte-identical
(the prompt cache depends on that); this module only renders it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from realmem.stores import ids
from realmem.stores import imported as imported_mark
from realmem.stores.pidir import is_global_context
from realmem.app import Realmem
from realmem.read.escape import inline
from realmem.read.pathnotes import attached_counts
from realmem.projections import queries

INTRO = """\
realmem is your only long-term memory system. Ignore MEMORY.md, Claude memory, surmem, and \
Magic Context's ctx_memory / <project-memory>; do not write memory files yourself.
- Before any work, call realmem_recall with queries (and paths) about the task: project \
conventions, commands, decisions and pitfalls live there, not in AGENTS.md.
- Remember proactively with realmem_remember whenever you learn something new, important and \
durable (how to build, test or release; conventions; decisions and their reasons; pitfalls; \
user preferences). Not task status. One fact per call; caption = one-line summary; give \
paths when the fact is about specific files or directories.
- Facts about files appear in <realmem-path-notes> after tool results when you touch their \
paths; read a captioned one with realmem_recall ids=[...].
- When a memory is wrong, remember the corrected fact (it replaces the old one) or \
realmem_forget it."""


def section(app: Realmem) -> str:
    n = int(app.config["prompt.captions"])
    wide = queries.most_used_store_wide(app.conn, app.visible_stores(), n)
    parts = ["<realmem>", INTRO]
    if wide:
        parts.append("Most-used memories (recall for details):")
        parts.extend(f"- [{ids.short(r[1])}] {r[2]}" for r in wide)
    counts = attached_counts(app)
    if counts:
        parts.append("Paths with path notes: " + ", ".join(f"{inline(p)} ({c})" for p, c in counts))
    parts.append("</realmem>")
    return "\n".join(parts)


def file_hash(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def _abs(app: Realmem, path: str) -> str:
    p = Path(path).expanduser()
    return str(p if p.is_absolute() else (app.cwd / p).resolve())


def imported(app: Realmem, path: str, content: str) -> bool:
    """Imported, and unchanged since (a changed file has facts realmem does not know yet)."""
    recorded = queries.imported_hash(app.conn, _abs(app, path))
    if recorded is not None and recorded == file_hash(content):
        return True
    # Imported on a teammate's machine, its facts pulled with the shared store's record.
    if app.project is None:
        return False
    rel = imported_mark.relative(app.project.root, Path(_abs(app, path)))
    return rel is not None and imported_mark.marks(app.project.root).get(rel) == file_hash(content)


# What Pi writes before the context-file blocks (pi-coding-agent 0.73.1, core/system-prompt.js).
CONTEXT_HEADER = "\n\n# Project Context\n\nProject-specific instructions and guidelines:\n\n"
# Pi 1.x (1.6.0, core/system-prompt.js) renders the files as a <project_context> section instead:
# a <project_instructions path="..."> block per file, each after a blank line.
CONTEXT_SECTION_EMPTY = "\n\n<project_context>\nProject-specific instructions and guidelines:\n</project_context>"


def _blocks(path: str, content: str) -> tuple[str, str]:
    """The block Pi 1.x, then the one Pi 0.73 writes for one context file."""
    return (f'\n\n<project_instructions path="{path}">\n{content}\n</project_instructions>',
            f"## {path}\n\n{content}\n\n")


def strip_context_files(app: Realmem, system_prompt: str, context_files: list[dict[str, Any]],
                        only: list[str] | None = None) -> tuple[str, list[str]]:
    """Cut Pi's block of every imported context file (either Pi's format, see ``_blocks``), and
    Pi's project-context header or section when no file is left under it.

    ``only`` names the files to cut, decided once at a session's first prompt: an import during the
    session then changes nothing until the next session, so the running prompt stays byte-identical.
    """
    stripped = []
    for f in context_files:
        path, content = str(f.get("path", "")), str(f.get("content", ""))
        if not path or not (path in only if only is not None else imported(app, path, content)):
            continue
        for block in _blocks(path, content):
            if block in system_prompt:
                system_prompt = system_prompt.replace(block, "", 1)
                stripped.append(path)
                break
    if stripped and len(stripped) == sum(1 for f in context_files if f.get("path")):
        system_prompt = system_prompt.replace(CONTEXT_SECTION_EMPTY, "", 1).replace(CONTEXT_HEADER, "", 1)
    return system_prompt, stripped


def stripped_files(app: Realmem) -> list[str]:
    """The context files Pi loads for this cwd (AGENTS.md / CLAUDE.md in the cwd and its
    ancestors, and the global one in Pi's directory) that realmem will strip: imported and
    unchanged since."""
    rows = queries.imported_paths(app.conn)
    if app.project is not None:  # and what teammates imported into the shared store
        rows = list(dict.fromkeys([*rows, *(str(app.project.root / rel) for rel in imported_mark.marks(app.project.root))]))
    ancestors = {app.cwd, *app.cwd.parents}
    out = []
    for path in rows:
        p = Path(path)
        if ((p.parent in ancestors or is_global_context(p)) and p.is_file()
                and imported(app, path, p.read_text(encoding="utf-8", errors="replace"))):
            out.append(path)
    return out
