"""Shared fixtures: an isolated environment for every test, a REALMEM_HOME and a real git repo.

Every test runs with HOME, REALMEM_HOME and git's global config pointed into its tmp_path, so
nothing reads or writes the real ~/.pi or ~/.gitconfig.  Keep this file small and generic:
tests of every part of realmem use it.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import string
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

GitRunner = Callable[..., str]


def worker_pids(under: Path) -> set[int]:
    """Pids of `realmem worker` and `hook-server` processes whose home lies under ``under``
    (a test's tmp dir)."""
    prefix = str(under.resolve()).encode()
    found: set[int] = set()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            argv = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if (b"worker" in argv or b"hook-server" in argv) and any(a.startswith(prefix) for a in argv):
            found.add(int(d.name))
    return found


def kill_workers(under: Path) -> None:
    """Stop every worker under ``under`` and wait until each has exited, so nothing still
    writes into a directory the test is about to remove."""
    pids = worker_pids(under)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    for pid in pids:
        _wait_gone(pid)


def stop_pid(pid: int) -> None:
    """SIGTERM a detached process (a worker, a hook server) and wait until it has exited."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    _wait_gone(pid)


def _wait_gone(pid: int) -> None:
    """Until ``pid`` is gone or a zombie (it writes nothing more); SIGKILL if SIGTERM is not
    enough within the liveness bound.  Workers are detached: not ours to reap."""
    deadline = time.monotonic() + 30.0
    while True:
        try:
            data = Path(f"/proc/{pid}/stat").read_bytes()
        except OSError:
            return
        if data[data.rindex(b")") + 2:].startswith(b"Z"):
            return
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 30.0
        time.sleep(0.01)


@pytest.fixture(autouse=True)
def _no_stray_workers(tmp_path: Path) -> Iterator[None]:
    """Any worker a test started (directly or through session start) ends with the test."""
    yield
    kill_workers(tmp_path)


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """HOME, REALMEM_HOME and git config in tmp_path; REALMEM_* overrides cleared."""
    base = tmp_path.resolve()
    user_home = base / "user-home"
    user_home.mkdir()
    git_config = base / "gitconfig"
    git_config.write_text("", encoding="utf-8")
    monkeypatch.setenv("HOME", str(user_home))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(git_config))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("REALMEM_HOME", str(base / "realmem-home"))
    for var in list(os.environ):
        if var.startswith("REALMEM_") and var != "REALMEM_HOME":
            monkeypatch.delenv(var)
    # The bundled embedder costs ~25 ms a memory; tests of other parts run without it.  Its own
    # tests (tests/read/test_local_embedder.py, the evaluation) turn it back on.
    monkeypatch.setenv("REALMEM_EMBEDDING_LOCAL", "off")
    for var in ("XDG_CONFIG_HOME", "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_CONFIG_PARAMETERS"):
        monkeypatch.delenv(var, raising=False)
    try:  # project detection is cached per process; a new test may reuse a path
        from realmem.stores.project import forget_cache
        forget_cache()
    except ImportError:
        pass
    try:  # so is the "(auto)" model per endpoint URL; a new fake may reuse a port
        from realmem.clients.base import forget_auto_models
        forget_auto_models()
    except ImportError:
        pass
    return user_home


@pytest.fixture
def user_home(_isolated_env: Path) -> Path:
    """The temporary HOME (``~``) of the test."""
    return _isolated_env


@pytest.fixture
def home(_isolated_env: Path) -> Path:
    """The REALMEM_HOME of the test (created empty; also exported as $REALMEM_HOME)."""
    d = Path(os.environ["REALMEM_HOME"])
    d.mkdir(parents=True, exist_ok=True)
    return d


def run_git(cwd: Path, *args: str) -> str:
    """Run git in ``cwd`` with a fixed identity; returns stdout, raises on failure."""
    out = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main", *args],
        cwd=cwd, capture_output=True, text=True, check=True,
    )
    return out.stdout.strip()


@pytest.fixture
def git() -> GitRunner:
    """``git(cwd, *args) -> stdout``: git with a fixed identity (commits work)."""
    return run_git


def make_repo(root: Path) -> Path:
    """A real git repository at ``root`` with one commit (README.md); returns the resolved path.
    The README names the directory, so repos made side by side have different root commits
    (the project key is ``git-<root commit>``)."""
    root = root.resolve()
    root.mkdir()
    run_git(root, "init", "-q")
    (root / "README.md").write_text(f"# {root.name}\n", encoding="utf-8")
    run_git(root, "add", "README.md")
    run_git(root, "commit", "-q", "-m", "init")
    return root


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A real git repository with one commit (README.md), resolved path."""
    return make_repo(tmp_path / "repo")


@pytest.fixture
def judge() -> str:
    """Which judge the gate asks: "semif" (the System One fake) here; a module that runs its
    decision rules under both parametrises it with ``JUDGES`` (or overrides this fixture)."""
    return "semif"


# "chat-rounded": the chat judge with its probabilities rounded to 0.1, as models report them
# (docs/judge-calibration.md).
JUDGES = ("semif", "chat", "chat-rounded")


@pytest.fixture
def servers(monkeypatch: pytest.MonkeyPatch, judge: str):  # type: ignore[no-untyped-def]
    """Fake System One, embeddings and chat servers on 127.0.0.1, configured through the
    environment; the worker is not autostarted (tests that want one start it).

    With ``judge`` "chat" or "chat-rounded" REALMEM_SEMIF_URL stays unset, so the gate asks the
    chat judge, and the chat fake answers it from the System One fake's scripts (its judge
    mode): a test scripts ``s1`` the same way under every judge."""
    from realmem.fakes import FakeChat, FakeEmbeddings, FakeSystemOne

    s1, emb = FakeSystemOne().start(), FakeEmbeddings().start()
    chat = FakeChat(judge=None if judge == "semif" else s1, report_step=0.1 if judge == "chat-rounded" else None).start()
    if judge == "semif":
        monkeypatch.setenv("REALMEM_SEMIF_URL", s1.url)
    monkeypatch.setenv("REALMEM_EMBEDDING_URL", emb.url)
    monkeypatch.setenv("REALMEM_REWRITER_URL", chat.url)
    monkeypatch.setenv("REALMEM_WORKER_AUTOSTART", "0")
    yield s1, emb, chat
    for s in (s1, emb, chat):
        s.stop()


def fake_secret(prefix: str, length: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    """A secret-shaped string made at test time (a committed literal could trip push scanners)."""
    return prefix + "".join(random.choice(alphabet) for _ in range(length))
