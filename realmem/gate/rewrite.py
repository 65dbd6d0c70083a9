"""Edit / Merge rewriting through the configured chat model (spec: "Remember path", step 6).

The rewriter is ``rewriter.url`` when set, else a front end's own model (MCP sampling), else
the Pi model bridge (clients/bridge.py).  The model
answers JSON ``{"caption", "content"}``; the result is scanned again, and on any failure (no
endpoint, unreachable, invalid output, a secret or injection in the result) a deterministic
fallback is used:

- edit / supersede: the new caption and content;
- merge: the old caption, the old content plus the new content's lines not already present;
- revise: the memory unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from realmem.clients.chat import chat_client
from realmem.clients.errors import EndpointError, EndpointUnavailable
from realmem.gate import safety
from realmem.logs import get_logger

if TYPE_CHECKING:
    from realmem.app import Realmem
    from realmem.projections.state import Memory

log = get_logger("realmem.rewrite")

MODES = ("edit", "merge", "supersede", "revise")

SYSTEM = ("You maintain a coding agent's long-term memory: small Markdown facts, each a one-line caption "
          "and a short content.  Answer with one JSON object {\"caption\": ..., \"content\": ...} and "
          "nothing else.  Keep commands, paths and names exact; never add secrets or instructions to the "
          "reader; be concise.")

INSTRUCTIONS = {
    "edit": "The NEW FACT corrects the OLD MEMORY.  Rewrite the old memory so it states the new fact: where "
            "they disagree the new fact wins; keep old details that are still true.",
    "merge": "The NEW FACT complements the OLD MEMORY.  Combine both into one memory that keeps every "
             "distinct detail of both, without repetition.",
    "supersede": "The NEW FACT is newer than the OLD MEMORY and replaces it where they disagree.  Write one "
                 "memory holding the newer facts plus old details that are still true.",
    "revise": "Rewrite the OLD MEMORY clearer and shorter, with exactly the same information.",
}

MAX_CAPTION = 200
MAX_CONTENT = 8000

# Why the deterministic fallback was used (Rewritten.fallback).
NO_ENDPOINT = "no rewriter endpoint"
UNREACHABLE = "the rewriter did not answer"
INVALID = "the rewriter's answer was not a usable caption and content"
UNSAFE = "the rewrite failed the safety scan"


@attrs.frozen
class Rewritten:
    caption: str
    content: str
    fallback: str | None = None  # why the deterministic fallback replaced the model's text; None: it did not

    @property
    def used_fallback(self) -> bool:
        return self.fallback is not None


def fallback(mode: str, old_caption: str, old_content: str, new_caption: str, new_content: str) -> tuple[str, str]:
    if mode in ("edit", "supersede"):
        return new_caption, new_content
    if mode == "merge":
        old_lines = {line.strip() for line in old_content.splitlines() if line.strip()}
        extra: list[str] = []
        for line in new_content.splitlines():
            key = line.strip()
            if key and key in old_lines:
                continue
            if key:
                old_lines.add(key)
            extra.append(line)
        added = "\n".join(extra).strip("\n")
        return old_caption, (old_content.rstrip("\n") + ("\n\n" + added if added.strip() else ""))
    return old_caption, old_content


def _prompt(mode: str, target: "Memory", new_caption: str, new_content: str) -> list[dict[str, Any]]:
    user = [INSTRUCTIONS[mode] + ' Reply with JSON only: {"caption": "...", "content": "..."}', "",
            "OLD MEMORY", f"Caption: {target.caption}", f"Content: {target.content}"]
    if mode != "revise":
        user += ["", "NEW FACT", f"Caption: {new_caption}", f"Content: {new_content}"]
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n".join(user)}]


def rewrite(app: "Realmem", mode: str, target: "Memory", new_caption: str, new_content: str) -> Rewritten:
    """``target`` rewritten with the new fact, or the deterministic fallback and the reason."""
    if mode not in MODES:
        raise ValueError(f"unknown rewrite mode {mode!r}")

    def fall_back(reason: str) -> Rewritten:
        return Rewritten(*fallback(mode, target.caption, target.content, new_caption, new_content), fallback=reason)

    client = chat_client(app)
    if not client.configured:
        log.info("rewrite.fallback", mode=mode, reason=NO_ENDPOINT)
        return fall_back(NO_ENDPOINT)
    try:
        reply = client.complete_json(_prompt(mode, target, new_caption, new_content))
    except (EndpointUnavailable, EndpointError) as exc:
        log.warning("rewrite.fallback", mode=mode, reason=type(exc).__name__)
        return fall_back(f"{UNREACHABLE} ({exc})")
    finally:
        client.close()
    caption, content = reply.get("caption"), reply.get("content")
    if not isinstance(caption, str) or not isinstance(content, str):
        log.warning("rewrite.fallback", mode=mode, reason="invalid output")
        return fall_back(INVALID)
    caption, content = " ".join(caption.split()), content.strip()
    if not caption or not content or len(caption) > MAX_CAPTION or len(content) > MAX_CONTENT:
        log.warning("rewrite.fallback", mode=mode, reason="empty or oversized output")
        return fall_back(INVALID)
    result, _, _ = safety.scan_memory(caption, content, redact=False)
    if not result.ok:
        log.warning("rewrite.fallback", mode=mode, reason="rewrite failed the safety scan",
                    kinds=[f.kind for f in result.findings])
        return fall_back(UNSAFE)
    return Rewritten(caption, content)
