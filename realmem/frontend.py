"""The front end the user reaches realmem through, so a hint names a command they can run.

Pi users type slash commands (`/realmem retry`); everyone else (the `realmem` CLI, an MCP
client such as Claude Code or Cursor, the Claude Code hooks) runs the shell command
(`realmem retry`).  Only the rpc child serves Pi, so it sets PI once at start; every other
entry point keeps the default, so a forgotten one shows commands that work in a shell.
"""
from __future__ import annotations

PI = "pi"
SHELL = "shell"

_current = SHELL


def use(frontend: str) -> None:
    """Set the front end for this process (called once by the entry point)."""
    global _current
    if frontend not in (PI, SHELL):
        raise ValueError(f"unknown front end {frontend!r}")
    _current = frontend


def current() -> str:
    return _current


def hint(command: str, shell: str | None = None) -> str:
    """`command` (a /realmem subcommand with its arguments, e.g. "retry") as the user runs it
    here; `shell` where the CLI spells it differently."""
    if _current == PI:
        return f"/realmem {command}"
    return f"realmem {command if shell is None else shell}"


def settings_hint(key: str | None = None) -> str:
    """The command that sets `key`: Pi's settings screen, or the CLI's `settings set`."""
    return hint("settings", f"settings set {key or 'KEY'} VALUE")


def set_in(key: str | None = None) -> str:
    """"in /realmem settings" (a screen) or "with realmem settings set KEY VALUE" (a command),
    for sentences such as "set it <set_in>"."""
    return f"{'in' if _current == PI else 'with'} {settings_hint(key)}"
