"""The hook command of every client (``--agent claude-code``, the default, ``codex`` or
``gemini``): stdin (the hook's JSON input) -> the per-home hook server -> stdout (the hook's
JSON output, or nothing).

A hook runs after every tool call, so this is run as a script with ``python -I -S`` (no
site-packages, no realmem import) and imports almost nothing: it does not even parse JSON
(``json`` pulls in ``re`` and ``enum``); it forwards the input bytes and prints the reply
bytes.  When no server answers it starts one (``realmem
hook-server``, detached) and waits for its socket.  It never blocks the agent: any failure
prints a line on stderr and exits 0 with no output, which every client ignores.

Wire (one connection per hook call): the client sends ``realmem-hook 2 <agent>\\n`` and the
input bytes, then shuts its side down; the server answers one line (an error message, or empty)
followed by the output bytes (empty when the hook has nothing to say).

Another local user must not be able to stand in for the server: it would receive every tool
input and output and put its own text into the agent's context at SessionStart.  So the
socket's directory must be this user's own, mode 0700 and not a symlink (a deep home's socket
lives in ``$XDG_RUNTIME_DIR`` or ``$TMPDIR/realmem-<uid>``, which anyone may create first),
and the server's uid (SO_PEERCRED) must be ours before a byte is sent.  Either failing is
refused with one line on stderr and no output: the agent goes on without memory.

``realmem.agents.hookserver`` imports ``socket_path``, ``home_dir`` and ``HELLO`` from here,
so both sides agree on the socket and the wire.
"""

from __future__ import annotations

import _socket  # the C module: ``socket`` imports enum and selectors, two thirds of our start time
import os
import stat
import sys
import time

HELLO = b"realmem-hook 2"  # then a space, the agent and a newline
CONNECT_WAIT_SECONDS = 20.0  # a cold server imports realmem and opens the store first
REPLY_WAIT_SECONDS = 60.0    # a SessionStart scans the stores of a big project
SPAWN_GUARD_SECONDS = 5.0
MAX_UNIX_PATH = 100          # sun_path is 108 bytes on Linux, 104 on macOS


def home_dir(explicit: str | None = None) -> str:
    """REALMEM_HOME as ``realmem.config.home_dir`` resolves it (repeated here: no realmem import)."""
    raw = explicit or os.environ.get("REALMEM_HOME")
    if raw:
        return os.path.realpath(os.path.expanduser(raw))
    return os.path.join(os.path.expanduser("~"), ".pi", "agent", "realmem")


class Refused(OSError):
    """A socket directory or a server that is not this user's alone: it is never sent a hook."""


def socket_path(home: str) -> str:
    """``<home>/hooks.sock``; a deep home gets a short path in a private runtime dir instead."""
    inside = os.path.join(home, "hooks.sock")
    if len(inside) <= MAX_UNIX_PATH:
        return inside
    import hashlib  # only for deep homes; costs milliseconds to import
    base = os.environ.get("XDG_RUNTIME_DIR")
    if not base:  # cron, ssh without logind, containers; macOS's TMPDIR is per user already
        tmp = os.environ.get("TMPDIR") or "/tmp"
        base = os.path.join(tmp if len(tmp) <= MAX_UNIX_PATH - 50 else "/tmp", f"realmem-{os.getuid()}")
    return os.path.join(base, f"hooks-{hashlib.sha256(home.encode()).hexdigest()[:20]}.sock")


