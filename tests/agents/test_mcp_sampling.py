"""An MCP client's own model judges and rewrites through MCP sampling when no System One is set:
the official SDK client over real stdio, its sampling callback playing the model."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, types
from mcp.shared.exceptions import MCPError

from realmem.clients import chatjudge
from realmem.gate import rewrite

from helpers.mcp_client import run_client, text_of

MODEL = "client-model-7"


@pytest.fixture
def env(home: Path) -> dict[str, str]:
    return {**os.environ, "REALMEM_HOME": str(home), "REALMEM_WORKER_AUTOSTART": "0"}


def _text(params: types.CreateMessageRequestParams) -> str:
    content = params.messages[-1].content
    assert isinstance(content, types.TextContent)
    return content.text


def judge_reply(params: types.CreateMessageRequestParams, **picks: Callable[[dict[str, str]], str]) -> str:
    """Certainty on one option per question: ``picks`` by question, else a new, useful, lasting,
    safe, shared fact."""
    asked = json.loads(_text(params).split("QUESTIONS\n", 1)[1])
    defaults = {"action": "add", "importance": "3", "durable": "true", "unsafe": "false", "scope": "shared",
                "path_urgency": "1"}
    answers = {}
    for name, q in asked.items():
        base = re.sub(r"_\d+$", "", name)
        chosen = picks[base](q["options"]) if base in picks else defaults.get(base, "none")
        answers[name] = {"probabilities": {k: float(k == chosen) for k in q["options"]}}
    return json.dumps({"answers": answers})


def neighbour(options: dict[str, str]) -> str:
    return next(k for k in options if k != "none")


def reply(text: str) -> types.CreateMessageResult:
    return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text=text),
                                     model=MODEL, stop_reason="endTurn")


def remember(caption: str, content: str) -> Callable[[ClientSession], Any]:
    async def body(s: ClientSession) -> types.CallToolResult:
        return await s.call_tool("realmem_remember", {"caption": caption, "content": content})
    return body


def test_the_clients_model_judges_and_rewrites_by_sampling(env: dict[str, str], repo: Path, tmp_path: Path) -> None:
    seen: list[types.CreateMessageRequestParams] = []
    answers: list[Callable[[types.CreateMessageRequestParams], str]] = [
        judge_reply,
        lambda p: judge_reply(p, conflict_with=neighbour, action=lambda o: "edit"),
        lambda p: json.dumps({"caption": "Deploys run with make deploy",
                              "content": "Run `make deploy` from the repo root; `make ship` is gone."}),
    ]

    async def sample(params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        seen.append(params)
        return reply(answers.pop(0)(params))

    added = run_client(env, repo, remember("Deploys run with make ship", "Run `make ship` from the repo root."),
                       errlog=tmp_path / "mcp.log", sampling=sample)
    assert text_of(added).startswith("Stored [") and not added.is_error, text_of(added)
    edited = run_client(env, repo, remember("Deploys now run with make deploy",
                                            "`make ship` was replaced by `make deploy`, run from the repo root."),
                        errlog=tmp_path / "mcp.log", sampling=sample)
    assert text_of(edited).startswith("Updated ["), text_of(edited)
    assert answers == []
    # The judge's request as the client sees it: its system prompt, temperature 0.
    assert seen[0].system_prompt == chatjudge.SYSTEM and seen[0].temperature == 0.0
    assert seen[2].system_prompt == rewrite.SYSTEM
    mid = re.search(r"\[([\w-]+)\]", text_of(edited)).group(1)  # type: ignore[union-attr]
    audit = subprocess.run([sys.executable, "-m", "realmem.interface.cli", "--cwd", str(repo), "audit", mid],
                           capture_output=True, text=True, env=env, check=True).stdout
    assert f"Judge: chat:{MODEL} (1 request)" in audit, audit


def test_a_declined_sampling_request_queues_with_the_reason(env: dict[str, str], repo: Path, tmp_path: Path) -> None:
    async def decline(params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        raise MCPError(code=-1, message="User rejected sampling request")

    out = run_client(env, repo, remember("Lint with ruff", "Run `ruff check .` before committing."),
                     errlog=tmp_path / "mcp.log", sampling=decline)
    text = text_of(out)
    assert text.startswith("Queued: the chat judge refused the request (the MCP client refused the sampling "
                           "request ("), text
    assert "User rejected sampling request" in text


def test_without_sampling_or_endpoint_the_queue_says_how_to_get_a_judge(env: dict[str, str], repo: Path,
                                                                      tmp_path: Path) -> None:
    out = run_client(env, repo, remember("Lint with ruff", "Run `ruff check .` before committing."),
                     errlog=tmp_path / "mcp.log")
    text = text_of(out)
    assert text.startswith("Queued: no judge is reachable"), text
    assert "semif.url" in text and "rewriter.url" in text
