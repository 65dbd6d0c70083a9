"""`realmem rpc` over real stdio pipes: the child is `python -m realmem.interface.cli --home H rpc`, the
endpoints are the fake servers on 127.0.0.1 (real sockets), the stores are real SQLite and a
real git repository.  The contract is docs/rpc.md.

Slow judges are made deterministic, not timed: a scripted System One question blocks in the
fake's handler thread until the test releases it, so "path_notes answers while remember waits"
and "cancel during consolidate" never depend on how fast anything runs.
"""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from realmem.stores import ids
from realmem.write import memories
from realmem.events import log as evlog
from realmem.events import types as ev
from realmem.fakes import FakeSystemOne
from realmem.interface import rpc
from realmem.write.attached import open_attached

from helpers.rpc_child import WAIT, Gate, child_env, spawn  # noqa: F401 (fixtures)


@pytest.fixture
def semif(child_env: dict[str, str]) -> Iterator[FakeSystemOne]:
    with FakeSystemOne() as s1:
        child_env["REALMEM_SEMIF_URL"] = s1.url
        yield s1


# --- protocol ------------------------------------------------------------------------------------

def test_hello(spawn: Any, home: Path) -> None:
    c = spawn()
    res = c.call("hello")
    assert res["pid"] == c.proc.pid
    assert res["home"] == str(home.resolve())
    assert isinstance(res["version"], str) and res["version"]
    assert res["hidden_tools"] == ["ctx_memory"]
    assert res["path_notes"] == {"maxFull": 2, "maxCaptions": 6, "charBudget": 2400}
    assert c.close() == 0


def test_errors_by_code(spawn: Any, repo: Path) -> None:
    c = spawn()
    err = c.error("no_such_method")
    assert err["code"] == -32601 and "no_such_method" in err["message"]
    # a bad argument value is a usage error (2), on the slow thread as on the main one
    err = c.error("list", {"cwd": str(repo), "page": "two"})
    assert err["code"] == 2 and "page must be a whole number" in err["message"]
    err = c.error("recall", {"cwd": str(repo), "queries": ["x"], "page": "two"})
    assert err["code"] == 2
    err = c.error("settings_models", {"endpoint": "bogus"})
    assert err["code"] == 2 and "bogus" in err["message"]
    # refused or not found: code 1 with the user-facing message
    err = c.error("show", {"cwd": str(repo), "id": "AZJrPlwafS-aSxwtPk9aaw"})
    assert err["code"] == 1 and "AZJrPlwafS-aSxwtPk9aaw" in err["message"]
    err = c.error("remember", {"cwd": str(repo), "caption": "", "content": "x"})
    assert err["code"] == 1 and "caption is empty" in err["message"]
    # a request whose params are not an object is an invalid request
    msg = c.response(c.send("status", [str(repo)]))
    assert msg["error"]["code"] == -32600
    # parse error: id null, and the child keeps serving
    c.send_raw("{not json")
    c.wait_for(lambda: None in c.responses, "parse error")
    assert c.responses[None]["error"]["code"] == -32700
    assert c.call("hello")["pid"] == c.proc.pid
    # a notification (no id) is served but never answered
    before = len(c.order)
    c.send("status", {"cwd": str(repo)}, mid=None)
    assert c.call("hello")
    assert len(c.order) == before + 1
    assert c.close() == 0


def test_stdin_close_exits_zero_and_stdout_is_only_json(spawn: Any, repo: Path) -> None:
    c = spawn()
    for method, params in [("hello", {}), ("status", {"cwd": str(repo)}), ("prompt_section", {"cwd": str(repo)}),
                           ("list", {"cwd": str(repo)})]:
        c.call(method, params)
    assert c.close() == 0
    assert all(json.loads(line)["jsonrpc"] == "2.0" for line in c.raw)


def test_a_pending_slow_request_is_answered_before_exit(spawn: Any, repo: Path, semif: FakeSystemOne) -> None:
    gate = Gate("importance")
    semif.script({"importance": gate})
    c = spawn(REALMEM_WORKER_AUTOSTART="0")
    mid = c.send("remember", {"cwd": str(repo), "session": "s", "caption": "Build with make",
                              "content": "Run `make build` to build the project.", "user_requested": True})
    gate.wait_entered()
    assert c.proc.stdin is not None
    c.proc.stdin.close()  # the adapter goes away while remember waits for the judge
    gate.release()
    assert c.close() == 0
    assert c.responses[mid]["result"]["details"]["decision"] == "add"


# --- the slow thread ------------------------------------------------------------------------------

