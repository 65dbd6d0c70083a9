"""`realmem install`: write (or remove) realmem's Claude Code hooks and MCP server entries.

``claude-code --project`` edits ``<project>/.claude/settings.json`` (hooks) and
``<project>/.mcp.json`` (MCP server); ``--user`` edits ``~/.claude/settings.json`` and the
top-level ``mcpServers`` of ``~/.claude.json``, where Claude Code keeps user-scope servers.
Every change is planned first and shown as a diff; nothing is written before the user
confirms (``--yes`` skips the question).  Installing twice changes nothing; ``--uninstall``
removes exactly realmem's entries (recognised by the hook client's path and the server name)
and leaves every other hook, server and key alone.

Install records in ``<REALMEM_HOME>/install.json``, keyed by the file's absolute path, the file
as it was (its text, or that it did not exist) and the directories it had to create.  When
uninstall leaves the same JSON as that record, it gives back the recorded bytes (a ``{}`` file
stays ``{}``, a 4-space layout keeps its layout), deletes a file install created and removes
the directories install created once they are empty: a ``.claude/`` that was there stays.
When the file was changed since (other keys, hooks or servers), those edits are kept and the
file is rewritten as JSON with a 2-space indent.  Without a record (another home, an install
by an older realmem) a file that only realmem's entries filled is deleted, no directory.

A file that is a symlink (or sits in a symlinked directory) is read and written at its target
when the target stays inside the project (``--user``: the home directory): the link stays a
link, so restoring the target's bytes restores everything.  A link that leaves it is refused
before anything is written: a committed ``.claude/settings.json`` linked to a file elsewhere
would otherwise have realmem rewrite that file, or replace the link with a copy of it.

The CLI imports it at start, so it imports nothing the CLI does not load anyway.
"""

from __future__ import annotations

import difflib
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import attrs
import click

from realmem.app import RealmemError
from realmem.config import SECRET_KEYS, Config, home_dir, secret_var
from realmem.storage.fsutil import atomic_write_text
from realmem.stores.project import detect

SERVER_NAME = "realmem"
MANIFEST = "install.json"  # in the realmem home: what install found and created, per file
HOOK_CLIENT = Path(__file__).resolve().parent / "hookclient.py"
MARKER = "realmem/agents/hookclient.py"  # how an installed hook command is recognised
SESSION_START_MATCHER = "startup|resume|clear|compact"
SESSION_START_TIMEOUT = 60   # seconds; the first call starts the hook server
POST_TOOL_USE_TIMEOUT = 15


class InstallError(RealmemError):
    """A settings file realmem will not touch (unreadable, not a JSON object): exit 1."""


def hook_command(home: str | None) -> str:
    """``python -I -S hookclient.py``: no site-packages, no realmem import (starts in milliseconds)."""
    parts = [sys.executable, "-I", "-S", str(HOOK_CLIENT)]
    if home:
        parts += ["--home", home]
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


def hook_entries(home: str | None) -> dict[str, dict[str, Any]]:
    cmd = hook_command(home)
    return {
        "SessionStart": {"matcher": SESSION_START_MATCHER,
                         "hooks": [{"type": "command", "command": cmd, "timeout": SESSION_START_TIMEOUT}]},
        "PostToolUse": {"matcher": "*", "hooks": [{"type": "command", "command": cmd, "timeout": POST_TOOL_USE_TIMEOUT}]},
    }


def _ours(handler: Any) -> bool:
    return isinstance(handler, dict) and MARKER in str(handler.get("command", "")).replace(os.sep, "/")


def _our_server(entry: Any) -> bool:
    args = entry.get("args", []) if isinstance(entry, dict) else []
    # "realmem.cli" is what installs before the package move wrote; they are ours to replace.
    return bool(set(args) & {"realmem", "realmem.cli", "realmem.interface.cli"}) and "mcp" in args


# --- planning: pure functions from a document to the changed document ------------------------

def add_hooks(doc: dict[str, Any], home: str | None) -> dict[str, Any]:
    doc = remove_hooks(doc)  # a stale entry (moved checkout, other home) is replaced, not doubled
    hooks = doc.setdefault("hooks", {})
    for event, group in hook_entries(home).items():
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


def add_server(doc: dict[str, Any], home: str | None) -> dict[str, Any]:
    doc = json.loads(json.dumps(doc))
    servers = doc.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise InstallError("mcpServers is not a JSON object; fix the file by hand first")
    current = servers.get(SERVER_NAME)
    if current is not None and not _our_server(current):
        raise InstallError(f"an MCP server named {SERVER_NAME!r} that realmem did not write is already configured")
    servers[SERVER_NAME] = server_entry(home)
    return doc


