"""`realmem install`: write (or remove) realmem's hooks and MCP server entries for Claude
Code, Codex and Gemini CLI, and the MCP server alone for Cursor and opencode; any other client
gets ``install mcp --print``.

``claude-code --project`` edits ``<project>/.claude/settings.json`` (hooks) and
``<project>/.mcp.json`` (MCP server); ``--user`` edits ``~/.claude/settings.json`` and the
top-level ``mcpServers`` of ``~/.claude.json``, where Claude Code keeps user-scope servers.
``codex`` edits ``.codex/hooks.json`` (hooks, Claude Code's JSON shape) and ``.codex/config.toml``
(``[mcp_servers.realmem]`` and ``[features] hooks = true``) in the project or in Codex's home;
``gemini`` edits ``.gemini/settings.json`` (``hooks`` and ``mcpServers``) in the project or
the home directory; ``cursor`` edits ``.cursor/mcp.json`` and ``opencode`` the ``mcp`` object
of ``opencode.json`` (``~/.config/opencode/`` for ``--user``).

Every change is planned first and shown as a diff; nothing is written before the user
confirms (``--yes`` skips the question).  Installing twice changes nothing; ``--uninstall``
removes exactly realmem's entries (recognised by the hook client's path and the server name),
leaves every other hook, server and key alone and gives a file back byte for byte when nobody
changed it since (``realmem.agents.edits``).

A file that is a symlink (or sits in a symlinked directory) is read and written at its target
when the target stays inside the project (``--user``: the home directory): the link stays a
link, so restoring the target's bytes restores everything.  A link that leaves it is refused
before anything is written: a committed ``.claude/settings.json`` linked to a file elsewhere
would otherwise have realmem rewrite that file, or replace the link with a copy of it.

The CLI imports it at start, so it imports nothing the CLI does not load anyway (tomlkit is
imported when a Codex file is planned).
"""

from __future__ import annotations

import inspect
import json
import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import click

from realmem.agents import edits
from realmem.agents.edits import InstallError
from realmem.config import SECRET_KEYS, Config, home_dir, secret_var
from realmem.stores.project import detect

SERVER_NAME = "realmem"
HOOK_CLIENT = Path(__file__).resolve().parent / "hookclient.py"
MARKER = "realmem/agents/hookclient.py"  # how an installed hook command is recognised
# Per client: (event, matcher or None, timeout in seconds).  The first SessionStart call may
# start the hook server and scan the stores, so it gets a minute.
HOOKS: dict[str, list[tuple[str, str | None, int]]] = {
    "claude-code": [("SessionStart", "startup|resume|clear|compact", 60), ("PostToolUse", "*", 15)],
    "codex": [("SessionStart", "startup|resume|clear|compact", 60), ("PostToolUse", "*", 15),
              ("PostCompact", None, 15)],
    # Lifecycle matchers are exact strings in Gemini CLI; "*" matches every source and trigger.
    "gemini": [("SessionStart", "*", 60), ("BeforeAgent", "*", 60), ("AfterTool", "*", 15), ("PreCompress", "*", 15)],
}
TIMEOUT_UNIT = {"gemini": 1000}  # Gemini CLI counts hook timeouts in milliseconds


def hook_command(home: str | None, agent: str = "claude-code") -> str:
    """``python -I -S hookclient.py``: no site-packages, no realmem import (starts in milliseconds)."""
    parts = [sys.executable, "-I", "-S", str(HOOK_CLIENT)]
    if home:
        parts += ["--home", home]
    if agent != "claude-code":  # the client's default; Claude Code's installed commands stay as they were
        parts += ["--agent", agent]
    return " ".join(shlex.quote(p) for p in parts)


def launcher(executable: str = sys.executable, source: str | None = None) -> list[str]:
    """How a client starts this realmem: its own Python, except under ``uvx``, whose
    environment lives in uv's cache and may be pruned; that one is started as it was started
    (``uvx --from <source> realmem``), from the source pip recorded (PEP 610)."""
    parts = Path(executable).parts
    cached = any(p.startswith(("archive-v", "builds-v")) for p in parts) and "uv" in parts
    if cached and (source := source or installed_from()):
        return ["uvx", "--from", source, "realmem"]
    return [executable, "-m", "realmem"]


def installed_from() -> str | None:
    """The path or VCS URL realmem was installed from, when it was not an index or a checkout."""
    import importlib.metadata  # here: the CLI imports this module at start, and only uvx needs it

    try:
        raw = importlib.metadata.distribution("realmem").read_text("direct_url.json")
        info = json.loads(raw or "{}")
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return None
    if info.get("dir_info", {}).get("editable"):
        return None
    url = info.get("url")
    vcs = info.get("vcs_info", {}).get("vcs")
    if not isinstance(url, str):
        return None
    if vcs:
        return f"{vcs}+{url}"
    return url.removeprefix("file://") if url.startswith("file://") else url


