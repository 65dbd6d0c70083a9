"""`realmem install claude-code` and `realmem install mcp` on real temp files that already hold
other hooks, servers and keys: install adds realmem's entries, a second install changes
nothing, uninstall removes exactly what install added, and nothing else ever changes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from realmem.agents import edits, install
from realmem.interface.cli import cli

from helpers.hooks import server  # noqa: F401 (the hook server fixture)

OTHER_SETTINGS: dict[str, Any] = {
    "model": "opus",
    "permissions": {"allow": ["Bash(npm run lint)"]},
    "hooks": {
        "PostToolUse": [{"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "npx prettier --write"}]}],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./guard.sh", "timeout": 5}]}],
    },
}
OTHER_MCP: dict[str, Any] = {"mcpServers": {"github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"],
                                                       "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}"}}}}
OTHER_CLAUDE_JSON: dict[str, Any] = {
    "numStartups": 42,
    "projects": {"/src/app": {"mcpServers": {"local-db": {"command": "db-mcp"}}, "allowedTools": []}},
    "mcpServers": {"context7": {"command": "npx", "args": ["-y", "@upstash/context7-mcp"]}},
}


def invoke(*args: str, input: str | None = None, cwd: Path | None = None) -> Any:
    base = ["--cwd", str(cwd)] if cwd else []
    return CliRunner().invoke(cli, [*base, "install", *args], input=input, catch_exceptions=False)


def load(p: Path) -> Any:
    return json.loads(p.read_text(encoding="utf-8"))


def write(p: Path, doc: Any) -> None:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(doc, indent=4) + "\n", encoding="utf-8")


def ours(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(event, h) for event, groups in doc.get("hooks", {}).items() for g in groups for h in g["hooks"]
            if install.MARKER in h["command"]]


def test_project_install_is_idempotent_and_uninstall_restores_everything(repo: Path, home: Path) -> None:
    settings, mcp = repo / ".claude" / "settings.json", repo / ".mcp.json"
    write(settings, OTHER_SETTINGS)
    write(mcp, OTHER_MCP)

    r = invoke("claude-code", "--project", "--yes", cwd=repo)
    assert r.exit_code == 0, r.output
    assert f"+++ {settings}" in r.output and f"+++ {mcp}" in r.output  # the diff was shown
    doc = load(settings)
    assert {e for e, _ in ours(doc)} == {"SessionStart", "PostToolUse"}
    assert all(h["command"] == install.hook_command(str(home)) for _, h in ours(doc))
    assert doc["hooks"]["SessionStart"][0]["matcher"] == "startup|resume|clear|compact"
    # Every other hook, key and server is as it was.
    assert doc["hooks"]["PostToolUse"][0] == OTHER_SETTINGS["hooks"]["PostToolUse"][0]
    assert doc["hooks"]["PreToolUse"] == OTHER_SETTINGS["hooks"]["PreToolUse"]
    assert {k: v for k, v in doc.items() if k != "hooks"} == {k: v for k, v in OTHER_SETTINGS.items() if k != "hooks"}
    servers = load(mcp)["mcpServers"]
    assert servers["github"] == OTHER_MCP["mcpServers"]["github"]
    assert servers["realmem"] == install.server_entry(str(home))
    assert servers["realmem"]["args"][-1] == "mcp" and "--home" in servers["realmem"]["args"]

    before = (settings.read_bytes(), mcp.read_bytes())
    r = invoke("claude-code", "--yes", cwd=repo)  # --project is the default
    assert r.exit_code == 0 and "Already installed" in r.output
    assert (settings.read_bytes(), mcp.read_bytes()) == before

    r = invoke("claude-code", "--uninstall", "--yes", cwd=repo)
    assert r.exit_code == 0, r.output
    assert load(settings) == OTHER_SETTINGS
    assert load(mcp) == OTHER_MCP
    r = invoke("claude-code", "--uninstall", "--yes", cwd=repo)
    assert "Nothing to remove" in r.output


def test_an_entry_from_before_the_package_move_is_replaced(repo: Path, home: Path) -> None:
    # Installs before the package move ran `python -m realmem.cli mcp`, a module that no longer exists.
    old = {"mcpServers": {"realmem": {"command": "python3", "args": ["-m", "realmem.cli", "--home", str(home), "mcp"]}}}
    write(repo / ".mcp.json", old)
    r = invoke("claude-code", "--yes", cwd=repo)
    assert r.exit_code == 0, r.output
    servers = load(repo / ".mcp.json")["mcpServers"]
    assert servers == {"realmem": install.server_entry(str(home))}
    assert servers["realmem"]["args"][:2] == ["-m", "realmem"]


def test_files_install_created_are_removed_by_uninstall(repo: Path, home: Path) -> None:
    assert invoke("claude-code", "--yes", cwd=repo).exit_code == 0
    assert (repo / ".claude" / "settings.json").exists() and (repo / ".mcp.json").exists()
    assert invoke("claude-code", "--uninstall", "--yes", cwd=repo).exit_code == 0
    assert not (repo / ".claude").exists() and not (repo / ".mcp.json").exists()


def test_user_scope_edits_the_user_files_only(repo: Path, home: Path, user_home: Path) -> None:
    settings, claude_json = user_home / ".claude" / "settings.json", user_home / ".claude.json"
    write(settings, OTHER_SETTINGS)
    write(claude_json, OTHER_CLAUDE_JSON)
    claude_json.chmod(0o600)
    assert invoke("claude-code", "--user", "--yes", cwd=repo).exit_code == 0
    assert not (repo / ".claude").exists() and not (repo / ".mcp.json").exists()
    assert {e for e, _ in ours(load(settings))} == {"SessionStart", "PostToolUse"}
    doc = load(claude_json)
    assert doc["mcpServers"]["realmem"] == install.server_entry(str(home))
    assert doc["projects"] == OTHER_CLAUDE_JSON["projects"] and doc["numStartups"] == 42
    assert claude_json.stat().st_mode & 0o777 == 0o600  # it stays private
    assert invoke("claude-code", "--user", "--uninstall", "--yes", cwd=repo).exit_code == 0
    assert load(settings) == OTHER_SETTINGS
    assert load(claude_json) == OTHER_CLAUDE_JSON


def test_declining_the_confirmation_writes_nothing(repo: Path, home: Path) -> None:
    settings = repo / ".claude" / "settings.json"
    write(settings, OTHER_SETTINGS)
    before = settings.read_bytes()
    r = invoke("claude-code", input="n\n", cwd=repo)
    assert r.exit_code == 1 and "Apply these changes?" in r.output and "Nothing changed." in r.output
    assert settings.read_bytes() == before and not (repo / ".mcp.json").exists()


@pytest.mark.parametrize("bad", ["{not json", "[1, 2]"])
def test_an_unreadable_settings_file_is_refused_untouched(repo: Path, home: Path, bad: str) -> None:
    settings = repo / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(bad, encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "realmem.interface.cli", "--cwd", str(repo), "install", "claude-code", "--yes"],
                       capture_output=True, text=True)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.startswith(f"realmem: {settings}") and "nothing was changed" in r.stderr
    assert settings.read_text(encoding="utf-8") == bad and not (repo / ".mcp.json").exists()


def test_a_foreign_server_named_realmem_is_left_alone(repo: Path, home: Path) -> None:
    mcp = repo / ".mcp.json"
    foreign = {"mcpServers": {"realmem": {"command": "some-other-realmem"}}}
    write(mcp, foreign)
    r = invoke("claude-code", "--yes", cwd=repo)
    assert r.exit_code == 1 and "did not write" in r.output
    assert load(mcp) == foreign and not (repo / ".claude").exists()


def test_the_installed_hook_command_reaches_the_server(repo: Path, home: Path, server: Any) -> None:
    """The command written into settings.json, run by a shell as Claude Code runs it, reaches
    the home's hook server (named by --home, without REALMEM_HOME in its environment)."""
    assert invoke("claude-code", "--yes", cwd=repo).exit_code == 0
    cmd = ours(load(repo / ".claude" / "settings.json"))[0][1]["command"]
    env = {k: v for k, v in os.environ.items() if k != "REALMEM_HOME"}
    out = subprocess.run(cmd, shell=True, input=b"[]", capture_output=True, timeout=60, env=env)
    assert out.returncode == 0 and out.stdout == b""
    assert out.stderr == b"realmem hook: bad hook input: the hook input is not a JSON object\n"


