"""The background worker and queue with real OS processes.

Workers here are real `realmem worker` processes (python -m realmem.interface.cli) talking to the fake
endpoints served by this test process.  Waiting loops have generous bounds only so a broken
build fails instead of hanging; nothing asserts on timing.  Every worker a test starts is
ended by its pid.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from realmem.app import Realmem
from realmem.events import log as evlog
from realmem.events import types as ev
from realmem.jobs import queue, worker
from realmem.projections.urgency import urgency_key
from realmem.gate.remember import remember
from realmem.write.attached import open_attached

HELPERS = Path(__file__).parents[1] / "helpers"
BOUND = 120.0  # seconds: a safety bound for waits, not an assertion


@pytest.fixture
def servers(servers, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """conftest's fake servers, with backoff and idle times short enough for a test."""
    monkeypatch.setenv("REALMEM_QUEUE_BASEBACKOFFSECONDS", "0.2")
    monkeypatch.setenv("REALMEM_QUEUE_MAXBACKOFFSECONDS", "1")
    monkeypatch.setenv("REALMEM_WORKER_IDLESECONDS", "1")
    return servers


@pytest.fixture
def reap(home: Path):  # type: ignore[no-untyped-def]
    """Ends any worker this test started (by pid) at teardown."""
    started: list[int] = []
    yield started
    st = queue.status_for(home)
    pids = set(started) | ({st["pid"]} if st["alive"] and st["pid"] else set())
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


def start_worker(home: Path) -> subprocess.Popen:  # type: ignore[type-arg]
    return subprocess.Popen(queue.worker_command(home), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=dict(os.environ))


def wait_until(pred, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + BOUND
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.05)


def pending(app: Realmem) -> int:
    return app.conn.execute("SELECT count(*) FROM pending").fetchone()[0]


def test_judge_down_queued_then_a_worker_process_handles_it(home: Path, repo: Path, servers, reap):
    s1, _, _ = servers
    s1.down()
    app = open_attached(home, repo)
    try:
        out = remember(app, "Run e2e tests with pnpm test:e2e", "`pnpm test:e2e` needs Docker running.",
                       paths=["packages/web"])
        assert out.queued and pending(app) == 1
        s1.up()
        proc = start_worker(home)
        reap.append(proc.pid)
        _, err = proc.communicate(timeout=BOUND)
        assert proc.returncode == 0, err.decode()
        assert pending(app) == 0
        mems = app.memories()
        assert [m.caption for m in mems] == ["Run e2e tests with pnpm test:e2e"]
        assert mems[0].paths == ["packages/web"]
        done = [e.event for e in evlog.read(app.conn) if isinstance(e.event, ev.CandidateDone)]
        assert [d.outcome for d in done] == ["add"]
        urg = app.conn.execute("SELECT valid_for, source FROM urgency").fetchall()
        assert urg == [(urgency_key(mems[0]), "remember")]
    finally:
        app.close()


@pytest.mark.parametrize("judge", ["semif", "chat"])
def test_a_running_worker_retries_a_due_candidate_once_the_judge_is_back(home: Path, repo: Path, servers, reap,
                                                                        judge: str):
    s1, _, chat = servers
    down = s1 if judge == "semif" else chat  # the chat judge is the chat fake answering from s1's scripts
    down.down()
    app = open_attached(home, repo)
    try:
        assert remember(app, "Lint with ruff", "Run `ruff check .` before committing.").queued
        attempts = lambda: app.conn.execute("SELECT coalesce(max(attempts), 0) FROM pending").fetchone()[0]  # noqa: E731
        proc = start_worker(home)
        reap.append(proc.pid)
        wait_until(lambda: attempts() >= 1, "the worker's first try, with the judge down")
        down.up()  # from here only the worker's loop can retry it: no event calls for it again
        wait_until(lambda: pending(app) == 0, "the due candidate retried by the running worker")
        assert [m.caption for m in app.memories()] == ["Lint with ruff"]
    finally:
        app.close()


def schema_fact(app):  # type: ignore[no-untyped-def]
    """A user-requested fact, stored as an add (no judge, embedder down: work left queued)."""
    out = remember(app, "Schema lives in db/schema.sql", "Edit `db/schema.sql`, then run `make migrate`.",
                   paths=["db"], user_requested=True)
    assert out.action == "add"
    return out.memory