# Codex starts MCP servers with a fixed list of variables (HOME, PATH, USER, …) plus those an
# entry names in env_vars; the rest of the user's environment is dropped.
def forwarded_env(home: str | None) -> list[str]:
    """The variables a client must pass to the server: REALMEM_HOME, every REALMEM_* set now,
    and the variables the configured keys refer to (``$VAR``, ``env:VAR``)."""
    names = {"REALMEM_HOME", *(k for k in os.environ if k.startswith("REALMEM_"))}
    cfg = Config(home_dir(home))
    for key in SECRET_KEYS:
        var = secret_var(str(cfg.raw(key) or ""))
        if var:
            names.add(var)
    return sorted(names)


def server_entry(home: str | None) -> dict[str, Any]:
    """The stdio MCP server entry, in the ``mcpServers`` shape most clients share."""
    command, *first = launcher()
    args = first + (["--home", home] if home else []) + ["mcp"]
    return {"type": "stdio", "command": command, "args": args, "env": {}}


def gemini_server_entry(home: str | None) -> dict[str, Any]:
    """Gemini CLI's ``mcpServers`` entry: no ``type`` key (it tells stdio by ``command``)."""
    entry = server_entry(home)
    return {"command": entry["command"], "args": entry["args"]}


def hook_entries(home: str | None, agent: str = "claude-code") -> dict[str, dict[str, Any]]:
    cmd = hook_command(home, agent)
    unit = TIMEOUT_UNIT.get(agent, 1)
    out = {}
    for event, matcher, timeout in HOOKS[agent]:
        handler = {"type": "command", "command": cmd, "timeout": timeout * unit}
        if agent == "gemini":
            handler = {"name": SERVER_NAME, **handler}  # how /hooks lists it
        out[event] = {**({"matcher": matcher} if matcher is not None else {}), "hooks": [handler]}
    return out


def _ours(handler: Any) -> bool:
    return isinstance(handler, dict) and MARKER in str(handler.get("command", "")).replace(os.sep, "/")


# --- planning: pure functions from a document to the changed document ------------------------

def add_hooks(doc: dict[str, Any], home: str | None, agent: str = "claude-code") -> dict[str, Any]:
    doc = remove_hooks(doc)  # a stale entry (moved checkout, other home) is replaced, not doubled
    hooks = doc.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise InstallError("hooks is not a JSON object; fix the file by hand first")
    for event, group in hook_entries(home, agent).items():
        hooks.setdefault(event, []).append(group)
    return doc


def remove_hooks(doc: dict[str, Any]) -> dict[str, Any]:
    doc = json.loads(json.dumps(doc))
    hooks = doc.get("hooks")
    if not isinstance(hooks, dict):
        return doc
    emptied = False
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept = []
        for group in groups:
            handlers = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(handlers, list) or not any(_ours(h) for h in handlers):
                kept.append(group)
                continue
            rest = [h for h in handlers if not _ours(h)]
            if rest:
                kept.append({**group, "hooks": rest})
        if kept:
            hooks[event] = kept
        elif groups:  # only realmem's groups were in it
            del hooks[event]
            emptied = True
    if emptied and not hooks:
        del doc["hooks"]
    return doc


def add_server(doc: dict[str, Any], home: str | None, entry: dict[str, Any] | None = None,
               key: str = "mcpServers") -> dict[str, Any]:
    doc = json.loads(json.dumps(doc))
    servers = doc.setdefault(key, {})
    if not isinstance(servers, dict):
        raise InstallError(f"{key} is not a JSON object; fix the file by hand first")
    current = servers.get(SERVER_NAME)
    if current is not None and not edits.our_server(current):
        raise InstallError(f"an MCP server named {SERVER_NAME!r} that realmem did not write is already configured")
    servers[SERVER_NAME] = entry or server_entry(home)
    return doc


def remove_server(doc: dict[str, Any], key: str = "mcpServers") -> dict[str, Any]:
    doc = json.loads(json.dumps(doc))
    edits.drop(doc, key, SERVER_NAME, edits.our_server)
    return doc


def opencode_server_entry(home: str | None) -> dict[str, Any]:
    """opencode's ``mcp`` entry: a local server whose command list holds the arguments."""
    entry = server_entry(home)
    return {"type": "local", "command": [entry["command"], *entry["args"]], "enabled": True}


# --- the files of each client -------------------------------------------------------------------

JSON = edits.Format("JSON", edits.parse_json, edits.dump_json, lambda doc: remove_hooks(remove_server(doc)))


