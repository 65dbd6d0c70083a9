"""`realmem mcp` through the official MCP SDK client over real stdio: the server is
`python -m realmem.interface.cli mcp`, the judge the fake System One on 127.0.0.1, the stores real
SQLite and a real git repo.  The cross-agent tests run the Pi adapter's rpc child beside it
on the same home and project.  The SDK's stdio client stops and waits for the server.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, types

from realmem.read import prompt
from realmem.agents import mcp_server
from realmem.fakes import FakeEmbeddings, FakeSystemOne
from realmem.write.attached import open_attached

from conftest import kill_workers, make_repo
from helpers.mcp_client import run_client, text_of
from helpers.rpc_child import Child

@pytest.fixture
def env(home: Path) -> dict[str, str]:
    return {**os.environ, "REALMEM_HOME": str(home), "REALMEM_WORKER_AUTOSTART": "0"}


@pytest.fixture
def semif(env: dict[str, str]) -> Any:
    with FakeSystemOne() as s1:
        env["REALMEM_SEMIF_URL"] = s1.url
        yield s1


def test_tools_prompt_and_resource_over_stdio(env: dict[str, str], semif: FakeSystemOne, repo: Path, home: Path,
                                              tmp_path: Path) -> None:
    (repo / "src").mkdir()
    (repo / "src" / "db.py").write_text("import apsw\n", encoding="utf-8")

    async def body(s: ClientSession) -> dict[str, Any]:
        out: dict[str, Any] = {"tools": (await s.list_tools()).tools}
        out["remember"] = await s.call_tool("realmem_remember", {
            "caption": "database access goes through apsw",
            "content": "src/db.py opens every connection with apsw (WAL, busy_timeout 30 s); never sqlite3.",
            "paths": ["src/db.py"], "scope": "shared"})
        out["recall"] = await s.call_tool("realmem_recall", {"queries": ["apsw connection"]})
        out["list"] = await s.call_tool("realmem_list", {})
        out["status"] = await s.call_tool("realmem_status", {})
        out["prompt"] = await s.get_prompt("realmem")
        out["resource"] = await s.read_resource(mcp_server.SECTION_URI)
        return out

    # The server runs elsewhere: the project comes from the client's roots.
    out = run_client(env, tmp_path, body, roots=[repo], errlog=tmp_path / "mcp.log")

    tools = {t.name: t for t in out["tools"]}
    assert set(tools) == {"realmem_recall", "realmem_remember", "realmem_status", "realmem_list", "realmem_forget"}
    assert tools["realmem_remember"].input_schema["required"] == ["caption", "content"]
    assert set(tools["realmem_recall"].input_schema["properties"]) == {"queries", "paths", "ids", "page", "scope"}
    assert tools["realmem_forget"].input_schema["properties"]["ids"]["minItems"] == 1

    assert not out["remember"].is_error, text_of(out["remember"])
    assert any(r.path == "/v1/systemone" for r in semif.requests)  # the gate asked the judge
    m = re.search(r"\[([A-Za-z0-9_-]{22})\]", text_of(out["remember"]))
    assert m, text_of(out["remember"])
    mem_id = m.group(1)
    assert not out["recall"].is_error and mem_id in text_of(out["recall"])
    assert mem_id in text_of(out["list"])
    assert str(repo) in text_of(out["status"])

    with open_attached(home, repo, scan=False) as app:
        section = prompt.section(app)
        key = app.resolve(mem_id)
        assert key[0] == app.project.shared_store  # type: ignore[union-attr]
        actors = {r[0] for r in app.conn.execute("SELECT session FROM events WHERE memory_id=?", (key[1],))}
    assert actors == {"test-agent/1.2.3"}  # audit tells which agent wrote it
    assert out["prompt"].messages[0].content.text == section
    assert "src/db.py (1)" in section
    assert out["resource"].contents[0].text == section

    async def forget(s: ClientSession) -> types.CallToolResult:
        return await s.call_tool("realmem_forget", {"ids": [mem_id[:12], "zzzzzzzz"]})

    gone = run_client(env, tmp_path, forget, roots=[repo], errlog=tmp_path / "mcp.log")
    assert gone.is_error  # an unknown id is a tool error, and the text still says what was forgotten
    assert text_of(gone) == f"Forgot 1 memory: {mem_id}\nno memory with id or prefix zzzzzzzz"
    child = Child(home, env)
    try:
        err = child.error("forget", {"cwd": str(repo), "ids": ["zzzzzzzz"]})
    finally:
        child.close()
    assert err == {"code": 1, "message": "no memory with id or prefix zzzzzzzz"}  # the same code over rpc

    audit = subprocess.run([sys.executable, "-m", "realmem.interface.cli", "--cwd", str(repo), "audit", mem_id],
                           capture_output=True, text=True, env=env, check=True)
    assert "test-agent/1.2.3" in audit.stdout


def test_tool_errors_carry_the_user_facing_message(env: dict[str, str], repo: Path, tmp_path: Path,
                                                   home: Path) -> None:
    bad = {"queries": ["x"], "paths": ["~someone-else/notes.md"]}

    async def body(s: ClientSession) -> list[types.CallToolResult]:
        return [await s.call_tool("realmem_recall", bad),
                await s.call_tool("realmem_remember", {"caption": "c", "content": "some fact",
                                                       "paths": ["~someone-else/notes.md"]})]

    results = run_client(env, repo, body, errlog=tmp_path / "mcp.log")  # no roots: the server's cwd
    message = ("bad path '~someone-else/notes.md': only ~ and ~/ are supported, not another user's home: "
               "'~someone-else/notes.md'")
    for r in results:
        assert r.is_error
        assert text_of(r) == message
    child = Child(home, env)
    try:
        err = child.error("recall", {"cwd": str(repo), **bad})
    finally:
        child.close()
    assert err == {"code": 1, "message": message}  # the same message the Pi adapter shows


def test_one_memory_for_mcp_and_pi(env: dict[str, str], semif: FakeSystemOne, repo: Path, home: Path,
                                   tmp_path: Path) -> None:
    (repo / "src").mkdir()
    (repo / "src" / "db.py").write_text("import apsw\n", encoding="utf-8")
    (repo / "Makefile").write_text("dist:\n\tpython -m build\n", encoding="utf-8")
    child = Child(home, env)
    try:
        # Pi remembers while an MCP agent remembers: both go through the same lease, both land.
        pi_mid = child.send("remember", {"cwd": str(repo), "session": "pi-session", "caption": "release with make dist",
                                         "content": "make dist builds the wheel and sdist into dist/.",
                                         "paths": ["Makefile"], "scope": "shared"})

        async def remember(s: ClientSession) -> types.CallToolResult:
            return await s.call_tool("realmem_remember", {
                "caption": "database access goes through apsw",
                "content": "src/db.py opens every connection with apsw (WAL, busy_timeout 30 s); never sqlite3.",
                "paths": ["src/db.py"], "scope": "shared"})

        made = run_client(env, repo, remember, errlog=tmp_path / "mcp.log")
        assert not made.is_error, text_of(made)
        mcp_id = re.search(r"\[([A-Za-z0-9_-]{22})\]", text_of(made)).group(1)  # type: ignore[union-attr]
        pi = child.response(pi_mid)
        assert "result" in pi, pi
        pi_id = pi["result"]["details"]["id"]
        assert pi_id

        # MCP -> Pi: recall and path notes through the rpc child.
        recalled = child.call("recall", {"cwd": str(repo), "session": "pi-session", "queries": ["apsw"]})
        assert mcp_id in recalled["text"]
        notes = child.call("path_notes", {"cwd": str(repo), "session": "pi-session", "tool_name": "read",
                                          "input": {"path": "src/db.py"}, "shown": []})
        assert notes["text"] and mcp_id in notes["text"] and mcp_id in notes["shown"]

        # Pi -> MCP: recall through the MCP server.
        async def recall(s: ClientSession) -> types.CallToolResult:
            return await s.call_tool("realmem_recall", {"queries": ["make dist wheel"]})

        found = run_client(env, repo, recall, errlog=tmp_path / "mcp.log")
        assert not found.is_error and pi_id in text_of(found)
    finally:
        assert child.close() == 0
        kill_workers(home)

    check = subprocess.run([sys.executable, "-m", "realmem.interface.cli", "--cwd", str(repo), "replay", "--check"],
                           capture_output=True, text=True, env=env)
    assert check.returncode == 0, check.stdout + check.stderr


def test_stderr_carries_no_info_logs(env: dict[str, str], semif: FakeSystemOne, repo: Path, tmp_path: Path) -> None:
    """An MCP client shows the server's stderr as its log: realmem's level (REALMEM_LOG, default
    warning) holds there too, so neither the SDK's per-request lines nor httpx's per-call lines
    flood it."""
    with FakeEmbeddings() as emb:
        env["REALMEM_EMBEDDING_URL"] = emb.url

        async def body(s: ClientSession) -> list[types.CallToolResult]:
            return [await s.call_tool("realmem_remember", {"caption": "docs build with mkdocs",
                                                           "content": "Run mkdocs build --strict; CI fails on warnings."}),
                    await s.call_tool("realmem_recall", {"queries": ["mkdocs"]})]

        errlog = tmp_path / "mcp.log"
        results = run_client(env, repo, body, errlog=errlog)
    assert not any(r.is_error for r in results)
    assert "mkdocs" in text_of(results[1])
    assert errlog.read_text(encoding="utf-8") == ""


def test_a_roots_change_moves_the_server_to_the_new_workspace(env: dict[str, str], repo: Path, tmp_path: Path) -> None:
    """A client that opens another workspace says so (notifications/roots/list_changed): the
    next call works in the new project, not the one the first call found."""
    other = make_repo(tmp_path / "other")
    roots = [repo]

    async def body(s: ClientSession) -> list[str]:
        seen = [text_of(await s.call_tool("realmem_status", {}))]
        roots[:] = [other]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # roots are deprecated in the newest protocol, still what clients send
            await s.send_roots_list_changed()
        # The SDK handles a notification on a task of its own: a call may overtake it.
        for _ in range(20):
            seen.append(text_of(await s.call_tool("realmem_status", {})))
            if str(other) in seen[-1]:
                break
        return seen

    seen = run_client(env, tmp_path, body, roots=roots, errlog=tmp_path / "mcp.log")
    assert str(repo) in seen[0] and str(other) not in seen[0]
    assert str(other) in seen[-1]


# What Codex passes to the MCP servers it starts, beside an entry's env_vars (codex-rs
# rmcp-client, DEFAULT_ENV_VARS on unix); every other variable of the user's shell is dropped.
CODEX_DEFAULT_ENV = ("HOME", "LOGNAME", "PATH", "SHELL", "USER", "__CF_USER_TEXT_ENCODING", "LANG", "LC_ALL",
                     "TERM", "TMPDIR", "TZ")


def test_the_printed_codex_entry_carries_realmems_environment(env: dict[str, str], semif: FakeSystemOne,
                                                               repo: Path, home: Path, tmp_path: Path) -> None:
    """Endpoints set by environment only reach a server started the way Codex starts it."""
    import tomllib  # here: only this test reads TOML

    env["REALMEM_EMBEDDING_URL"] = "http://127.0.0.1:9/v1"
    env["REALMEM_SEMIF_KEY"] = "$TEAM_SEMIF_KEY"  # a key by reference: its variable must be forwarded too
    env["TEAM_SEMIF_KEY"] = "sk-test-" + os.urandom(8).hex()
    printed = subprocess.run([sys.executable, "-m", "realmem.interface.cli", "install", "mcp", "--client", "codex"],
                             env=env, capture_output=True, text=True, check=True).stdout
    entry = tomllib.loads(printed)["mcp_servers"]["realmem"]
    assert {"REALMEM_HOME", "REALMEM_SEMIF_URL", "REALMEM_EMBEDDING_URL", "REALMEM_SEMIF_KEY",
            "TEAM_SEMIF_KEY"} <= set(entry["env_vars"])
    codex_env = {k: env[k] for k in (*CODEX_DEFAULT_ENV, *entry["env_vars"]) if k in env}

    async def body(s: ClientSession) -> str:
        return text_of(await s.call_tool("realmem_status", {}))

    status = run_client(codex_env, repo, body, errlog=tmp_path / "mcp.log", command=[entry["command"], *entry["args"]])
    assert semif.url in status and "semif not set" not in status
    assert str(home) in status or home.name in status
    # Without env_vars the same server would run on another home with no judge: the check can fail.
    bare = {k: env[k] for k in CODEX_DEFAULT_ENV if k in env}
    status_bare = run_client(bare | {"HOME": str(tmp_path / "h")}, repo, body, errlog=tmp_path / "mcp.log",
                             command=[entry["command"], *entry["args"]])
    assert semif.url not in status_bare


def test_a_damaged_database_is_a_tool_error_naming_it(env: dict[str, str], repo: Path, home: Path,
                                                      tmp_path: Path) -> None:
    with open_attached(home, repo):
        pass
    db_path = home / "realmem.sqlite"
    data = bytearray(db_path.read_bytes())
    data[:] = os.urandom(len(data))  # not a database at all any more
    db_path.write_bytes(bytes(data))

    async def body(s: ClientSession) -> Any:
        return await s.call_tool("realmem_list", {})

    out = run_client(env, repo, body, errlog=tmp_path / "mcp.log")
    assert out.is_error
    text = text_of(out)
    assert str(db_path) in text and "damaged" in text and "realmem repair" in text, text
    assert "internal error" not in text and "\n" not in text
