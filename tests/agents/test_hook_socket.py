"""A hostile machine around the hook socket: another local user who creates the runtime
directory of a deep home first, binds a socket there, or serves on the path itself, must
never receive a hook's input nor answer it; and every file the hooks leave under the home is
private.  Real processes, real directories, real chmod/chown/symlinks; root-only cases
(another uid) skip with the reason when not run as root.
"""

from __future__ import annotations

import json
import os
import stat
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from realmem.agents import hookclient
from realmem.agents.hookserver import LOCK
from realmem.storage.lock import LeaseLock
from realmem.write import memories
from realmem.write.attached import open_attached

from conftest import stop_pid
from helpers.hooks import HOOK, WAIT, fixture, run_hook, server, wait_socket  # noqa: F401 (the hook server fixture)

NOBODY = 65534
SQUATTER = Path(__file__).parents[1] / "helpers" / "squatter.py"


def hook(hook_input: dict[str, Any], home: Path, **env: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-I", "-S", str(HOOK)], input=json.dumps(hook_input).encode(),
                          capture_output=True, timeout=WAIT,
                          env={**os.environ, "REALMEM_HOME": str(home), "REALMEM_WORKER_AUTOSTART": "0", **env})


@pytest.fixture
def tmpdir_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh short TMPDIR (tmp_path is too deep for a socket path) standing for /tmp."""
    d = Path(tempfile.mkdtemp(prefix="rmsock-", dir="/tmp"))
    os.chmod(d, 0o1777)  # like /tmp: everyone may create a directory in it
    monkeypatch.setenv("TMPDIR", str(d))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def deep_home(tmp_path: Path, tmpdir_env: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A REALMEM_HOME too deep for ``<home>/hooks.sock``, with XDG_RUNTIME_DIR unset (cron,
    ssh without logind), so the socket goes to ``$TMPDIR/realmem-<uid>``."""
    home = (tmp_path / ("d" * 60) / ("e" * 60) / "realmem-home").resolve()
    home.mkdir(parents=True)
    monkeypatch.setenv("REALMEM_HOME", str(home))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    return home


def runtime_dir(tmp: Path) -> Path:
    return tmp / f"realmem-{os.getuid()}"


def test_a_deep_home_gets_its_socket_in_a_private_runtime_dir(deep_home: Path, tmpdir_env: Path, repo: Path) -> None:
    path = Path(hookclient.socket_path(str(deep_home)))
    assert path.parent == runtime_dir(tmpdir_env) and len(str(path)) <= hookclient.MAX_UNIX_PATH
    out = hook(fixture("session_start_startup", repo, "deep"), deep_home)
    pid = int(LeaseLock(deep_home / "realmem.sqlite", LOCK).holder()["pid"])  # type: ignore[index]
    try:
        assert out.returncode == 0 and out.stderr == b"", out.stderr
        assert json.loads(out.stdout)["hookSpecificOutput"]["hookEventName"] == "SessionStart"
        st = os.lstat(path.parent)
        assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.geteuid()
        assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
    finally:
        stop_pid(pid)


