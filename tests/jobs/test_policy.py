"""Jobs follow the log (realmem/jobs/policy.py): the follower's position and what it enqueues.

Real SQLite files and a real Huey queue database; the endpoints are configured (their URLs)
but never called: following only decides which wake-ups to send.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from realmem.write import memories
from realmem.app import Realmem
from realmem.events import log
from realmem.events import types as ev
from realmem.jobs import policy, queue
from realmem.write.attached import open_attached
from realmem.write.observe import scan_stores


@pytest.fixture
def app(home: Path, repo: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("REALMEM_EMBEDDING_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("REALMEM_SEMIF_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("REALMEM_WORKER_AUTOSTART", "0")
    queue._HUEYS.clear()
    a = open_attached(home, repo)
    yield a
    a.close()
    queue._HUEYS.clear()


def add(app: Realmem, caption: str, paths: list[str]):  # type: ignore[no-untyped-def]
    store, stored = memories.place(app, "shared", paths)
    return memories.add(app, caption, f"{caption}: the details.", store=store, stored_paths=stored, source="add")


def follow(app: Realmem) -> set[str]:
    return policy.follow(app.conn, app.home, app.config)


def tasks(app: Realmem) -> int:
    return queue.pending_tasks(app.home)


def test_a_new_memory_is_embedded_and_judged_and_the_position_advances(app: Realmem) -> None:
    assert policy.position(app.conn) == 0
    add(app, "Migrations live in db/", ["db"])
    assert follow(app) == {"embed", "urgency"}
    assert policy.position(app.conn) == log.last_seq(app.conn)
    assert tasks(app) == 2
    assert follow(app) == set() and tasks(app) == 2  # followed once: nothing sent twice


def test_without_endpoints_nothing_is_sent_but_the_position_still_moves(app: Realmem,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REALMEM_EMBEDDING_URL")
    monkeypatch.delenv("REALMEM_SEMIF_URL")
    app.config.reload()
    add(app, "Migrations live in db/", ["db"])
    assert follow(app) == set()
    assert policy.position(app.conn) == log.last_seq(app.conn) and tasks(app) == 0


def test_a_store_wide_memory_needs_no_urgency(app: Realmem) -> None:
    add(app, "Use pnpm, not npm", ["."])
    assert follow(app) == {"embed"}


def test_an_edit_a_move_and_an_outside_change_are_followed(app: Realmem) -> None:
    m = add(app, "Migrations live in db/", ["db"])
    follow(app)
    memories.edit(app, (m.store, m.id), content="Run make migrate after editing db/schema.sql.")
    assert follow(app) == {"embed", "urgency"}
    moved = memories.move(app, (m.store, m.id), app.project.personal_store)
    assert follow(app) == {"embed", "urgency"}
    path = app.store_dir(moved.store) / moved.file
    path.write_text(path.read_text().replace("make migrate", "make migrate-all"))
    assert [type(e.event) for e in scan_stores(app)] == [ev.FileObserved]
    assert follow(app) == {"embed", "urgency"}


def test_a_queued_candidate_is_retried(app: Realmem) -> None:
    app.emit([ev.CandidateQueued("c1", None, str(app.cwd), {"caption": "x", "content": "y"}, "judge down",
                                 log.now_iso())])
    assert follow(app) == {"retry"}


@pytest.mark.parametrize("chat, fallback, retried", [
    ("rewriter", "chat", True),   # a chat model judges when System One is not set
    ("bridge", "chat", True),     # Pi's model, through a live bridge
    ("none", "chat", False),      # nothing can judge: the candidate waits, no wake-up is wasted
    ("rewriter", "queue", False),  # the user asked for System One only
])
def test_a_queued_candidate_is_retried_by_the_chat_judge(app: Realmem, monkeypatch: pytest.MonkeyPatch, chat: str,
                                                       fallback: str, retried: bool) -> None:
    monkeypatch.delenv("REALMEM_SEMIF_URL")
    monkeypatch.setenv("REALMEM_JUDGE_FALLBACK", fallback)
    if chat == "rewriter":
        monkeypatch.setenv("REALMEM_REWRITER_URL", "http://127.0.0.1:9")
    elif chat == "bridge":
        (app.home / "bridge").mkdir()
        (app.home / "bridge" / "1.json").write_text(json.dumps({"url": "http://127.0.0.1:9", "token": "t",
                                                                "pid": os.getpid()}))
    app.config.reload()
    app.emit([ev.CandidateQueued("c1", None, str(app.cwd), {"caption": "x", "content": "y"}, "judge down",
                                 log.now_iso())])
    assert follow(app) == ({"retry"} if retried else set())


def test_events_that_call_for_nothing_do_not_write_until_many(app: Realmem, monkeypatch: pytest.MonkeyPatch) -> None:
    m = add(app, "Migrations live in db/", ["db"])
    follow(app)
    before = policy.position(app.conn)
    app.emit([ev.RecallHit([(m.store, m.id)])])
    assert follow(app) == set() and policy.position(app.conn) == before
    monkeypatch.setattr(policy, "ADVANCE_AFTER", 1)
    assert follow(app) == set() and policy.position(app.conn) == log.last_seq(app.conn)


def test_a_wake_up_that_cannot_be_sent_leaves_the_position(app: Realmem) -> None:
    add(app, "Migrations live in db/", ["db"])
    queue.queue_path(app.home).mkdir()  # the queue database cannot be opened
    with pytest.raises(queue.EnqueueFailed):
        follow(app)
    assert policy.position(app.conn) == 0
    assert policy.follow_app(app) == set()  # a front end is never failed by it
    queue.queue_path(app.home).rmdir()
    queue._HUEYS.clear()
    assert follow(app) == {"embed", "urgency"}  # sent on the next follow
    assert policy.position(app.conn) == log.last_seq(app.conn)


def test_a_deleted_memory_calls_for_nothing(app: Realmem) -> None:
    m = add(app, "Migrations live in db/", ["db"])
    memories.forget(app, [(m.store, m.id)])
    assert follow(app) == set()


def test_a_process_with_a_huey_counts_through_it_never_through_a_second_sqlite(app: Realmem,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """queue.sqlite is Huey's, read through the stdlib's SQLite; apsw bundles another copy.  Two
    copies with the file open in one process break SQLite's POSIX locks (a reset -shm, SIGBUS in
    the eight-process test), so apsw counts only in a process that has no Huey for the home."""
    import apsw

    opened: list[str] = []
    real = apsw.Connection

    def spy(path: str, *args: object, **kwargs: object) -> apsw.Connection:
        opened.append(Path(path).name)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(queue.apsw, "Connection", spy)
    assert tasks(app) == 0  # no queue yet: nothing opened
    add(app, "Migrations live in db/", ["db"])
    assert follow(app) == {"embed", "urgency"}  # this process now has Huey's connection
    assert tasks(app) == 2 and "queue.sqlite" not in opened
    queue._HUEYS.clear()  # a process that never sent a wake-up (`realmem status`)
    assert tasks(app) == 2 and opened.count("queue.sqlite") == 1


def test_the_event_names_that_call_for_work_are_those_of_their_classes() -> None:
    """The policy names the events it follows by their stored type (so a command that appends
    none never makes the event classes): the names must be those classes'."""
    assert policy.WORK_TYPES == tuple(cls.TYPE for cls in (ev.MemoryAdded, ev.MemoryEdited, ev.MemoryMoved,
                                                            ev.FileObserved, ev.CandidateQueued, ev.CandidateRetried))
