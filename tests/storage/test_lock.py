"""LeaseLock across real OS processes and threads, on real SQLite files.

Contending processes run tests/helpers/lockworker.py.  Timeouts below only bound liveness (a broken
lock fails instead of hanging); nothing asserts how fast anything is.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Callable

import pytest

from realmem.storage.db import connect
from realmem.storage.lock import HOST, LeaseLock, LockTimeout

WORKER = Path(__file__).parents[1] / "helpers" / "lockworker.py"
LIVENESS = 60.0  # seconds: a generous bound for anything that must eventually happen


class Worker:
    """One lockworker.py process: JSON lines out, commands in, JSON logs in a file."""

    def __init__(self, tmp_path: Path, index: int, *args: object) -> None:
        self.log_path = tmp_path / f"worker-{index}.log"
        self._log: IO[bytes] = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER), *map(str, args)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def read(self, timeout: float = LIVENESS) -> dict[str, Any]:
        line = self._lines.get(timeout=timeout)
        assert line is not None, f"worker exited; log:\n{self.log_path.read_text()}"
        message: dict[str, Any] = json.loads(line)
        return message

    def send(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def logs(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log_path.read_text().splitlines() if line]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)  # a stopped process cannot die until resumed
            self.proc.kill()
        self.proc.wait(timeout=LIVENESS)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()
        self._log.close()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "realmem.sqlite"
    connect(path).close()  # migrated once, before processes race to open it
    return path


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Callable[..., Worker]]:
    workers: list[Worker] = []

    def start(*args: object) -> Worker:
        worker = Worker(tmp_path, len(workers), *args)
        workers.append(worker)
        return worker

    yield start
    for worker in workers:
        worker.stop()


def row_of(db: Path) -> tuple[Any, ...] | None:
    conn = connect(db, migrate=False)
    try:
        return conn.execute(
            "SELECT owner, pid, host, acquired, heartbeat, ttl FROM locks WHERE name='write'"
        ).fetchone()
    finally:
        conn.close()


def held_row(db: Path) -> tuple[Any, ...]:
    row = row_of(db)
    assert row is not None, "nobody holds the lock"
    return row


def eventually(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + LIVENESS
    while not check():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.02)


def proc_state(pid: int) -> str:
    data = Path(f"/proc/{pid}/stat").read_bytes()
    return data[data.rindex(b")") + 2 :].split()[0].decode()


def insert_row(db: Path, owner: str, pid: int, host: str, heartbeat: float, ttl: float) -> None:
    conn = connect(db, migrate=False)
    try:
        conn.execute(
            "INSERT INTO locks (name, owner, pid, host, acquired, heartbeat, ttl) VALUES ('write', ?, ?, ?, ?, ?, ?)",
            (owner, pid, host, heartbeat, heartbeat, ttl),
        )
    finally:
        conn.close()


# --- across processes -----------------------------------------------------------------


def test_processes_serialise_read_modify_write(
    db: Path, tmp_path: Path, spawn: Callable[..., Worker]
) -> None:
    processes, n = 8, 25
    conn = connect(db, migrate=False)
    conn.execute("CREATE TABLE counter (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)")
    conn.execute("INSERT INTO counter VALUES (1, 0)")
    out, go = tmp_path / "lines.txt", tmp_path / "go"
    workers = [spawn("count", db, out, n, go) for _ in range(processes)]
    go.touch()
    for worker in workers:
        assert worker.read(timeout=300) == {"done": n}
        assert worker.proc.wait(timeout=LIVENESS) == 0

    total = processes * n
    assert conn.execute("SELECT n FROM counter WHERE id = 1").fetchone() == (total,)
    conn.close()
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == total
    parsed = []
    for line in lines:
        assert re.fullmatch(r"\d+ \d+ \d+", line), f"interleaved line {line!r}"
        parsed.append(tuple(map(int, line.split())))
    assert [value for value, _, _ in parsed] == list(range(1, total + 1))
    per_pid: dict[int, list[int]] = {}
    for _, pid, i in parsed:
        per_pid.setdefault(pid, []).append(i)
    assert sorted(per_pid) == sorted(w.proc.pid for w in workers)
    assert all(seq == list(range(n)) for seq in per_pid.values())
    assert row_of(db) is None


@pytest.mark.parametrize("reaped", [True, False], ids=["reaped", "zombie"])
def test_killed_holder_is_taken_over_without_waiting_for_ttl(
    db: Path, spawn: Callable[..., Worker], reaped: bool
) -> None:
    # A ttl far beyond the contender's timeout: only dead-pid detection can let it in.
    first = spawn("hold", db, "--ttl", 3600, "--heartbeat", 1)
    assert first.read()["acquired"]
    first.proc.send_signal(signal.SIGKILL)
    if reaped:
        first.proc.wait(timeout=LIVENESS)
    else:
        eventually(lambda: proc_state(first.proc.pid) == "Z", "killed holder became a zombie")

    second = spawn("hold", db, "--ttl", 3600, "--timeout", LIVENESS)
    got = second.read()
    assert got["acquired"]
    owner, pid, host, *_ = held_row(db)
    assert (owner, pid, host) == (got["owner"], second.proc.pid, HOST)
    takeovers = [e for e in second.logs() if e["event"] == "lock.taken_over"]
    assert [(e["reason"], e["previous_pid"]) for e in takeovers] == [("dead", first.proc.pid)]

    second.send("release")
    assert second.read() == {"released": True}
    assert row_of(db) is None


def test_stopped_holder_loses_lease_after_ttl_and_notices(
    db: Path, spawn: Callable[..., Worker]
) -> None:
    first = spawn("hold", db, "--ttl", 1, "--heartbeat", 0.2)
    first_owner = first.read()["owner"]
    first.proc.send_signal(signal.SIGSTOP)
    try:
        second = spawn("hold", db, "--ttl", 30, "--timeout", LIVENESS)
        got = second.read()
        assert got["acquired"]
        takeovers = [e for e in second.logs() if e["event"] == "lock.taken_over"]
        assert [(e["reason"], e["previous_owner"]) for e in takeovers] == [
            ("expired", first_owner)
        ]
    finally:
        first.proc.send_signal(signal.SIGCONT)

    def first_sees_loss() -> bool:
        first.send("held")
        return first.read() == {"held": False}

    eventually(first_sees_loss, "the resumed holder noticed its lease was taken")
    first.send("release")
    assert first.read() == {"released": True}
    assert first.proc.wait(timeout=LIVENESS) == 0
    assert any(e["event"] == "lock.lost" and e["level"] == "error" for e in first.logs())

    owner, pid, *_ = held_row(db)
    assert (owner, pid) == (got["owner"], second.proc.pid)  # the stale release deleted nothing
    second.send("release")
    assert second.read() == {"released": True}
    assert row_of(db) is None


def test_timeout_reports_the_live_holder(db: Path, spawn: Callable[..., Worker]) -> None:
    holder = spawn("hold", db, "--ttl", 30, "--heartbeat", 1)
    held = holder.read()
    lock = LeaseLock(db)
    with pytest.raises(LockTimeout) as caught:
        lock.acquire(timeout=0.3)
    assert isinstance(caught.value, TimeoutError)
    info = caught.value.holder
    assert info is not None
    assert (info["pid"], info["host"], info["owner"]) == (holder.proc.pid, HOST, held["owner"])
    assert info["held_for"] >= 0
    assert not lock.held
    assert str(holder.proc.pid) in str(caught.value)

    contender = spawn("hold", db, "--timeout", 0.3)
    refused = contender.read()
    assert refused["timeout"] and refused["holder"]["pid"] == holder.proc.pid
    assert contender.proc.wait(timeout=LIVENESS) == 3
    assert held_row(db)[0] == held["owner"]


def test_forked_child_does_not_inherit_the_lease(db: Path) -> None:
    lock = LeaseLock(db)
    lock.acquire()
    owner = held_row(db)[0]
    pid = os.fork()
    if pid == 0:  # child: report through the exit status only
        code = 1
        try:
            if not lock.held:
                try:
                    lock.acquire(timeout=0.2)
                except LockTimeout as exc:
                    code = 0 if exc.holder and exc.holder["owner"] == owner else 2
                else:
                    code = 3
            lock.release()  # not the child's to give back
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert lock.held
    assert held_row(db)[0] == owner
    lock.release()
    assert row_of(db) is None


# --- pid checks against rows written by hand ------------------------------------------


@pytest.fixture
def live_pid() -> Iterator[int]:
    proc = subprocess.Popen(["sleep", "600"])
    yield proc.pid
    proc.kill()
    proc.wait()


def start_time(pid: int) -> str:
    data = Path(f"/proc/{pid}/stat").read_bytes()
    return data[data.rindex(b")") + 2 :].split()[19].decode()


def test_reused_pid_counts_as_dead(db: Path, live_pid: int) -> None:
    # The pid is alive, but it belongs to a process started after the recorded holder.
    wrong_start = str(int(start_time(live_pid)) - 1)
    insert_row(db, f"{live_pid}:{wrong_start}:x", live_pid, HOST, time.time(), 3600)
    lock = LeaseLock(db)
    with lock.hold(timeout=LIVENESS):
        assert held_row(db)[1] == os.getpid()


def test_live_pid_with_matching_start_time_keeps_the_lease(db: Path, live_pid: int) -> None:
    insert_row(db, f"{live_pid}:{start_time(live_pid)}:x", live_pid, HOST, time.time(), 3600)
    with pytest.raises(LockTimeout):
        LeaseLock(db).acquire(timeout=0.2)


def test_other_host_waits_for_ttl_even_if_pid_is_unknown_here(db: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    insert_row(db, f"{dead.pid}:1:x", dead.pid, HOST + "-elsewhere", time.time(), 3600)
    with pytest.raises(LockTimeout):
        LeaseLock(db).acquire(timeout=0.2)


def test_expired_row_from_other_host_is_taken(db: Path) -> None:
    insert_row(db, "1:1:x", 1, HOST + "-elsewhere", time.time() - 10, 1)
    lock = LeaseLock(db)
    lock.acquire(timeout=LIVENESS)
    assert held_row(db)[1] == os.getpid()
    lock.release()


# --- within one process ---------------------------------------------------------------


def test_reentrant_within_one_object(db: Path) -> None:
    lock = LeaseLock(db)
    with lock:
        owner = held_row(db)[0]
        with lock.hold(timeout=1):
            lock.acquire()
            lock.release()
            assert lock.held
        assert lock.held
        assert held_row(db)[0] == owner
    assert not lock.held
    assert row_of(db) is None


def test_release_by_non_holder_is_a_no_op(db: Path) -> None:
    holder, other = LeaseLock(db), LeaseLock(db)
    other.release()  # never acquired
    holder.acquire()
    owner = held_row(db)[0]
    other.release()
    worker = threading.Thread(target=holder.release)  # a thread that does not hold it
    worker.start()
    worker.join()
    assert holder.held
    assert held_row(db)[0] == owner
    holder.release()
    holder.release()  # one release too many
    assert row_of(db) is None


def test_heartbeat_renews_while_held(db: Path) -> None:
    lock = LeaseLock(db, ttl=5, heartbeat=0.05)
    with lock:
        first = lock.holder()
        assert first is not None

        def renewed() -> bool:
            now = lock.holder()
            return now is not None and now["heartbeat"] > first["heartbeat"]

        eventually(renewed, "heartbeat column advanced")
        assert held_row(db)[3] == first["acquired"]
        assert lock.held


def test_renewal_inside_a_write_transaction_commits_with_it_and_fails_once_taken_over(db: Path) -> None:
    """A write transaction longer than the ttl blocks the renewal thread; renewing inside it
    means the lease looks fresh the moment it commits.  A row taken over is not renewed."""
    lock = LeaseLock(db, ttl=30, heartbeat=10)
    conn, other = connect(db), connect(db)
    try:
        with lock:
            other.execute("UPDATE locks SET heartbeat=0")  # as if a long transaction had held it
            with conn:
                assert lock.renew(conn)
                assert other.execute("SELECT heartbeat FROM locks").fetchone()[0] == 0  # not before the commit
            assert other.execute("SELECT heartbeat FROM locks").fetchone()[0] > time.time() - LIVENESS
            other.execute("UPDATE locks SET owner='someone-else', generation=generation+1")
            with conn:
                assert not lock.renew(conn)
        assert not lock.renew(conn)  # not held at all
    finally:
        conn.close()
        other.close()


@pytest.mark.parametrize("shared", [True, False], ids=["one-object", "object-per-thread"])
def test_threads_exclude_each_other(db: Path, shared: bool) -> None:
    threads, n = 4, 15
    common = LeaseLock(db)
    state = {"value": 0, "inside": 0, "max_inside": 0}

    def run() -> None:
        lock = common if shared else LeaseLock(db)
        for _ in range(n):
            with lock.hold(timeout=LIVENESS):
                state["inside"] += 1
                state["max_inside"] = max(state["max_inside"], state["inside"])
                value = state["value"]
                time.sleep(0.001)
                state["value"] = value + 1
                state["inside"] -= 1

    workers = [threading.Thread(target=run) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=LIVENESS * 2)
        assert not worker.is_alive()
    assert state["value"] == threads * n
    assert state["max_inside"] == 1
    assert row_of(db) is None


def test_shared_object_times_out_for_a_second_thread(db: Path) -> None:
    lock = LeaseLock(db)
    lock.acquire()
    seen: list[object] = []

    def contend() -> None:
        seen.append(lock.held)
        try:
            lock.acquire(timeout=0.1)
        except LockTimeout as exc:
            seen.append(exc)

    worker = threading.Thread(target=contend)
    worker.start()
    worker.join(timeout=LIVENESS)
    assert seen[0] is False
    assert len(seen) == 2 and isinstance(seen[1], LockTimeout)
    assert lock.held
    lock.release()
    assert row_of(db) is None


def test_migrates_a_fresh_database(tmp_path: Path) -> None:
    lock = LeaseLock(tmp_path / "new.sqlite")
    with lock:
        assert held_row(tmp_path / "new.sqlite")[1] == os.getpid()


@pytest.mark.parametrize(("ttl", "heartbeat"), [(1.0, 1.0), (1.0, 2.0), (0.0, 0.0), (5.0, -1.0)])
def test_rejects_heartbeat_that_cannot_keep_the_lease(
    tmp_path: Path, ttl: float, heartbeat: float
) -> None:
    with pytest.raises(ValueError):
        LeaseLock(tmp_path / "x.sqlite", ttl=ttl, heartbeat=heartbeat)