def test_path_notes_answer_while_remember_waits_for_the_judge(spawn: Any, repo: Path, home: Path,
                                                              semif: FakeSystemOne) -> None:
    (repo / "src" / "db").mkdir(parents=True)
    (repo / "src" / "db" / "schema.sql").write_text("create table t();\n", encoding="utf-8")
    with open_attached(home, repo) as a:
        note = memories.add(a, "Schema changes need migrations", "Add a migration for every schema change.",
                            store=a.project.shared_store, stored_paths=["src/db"], source="add")  # type: ignore[union-attr]
    gate = Gate("importance")
    semif.script({"importance": gate})
    c = spawn(REALMEM_WORKER_AUTOSTART="0")
    c.call("session_start", {"cwd": str(repo), "session": "s"})
    slow = c.send("remember", {"cwd": str(repo), "session": "s", "caption": "Deploy with fly",
                               "content": "Deploy with `fly deploy` from the repository root.", "user_requested": True})
    gate.wait_entered()  # remember is now blocked on the judge
    quick = c.send("path_notes", {"cwd": str(repo), "session": "s", "tool_name": "read",
                                  "input": {"path": "src/db/schema.sql"}, "shown": []})
    notes = c.response(quick)["result"]
    assert notes["shown"] == [ids.short(note.id)] and note.caption in notes["text"]
    status = c.call("status", {"cwd": str(repo)})  # other quick methods too
    assert "shared" in status["text"]
    # The note's count is written after its answer went out, before the next request ran.
    with open_attached(home, repo, scan=False) as a:
        assert a.counters((note.store, note.id)) == (0, 1)
    assert slow not in c.responses
    gate.release()
    res = c.response(slow)["result"]
    assert res["details"]["decision"] == "add" and res["details"]["id"]
    assert c.order.index(quick) < c.order.index(slow)
    assert c.close() == 0


def test_slow_requests_are_served_in_order(spawn: Any, repo: Path, semif: FakeSystemOne) -> None:
    gate = Gate("importance")
    semif.script({"importance": gate})
    c = spawn(REALMEM_WORKER_AUTOSTART="0")
    first = c.send("remember", {"cwd": str(repo), "session": "s", "caption": "Lint with ruff",
                                "content": "Run `ruff check .` before committing.", "user_requested": True})
    gate.wait_entered()
    second = c.send("manage_list", {"cwd": str(repo)})
    third = c.send("recall", {"cwd": str(repo), "queries": ["ruff"]})
    quick = c.send("list", {"cwd": str(repo)})  # a quick method: answered at once, before remember
    c.response(quick)
    assert c.responses[quick]["result"]["details"]["total"] == 0
    gate.release()
    c.response(third)
    assert c.order.index(quick) < c.order.index(first) < c.order.index(second) < c.order.index(third)
    assert [i["caption"] for i in c.responses[second]["result"]["items"]] == ["Lint with ruff"]
    assert "Lint with ruff" in c.responses[third]["result"]["text"]
    assert c.close() == 0


# --- progress and cancel ---------------------------------------------------------------------------

def seed(home: Path, repo: Path, n: int) -> list[Any]:
    with open_attached(home, repo) as a:
        return [memories.add(a, f"Temporary note {i}", f"Work in progress item number {i} for today.",
                             store=a.project.shared_store, stored_paths=["."], source="add")  # type: ignore[union-attr]
                for i in range(n)]


def files_and_events(home: Path, repo: Path) -> tuple[dict[str, str], int, int]:
    with open_attached(home, repo, scan=False) as a:
        d = a.store_dir(a.project.shared_store)  # type: ignore[union-attr]
        files = {p.name: p.read_text(encoding="utf-8") for p in sorted(d.glob("*.md"))}
        return files, a.conn.execute("SELECT count(*) FROM memories").fetchone()[0], evlog.last_seq(a.conn)


def test_consolidate_progress_then_cancel_writes_nothing(spawn: Any, repo: Path, home: Path,
                                                        semif: FakeSystemOne) -> None:
    seed(home, repo, 4)
    before = files_and_events(home, repo)
    gate = Gate("forget", at=2, spec={"noul": 0.95})  # every memory would be forgotten
    semif.script({"forget": gate})
    c = spawn(REALMEM_WORKER_AUTOSTART="0")
    mid = c.send("consolidate", {"cwd": str(repo), "session": "s", "paths": False, "progress_token": "tok-1"})
    gate.wait_entered(2)  # the first memory is reviewed; the second review waits for the judge
    progress = c.wait_for(lambda: [n for n in c.notifications if n.get("method") == "progress"], "progress")
    p = progress[0]["params"]
    assert p["token"] == "tok-1" and p["done"] == 1 and p["total"] == 5 and "review" in p["message"]
    c.send("cancel", {"token": "tok-1"}, mid=None)
    assert c.call("hello")  # the reader has taken the cancel: it reads lines in order
    gate.release()
    err = c.response(mid)["error"]
    assert err == {"code": 1, "message": "cancelled"}
    assert files_and_events(home, repo) == before
    # the token is free again: the same consolidation without a cancel writes
    done = c.call("consolidate", {"cwd": str(repo), "session": "s", "paths": False, "progress_token": "tok-1"})
    assert len(done["details"]["changes"]) == 4
    assert files_and_events(home, repo)[1] == 0
    assert c.close() == 0


