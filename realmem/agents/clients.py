"""The hook clients: for each agent, which of its hook events does what, and how its tools'
inputs name the paths they touch.  The handlers themselves are ``realmem.agents.sessions``.

- Claude Code: ``SessionStart`` (sources startup, resume, clear, compact) and ``PostToolUse``.
- Codex: the same events and JSON as Claude Code (codex-rs/hooks/schema/generated), plus
  ``PostCompact``, which forgets the shown notes for a Codex that has no ``compact``
  SessionStart yet.  Its shell tool is ``Bash``; ``apply_patch`` passes the raw patch in
  ``tool_input.command``, whose ``*** Update File:`` lines name the paths.
- Gemini CLI (docs/hooks/reference.md): ``SessionStart`` (startup, resume, clear),
  ``AfterTool`` and ``PreCompress``.  Its SessionStart never says ``compact``, so
  ``PreCompress`` forgets what was shown and the next ``BeforeAgent`` (the next prompt)
  carries the section again.  ``read_many_files`` names its paths in ``include``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from realmem.read import pathnotes
from realmem.agents import sessions
from realmem.app import Realmem

PATCH_HEADERS = ("*** Update File: ", "*** Add File: ", "*** Delete File: ", "*** Move to: ")


def same(tool_name: str, tool_input: Any) -> Any:
    return tool_input


def codex_input(tool_name: str, tool_input: Any) -> Any:
    """``apply_patch``'s patch as the paths its file headers name; other tools as they are."""
    command = tool_input.get("command") if isinstance(tool_input, dict) else None
    if tool_name != "apply_patch" or not isinstance(command, str):
        return tool_input
    paths = [line[len(h):].strip() for line in command.splitlines() for h in PATCH_HEADERS if line.startswith(h)]
    return {"paths": paths}


def gemini_input(tool_name: str, tool_input: Any) -> Any:
    """``read_many_files`` lists its files (or globs) in ``include``; the others use path keys."""
    if tool_name == "read_many_files" and isinstance(tool_input, dict):
        return {"paths": tool_input.get("include") or []}
    return tool_input


@attrs.frozen
class Client:
    agent: str                          # the name in ``realmem hook --agent`` and in event actors
    start: str                          # the event that opens (or resumes, compacts) a session
    tool: str                           # the event after each tool call
    own_tools: str                      # realmem's own MCP tools: no notes about itself
    tool_input: Callable[[str, Any], Any] = same
    compacted: str | None = None        # an event telling that the context was compacted
    prompt: str | None = None           # an event before each prompt: the section after compaction

    def events(self) -> set[str]:
        return {e for e in (self.start, self.tool, self.compacted, self.prompt) if e}


CLIENTS = {c.agent: c for c in (
    Client("claude-code", start="SessionStart", tool="PostToolUse", own_tools="mcp__realmem__"),
    Client("codex", start="SessionStart", tool="PostToolUse", own_tools="mcp__realmem__", tool_input=codex_input,
           compacted="PostCompact"),
    # Gemini names MCP tools mcp_<server>_<tool> (docs/hooks/reference.md, "Matchers and tool names").
    Client("gemini", start="SessionStart", tool="AfterTool", own_tools="mcp_realmem_", tool_input=gemini_input,
           compacted="PreCompress", prompt="BeforeAgent"),
)}
DEFAULT = "claude-code"  # hooks installed before agents were named are Claude Code's


def handle(client: Client, app: Realmem, index: pathnotes.NoteIndex, hook: dict[str, Any]) -> dict[str, Any] | None:
    event = hook.get("hook_event_name")
    if event == client.start:
        return sessions.session_start(app, client.agent, hook, event=event)
    if event == client.tool:
        tool = str(hook.get("tool_name") or "")
        if tool.startswith(client.own_tools):
            return None
        return sessions.tool_notes(app, index, client.agent, hook, event=event,
                                   tool_input=client.tool_input(tool, hook.get("tool_input")))
    if event == client.compacted:
        sessions.forget(app, client.agent, hook)
        return None
    if event == client.prompt:
        return sessions.section_again(app, client.agent, hook, event=event)
    raise ValueError(f"unsupported hook event {event!r} for {client.agent}")
