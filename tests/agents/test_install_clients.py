"""`realmem install codex` and `realmem install gemini` on real temp files: empty, existing,
commented and malformed.  Install adds realmem's entries (and Codex's feature flag, shown in
the diff), a second install changes nothing, uninstall gives every file back byte for byte,
and a file realmem cannot edit safely is refused with nothing written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from realmem.agents import edits, install
from realmem.interface.cli import cli

from helpers.hooks import fixture, server  # noqa: F401 (the hook server fixture)

# A config.toml as people keep it: comments, other servers, other features, odd spacing.
CODEX_CONFIG = """\
# Codex settings, kept by hand.
model = "gpt-5.5-codex"   # the default model
approval_policy = "on-request"

[features]
# web search on, for docs
web_search_request = true

[mcp_servers.github]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-github"]
env_vars = ["GITHUB_TOKEN"]   # forwarded from the shell

[projects."/src/app"]
trust_level = "trusted"
"""
CODEX_HOOKS = {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./guard.sh"}]}]}}
GEMINI_SETTINGS = {
    "theme": "GitHub",
    "hooks": {"AfterTool": [{"matcher": "write_file|replace",
                             "hooks": [{"name": "lint", "type": "command", "command": "npm run lint", "timeout": 5000}]}]},
    "mcpServers": {"github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"]}},
}


@pytest.fixture(autouse=True)
def _no_codex_home(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CODEX_HOME", raising=False)  # --user must land in the temp HOME


def invoke(cwd: Path, *args: str) -> Any:
    return CliRunner().invoke(cli, ["--cwd", str(cwd), "install", *args], catch_exceptions=False)


def write(p: Path, text: str) -> None:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")


def our_hooks(doc: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    return {event: [h for g in groups for h in g["hooks"] if install.MARKER in h["command"]]
            for event, groups in doc.get("hooks", {}).items()
            if any(install.MARKER in h["command"] for g in groups for h in g["hooks"])}


def snapshot(*paths: Path) -> dict[Path, bytes | None]:
    return {p: p.read_bytes() if p.exists() else None for p in paths}


def roundtrip(cwd: Path, agent: str, *scope: str) -> Any:
    """Install, install again (no change), return the install output; the caller uninstalls."""
    r = invoke(cwd, agent, *scope, "--yes")
    assert r.exit_code == 0, r.output
    return r


def uninstall(cwd: Path, agent: str, *scope: str) -> None:
    r = invoke(cwd, agent, *scope, "--uninstall", "--yes")
    assert r.exit_code == 0, r.output


# --- Codex -------------------------------------------------------------------------------------

def test_codex_on_an_empty_project_creates_and_removes_everything(repo: Path, home: Path) -> None:
    r = roundtrip(repo, "codex")
    hooks_json, config = repo / ".codex" / "hooks.json", repo / ".codex" / "config.toml"
    assert f"+++ {config}" in r.output and "+hooks = true" in r.output  # the flag is in the diff
    assert set(our_hooks(json.loads(hooks_json.read_text()))) == {"SessionStart", "PostToolUse", "PostCompact"}
    assert all(h["command"].endswith("--agent codex") and h["timeout"] <= 60
               for hs in our_hooks(json.loads(hooks_json.read_text())).values() for h in hs)
    doc = tomllib.loads(config.read_text())
    assert doc["features"] == {"hooks": True}
    entry = install.server_entry(str(home))
    assert doc["mcp_servers"]["realmem"] == {"command": entry["command"], "args": entry["args"],
                                             "env_vars": install.forwarded_env(str(home))}
    before = snapshot(hooks_json, config)
    r = invoke(repo, "codex", "--yes")
    assert "Already installed" in r.output and snapshot(hooks_json, config) == before
    uninstall(repo, "codex")
    assert not (repo / ".codex").exists()


def test_codex_keeps_comments_and_gives_both_files_back_byte_for_byte(repo: Path, home: Path) -> None:
    hooks_json, config = repo / ".codex" / "hooks.json", repo / ".codex" / "config.toml"
    write(config, CODEX_CONFIG)
    write(hooks_json, json.dumps(CODEX_HOOKS, indent=4) + "\n")
    before = snapshot(hooks_json, config)
    roundtrip(repo, "codex")
    text = config.read_text()
    for line in CODEX_CONFIG.splitlines():  # every line of the user's file is still there, as it was
        assert line in text.splitlines()
    assert tomllib.loads(text)["features"] == {"web_search_request": True, "hooks": True}
    assert json.loads(hooks_json.read_text())["hooks"]["PreToolUse"] == CODEX_HOOKS["hooks"]["PreToolUse"]
    uninstall(repo, "codex")
    assert snapshot(hooks_json, config) == before


def test_codex_turns_hooks_back_on_and_uninstall_turns_them_off_again(repo: Path, home: Path) -> None:
    config = repo / ".codex" / "config.toml"
    write(config, "[features]\nhooks = false  # off while debugging\n")
    before = config.read_bytes()
    r = roundtrip(repo, "codex")
    assert "-hooks = false" in r.output and "+hooks = true" in r.output
    uninstall(repo, "codex")
    assert config.read_bytes() == before


def test_codex_edits_made_after_install_survive_uninstall(repo: Path, home: Path) -> None:
    config = repo / ".codex" / "config.toml"
    write(config, CODEX_CONFIG)
    roundtrip(repo, "codex")
    config.write_text(config.read_text() + '\n[mcp_servers.docs]\ncommand = "docs-mcp"  # added later\n')
    uninstall(repo, "codex")
    text = config.read_text()
    doc = tomllib.loads(text)
    assert "realmem" not in doc["mcp_servers"] and doc["mcp_servers"]["docs"] == {"command": "docs-mcp"}
    assert "# added later" in text and "# Codex settings, kept by hand." in text


@pytest.mark.parametrize("bad", ['model = "unterminated\n', "[features]\nhooks = true\n[features]\n",
                                 'mcp_servers = "none"\n'])
def test_codex_refuses_a_malformed_config_and_writes_nothing(repo: Path, home: Path, bad: str) -> None:
    config = repo / ".codex" / "config.toml"
    write(config, bad)
    r = subprocess.run([sys.executable, "-m", "realmem.interface.cli", "--cwd", str(repo), "install", "codex", "--yes"],
                       capture_output=True, text=True)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.startswith(f"realmem: {config}") and "nothing was changed" in r.stderr, r.stderr
    assert config.read_text() == bad and not (repo / ".codex" / "hooks.json").exists()
    assert not (home / edits.MANIFEST).exists()


def test_codex_refuses_a_foreign_server_named_realmem(repo: Path, home: Path) -> None:
    config = repo / ".codex" / "config.toml"
    write(config, '[mcp_servers.realmem]\ncommand = "another-realmem"\n')
    r = invoke(repo, "codex", "--yes")
    assert r.exit_code == 1 and "did not write" in r.output
    assert config.read_text() == '[mcp_servers.realmem]\ncommand = "another-realmem"\n'


def test_codex_user_scope_writes_the_codex_home(repo: Path, home: Path, user_home: Path) -> None:
    config = user_home / ".codex" / "config.toml"
    write(config, CODEX_CONFIG)
    before = snapshot(config)
    roundtrip(repo, "codex", "--user")
    assert not (repo / ".codex").exists() and (user_home / ".codex" / "hooks.json").exists()
    uninstall(repo, "codex", "--user")
    assert snapshot(config) == before and not (user_home / ".codex" / "hooks.json").exists()


# --- Gemini CLI --------------------------------------------------------------------------------

def test_gemini_on_an_empty_project_creates_and_removes_everything(repo: Path, home: Path) -> None:
    roundtrip(repo, "gemini")
    settings = repo / ".gemini" / "settings.json"
    doc = json.loads(settings.read_text())
    hooks = our_hooks(doc)
    assert set(hooks) == {"SessionStart", "BeforeAgent", "AfterTool", "PreCompress"}
    assert all(h["command"].endswith("--agent gemini") and h["timeout"] >= 1000  # milliseconds
               for hs in hooks.values() for h in hs)
    assert doc["mcpServers"]["realmem"] == install.gemini_server_entry(str(home))
    before = settings.read_bytes()
    assert "Already installed" in invoke(repo, "gemini", "--yes").output and settings.read_bytes() == before
    uninstall(repo, "gemini")
    assert not (repo / ".gemini").exists()


@pytest.mark.parametrize("scope", ["--project", "--user"])
def test_gemini_gives_existing_settings_back_byte_for_byte(repo: Path, home: Path, user_home: Path, scope: str) -> None:
    settings = (user_home if scope == "--user" else repo) / ".gemini" / "settings.json"
    write(settings, json.dumps(GEMINI_SETTINGS, indent=4) + "\n")
    before = settings.read_bytes()
    roundtrip(repo, "gemini", scope)
    doc = json.loads(settings.read_text())
    assert doc["theme"] == "GitHub" and doc["mcpServers"]["github"] == GEMINI_SETTINGS["mcpServers"]["github"]
    assert doc["hooks"]["AfterTool"][0] == GEMINI_SETTINGS["hooks"]["AfterTool"][0]
    uninstall(repo, "gemini", scope)
    assert settings.read_bytes() == before


@pytest.mark.parametrize("text,why", [
    ('{\n  // the theme\n  "theme": "GitHub", /* dark */\n  "url": "http://x//y"\n}\n', "has comments"),
    ('{"theme": "GitHub",,}\n', "is not valid JSON"),
    ("[]\n", "does not hold a JSON object"),
])
def test_gemini_refuses_commented_or_malformed_settings(repo: Path, home: Path, text: str, why: str) -> None:
    settings = repo / ".gemini" / "settings.json"
    write(settings, text)
    r = subprocess.run([sys.executable, "-m", "realmem.interface.cli", "--cwd", str(repo), "install", "gemini", "--yes"],
                       capture_output=True, text=True)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.startswith(f"realmem: {settings}") and why in r.stderr and "nothing was changed" in r.stderr
    assert settings.read_text() == text and not (home / edits.MANIFEST).exists()


def test_a_comment_marker_inside_a_string_is_not_a_comment() -> None:
    assert edits.strip_json_comments('{"a": "x // y /* z */", "b": "\\" //"} // c') == '{"a": "x // y /* z */", "b": "\\" //"} '


# --- the installed commands reach the hook server ------------------------------------------------

@pytest.mark.parametrize("agent,settings,name", [("codex", ".codex/hooks.json", "post_tool_use_bash"),
                                                 ("gemini", ".gemini/settings.json", "after_tool_read_file")])
def test_the_installed_hook_command_reaches_the_server_as_its_agent(repo: Path, home: Path, server: Any, agent: str,
                                                                    settings: str, name: str) -> None:
    """Run by a shell as the client runs it, without REALMEM_HOME: the command names the home
    and the agent, so the server reads the client's own events (an empty answer, no error)."""
    assert invoke(repo, agent, "--yes").exit_code == 0
    cmd = next(iter(our_hooks(json.loads((repo / settings).read_text())).values()))[0]["command"]
    env = {k: v for k, v in os.environ.items() if k != "REALMEM_HOME"}
    hook_input = fixture(name, repo, "s1", agent)
    out = subprocess.run(cmd, shell=True, input=json.dumps(hook_input).encode(), capture_output=True, timeout=60, env=env)
    assert (out.returncode, out.stdout, out.stderr) == (0, b"", b"")


