"""A separate OS process for tests/storage/test_lock.py: contends for, holds, or loses a LeaseLock.

Speaks one JSON object per line on stdout; logs go to stderr as JSON lines, so tests can
check what the lock reported without mixing it into the protocol.

    lockworker.py count DB OUT N GO   N locked read-modify-write increments (after GO exists)
    lockworker.py hold DB [--ttl S] [--heartbeat S] [--timeout S]
        acquire, report, then obey stdin lines: "held" -> {"held": bool}, "release" -> exit
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

import structlog

from realmem.storage.db import connect
from realmem.storage.lock import LeaseLock, LockTimeout


def emit(**fields: object) -> None:
    print(json.dumps(fields), flush=True)


def count(db: Path, out: Path, n: int, go: Path) -> None:
    """Increments that lose updates and interleave lines unless the lock serialises them."""
    lock = LeaseLock(db)
    conn = connect(db, migrate=False)
    while not go.exists():
        time.sleep(0.005)
    for i in range(n):
        with lock.hold(timeout=120):
            value = conn.execute("SELECT n FROM counter WHERE id = 1").fetchall()[0][0]
            assert isinstance(value, int)
            time.sleep(random.uniform(0.0005, 0.003))
            conn.execute("UPDATE counter SET n = ? WHERE id = 1", (value + 1,))
            with out.open("a", encoding="utf-8") as f:
                f.write(f"{value + 1} {os.getpid()} ")
                f.flush()
                time.sleep(0.0005)
                f.write(f"{i}\n")
    emit(done=n)


def hold(db: Path, ttl: float, heartbeat: float, timeout: float | None) -> int:
    lock = LeaseLock(db, ttl=ttl, heartbeat=heartbeat)
    try:
        lock.acquire(timeout)
    except LockTimeout as exc:
        emit(timeout=True, holder=exc.holder)
        return 3
    row = lock.holder()
    emit(
        acquired=True,
        pid=os.getpid(),
        owner=row["owner"] if row else None,
    )
    for line in sys.stdin:
        command = line.strip()
        if command == "held":
            emit(held=lock.held)
        elif command == "release":
            break
    lock.release()
    emit(released=True)
    return 0


def main() -> int:
    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.processors.JSONRenderer()],
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="mode", required=True)
    c = sub.add_parser("count")
    c.add_argument("db", type=Path)
    c.add_argument("out", type=Path)
    c.add_argument("n", type=int)
    c.add_argument("go", type=Path)
    h = sub.add_parser("hold")
    h.add_argument("db", type=Path)
    h.add_argument("--ttl", type=float, default=30.0)
    h.add_argument("--heartbeat", type=float, default=5.0)
    h.add_argument("--timeout", type=float, default=None)
    args = parser.parse_args()
    if args.mode == "count":
        count(args.db, args.out, args.n, args.go)
        return 0
    return hold(args.db, args.ttl, args.heartbeat, args.timeout)


if __name__ == "__main__":
    sys.exit(main())