def remove_server(doc: dict[str, Any]) -> dict[str, Any]:
    doc = json.loads(json.dumps(doc))
    servers = doc.get("mcpServers")
    if isinstance(servers, dict) and _our_server(servers.get(SERVER_NAME)):
        del servers[SERVER_NAME]
        if not servers:
            del doc["mcpServers"]
    return doc


# --- files --------------------------------------------------------------------------------------

@attrs.define
class Change:
    path: Path
    before: str | None  # None: the file does not exist
    after: str | None   # None: the file is removed
    record: dict[str, Any] | None = None  # install: the file as found, for the manifest
    forget: bool = False                  # uninstall: drop the file's record once applied
    remove_dirs: list[Path] = attrs.field(factory=list)  # install created them; removed when empty

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        return "".join(difflib.unified_diff((self.before or "").splitlines(keepends=True),
                                            (self.after or "").splitlines(keepends=True),
                                            fromfile=str(self.path) if self.before is not None else "/dev/null",
                                            tofile=str(self.path) if self.after is not None else "/dev/null"))

    def apply(self) -> None:
        if self.after is None:
            self.path.unlink(missing_ok=True)
            for d in self.remove_dirs:  # deepest first
                if d.is_dir() and not any(d.iterdir()):
                    d.rmdir()
            return
        mode = (self.path.stat().st_mode & 0o777) if self.path.exists() else None  # ~/.claude.json stays private
        atomic_write_text(self.path, self.after, mode=mode)