def test_install_mcp_prints_each_clients_entry(home: Path) -> None:
    generic = json.loads(invoke("mcp", "--print").output)
    assert generic == {"mcpServers": {"realmem": install.server_entry(str(home))}}
    entry = install.server_entry(str(home))
    codex = invoke("mcp", "--print", "--client", "codex").output
    assert codex.startswith("[mcp_servers.realmem]\n") and json.dumps(entry["command"]) in codex
    opencode = json.loads(invoke("mcp", "--client", "opencode").output)
    assert opencode["mcp"]["realmem"]["command"] == [entry["command"], *entry["args"]]
    gemini = json.loads(invoke("mcp", "--client", "gemini").output)
    assert gemini["mcpServers"]["realmem"] == {"command": entry["command"], "args": entry["args"]}
    cursor = json.loads(invoke("mcp", "--client", "cursor").output)
    assert cursor == generic


# --- uninstall gives back what was there before install -----------------------------------------

def roundtrip(repo: Path, *scope: str) -> None:
    r = invoke("claude-code", *scope, "--yes", cwd=repo)
    assert r.exit_code == 0, r.output
    r = invoke("claude-code", *scope, "--uninstall", "--yes", cwd=repo)
    assert r.exit_code == 0, r.output


def test_a_claude_directory_that_existed_empty_stays(repo: Path, home: Path) -> None:
    (repo / ".claude").mkdir()
    roundtrip(repo)
    assert (repo / ".claude").is_dir() and list((repo / ".claude").iterdir()) == []
    assert not (repo / ".mcp.json").exists()


