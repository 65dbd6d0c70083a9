"""A separate OS process for tests/e2e/test_core_processes.py: writes through the real core.

Speaks one JSON object per line on stdout; logs go to stderr.

    coreworker.py add HOME CWD N GO TAG
        wait until the file GO exists, open realmem, add N memories (captions shared by all
        workers, so file names collide), print {"ids": [...]}
    coreworker.py hold HOME CWD
        open realmem, take the write lock, print {"held": true, "pid": ...}, sleep forever
    coreworker.py write-after-hold HOME CWD
        open realmem (waits for the lock), add one memory, print {"id": ...}
    coreworker.py edit-loop HOME CWD STORE ID
        edit the memory's content in a loop forever, printing {"edits": n} after each one
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import structlog

from realmem.write import memories
from realmem.app import Realmem
from realmem.write.attached import open_attached


def emit(**fields: object) -> None:
    print(json.dumps(fields), flush=True)


def add_one(app: Realmem, caption: str, content: str, scope: str = "shared"):
    store, stored = memories.place(app, scope, None)
    return memories.add(app, caption, content, store=store, stored_paths=stored, source="add")


def cmd_add(home: str, cwd: str, n: int, go: Path, tag: str) -> None:
    while not go.exists():
        time.sleep(0.005)
    app = open_attached(home, cwd)
    made = []
    for i in range(n):
        scope = ("shared", "personal", "global")[i % 3]
        m = add_one(app, f"Common caption {i}", f"written by {tag} as number {i} (pid {os.getpid()})", scope)
        made.append([m.store, m.id])
    app.close()
    emit(ids=made)


def cmd_hold(home: str, cwd: str) -> None:
    app = open_attached(home, cwd)
    app.lock.acquire()
    emit(held=True, pid=os.getpid())
    while True:
        time.sleep(3600)


def cmd_write_after_hold(home: str, cwd: str) -> None:
    app = open_attached(home, cwd)
    m = add_one(app, "Written after the takeover", "the lock of a killed process was taken over")
    app.close()
    emit(id=m.id, store=m.store)


def cmd_edit_loop(home: str, cwd: str, store: str, mem_id: str) -> None:
    app = open_attached(home, cwd, scan=False)
    n = 0
    while True:
        n += 1
        # Growing and shrinking content, so a torn write could not look like a valid file.
        body = f"edit {n}\n\n" + ("lorem ipsum dolor sit amet " * (1 + (n * 37) % 250))
        memories.edit(app, (store, mem_id), content=body)
        emit(edits=n)


def main() -> int:
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    mode, *args = sys.argv[1:]
    if mode == "add":
        cmd_add(args[0], args[1], int(args[2]), Path(args[3]), args[4])
    elif mode == "hold":
        cmd_hold(args[0], args[1])
    elif mode == "write-after-hold":
        cmd_write_after_hold(args[0], args[1])
    elif mode == "edit-loop":
        cmd_edit_loop(*args)
    else:
        print(f"unknown mode {mode}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