def _read(path: Path) -> tuple[str | None, dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, {}
    except OSError as exc:
        raise InstallError(f"cannot read {path}: {exc}") from None
    try:
        doc = json.loads(text) if text.strip() else {}
    except ValueError as exc:
        raise InstallError(f"{path} is not valid JSON ({exc}); nothing was changed") from None
    if not isinstance(doc, dict):
        raise InstallError(f"{path} does not hold a JSON object; nothing was changed")
    return text, doc


def _dump(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def _missing_dirs(path: Path) -> list[Path]:
    """The directories above ``path`` that do not exist yet, deepest first."""
    out = []
    d = path.parent
    while not d.exists():
        out.append(d)
        d = d.parent
    return out


def target(path: Path, bound: Path, where: str) -> Path:
    """The file to read and write for ``path``: itself, or where its symlinks lead if that is
    inside ``bound`` (else InstallError: realmem never writes through a link out of it)."""
    try:
        real = path.resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop (RuntimeError on Python 3.11)
        raise InstallError(f"cannot resolve {path} ({exc}); nothing was changed") from None
    if real == path:
        return path
    if not real.is_relative_to(bound.resolve()):
        raise InstallError(f"{path} is a symlink to {real}, outside {where}; realmem does not write through it "
                           "(replace the link with a file to install there); nothing was changed")
    return real


def plan_install(path: Path, edit, manifest: dict[str, Any]) -> Change:  # type: ignore[no-untyped-def]
    before, doc = _read(path)
    new = edit(doc)
    if new == doc:
        return Change(path, before, before)
    record = None
    if remove_hooks(remove_server(doc)) == doc:
        # The file as found, unless realmem's entries are in it already (a second install, say
        # with another home): then the first record still says what was there before realmem.
        record = {"text": before, "dirs": [str(d) for d in _missing_dirs(path)]}
    return Change(path, before, _dump(new), record=record)


def plan_uninstall(path: Path, edit, manifest: dict[str, Any]) -> Change:  # type: ignore[no-untyped-def]
    before, doc = _read(path)
    new = edit(doc)
    if new == doc:
        return Change(path, before, before)
    record = manifest.get(str(path))
    if not isinstance(record, dict):  # no record (another home, an older realmem): entries, and a file only they fill
        if not new and before is not None and doc:
            return Change(path, before, None)
        return Change(path, before, _dump(new))
    found = record.get("text") if isinstance(record.get("text"), str) else None  # None: there was no file
    if found is None:
        found_doc: Any = {}
    else:
        try:
            found_doc = json.loads(found) if found.strip() else {}
        except ValueError:
            found_doc = None
    if new != found_doc:  # edited since install: keep those edits
        return Change(path, before, _dump(new), forget=True)
    return Change(path, before, found, forget=True, remove_dirs=[Path(d) for d in record.get("dirs", [])])


def claude_paths(scope: str, project_root: Path, user_home: Path) -> tuple[Path, Path]:
    """(settings file for hooks, file holding the MCP server) for a scope."""
    if scope == "user":
        return user_home / ".claude" / "settings.json", user_home / ".claude.json"
    return project_root / ".claude" / "settings.json", project_root / ".mcp.json"


def plan_claude_code(scope: str, project_root: Path, user_home: Path, home: str | None, *,
                     uninstall: bool, manifest: dict[str, Any] | None = None) -> list[Change]:
    bound, where = (user_home, "your home directory") if scope == "user" else (project_root, "the project")
    settings, mcp_file = (target(p.absolute(), bound, where) for p in claude_paths(scope, project_root, user_home))
    manifest = manifest or {}
    if uninstall:
        return [plan_uninstall(settings, remove_hooks, manifest), plan_uninstall(mcp_file, remove_server, manifest)]
    return [plan_install(settings, lambda d: add_hooks(d, home), manifest),
            plan_install(mcp_file, lambda d: add_server(d, home), manifest)]


def load_manifest(realmem_home: Path) -> dict[str, Any]:
    path = realmem_home / MANIFEST
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise InstallError(f"cannot read {path} ({exc}); move it away to continue") from None
    return data if isinstance(data, dict) else {}


def save_manifest(realmem_home: Path, manifest: dict[str, Any]) -> None:
    atomic_write_text(realmem_home / MANIFEST, _dump(manifest), mode=0o600)


def explicit_home(cli_home: str | None) -> str | None:
    """The home to write into commands: only one the user chose (the default needs no flag)."""
    if not cli_home:
        return None
    return str(Path(cli_home).expanduser().resolve())


# --- the commands -------------------------------------------------------------------------------

@click.group()
def install() -> None:
    """Connect other agents to realmem (hooks and MCP configuration)."""


@install.command("claude-code")
@click.option("--project", "scope", flag_value="project", default=True,
              help="this project: .claude/settings.json and .mcp.json (default)")
@click.option("--user", "scope", flag_value="user", help="every project: ~/.claude/settings.json and ~/.claude.json")
@click.option("--uninstall", is_flag=True, help="remove exactly what install added")
@click.option("--yes", is_flag=True, help="do not ask for confirmation")
@click.pass_context
def claude_code(ctx: click.Context, scope: str, uninstall: bool, yes: bool) -> None:
    """Write realmem's Claude Code hooks (SessionStart, PostToolUse) and its MCP server.

    Example:
        realmem install claude-code --project
        realmem install claude-code --user --uninstall --yes
    """
    c = ctx.find_root().obj
    cwd = Path(c.cwd or os.getcwd()).resolve()
    project = detect(cwd)
    root = project.root if project is not None else cwd
    realmem_home = home_dir(c.home)
    manifest = load_manifest(realmem_home)
    changes = plan_claude_code(scope, root, Path.home(), explicit_home(c.home), uninstall=uninstall,
                               manifest=manifest)
    todo = [ch for ch in changes if ch.changed]
    if not todo:
        click.echo("Nothing to remove: realmem is not installed there." if uninstall
                   else "Already installed; nothing to change.")
        return
    for ch in todo:
        click.echo(ch.diff(), nl=False)
    if not yes and not click.confirm("Apply these changes?", default=False):
        click.echo("Nothing changed.")
        raise SystemExit(1)
    recorded = [ch for ch in todo if ch.record is not None]
    if recorded:  # before the files change: a failed write then leaves a record of the untouched file
        save_manifest(realmem_home, manifest | {str(ch.path): ch.record for ch in recorded})
    for ch in todo:
        ch.apply()
    if any(ch.forget for ch in todo):
        save_manifest(realmem_home, {k: v for k, v in manifest.items()
                                     if k not in {str(ch.path) for ch in todo if ch.forget}})
    verb = "Removed realmem from" if uninstall else "Installed realmem into"
    click.echo(f"{verb}: " + ", ".join(str(ch.path) for ch in todo))
    if not uninstall:
        click.echo("Restart Claude Code (or run /hooks and /mcp) to load it.")


CLIENTS = ("generic", "cursor", "codex", "gemini", "opencode")


def client_snippet(client: str, home: str | None) -> str:
    entry = server_entry(home)
    if client == "codex":  # ~/.codex/config.toml
        args = ", ".join(json.dumps(a) for a in entry["args"])
        env_vars = ", ".join(json.dumps(v) for v in forwarded_env(home))
        return (f"[mcp_servers.{SERVER_NAME}]\ncommand = {json.dumps(entry['command'])}\nargs = [{args}]\n"
                f"env_vars = [{env_vars}]\n")
    if client == "opencode":  # opencode.json
        return _dump({"mcp": {SERVER_NAME: {"type": "local", "command": [entry["command"], *entry["args"]],
                                            "enabled": True}}})
    if client == "gemini":  # ~/.gemini/settings.json: no "type" key
        return _dump({"mcpServers": {SERVER_NAME: {"command": entry["command"], "args": entry["args"]}}})
    return _dump({"mcpServers": {SERVER_NAME: entry}})


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
