"""The Claude Code hook command: stdin (the hook's JSON input) -> the per-home hook server ->
stdout (the hook's JSON output, or nothing).

A hook runs after every tool call, so this file imports the standard library only and is run
as a script with ``python -I -S`` (no site-packages, no realmem import): the process starts in
a few milliseconds and the warm server does the work.  When no server answers, it starts one
(``realmem hook-server``, detached) and waits for its socket.  It never blocks the agent: any
failure prints a line on stderr and exits 0 with no output, which Claude Code ignores.

Kept free of realmem imports on purpose; ``realmem.agents.hookserver`` imports
``socket_path`` and ``home_dir`` from here so both sides agree on the socket.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

PROTOCOL = 1
CONNECT_WAIT_SECONDS = 20.0  # a cold server imports realmem and opens the store first
REPLY_WAIT_SECONDS = 60.0    # a SessionStart scans the stores of a big project
SPAWN_GUARD_SECONDS = 5.0
MAX_UNIX_PATH = 100          # sun_path is 108 bytes on Linux, 104 on macOS


def home_dir(explicit: str | None = None) -> Path:
    """REALMEM_HOME as ``realmem.config.home_dir`` resolves it (duplicated: no realmem import here)."""
    raw = explicit or os.environ.get("REALMEM_HOME")
    if raw:
        return Path(raw).expanduser().resolve()
    return Path.home() / ".pi" / "agent" / "realmem"


def socket_path(home: Path) -> Path:
    """``<home>/hooks.sock``; a deep home gets a short path in a private runtime dir instead."""
    inside = home / "hooks.sock"
    if len(str(inside)) <= MAX_UNIX_PATH:
        return inside
    base = Path(os.environ.get("XDG_RUNTIME_DIR") or f"/tmp/realmem-{os.getuid()}")
    return base / f"hooks-{hashlib.sha256(str(home).encode()).hexdigest()[:20]}.sock"


def request(home: Path, payload: dict, *, timeout: float = REPLY_WAIT_SECONDS) -> dict:
    """One request over the socket: a JSON line out, a JSON line back."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(str(socket_path(home)))
        s.sendall(json.dumps(payload, ensure_ascii=False).encode() + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    return json.loads(buf)


def spawn_server(home: Path) -> None:
    """Start ``realmem hook-server`` detached, unless another client started one just now."""
    guard = home / "hooks.spawn"
    try:
        if time.time() - guard.stat().st_mtime < SPAWN_GUARD_SECONDS:
            return
    except OSError:
        pass
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    guard.touch()
    with open(home / "hooks.log", "ab") as log:
        # sys.executable is the interpreter of realmem's environment (the hook command names it).
        subprocess.Popen([sys.executable, "-m", "realmem.cli", "--home", str(home), "hook-server"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                         start_new_session=True, close_fds=True, cwd=str(home))


def call(home: Path, payload: dict) -> dict:
    try:
        return request(home, payload)
    except (FileNotFoundError, ConnectionRefusedError):
        pass
    spawn_server(home)
    deadline = time.monotonic() + CONNECT_WAIT_SECONDS
    delay = 0.01
    while True:
        try:
            return request(home, payload)
        except (FileNotFoundError, ConnectionRefusedError):
            if time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.2)


def main(argv: list[str]) -> int:
    home_arg = argv[argv.index("--home") + 1] if "--home" in argv[:-1] else None
    try:
        hook_input = json.loads(sys.stdin.buffer.read() or b"{}")
        if not isinstance(hook_input, dict):
            raise ValueError("the hook input is not a JSON object")
        reply = call(home_dir(home_arg), {"v": PROTOCOL, "input": hook_input})
    except Exception as exc:  # never block the agent on memory
        print(f"realmem hook: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 0
    if reply.get("error"):
        print(f"realmem hook: {reply['error']}", file=sys.stderr)
    if reply.get("output") is not None:
        sys.stdout.write(json.dumps(reply["output"], ensure_ascii=False))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