# --- Cursor and opencode: the MCP server only ------------------------------------------------------

MCP_ONLY = [("cursor", ".cursor/mcp.json", ".cursor/mcp.json", "mcpServers", install.server_entry),
            ("opencode", "opencode.json", ".config/opencode/opencode.json", "mcp", install.opencode_server_entry)]


@pytest.mark.parametrize("agent,project_file,user_file,key,entry", MCP_ONLY)
@pytest.mark.parametrize("scope", ["--project", "--user"])
def test_mcp_only_clients_get_the_server_and_back_byte_for_byte(repo: Path, home: Path, user_home: Path, agent: str,
                                                                 project_file: str, user_file: str, key: str,
                                                                 entry: Any, scope: str) -> None:
    path = user_home / user_file if scope == "--user" else repo / project_file
    other = {"$schema": "https://example.test/config.json", key: {"github": {"command": "npx", "args": ["-y", "gh"]}}}
    write(path, json.dumps(other, indent=4) + "\n")
    before = path.read_bytes()
    roundtrip(repo, agent, scope)
    doc = json.loads(path.read_text())
    assert doc[key]["realmem"] == entry(str(home)) and doc[key]["github"] == other[key]["github"]
    assert "Already installed" in invoke(repo, agent, scope, "--yes").output
    uninstall(repo, agent, scope)
    assert path.read_bytes() == before


@pytest.mark.parametrize("agent,project_file,user_file,key,entry", MCP_ONLY)
def test_mcp_only_clients_on_an_empty_project(repo: Path, home: Path, agent: str, project_file: str, user_file: str,
                                              key: str, entry: Any) -> None:
    roundtrip(repo, agent)
    assert json.loads((repo / project_file).read_text()) == {key: {"realmem": entry(str(home))}}
    uninstall(repo, agent)
    assert not (repo / project_file).exists() and not (repo / ".cursor").exists()


def test_opencode_refuses_a_commented_config(repo: Path, home: Path) -> None:
    path = repo / "opencode.json"
    text = '{\n  // opencode reads JSONC\n  "theme": "opencode"\n}\n'
    write(path, text)
    r = subprocess.run([sys.executable, "-m", "realmem.interface.cli", "--cwd", str(repo), "install", "opencode", "--yes"],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "has comments" in r.stderr and path.read_text() == text