def test_a_late_cancel_is_ignored(spawn: Any, repo: Path, home: Path, semif: FakeSystemOne) -> None:
    seed(home, repo, 2)
    semif.script({"forget": {"noul": 0.95}})
    c = spawn(REALMEM_WORKER_AUTOSTART="0")
    c.send("cancel", {"token": "tok-2"}, mid=None)  # before the request: no such request yet
    res = c.call("consolidate", {"cwd": str(repo), "session": "s", "paths": False, "progress_token": "tok-2"})
    assert len(res["details"]["changes"]) == 2
    toks = {n["params"]["token"] for n in c.notifications if n.get("method") == "progress"}
    assert toks == {"tok-2"}
    c.send("cancel", {"token": "tok-2"}, mid=None)  # after it finished: dropped
    seed(home, repo, 1)
    res = c.call("consolidate", {"cwd": str(repo), "session": "s", "paths": False, "progress_token": "tok-2"})
    assert len(res["details"]["changes"]) == 1
    assert c.close() == 0


def test_no_progress_without_a_token(spawn: Any, repo: Path, home: Path, semif: FakeSystemOne) -> None:
    seed(home, repo, 2)
    c = spawn(REALMEM_WORKER_AUTOSTART="0")
    c.call("consolidate", {"cwd": str(repo), "session": "s", "paths": False})
    assert c.notifications == []
    assert c.close() == 0


# --- session start over the pipe (spawns the worker, which the fixture cleans up) --------------------

def test_session_start_and_prompt_section_over_the_pipe(spawn: Any, repo: Path, home: Path) -> None:
    seed(home, repo, 1)
    c = spawn()
    res = c.call("session_start", {"cwd": str(repo), "session": "s"})
    assert res["project"]["root"] == str(repo) and res["project"]["key"].startswith("git-")
    assert res["queued"] == 0 and res["missing"] == 0 and res["gitignore"] is None
    first = c.call("prompt_section", {"cwd": str(repo)})["text"]
    assert first.startswith("<realmem>") and "Temporary note 0" in first
    assert c.call("prompt_section", {"cwd": str(repo)})["text"] == first
    assert c.close() == 0


def test_session_start_reads_a_large_backlog_in_the_background(spawn: Any, repo: Path, home: Path) -> None:
    """A pull bringing more fact files than session start reads up front: the answer and the
    prompt section come from what is already projected, and the files arrive soon after."""
    import time

    from realmem.write import observe
    from realmem.projections import files
    seed(home, repo, 1)
    with open_attached(home, repo, scan=False) as a:
        d = a.store_dir(a.project.shared_store)  # type: ignore[union-attr]
    total = max(observe.SYNC_FILES, observe.EMIT_BATCH) + 20  # more than one batch of appends
    for i in range(total):
        text = files.render(id=ids.new_id(), caption=f"Pulled fact {i}", paths=["."], created="2026-01-01T00:00:00.000Z",
                            updated="2026-01-01T00:00:00.000Z", content=f"Teammate's note {i}.")
        (d / f"pulled-{i}.md").write_text(text if i else text.replace("id: ", "idx: ", 1), encoding="utf-8")
    c = spawn()
    res = c.call("session_start", {"cwd": str(repo), "session": "s"})
    assert res["observing"] == total
    assert f"reading {total} new or changed fact files in the background" in res["notification"]
    assert "Temporary note 0" in c.call("prompt_section", {"cwd": str(repo)})["text"]
    deadline = time.monotonic() + WAIT
    while True:  # the background scan commits in batches: wait for the last one and the files it writes
        with open_attached(home, repo, scan=False) as a:
            n = a.conn.execute("SELECT count(*) FROM memories WHERE caption LIKE 'Pulled fact %'").fetchone()[0]
            pending = observe.backlog(a)
        if (n == total and pending == 0) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert n == total  # the one without an id was adopted with a fresh one
    assert pending == 0
    again = c.call("session_start", {"cwd": str(repo), "session": "s"})
    assert again["observing"] == 0 and again["notification"] is None
    assert c.close() == 0


# --- the recall hit, appended after the answer ----------------------------------------------------

