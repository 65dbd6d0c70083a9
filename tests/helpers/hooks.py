"""Claude Code hooks as Claude Code runs them: the documented hook input (tests/fixtures/claude_code)
fed to the installed hook command, and a real per-home hook server on a Unix socket."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from realmem.agents import hookclient

FIXTURES = Path(__file__).parents[1] / "fixtures" / "claude_code"
HOOK = Path(hookclient.__file__)
WAIT = 60.0  # a hang guard only


def fixture(name: str, cwd: Path, session: str) -> dict[str, Any]:
    text = (FIXTURES / f"{name}.json").read_text(encoding="utf-8")
    text = text.replace("$CWD", str(cwd)).replace("$SESSION", session).replace("$HOME", os.environ["HOME"])
    return json.loads(text)


def run_hook(hook_input: dict[str, Any], home: Path) -> dict[str, Any] | None:
    """The hook command exactly as installed; None when it prints nothing."""
    out = subprocess.run([sys.executable, "-I", "-S", str(HOOK)], input=json.dumps(hook_input).encode(),
                         capture_output=True, env={**os.environ, "REALMEM_HOME": str(home)}, timeout=WAIT)
    assert out.returncode == 0
    assert out.stderr == b"", out.stderr
    return json.loads(out.stdout) if out.stdout else None


def wait_socket(home: Path, proc: subprocess.Popen[bytes] | None = None) -> None:
    path = Path(hookclient.socket_path(str(home)))
    deadline = time.monotonic() + WAIT
    while not path.exists():
        assert proc is None or proc.poll() is None, "the hook server exited"
        assert time.monotonic() < deadline, "the hook server never listened"
        time.sleep(0.02)


@pytest.fixture
def server(home: Path) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-m", "realmem.interface.cli", "--home", str(home), "hook-server", "--idle", "600"],
                            env={**os.environ, "REALMEM_WORKER_AUTOSTART": "0"}, stderr=subprocess.DEVNULL)
    try:
        wait_socket(home, proc)
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=WAIT)