def squat(directory: Path, socket_name: str, *, as_uid: int | None = None) -> subprocess.Popen[str]:
    """Another user's server on ``directory/socket_name``: it prints what each client sent and
    answers every hook with its own SessionStart text."""
    proc = subprocess.Popen([sys.executable, str(SQUATTER), str(directory / socket_name), str(as_uid or "")],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "listening\n"
    return proc


def received(proc: subprocess.Popen[str]) -> str:
    proc.terminate()
    out, _ = proc.communicate(timeout=WAIT)
    return out


@pytest.mark.parametrize("how", ["0777", "0755", "symlink", "other-uid"])
def test_a_runtime_dir_that_is_not_ours_alone_is_refused(how: str, deep_home: Path, tmpdir_env: Path, repo: Path) -> None:
    d = runtime_dir(tmpdir_env)
    if how == "symlink":
        target = tmpdir_env / "elsewhere"
        target.mkdir(mode=0o700)
        d.symlink_to(target)
    else:
        d.mkdir()
        os.chmod(d, {"0777": 0o777, "0755": 0o755, "other-uid": 0o700}[how])
        if how == "other-uid":
            if os.geteuid() != 0:
                pytest.skip("giving the directory to another uid needs root (os.chown)")
            os.chown(d, NOBODY, NOBODY)
    squatter = squat(d, Path(hookclient.socket_path(str(deep_home))).name)
    out = hook(fixture("session_start_startup", repo, "squatted"), deep_home)
    assert received(squatter) == ""  # not one byte of the hook's input
    assert out.returncode == 0 and out.stdout == b""  # nothing of the squatter's reaches the agent
    assert out.stderr.startswith(b"realmem hook: refused"), out.stderr
    assert str(d).encode() in out.stderr and out.stderr.count(b"\n") == 1
    # No server of ours started into it either: the server refuses the directory the same way.
    assert LeaseLock(deep_home / "realmem.sqlite", LOCK).holder() is None
    assert os.path.islink(d) == (how == "symlink")


def test_a_server_of_another_uid_is_never_sent_the_input(home: Path, repo: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("a server with another peer uid (SO_PEERCRED) can only be set up as root")
    squatter = squat(home, "hooks.sock", as_uid=NOBODY)
    out = hook(fixture("session_start_startup", repo, "peer"), home)
    assert received(squatter) == ""
    assert out.returncode == 0 and out.stdout == b""
    assert out.stderr.startswith(b"realmem hook: refused"), out.stderr
    assert f"uid {NOBODY}".encode() in out.stderr and out.stderr.count(b"\n") == 1


def test_every_file_under_the_home_is_private_after_a_session(home: Path, repo: Path, git: Any) -> None:
    (repo / ".gitignore").write_text(".pi/realmem/\n", encoding="utf-8")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-q", "-m", "ignore")
    (repo / "src").mkdir()
    (repo / "src" / "db.py").write_text("x = 1\n", encoding="utf-8")
    app = open_attached(home, repo, scan=False)
    assert app.project is not None
    memories.add(app, "db module uses apsw", "src/db.py opens apsw.", store=app.project.shared_store,
                 stored_paths=["src/db.py"], source="add")
    memories.add(app, "tests run with pytest", "pytest -q.", store=app.project.personal_store,
                 stored_paths=["."], source="add")
    memories.add(app, "prefer small commits", "Small commits.", store="global", stored_paths=[], source="add")
    app.close()
    sid = "private-files"
    out = hook(fixture("session_start_startup", repo, sid), home)  # starts the server on demand
    pid = int(LeaseLock(home / "realmem.sqlite", LOCK).holder()["pid"])  # type: ignore[index]
    try:
        assert out.returncode == 0 and out.stdout, out.stderr
        assert run_hook(fixture("post_tool_use_read", repo, sid), home) is not None
    finally:
        stop_pid(pid)
    loose = []
    for dirpath, dirnames, filenames in os.walk(home):
        for name in dirnames:
            mode = stat.S_IMODE(os.lstat(os.path.join(dirpath, name)).st_mode)
            if mode != 0o700:
                loose.append((os.path.relpath(os.path.join(dirpath, name), home), oct(mode)))
        for name in filenames:
            mode = stat.S_IMODE(os.lstat(os.path.join(dirpath, name)).st_mode)
            if mode != 0o600:
                loose.append((os.path.relpath(os.path.join(dirpath, name), home), oct(mode)))
    names = {rel for dirpath, _, files in os.walk(home) for rel in (os.path.relpath(os.path.join(dirpath, f), home) for f in files)}
    assert {"git-roots.json", "gitignore-cache.json", "hooks.log"} <= names, names
    assert loose == [], loose