@attrs.frozen
class File:
    """One file a client reads, and realmem's edits of it."""
    path: Path
    fmt: edits.Format
    add: Callable[[Any], Any]
    remove: Callable[[Any], Any]


def codex_dir(user_home: Path) -> Path:
    """Codex's own home: $CODEX_HOME, else ~/.codex."""
    raw = os.environ.get("CODEX_HOME")
    return Path(raw).expanduser() if raw else user_home / ".codex"


def client_files(agent: str, scope: str, project_root: Path, user_home: Path, home: str | None) -> list[File]:
    """The files ``realmem install <agent>`` edits in a scope, with realmem's entries for each."""
    hooks = File(Path(), JSON, lambda d: add_hooks(d, home, agent), remove_hooks)
    servers = File(Path(), JSON, lambda d: add_server(d, home), remove_server)
    user = scope == "user"
    if agent == "claude-code":
        return [attrs.evolve(hooks, path=(user_home if user else project_root) / ".claude" / "settings.json"),
                attrs.evolve(servers, path=user_home / ".claude.json" if user else project_root / ".mcp.json")]
    if agent == "codex":
        from realmem.agents import codexconfig  # lazy: tomlkit is only needed for Codex, not at CLI start

        toml = edits.Format("TOML", codexconfig.parse, codexconfig.dump, codexconfig.strip, codexconfig.plain)
        base = codex_dir(user_home) if user else project_root / ".codex"
        entry, env_vars = server_entry(home), forwarded_env(home)
        return [attrs.evolve(hooks, path=base / "hooks.json"),
                File(base / "config.toml", toml, lambda d: codexconfig.add(d, entry, env_vars),
                     codexconfig.remove_server)]
    if agent == "gemini":  # one settings.json holds both
        entry = gemini_server_entry(home)
        return [File((user_home if user else project_root) / ".gemini" / "settings.json", JSON,
                     lambda d: add_server(add_hooks(d, home, agent), home, entry),
                     lambda d: remove_server(remove_hooks(d)))]
    if agent == "cursor":  # MCP only: realmem does not drive Cursor's hooks (their own JSON, not wired yet)
        return [attrs.evolve(servers, path=(user_home if user else project_root) / ".cursor" / "mcp.json")]
    if agent == "opencode":  # MCP only: opencode extends itself by JavaScript plugins, not hook commands
        entry = opencode_server_entry(home)
        fmt = edits.Format("JSON", edits.parse_json, edits.dump_json, lambda d: remove_server(d, "mcp"))
        path = user_home / ".config" / "opencode" / "opencode.json" if user else project_root / "opencode.json"
        return [File(path, fmt, lambda d: add_server(d, home, entry, "mcp"), lambda d: remove_server(d, "mcp"))]
    raise ValueError(f"no install for {agent!r}")


def plan(agent: str, scope: str, project_root: Path, user_home: Path, home: str | None, *,
         uninstall: bool, manifest: dict[str, Any] | None = None) -> list[edits.Change]:
    bound, where = (user_home, "your home directory") if scope == "user" else (project_root, "the project")
    out = []
    for f in client_files(agent, scope, project_root, user_home, home):
        path = edits.target(f.path.absolute(), bound, where)
        out.append(edits.plan_uninstall(path, f.remove, f.fmt, manifest or {}) if uninstall
                   else edits.plan_install(path, f.add, f.remove, f.fmt))
    return out


def explicit_home(cli_home: str | None) -> str | None:
    """The home to write into commands: only one the user chose (the default needs no flag)."""
    if not cli_home:
        return None
    return str(Path(cli_home).expanduser().resolve())


# --- the commands -------------------------------------------------------------------------------

@click.group()
def install() -> None:
    """Connect other agents to realmem (hooks and MCP configuration)."""


# Per client: where --project and --user write, and how to make the client load the change.
INSTALLS = {
    "claude-code": (".claude/settings.json and .mcp.json", "~/.claude/settings.json and ~/.claude.json",
                    "Restart Claude Code (or run /hooks and /mcp) to load it."),
    "codex": (".codex/hooks.json and .codex/config.toml (a trusted project's)",
              "~/.codex/hooks.json and ~/.codex/config.toml ($CODEX_HOME when set)",
              "Restart Codex and trust the new hooks when it asks (/hooks lists them)."),
    "gemini": (".gemini/settings.json", "~/.gemini/settings.json",
               "Restart Gemini CLI (/hooks and /mcp list what it loaded)."),
    "cursor": (".cursor/mcp.json", "~/.cursor/mcp.json", "Reload Cursor's MCP servers (Settings > MCP) to load it."),
    "opencode": ("opencode.json", "~/.config/opencode/opencode.json", "Restart opencode to load it."),
}