def test_worker_rederives_work_after_the_queue_db_is_deleted(home: Path, repo: Path, servers, reap,
                                                             monkeypatch: pytest.MonkeyPatch):
    s1, emb, _ = servers
    monkeypatch.delenv("REALMEM_SEMIF_URL")  # hand-added memory: no judge, so no urgency yet
    monkeypatch.setenv("REALMEM_JUDGE_FALLBACK", "queue")  # nor the chat judge
    emb.down()
    app = open_attached(home, repo)
    try:
        m = schema_fact(app)
        assert app.conn.execute("SELECT count(*) FROM urgency").fetchone()[0] == 0
        queue.enqueue_embed(app)
        queue.enqueue_urgency(app)
        assert queue.worker_status(app)["pending_tasks"] >= 2  # remember enqueued an embed too
        queue.queue_path(home).unlink()  # the transport is not the truth
        for extra in ("-wal", "-shm"):
            Path(str(queue.queue_path(home)) + extra).unlink(missing_ok=True)
        queue._HUEYS.clear()
        emb.up()
        monkeypatch.setenv("REALMEM_SEMIF_URL", s1.url)
        s1.script({"path_urgency": {"probabilities": [0.1, 0.1, 0.8]}})
        proc = start_worker(home)
        reap.append(proc.pid)
        _, err = proc.communicate(timeout=BOUND)
        assert proc.returncode == 0, err.decode()
        from realmem.read import embedder
        assert embedder.missing(app) == []
        row = app.conn.execute("SELECT valid_for, score, source FROM urgency WHERE id=?", (m.id,)).fetchone()
        assert row[0] == urgency_key(m) and row[1] == pytest.approx(1.7) and row[2] == "background"
        # a hand edit makes it stale; the next worker re-judges it
        from realmem.write import memories
        memories.edit(app, (m.store, m.id), content="Edit `db/schema.sql`, then run `make migrate-all`.")
        proc = start_worker(home)
        reap.append(proc.pid)
        proc.communicate(timeout=BOUND)
        m2 = app.memory((m.store, m.id))
        row = app.conn.execute("SELECT valid_for FROM urgency WHERE id=?", (m.id,)).fetchone()
        assert row[0] == urgency_key(m2) != urgency_key(m)
    finally:
        app.close()


def test_only_one_worker_per_home(home: Path, repo: Path, servers, reap, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("REALMEM_WORKER_IDLESECONDS", "600")
    app = open_attached(home, repo)
    try:
        first = queue.ensure_worker(app)
        assert first["started"] is True
        reap.append(first["pid"])
        wait_until(lambda: queue.worker_status(app)["alive"], "the worker to take its lock")
        assert queue.worker_status(app)["pid"] == first["pid"]
        again = queue.ensure_worker(app)
        assert again["started"] is False and again["pid"] == first["pid"]
        # a second worker started by hand exits at once, leaving the first alone
        second = start_worker(home)
        reap.append(second.pid)
        assert second.wait(timeout=BOUND) == 0
        assert queue.worker_status(app)["pid"] == first["pid"]
        os.kill(first["pid"], signal.SIGTERM)
        wait_until(lambda: not queue.worker_status(app)["alive"], "the worker to stop")
    finally:
        app.close()


WORDS = ["amber", "birch", "cobalt", "dune", "ember", "fjord", "garnet", "harbor", "indigo", "juniper",
         "kelp", "lagoon", "magma", "nectar", "onyx", "prairie"]


def fact(word: str) -> str:
    """Facts the heuristic judge sees as unrelated (word overlap well below its merge bar)."""
    return f"The {word} module owner::`deploy-{word}.sh` ships {word} nightly."


def run_processes(home: Path, repo: Path, facts_per_proc: list[list[str]]) -> list[list[dict]]:  # type: ignore[type-arg]
    procs = [subprocess.Popen([sys.executable, str(HELPERS / "rememberworker.py"), str(home), str(repo), *facts],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ))
             for facts in facts_per_proc]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=BOUND)
        assert p.returncode == 0, err.decode()
        results.append([json.loads(line) for line in out.decode().splitlines() if line.strip()])
    return results


