"""The rpc child driven over real stdio pipes (Child), its environment and spawn fixtures, and
Gate, a System One question that blocks in the fake's handler until the test releases it."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from realmem.fakes.heuristic import Judgement

from conftest import kill_workers

WAIT = 120.0  # a hang guard only: nothing asserts how long anything takes


class Child:
    """The rpc child with a reader thread sorting its stdout into responses and notifications."""

    def __init__(self, home: Path, env: dict[str, str]) -> None:
        self.home = home
        self.stderr = open(home.parent / "rpc-stderr.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen([sys.executable, "-m", "realmem.interface.cli", "--home", str(home), "rpc"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                                     env=env, text=True, encoding="utf-8", bufsize=1)
        self.lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.order: list[Any] = []  # ids of responses in arrival order
        self.responses: dict[Any, dict[str, Any]] = {}
        self.notifications: list[dict[str, Any]] = []
        self.raw: list[str] = []
        self.cond = threading.Condition()
        self.next_id = 0
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            msg = json.loads(line)  # stdout carries JSON-RPC only: anything else fails here
            with self.cond:
                self.raw.append(line)
                if "id" in msg and ("result" in msg or "error" in msg):
                    self.order.append(msg["id"])
                    self.responses[msg["id"]] = msg
                else:
                    self.notifications.append(msg)
                self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    def send_raw(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def send(self, method: str, params: Any = None, *, mid: Any = "auto") -> Any:
        if mid == "auto":
            self.next_id += 1
            mid = self.next_id
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": {} if params is None else params}
        if mid is not None:
            msg["id"] = mid
        self.send_raw(json.dumps(msg))
        return mid

    def wait_for(self, predicate, what: str) -> Any:  # type: ignore[no-untyped-def]
        with self.cond:
            ok = self.cond.wait_for(lambda: predicate() or self.proc.poll() is not None, timeout=WAIT)
            value = predicate()
        assert ok and value, f"no {what} from the rpc child (exit {self.proc.poll()})"
        return value

    def response(self, mid: Any) -> dict[str, Any]:
        return self.wait_for(lambda: self.responses.get(mid), f"response {mid!r}")

    def call(self, method: str, params: Any = None) -> dict[str, Any]:
        msg = self.response(self.send(method, params))
        assert "result" in msg, msg
        return msg["result"]

    def error(self, method: str, params: Any = None) -> dict[str, Any]:
        msg = self.response(self.send(method, params))
        assert "error" in msg, msg
        return msg["error"]

    def close(self) -> int:
        if self.proc.stdin and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            rc = self.proc.wait(timeout=WAIT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.reader.join(timeout=WAIT)
        self.stderr.close()
        return rc


@pytest.fixture
def child_env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"REALMEM_HOME": str(home), "REALMEM_WORKER_IDLESECONDS": "1", "REALMEM_SEMIF_TIMEOUT": "300"})
    return env


@pytest.fixture
def spawn(home: Path, child_env: dict[str, str]) -> Iterator[Any]:
    children: list[Child] = []

    def start(**extra: str) -> Child:
        c = Child(home, {**child_env, **extra})
        children.append(c)
        return c
    try:
        yield start
    finally:
        for c in children:
            if c.proc.poll() is None:
                c.close()
        kill_workers(home)


class Gate:
    """A System One question that blocks in the fake's handler until released.

    ``entered`` counts calls; ``hold`` blocks call number ``at`` (1-based) and every later one
    until ``release``.  Answers are the fake's deterministic heuristic unless ``spec`` is given.
    """

    def __init__(self, name: str, *, at: int = 1, spec: Any = None) -> None:
        self.name, self.at, self.spec = name, at, spec
        self.calls = 0
        self.cond = threading.Condition()
        self.released = threading.Event()

    def __call__(self, state: str, question: dict[str, Any]) -> Any:
        with self.cond:
            self.calls += 1
            n = self.calls
            self.cond.notify_all()
        if n >= self.at:
            assert self.released.wait(WAIT), "the test never released the judge"
        return self.spec if self.spec is not None else Judgement(state).answer(self.name, question)

    def wait_entered(self, n: int | None = None) -> None:
        n = n or self.at
        with self.cond:
            assert self.cond.wait_for(lambda: self.calls >= n, timeout=WAIT), "the judge was never asked"

    def release(self) -> None:
        self.released.set()