def install_command(agent: str, doc: str) -> None:
    """Declare ``realmem install <agent>``: the same options and steps for every client."""
    project_files, user_files, restart = INSTALLS[agent]

    @install.command(agent, help=inspect.cleandoc(doc))
    @click.option("--project", "scope", flag_value="project", default=True, help=f"this project: {project_files} (default)")
    @click.option("--user", "scope", flag_value="user", help=f"every project: {user_files}")
    @click.option("--uninstall", is_flag=True, help="remove exactly what install added")
    @click.option("--yes", is_flag=True, help="do not ask for confirmation")
    @click.pass_context
    def command(ctx: click.Context, scope: str, uninstall: bool, yes: bool) -> None:
        if run(ctx, agent, scope, uninstall=uninstall, yes=yes) and not uninstall:
            click.echo(restart)


def run(ctx: click.Context, agent: str, scope: str, *, uninstall: bool, yes: bool) -> bool:
    """Plan, show the diff, ask, record what was there, write; False when there was nothing to do."""
    c = ctx.find_root().obj
    cwd = Path(c.cwd or os.getcwd()).resolve()
    project = detect(cwd)
    root = project.root if project is not None else cwd
    realmem_home = home_dir(c.home)
    manifest = edits.load_manifest(realmem_home)
    changes = plan(agent, scope, root, Path.home(), explicit_home(c.home), uninstall=uninstall, manifest=manifest)
    todo = [ch for ch in changes if ch.changed]
    if not todo:
        click.echo("Nothing to remove: realmem is not installed there." if uninstall
                   else "Already installed; nothing to change.")
        return False
    for ch in todo:
        click.echo(ch.diff(), nl=False)
    if not yes and not click.confirm("Apply these changes?", default=False):
        click.echo("Nothing changed.")
        raise SystemExit(1)
    recorded = [ch for ch in todo if ch.record is not None]
    if recorded:  # before the files change: a failed write then leaves a record of the untouched file
        edits.save_manifest(realmem_home, manifest | {str(ch.path): ch.record for ch in recorded})
    for ch in todo:
        ch.apply()
    if any(ch.forget for ch in todo):
        edits.save_manifest(realmem_home, {k: v for k, v in manifest.items()
                                           if k not in {str(ch.path) for ch in todo if ch.forget}})
    verb = "Removed realmem from" if uninstall else "Installed realmem into"
    click.echo(f"{verb}: " + ", ".join(str(ch.path) for ch in todo))
    return True


install_command("claude-code", """Write realmem's Claude Code hooks (SessionStart, PostToolUse) and its MCP server.

    Example:
        realmem install claude-code --project
        realmem install claude-code --user --uninstall --yes
    """)
install_command("codex", """Write realmem's Codex hooks (SessionStart, PostToolUse, PostCompact), its MCP server
    and the hooks feature flag.

    Example:
        realmem install codex --project
        realmem install codex --user --uninstall --yes
    """)
install_command("gemini", """Write realmem's Gemini CLI hooks (SessionStart, BeforeAgent, AfterTool, PreCompress)
    and its MCP server.

    Example:
        realmem install gemini --project
        realmem install gemini --user --uninstall --yes
    """)
install_command("cursor", """Write realmem's MCP server for Cursor (no hooks yet).

    Example:
        realmem install cursor --project
    """)
install_command("opencode", """Write realmem's MCP server for opencode (no hooks: opencode has plugins instead).

    Example:
        realmem install opencode --user
    """)


CLIENTS = ("generic", "cursor", "codex", "gemini", "opencode")


def client_snippet(client: str, home: str | None) -> str:
    entry = server_entry(home)
    if client == "codex":  # ~/.codex/config.toml
        from realmem.agents import codexconfig  # lazy: tomlkit is only needed for Codex, not at CLI start

        return codexconfig.snippet(entry, forwarded_env(home))
    if client == "opencode":  # opencode.json
        return edits.dump_json({"mcp": {SERVER_NAME: opencode_server_entry(home)}})
    if client == "gemini":  # ~/.gemini/settings.json: no "type" key
        return edits.dump_json({"mcpServers": {SERVER_NAME: gemini_server_entry(home)}})
    return edits.dump_json({"mcpServers": {SERVER_NAME: entry}})


@install.command("mcp")
@click.option("--print", "print_", is_flag=True, default=True, help="print the server entry (the default)")
@click.option("--client", type=click.Choice(CLIENTS), default="generic", help="the client's configuration format")
@click.pass_context
def mcp_entry(ctx: click.Context, print_: bool, client: str) -> None:
    """Print the MCP server entry for another client (Cursor, Codex, Gemini CLI, opencode).

    Example:
        realmem install mcp --print --client codex >> ~/.codex/config.toml
    """
    click.echo(client_snippet(client, explicit_home(ctx.find_root().obj.home)), nl=False)