def test_recall_hit_is_appended_after_the_answer_and_seen_by_the_next_request(spawn: Any, repo: Path,
                                                                               home: Path) -> None:
    """The reply counts the hit already; a list sent the moment that reply arrives (served by
    another thread of the child) shows the use count the hit added, and the log holds one
    RecallHit for it."""
    with open_attached(home, repo) as a:
        m = memories.add(a, "Lint with ruff", "Run `ruff check .` before committing.", store=a.project.shared_store,
                         stored_paths=["."], source="add")  # type: ignore[union-attr]
        before = evlog.last_seq(a.conn)
    c = spawn(REALMEM_WORKER_AUTOSTART="0")
    got = c.call("recall", {"cwd": str(repo), "queries": ["ruff"]})
    assert [(i["id"], i["used_count"]) for i in got["details"]["items"]] == [(ids.short(m.id), 1)]
    listed = c.call("list", {"cwd": str(repo)})
    assert [(i["id"], i["used_count"]) for i in listed["details"]["items"]] == [(ids.short(m.id), 1)]
    assert c.close() == 0
    with open_attached(home, repo, scan=False) as a:
        hits = [e.event for e in evlog.read(a.conn, before) if isinstance(e.event, ev.RecallHit)]
        assert [list(h.keys()) for h in hits] == [[(m.store, m.id)]]
        assert a.counters((m.store, m.id))[0] == 1


def test_recall_hit_is_kept_when_stdin_closes_right_after_the_answer(spawn: Any, repo: Path, home: Path) -> None:
    """The agent may end the session at once: the child appends the hit before it exits."""
    with open_attached(home, repo) as a:
        m = memories.add(a, "Lint with ruff", "Run `ruff check .` before committing.", store=a.project.shared_store,
                         stored_paths=["."], source="add")  # type: ignore[union-attr]
    c = spawn(REALMEM_WORKER_AUTOSTART="0")
    for _ in range(3):
        c.send("recall", {"cwd": str(repo), "queries": ["ruff"]})
    c.response(c.next_id)
    assert c.close() == 0
    with open_attached(home, repo, scan=False) as a:
        assert a.counters((m.store, m.id))[0] == 3


def test_a_request_waits_for_writes_deferred_past_an_earlier_reply(home: Path, repo: Path) -> None:
    """In process, deterministic: while one thread's write after its reply is held back, a
    request on another thread does not run; it runs once that write is done."""
    server = rpc.Server(str(home), io.StringIO())
    release, order = threading.Event(), []

    def first() -> None:
        server.later(lambda: (release.wait(WAIT), order.append("write")))
        server.handle({"jsonrpc": "2.0", "id": 1, "method": "hello", "params": {}})

    def second() -> None:
        server.handle({"jsonrpc": "2.0", "id": 2, "method": "list", "params": {"cwd": str(repo)}})
        order.append("list")

    a = threading.Thread(target=first)
    a.start()
    with server.deferred:
        assert server.deferred.wait_for(lambda: server.pending == 1, timeout=WAIT)
    b = threading.Thread(target=second)
    b.start()
    b.join(timeout=0.5)
    assert b.is_alive() and order == [], (b.is_alive(), order, server.pending)  # held behind the write, however long
    release.set()
    a.join(timeout=WAIT)
    b.join(timeout=WAIT)
    assert order == ["write", "list"] and server.pending == 0
    for apps in server.all_apps:
        for app in apps.values():
            app.close()


# --- path notes' counters, appended together once the child is idle ------------------------------

def test_path_note_counters_wait_for_idle_and_are_never_lost(spawn: Any, repo: Path, home: Path) -> None:
    """A path note's answer goes out before its counter is written.  The counters are then
    appended together: when the child is idle (another process sees them), before any other
    request (a `show` sent at once counts them), and when stdin closes."""
    import time
    with open_attached(home, repo) as a:
        ms = [memories.add(a, f"Note {i}", f"Fact {i} about module {i}.", store=a.project.shared_store,  # type: ignore[union-attr]
                           stored_paths=[f"src/m{i}"], source="add") for i in range(3)]
    c = spawn(REALMEM_WORKER_AUTOSTART="0")

    def note(i: int) -> None:
        out = c.call("path_notes", {"cwd": str(repo), "tool_name": "read", "input": {"path": f"src/m{i}/a.py"},
                                    "shown": []})
        assert out["shown"] == [ids.short(ms[i].id)]

    def injected(i: int) -> int:
        with open_attached(home, repo, scan=False) as a:
            return a.counters((ms[i].store, ms[i].id))[1]

    note(0)
    deadline = time.monotonic() + WAIT  # a hang guard: the child appends it once idle
    while injected(0) != 1:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    note(1)
    shown = c.call("show", {"cwd": str(repo), "id": ids.short(ms[1].id)})
    assert shown["details"]["path_inject_count"] == 1
    note(2)
    assert c.close() == 0
    assert [injected(i) for i in range(3)] == [1, 1, 1]
    with open_attached(home, repo, scan=False) as a:
        assert len([e for e in evlog.read(a.conn, 0) if isinstance(e.event, ev.PathNotesShown)]) == 3