def check_socket_dir(home: str, path: str) -> None:
    """Refused unless no other user can put a socket at ``path``; FileNotFoundError while its
    directory does not exist yet.  The shared runtime dir must be a real directory (lstat: no
    symlink) of our uid, mode 700.  The home itself is ours by choice (a symlinked ~/.pi is
    fine, a 755 one too): there only the owner and write access matter."""
    directory = os.path.dirname(path)
    in_home = directory == home
    st = os.stat(directory) if in_home else os.lstat(directory)
    uid = os.geteuid()
    if not stat.S_ISDIR(st.st_mode):
        raise Refused(f"refused the socket directory {directory}: it is not a directory (a symlink?)")
    if st.st_uid != uid:
        raise Refused(f"refused the socket directory {directory}: it belongs to uid {st.st_uid}, not {uid}")
    if st.st_mode & (0o022 if in_home else 0o077):
        raise Refused(f"refused the socket directory {directory}: mode {stat.S_IMODE(st.st_mode):o}, "
                      f"{'others may write it' if in_home else 'not 700'}")


def check_peer(s: _socket.socket, path: str) -> None:
    """Refused unless the process listening on ``s`` runs as our uid (Linux's SO_PEERCRED;
    elsewhere the private directory alone keeps others out)."""
    option = getattr(_socket, "SO_PEERCRED", None)
    if option is None:
        return
    import struct  # struct ucred {pid_t pid; uid_t uid; gid_t gid;}; a C module, cheap
    pid, uid, _ = struct.unpack("3i", s.getsockopt(_socket.SOL_SOCKET, option, struct.calcsize("3i")))
    if uid != os.geteuid():
        raise Refused(f"refused the hook server on {path}: it runs as uid {uid} (pid {pid}), not {os.geteuid()}")


def request(home: str, data: bytes, agent: str) -> tuple[str, bytes]:
    """One hook call over the socket: (error line, output bytes)."""
    path = socket_path(home)
    check_socket_dir(home, path)
    s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        s.settimeout(REPLY_WAIT_SECONDS)
        s.connect(path)
        check_peer(s, path)
        s.sendall(HELLO + b" " + agent.encode() + b"\n" + data)
        s.shutdown(_socket.SHUT_WR)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    finally:
        s.close()
    head, _, output = b"".join(chunks).partition(b"\n")
    return head.decode("utf-8", "replace"), output


def spawn_server(home: str) -> None:
    """Start ``realmem hook-server`` detached, unless another client started one just now."""
    import subprocess  # only when no server runs: it is the slowest import here
    guard = os.path.join(home, "hooks.spawn")
    try:
        if time.time() - os.stat(guard).st_mtime < SPAWN_GUARD_SECONDS:
            return
    except OSError:
        pass
    os.makedirs(home, mode=0o700, exist_ok=True)
    os.close(os.open(guard, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600))  # private like all of the home
    os.utime(guard)
    with open(os.open(os.path.join(home, "hooks.log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600),
              "ab") as log:
        # sys.executable is the interpreter of realmem's environment (the hook command names it).
        subprocess.Popen([sys.executable, "-m", "realmem", "--home", home, "hook-server"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                         start_new_session=True, close_fds=True, cwd=home)


# No server listening, or one closed its socket (idle exit) with our connection still queued.
NOT_SERVING = (FileNotFoundError, ConnectionRefusedError, ConnectionResetError)


def call(home: str, data: bytes, agent: str) -> tuple[str, bytes]:
    try:
        return request(home, data, agent)
    except NOT_SERVING:
        pass
    spawn_server(home)
    deadline = time.monotonic() + CONNECT_WAIT_SECONDS
    delay = 0.01
    while True:
        try:
            return request(home, data, agent)
        except NOT_SERVING:
            if time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.2)


def _option(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv[:-1] else None


def main(argv: list[str]) -> int:
    home = home_dir(_option(argv, "--home"))
    agent = _option(argv, "--agent") or "claude-code"  # the hooks installed before there were others
    try:
        error, output = call(home, sys.stdin.buffer.read(), agent)
    except Refused as exc:
        sys.stderr.write(f"realmem hook: {exc}\n")
        return 0
    except Exception as exc:  # never block the agent on memory
        sys.stderr.write(f"realmem hook: {type(exc).__name__}: {exc}\n")
        return 0
    if error:
        sys.stderr.write(f"realmem hook: {error}\n")
    if output:
        sys.stdout.buffer.write(output)
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
