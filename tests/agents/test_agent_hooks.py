"""Codex and Gemini CLI hooks end to end, as test_claude_hooks.py does for Claude Code: the real
hook command with ``--agent``, fed hook input written from each client's documentation and
source (tests/fixtures/codex/README.md, tests/fixtures/gemini/README.md), a real per-home hook
server, a real git repo and store.  Outputs are compared exactly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from realmem.read import prompt
from realmem.agents import clients
from realmem.write import memories
from realmem.app import Realmem
from realmem.events import types as ev

from helpers.hooks import HOOK, WAIT, fixture, notes_output, project, run_hook, section_output, server  # noqa: F401 (fixtures)


def client(agent: str, repo: Path, sid: str, home: Path) -> Callable[[str], dict[str, Any] | None]:
    """The hook command as ``agent`` runs it, on its fixture ``name`` for session ``sid``."""
    return lambda name: run_hook(fixture(name, repo, sid, agent), home, agent)


def actors(app: Realmem) -> set[str]:
    return {r[0] for r in app.conn.execute("SELECT session FROM events WHERE type=?", (ev.PathNotesShown.TYPE,))}


def release_memory(app: Realmem) -> None:
    """A new project-wide memory: a fresh section differs from a running session's."""
    memories.add(app, "release with make dist", "make dist builds the wheel.", store=app.project.shared_store,
                 stored_paths=["."], source="add")


def started(agent: str, project: Any, repo: Path, home: Path, sid: str) -> tuple[Realmem, Any, Any, str]:
    """The project's app and memories, the client's hook runner, and the section its session
    started with (checked: a startup SessionStart gives the fresh section)."""
    app, m = project
    hook = client(agent, repo, sid, home)
    section = prompt.section(app)
    assert hook("session_start_startup") == section_output(section)
    return app, m, hook, section


def test_codex_section_and_path_notes_once_per_session(server: Any, project: Any, repo: Path, home: Path) -> None:
    sid = "019a0b5e-6f3c-7111-8a2b-9c3d00000001"
    app, m, hook, section = started("codex", project, repo, home, sid)
    # apply_patch: the files its "*** Update File:" / "*** Add File:" lines name.
    assert hook("post_tool_use_apply_patch") == notes_output(m["api"])
    assert hook("post_tool_use_bash") == notes_output(m["db"])
    assert hook("post_tool_use_bash") is None  # once per session
    own = {**fixture("post_tool_use_bash", repo, sid, "codex"), "tool_name": "mcp__realmem__realmem_recall",
           "tool_input": {"paths": ["src/db.py"]}}
    assert run_hook(own, home, "codex") is None

    # PostCompact says nothing, but the notes left the context: they show again.
    assert hook("post_compact") is None
    assert hook("post_tool_use_bash") == notes_output(m["db"])

    # A compact SessionStart gives the session's own section back, byte for byte.
    release_memory(app)
    assert prompt.section(app) != section
    assert hook("session_start_compact") == section_output(section)
    assert hook("post_tool_use_apply_patch") == notes_output(m["api"])

    assert actors(app) == {f"codex#{sid}"}


def test_gemini_section_path_notes_and_compression(server: Any, project: Any, repo: Path, home: Path) -> None:
    sid = "5f0c3a1e-2222-4b3c-8d4e-000000000001"
    app, m, hook, section = started("gemini", project, repo, home, sid)
    assert hook("before_agent") is None  # the section is in the context already
    assert hook("after_tool_read_file") == notes_output(m["db"], event="AfterTool")
    assert hook("after_tool_read_many_files") == notes_output(m["sql"], event="AfterTool")
    assert hook("after_tool_shell") == notes_output(m["api"], event="AfterTool")
    assert hook("after_tool_replace") is None  # src/db.py's note was shown
    own = {**fixture("after_tool_read_file", repo, sid, "gemini"), "tool_name": "mcp_realmem_realmem_recall"}
    assert run_hook(own, home, "gemini") is None

    # Compression drops the section and the notes; Gemini has no start event after it, so the
    # next prompt carries the session's section (the same bytes), once.
    release_memory(app)
    assert hook("pre_compress") is None
    assert hook("before_agent") == section_output(section, event="BeforeAgent")
    assert hook("before_agent") is None
    assert hook("after_tool_read_file") == notes_output(m["db"], event="AfterTool")

    assert actors(app) == {f"gemini#{sid}"}


def test_an_unknown_agent_or_another_clients_event_is_bad_input(server: Any, repo: Path, home: Path) -> None:
    cases = [("cursor", fixture("post_tool_use_bash", repo, "s", "codex")),
             ("codex", fixture("after_tool_read_file", repo, "s", "gemini")),
             ("claude-code", fixture("pre_compress", repo, "s", "gemini"))]
    for agent, hook_input in cases:
        out = subprocess.run([sys.executable, "-I", "-S", str(HOOK), "--agent", agent], capture_output=True,
                             input=json.dumps(hook_input).encode(), env={**os.environ, "REALMEM_HOME": str(home)},
                             timeout=WAIT)
        assert out.returncode == 0 and out.stdout == b""
        assert out.stderr.startswith(b"realmem hook: bad hook input"), out.stderr
    assert server.poll() is None


def test_each_clients_tool_input_names_its_paths() -> None:
    # The patch grammar of Codex's apply_patch tool (openai/codex codex-rs/apply-patch).
    patch = ("*** Begin Patch\n*** Update File: src/a.py\n*** Move to: src/b.py\n@@\n-x\n+y\n"
             "*** Delete File: old.txt\n*** Add File: new.md\n+hi\n*** End Patch\n")
    assert clients.codex_input("apply_patch", {"command": patch}) == {"paths": ["src/a.py", "src/b.py", "old.txt",
                                                                                "new.md"]}
    assert clients.codex_input("Bash", {"command": "cat a"}) == {"command": "cat a"}
    assert clients.gemini_input("read_many_files", {"include": ["a.py", "docs"]}) == {"paths": ["a.py", "docs"]}
    assert clients.gemini_input("read_file", {"file_path": "a.py"}) == {"file_path": "a.py"}