@pytest.mark.parametrize("text", ["{}", "{}\n", "", "{ }\n"])
def test_an_empty_settings_file_stays_byte_identical(repo: Path, home: Path, text: str) -> None:
    settings, mcp = repo / ".claude" / "settings.json", repo / ".mcp.json"
    settings.parent.mkdir()
    settings.write_text(text, encoding="utf-8")
    mcp.write_text(text, encoding="utf-8")
    roundtrip(repo)
    assert settings.read_text(encoding="utf-8") == text and mcp.read_text(encoding="utf-8") == text


def test_other_hooks_and_servers_stay_byte_identical(repo: Path, home: Path, user_home: Path) -> None:
    """Files in another layout (4-space indent, key order) come back byte for byte."""
    settings, mcp = repo / ".claude" / "settings.json", repo / ".mcp.json"
    write(settings, OTHER_SETTINGS)
    write(mcp, OTHER_MCP)
    user_settings, claude_json = user_home / ".claude" / "settings.json", user_home / ".claude.json"
    write(user_settings, OTHER_SETTINGS)
    write(claude_json, OTHER_CLAUDE_JSON)
    before = {p: p.read_bytes() for p in (settings, mcp, user_settings, claude_json)}
    roundtrip(repo)
    roundtrip(repo, "--user")
    assert {p: p.read_bytes() for p in before} == before


def test_user_scope_directories_install_created_are_removed(repo: Path, home: Path, user_home: Path) -> None:
    assert not (user_home / ".claude").exists()
    roundtrip(repo, "--user")
    assert not (user_home / ".claude").exists() and not (user_home / ".claude.json").exists()


def test_edits_made_after_install_survive_uninstall(repo: Path, home: Path) -> None:
    """Someone else changed the file after install: uninstall removes realmem's entries only and
    keeps their change (the file is then rewritten as JSON with a 2-space indent)."""
    settings, mcp = repo / ".claude" / "settings.json", repo / ".mcp.json"
    settings.parent.mkdir()
    settings.write_text("{}", encoding="utf-8")
    assert invoke("claude-code", "--yes", cwd=repo).exit_code == 0
    doc = load(settings)
    doc["model"] = "sonnet"
    settings.write_text(json.dumps(doc), encoding="utf-8")
    servers = load(mcp)
    servers["mcpServers"]["github"] = OTHER_MCP["mcpServers"]["github"]
    mcp.write_text(json.dumps(servers), encoding="utf-8")
    assert invoke("claude-code", "--uninstall", "--yes", cwd=repo).exit_code == 0
    assert load(settings) == {"model": "sonnet"}
    assert load(mcp) == OTHER_MCP