def test_eight_processes_remember_concurrently_through_the_worker(home: Path, repo: Path, servers, reap,
                                                                  monkeypatch: pytest.MonkeyPatch):
    s1, _, _ = servers
    monkeypatch.setenv("REALMEM_WORKER_AUTOSTART", "1")
    common1 = "Build with make::Run `make build` before `make test`; the Makefile builds every package."
    common2 = "Format with prettier::Run `pnpm format` to apply prettier to the whole repository."
    # Phase 1: judge up, 8 processes at once, one shared fact each plus one of their own.
    phase1 = run_processes(home, repo, [[common1, fact(WORDS[i])] for i in range(8)])
    actions1 = sorted(r[0]["action"] for r in phase1)
    assert actions1 == ["add"] + ["reinforce"] * 7
    assert all(r[1]["action"] == "add" for r in phase1)
    # Phase 2: judge down: everything is queued, then the automatically started worker
    # processes the queue once the judge is back.
    s1.down()
    phase2 = run_processes(home, repo, [[common2, fact(WORDS[i + 8])] for i in range(8)])
    assert all(r["action"] == "queue" for rs in phase2 for r in rs)
    app = open_attached(home, repo)
    try:
        assert pending(app) == 16
        wait_until(lambda: queue.worker_status(app)["alive"], "a worker started by a remembering process")
        reap.append(queue.worker_status(app)["pid"])
        s1.up()
        wait_until(lambda: pending(app) == 0, "the worker to drain the queue")
        wait_until(lambda: not queue.worker_status(app)["alive"], "the idle worker to exit")
        mems = app.memories()
        captions = sorted(m.caption for m in mems)
        assert len(captions) == len(set(captions)) == 18
        assert {"Build with make", "Format with prettier"} <= set(captions)
        for w in WORDS:
            assert f"The {w} module owner" in captions
        files = sorted(p.name for p in app.store_dir(app.project.shared_store).glob("*.md"))
        assert len(files) == 18
        decided = [e.event for e in evlog.read(app.conn) if isinstance(e.event, ev.Decided)]
        assert sum(1 for d in decided if d.action == "queue") == 16
        assert sorted(d.action for d in decided if d.action != "queue").count("reinforce") == 14
    finally:
        app.close()


def test_worker_run_in_process_exits_when_idle(home: Path, servers):
    assert worker.run(home, idle_seconds=0.2) == 0


@pytest.mark.parametrize("damage", ["header", "pages"])
def test_a_damaged_queue_db_is_set_aside_and_its_work_rederived(home: Path, repo: Path, servers, reap,
                                                               monkeypatch: pytest.MonkeyPatch, damage: str):
    s1, emb, _ = servers
    monkeypatch.delenv("REALMEM_SEMIF_URL")
    monkeypatch.setenv("REALMEM_JUDGE_FALLBACK", "queue")  # no judge at all
    emb.down()
    app = open_attached(home, repo)
    try:
        schema_fact(app)
        for _ in range(200):  # a queue of several pages
            queue.enqueue_embed(app)
        h, _ = queue._HUEYS.pop(str(home.resolve()))
        h.storage.sql("PRAGMA wal_checkpoint(TRUNCATE)")
        h.storage.close()
        path = queue.queue_path(home)
        data = bytearray(path.read_bytes())
        assert len(data) >= 3 * 4096
        start = 0 if damage == "header" else 4096  # the whole file, or every page after the first
        data[start:] = os.urandom(len(data) - start)
        path.write_bytes(bytes(data))
        emb.up()
        proc = start_worker(home)
        reap.append(proc.pid)
        _, err = proc.communicate(timeout=BOUND)
        assert proc.returncode == 0, err.decode()
        assert b"Traceback" not in err
        from realmem.read import embedder
        assert embedder.missing(app) == []  # the embed the damaged queue held was re-derived
        [aside] = home.glob("queue.sqlite.damaged-*")
        assert aside.read_bytes()[start:] == bytes(data[start:])  # kept as it was, for a look
        assert queue.pending_tasks(home) == 0
        warned = [json.loads(line) for line in (home / "worker.log").read_text().splitlines()
                  if '"queue.damaged"' in line]
        assert [w["moved_to"] for w in warned] == [str(aside)]
    finally:
        app.close()
