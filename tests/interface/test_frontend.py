"""Command hints name a command the user can run where they are: `/realmem retry` in Pi (the rpc
child), `realmem retry` in a shell or through an MCP client (Claude Code, Cursor) and its hooks."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, types

from realmem import frontend
from realmem.interface import session
from realmem.interface.render import status_text
from realmem.write import gitignore
from realmem.clients import NotConfigured, SystemOneClient
from realmem.config import Config
from realmem.write.attached import open_attached

from conftest import kill_workers
from helpers.cli import ok
from helpers.hooks import fixture, run_hook, server  # noqa: F401 (the hook server fixture)
from helpers.judge_script import QUESTIONS, STATE
from helpers.mcp_client import run_client, text_of
from helpers.rpc_child import Child


# A Pi slash command, not the .pi/realmem directory.
PI_COMMAND = re.compile(r"(?<![\w.])/realmem\b")


@pytest.fixture
def env(home: Path) -> Iterator[dict[str, str]]:
    # No SemIf URL: status says where to set it.
    e = {k: v for k, v in os.environ.items() if not k.startswith("REALMEM_SEMIF")}
    yield {**e, "REALMEM_HOME": str(home), "REALMEM_WORKER_AUTOSTART": "0"}
    kill_workers(home)


@pytest.fixture
def pi() -> Iterator[None]:
    frontend.use(frontend.PI)
    yield
    frontend.use(frontend.SHELL)


def test_hint_per_front_end(pi: None) -> None:
    assert frontend.hint("retry") == "/realmem retry"
    assert frontend.settings_hint("semif.url") == "/realmem settings"
    assert frontend.set_in("semif.url") == "in /realmem settings"
    frontend.use(frontend.SHELL)
    assert frontend.hint("retry") == "realmem retry"
    assert frontend.hint("manage, prune-paths", "prune-paths") == "realmem prune-paths"
    assert frontend.settings_hint("semif.url") == "realmem settings set semif.url VALUE"
    assert frontend.set_in("semif.model") == "with realmem settings set semif.model VALUE"
    with pytest.raises(ValueError):
        frontend.use("vim")


def test_cli_status_names_shell_commands(home: Path, repo: Path) -> None:
    out = ok(home, repo, "status").stdout
    assert "or rewriter.url (a chat model) with realmem settings set KEY VALUE, or remember" in out
    assert not PI_COMMAND.search(out)


def test_mcp_status_names_shell_commands(env: dict[str, str], repo: Path, tmp_path: Path) -> None:
    async def body(s: ClientSession) -> types.CallToolResult:
        return await s.call_tool("realmem_status", {})

    text = text_of(run_client(env, repo, body, errlog=tmp_path / "mcp.log"))
    assert "(a chat model) with realmem settings set KEY VALUE" in text and not PI_COMMAND.search(text)


def test_pi_keeps_its_slash_commands(env: dict[str, str], repo: Path) -> None:
    child = Child(Path(env["REALMEM_HOME"]), env)
    try:
        text = child.call("status", {"cwd": str(repo)})["text"]
    finally:
        assert child.close() == 0
    assert ("No judge is reachable: set semif.url (a System One endpoint) or rewriter.url (a chat model) in "
            "/realmem settings, or remember from a Pi session, whose own model judges; new memories are queued "
            "until one is.") in text


def _info(**over: Any) -> dict[str, Any]:
    info: dict[str, Any] = {"project": None, "stores": [], "queued": 2, "problems": [], "gitignore": None,
                            "endpoints": {"semif": {"url": ""}}, "judge": "chat", "worker": {}, "missing_paths": 3}
    return info | over


def test_status_text_is_byte_identical_for_pi(pi: None) -> None:
    text = status_text(_info())
    assert "Queued candidates: 2 (retried automatically; /realmem retry)" in text
    assert "3 memories point at paths that no longer exist (/realmem manage, prune-paths)." in text
    frontend.use(frontend.SHELL)
    text = status_text(_info())
    assert "Queued candidates: 2 (retried automatically; realmem retry)" in text
    assert "3 memories point at paths that no longer exist (realmem manage, realmem prune-paths)." in text
    assert not PI_COMMAND.search(text)


def test_session_and_gitignore_hints(home: Path, repo: Path, git: Any, pi: None) -> None:
    (repo / ".gitignore").write_text(".pi/\n", encoding="utf-8")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-q", "-m", "ignore .pi")
    assert "Fix: /realmem fix-gitignore (appends" in (gitignore.store_warning(repo) or "")
    frontend.use(frontend.SHELL)
    warning = gitignore.store_warning(repo) or ""
    assert "Fix: realmem fix-gitignore (appends" in warning and not PI_COMMAND.search(warning)
    with open_attached(home, repo, session="s1") as a:
        note = session.start(a)["notification"] or ""
    kill_workers(home)
    assert "realmem fix-gitignore" in note and not PI_COMMAND.search(note)


def test_endpoint_hints_name_the_setting(pi: None) -> None:
    def not_set() -> str:
        with pytest.raises(NotConfigured) as exc:
            SystemOneClient("").ask(STATE, {"durable": QUESTIONS["durable"]})
        return str(exc.value)

    assert not_set() == "the SemIf endpoint is not configured; set it in /realmem settings"
    frontend.use(frontend.SHELL)
    assert not_set() == "the SemIf endpoint is not configured; set it with realmem settings set semif.url VALUE"


def test_config_key_advice(home: Path, pi: None) -> None:
    cfg = Config(home)
    assert cfg.key_advice("rewriter.key") == "rewriter.key is not set; set it in /realmem settings"
    frontend.use(frontend.SHELL)
    assert cfg.key_advice("rewriter.key") == ("rewriter.key is not set; set it with "
                                              "realmem settings set rewriter.key VALUE")


def test_claude_code_session_start_names_shell_commands(home: Path, repo: Path, git: Any, server: Any) -> None:
    """The SessionStart hook's systemMessage (served by the hook server) is read by a Claude Code user."""
    (repo / ".gitignore").write_text(".pi/\n", encoding="utf-8")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-q", "-m", "ignore .pi")
    out = run_hook(fixture("session_start_startup", repo, "cc-1"), home)
    assert out is not None
    message = out["systemMessage"]
    assert "Fix: realmem fix-gitignore (appends" in message and not PI_COMMAND.search(message)