def test_a_second_install_keeps_the_first_record(repo: Path, home: Path) -> None:
    """Installing again (say with another --home) must not make install's own entries the
    'before' that uninstall restores."""
    settings = repo / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text("{}", encoding="utf-8")
    assert invoke("claude-code", "--yes", cwd=repo).exit_code == 0
    other = home.parent / "other-home"
    r = CliRunner().invoke(cli, ["--home", str(other), "--cwd", str(repo), "install", "claude-code", "--yes"],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert all(h["command"] == install.hook_command(str(other)) for _, h in ours(load(settings)))
    assert invoke("claude-code", "--uninstall", "--yes", cwd=repo).exit_code == 0
    assert settings.read_text(encoding="utf-8") == "{}"


def test_the_entry_starts_realmem_as_it_was_installed() -> None:
    """A venv (a checkout, pipx) is started by its own Python; uvx's, in uv's cache, may be
    pruned, so the entry runs uvx again from the recorded source."""
    assert install.launcher("/home/u/.local/share/pipx/venvs/realmem/bin/python") == \
        ["/home/u/.local/share/pipx/venvs/realmem/bin/python", "-m", "realmem"]
    cached = "/home/u/.cache/uv/archive-v0/AbC123/bin/python"
    assert install.launcher(cached, "git+https://github.com/example/realmem") == \
        ["uvx", "--from", "git+https://github.com/example/realmem", "realmem"]
    assert install.launcher(cached, "/src/realmem") == ["uvx", "--from", "/src/realmem", "realmem"]
    # Where pip recorded no source (an index install), the Python itself is the best there is.
    assert install.installed_from() is None  # this checkout is an editable install: no source to give uvx
    assert install.launcher(cached) == [cached, "-m", "realmem"]


# --- symlinks: a link out of the project is never written through; one inside it is followed ---

@pytest.mark.parametrize("linked", [".claude/settings.json", ".mcp.json", ".claude"])
def test_a_link_out_of_the_project_is_refused_untouched(repo: Path, home: Path, tmp_path: Path, linked: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "settings.json").write_text('{"model": "elsewhere"}\n', encoding="utf-8")
    link = repo / linked
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(outside if linked == ".claude" else outside / "settings.json")  # git commits it as a link
    before = {p.name: p.read_bytes() for p in outside.iterdir()}
    r = subprocess.run([sys.executable, "-m", "realmem.interface.cli", "--cwd", str(repo), "install", "claude-code",
                        "--yes"], capture_output=True, text=True)
    assert r.returncode == 1 and r.stdout == "", r.stdout
    assert "is a symlink to" in r.stderr and "outside the project" in r.stderr and "nothing was changed" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert {p.name: p.read_bytes() for p in outside.iterdir()} == before
    assert link.is_symlink()
    assert not (home / edits.MANIFEST).exists()
    assert not (repo / ".mcp.json").exists() or (repo / ".mcp.json").is_symlink()


def test_a_link_inside_the_project_is_written_at_its_target_and_restored(repo: Path, home: Path) -> None:
    write(repo / "config" / "claude.json", OTHER_SETTINGS)
    settings = repo / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.symlink_to(Path("..") / "config" / "claude.json")
    (repo / ".mcp.json").symlink_to("config/mcp.json")  # dangling: install creates its target
    before = (repo / "config" / "claude.json").read_bytes()

    r = invoke("claude-code", "--yes", cwd=repo)
    assert r.exit_code == 0, r.output
    assert settings.is_symlink() and os.readlink(settings) == str(Path("..") / "config" / "claude.json")
    assert os.readlink(repo / ".mcp.json") == "config/mcp.json"
    assert {e for e, _ in ours(load(repo / "config" / "claude.json"))} == {"SessionStart", "PostToolUse"}
    assert load(repo / "config" / "mcp.json")["mcpServers"]["realmem"] == install.server_entry(str(home))

    r = invoke("claude-code", "--uninstall", "--yes", cwd=repo)
    assert r.exit_code == 0, r.output
    assert (repo / "config" / "claude.json").read_bytes() == before  # byte for byte, the link included
    assert os.readlink(settings) == str(Path("..") / "config" / "claude.json")
    assert (repo / ".mcp.json").is_symlink() and not (repo / "config" / "mcp.json").exists()
    assert sorted(p.name for p in (repo / "config").iterdir()) == ["claude.json"]


def test_user_scope_follows_a_link_within_the_home_and_refuses_one_out_of_it(repo: Path, home: Path,
                                                                            user_home: Path, tmp_path: Path) -> None:
    dotfiles = user_home / "dotfiles"
    write(dotfiles / "claude.json", OTHER_CLAUDE_JSON)
    (user_home / ".claude.json").symlink_to(dotfiles / "claude.json")
    r = invoke("claude-code", "--user", "--yes", cwd=repo)
    assert r.exit_code == 0, r.output
    assert (user_home / ".claude.json").is_symlink() and "realmem" in load(dotfiles / "claude.json")["mcpServers"]
    r = invoke("claude-code", "--user", "--uninstall", "--yes", cwd=repo)
    assert r.exit_code == 0, r.output
    assert load(dotfiles / "claude.json") == OTHER_CLAUDE_JSON and (user_home / ".claude.json").is_symlink()

    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text("{}\n", encoding="utf-8")
    (user_home / ".claude").mkdir(exist_ok=True)
    (user_home / ".claude" / "settings.json").symlink_to(elsewhere)
    r = invoke("claude-code", "--user", "--yes", cwd=repo)
    assert r.exit_code == 1 and "outside your home directory" in r.output
    assert elsewhere.read_text(encoding="utf-8") == "{}\n"
