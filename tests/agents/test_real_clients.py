"""The real Gemini CLI and Codex (pinned in scripts/agent-clients/) in a project where
`realmem install gemini` / `install codex` ran, driven headless by a scripted fake model API on
127.0.0.1 (realmem.fakes.gemini, realmem.fakes.responses): the model reads src/db.py, which a
memory is about, then answers.  What the model received is checked: the ``<realmem>`` section
at session start and ``<realmem-path-notes>`` after the read, exactly as realmem renders them;
the event log names the agent.  Run with ``scripts/e2e-agents.sh`` (skipped otherwise).
"""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import pytest

from realmem.fakes.gemini import FakeGemini
from realmem.fakes.responses import FakeResponses
from realmem.read import prompt
from realmem.stores import ids
from realmem.write.attached import open_attached

from helpers import cli
from helpers.agent_clients import client_bin, client_env, gemini_hook_contexts, run_client, strings, write_json
from helpers.hooks import notes_output

CAPTION = "db module uses apsw"
QUESTION = "What does src/db.py do?"
ANSWER = "src/db.py opens the database with apsw."


@pytest.fixture
def memory(repo: Path, home: Path) -> Any:
    """A project with src/db.py and a memory about it, added as a user adds one."""
    (repo / "src").mkdir()
    (repo / "src" / "db.py").write_text("import apsw\n", encoding="utf-8")
    added = cli.as_json(home, repo, "add", "--caption", CAPTION, "--content", "src/db.py opens apsw with WAL.",
                        "--path", "src/db.py")
    return types.SimpleNamespace(id=ids.canonical(added["id"]), caption=CAPTION, paths=["src/db.py"])


def expected(home: Path, repo: Path, memory: Any) -> tuple[str, str]:
    """The section a new session gets and the path notes for ``memory``, as realmem renders them."""
    app = open_attached(home, repo, scan=False)
    try:
        section = prompt.section(app)
    finally:
        app.close()
    return section, notes_output(memory)["hookSpecificOutput"]["additionalContext"]


def agent_sessions(home: Path, repo: Path) -> set[str]:
    events = cli.as_json(home, repo, "events")
    return {e["session"] for e in events if e["type"] == "path_notes_shown"}


def test_gemini_cli_gets_the_section_and_path_notes_after_read_file(repo: Path, home: Path, memory: Any) -> None:
    gemini = client_bin("gemini")
    cli.ok(home, repo, "install", "gemini", "--yes")
    user = Path(client_env()["HOME"]) / ".gemini"
    # An API-key user who trusted this folder; no update checks or usage statistics (offline).
    write_json(user / "settings.json", {"security": {"auth": {"selectedType": "gemini-api-key"}},
                                        "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
                                        "privacy": {"usageStatisticsEnabled": False}})
    write_json(user / "trustedFolders.json", {str(repo): "TRUST_FOLDER"})
    section, notes = expected(home, repo, memory)

    with FakeGemini() as model:
        model.script([{"call": "read_file", "args": {"file_path": "src/db.py"}}, {"text": ANSWER}])
        env = client_env(GOOGLE_GEMINI_BASE_URL=model.url, GEMINI_API_KEY="fake-key")
        out = run_client([str(gemini), "-p", QUESTION, "--yolo", "-m", "gemini-2.5-flash"], repo, env)
        assert out.returncode == 0, (out.stdout, out.stderr)
        assert ANSWER in out.stdout
        first, after_read = (r.body for r in model.requests if r.path.endswith(":streamGenerateContent"))

    assert gemini_hook_contexts(first) == [section]
    # AfterTool's context is appended to read_file's result, the functionResponse.
    response = after_read["contents"][-1]["parts"][0]["functionResponse"]
    assert response["name"] == "read_file"
    assert gemini_hook_contexts(response) == [notes]
    assert {s.split("#")[0] for s in agent_sessions(home, repo)} == {"gemini"}


def test_codex_gets_the_section_and_path_notes_after_a_shell_read(repo: Path, home: Path, memory: Any,
                                                                   tmp_path: Path) -> None:
    codex = client_bin("codex")
    cli.ok(home, repo, "install", "codex", "--yes")
    codex_home = tmp_path / "codex-home"
    section, notes = expected(home, repo, memory)

    with FakeResponses() as model:
        # A custom provider on the fake; the project trusted, so Codex reads its .codex/.
        codex_home.mkdir()
        (codex_home / "config.toml").write_text(
            f'model = "fake-model"\nmodel_provider = "fake"\n\n'
            f'[model_providers.fake]\nname = "fake"\nbase_url = "{model.url}/v1"\n'
            f'env_key = "FAKE_MODEL_KEY"\nwire_api = "responses"\n\n'
            f'[projects."{repo}"]\ntrust_level = "trusted"\n', encoding="utf-8")
        # Codex's shell tool for models it has no metadata for; its hooks call it Bash.
        model.script([{"call": "exec_command", "args": {"cmd": "sed -n 1,20p src/db.py"}}, {"text": ANSWER}])
        env = client_env(CODEX_HOME=str(codex_home), FAKE_MODEL_KEY="fake-key")
        # codex exec has no prompt to trust new hooks; the bypass trusts the ones install wrote.
        out = run_client([str(codex), "exec", "--dangerously-bypass-hook-trust", "--sandbox", "read-only", QUESTION],
                         repo, env)
        assert out.returncode == 0, (out.stdout, out.stderr)
        assert ANSWER in out.stdout
        first, after_read = (r.body for r in model.requests)

    developer = [s for item in first["input"] if item.get("role") == "developer" for s in strings(item["content"])]
    assert section in developer
    # PostToolUse's context is a developer message between the call and its output.
    tail = after_read["input"][len(first["input"]):]
    assert [i["type"] for i in tail if i["type"] != "message"] == ["function_call", "function_call_output"]
    assert notes in [s for i in tail if i.get("role") == "developer" for s in strings(i["content"])]
    assert {s.split("#")[0] for s in agent_sessions(home, repo)} == {"codex"}
