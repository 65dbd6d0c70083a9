"""Nothing lost: versioned writes, projections that heal, the exactly-once queue and the lease
only where needed, each proven with real OS processes (rpc children, CLI commands, workers).

Races are driven by explicit synchronisation, never by timing: both requests of a round are
written before either answer is read; a writer is killed or paused at a named step of its
write by the test-only ``REALMEM_TEST_FAULT`` hook (realmem/storage/faults.py); a paused process is
seen stopped in /proc before the test goes on.  Timeouts only bound liveness.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.rpc_child import WAIT, Child, Gate

from conftest import kill_workers, run_git
from realmem.stores import ids
from realmem.write import memories
from realmem.app import Realmem
from realmem.events import log as evlog
from realmem.events import types as ev
from realmem.fakes import FakeSystemOne
from realmem.jobs import worker
from realmem.stores.project import forget_cache
from realmem.projections import replay
from realmem.gate.remember import GONE_ATTEMPTS, remember
from realmem.write.attached import open_attached

ROUNDS = 20
COREWORKER = Path(__file__).parents[1] / "helpers" / "coreworker.py"


@pytest.fixture
def children(home: Path) -> Iterator[Any]:
    """rpc children (``realmem rpc``), each with its own extra environment; all are stopped and
    waited for before the test's directories go."""
    made: list[Child] = []

    def start(**extra: str) -> Child:
        env = {**os.environ, "REALMEM_HOME": str(home), "REALMEM_WORKER_AUTOSTART": "false", **extra}
        c = Child(home, env)
        made.append(c)
        return c
    try:
        yield start
    finally:
        for c in made:
            if c.proc.poll() is None:
                c.proc.send_signal(signal.SIGCONT)  # a paused child must be able to exit
                c.close()
        kill_workers(home)


def cli(home: Path, cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "REALMEM_HOME": str(home), "REALMEM_WORKER_AUTOSTART": "false", **env}
    return subprocess.run([sys.executable, "-m", "realmem.interface.cli", "--home", str(home), "--cwd", str(cwd), *args],
                          capture_output=True, text=True, env=full_env, timeout=WAIT)


def seed(home: Path, repo: Path, caption: str, content: str, scope: str = "shared") -> str:
    with open_attached(home, repo) as app:
        store, stored = memories.place(app, scope, None)
        return ids.short(memories.add(app, caption, content, store=store, stored_paths=stored, source="add").id)


def on_disk(app: Realmem) -> dict[tuple[str, str], str]:
    """(store, file name) -> text of every fact file in the visible stores."""
    out = {}
    for store in app.visible_stores():
        d = app.store_dir(store)
        if d.is_dir():
            out.update({(store, p.name): p.read_text(encoding="utf-8") for p in d.glob("*.md")})
    return out


def assert_consistent(home: Path, repo: Path, since: int = 0) -> None:
    """Files match the tables, nothing was mistaken for an outside change, replay agrees."""
    forget_cache()
    with open_attached(home, repo) as app:  # opening scans: a lost file would show up here
        expected = {(m.store, m.file): m.text for m in app.memories(include_quarantined=True)}
        assert on_disk(app) == expected
        observed = [e for e in evlog.read(app.conn, since) if isinstance(e.event, ev.FileObserved)]
        assert observed == [], observed
        assert replay.check(app).differences == []


def wait_stopped(proc: subprocess.Popen[str]) -> None:
    """Block until ``proc`` is stopped (SIGSTOP by its fault hook).  The deadline only bounds
    liveness (a build without the hook never pauses); nothing is timed."""
    deadline = time.monotonic() + WAIT
    while True:
        data = Path(f"/proc/{proc.pid}/stat").read_bytes()
        if data[data.rindex(b")") + 2:].split()[0] in (b"T", b"t"):
            return
        assert proc.poll() is None, "the process exited instead of pausing"
        assert time.monotonic() < deadline, "the process never paused at its fault point"
        time.sleep(0.01)


# --- item 1: versioned writes ------------------------------------------------------------------------

def test_edit_edit_keeps_both_changes(children: Any, home: Path, repo: Path) -> None:
    sid = seed(home, repo, "Original caption", "Original content")
    a, b = children(), children()
    for c in (a, b):  # both open and warm before the first round
        c.call("show", {"cwd": str(repo), "id": sid})
    for i in range(ROUNDS):
        ma = a.send("edit", {"cwd": str(repo), "session": "a", "id": sid, "caption": f"Caption of round {i}"})
        mb = b.send("edit", {"cwd": str(repo), "session": "b", "id": sid, "content": f"Content of round {i}"})
        ra, rb = a.response(ma), b.response(mb)
        assert "result" in ra and "result" in rb, (ra, rb)
        shown = a.call("show", {"cwd": str(repo), "id": sid})["details"]
        assert (shown["caption"], shown["content"]) == (f"Caption of round {i}", f"Content of round {i}"), \
            f"round {i}: an acknowledged edit was lost"
    assert_consistent(home, repo)


def test_forget_edit_never_brings_a_forgotten_memory_back(children: Any, home: Path, repo: Path) -> None:
    a, b = children(), children()
    for c in (a, b):
        c.call("status", {"cwd": str(repo)})
    outcomes: Counter[str] = Counter()
    for i in range(ROUNDS):
        sid = seed(home, repo, f"Doomed fact {i}", f"It will be forgotten in round {i}")
        mf = a.send("forget", {"cwd": str(repo), "session": "a", "ids": [sid]})
        me = b.send("edit", {"cwd": str(repo), "session": "b", "id": sid, "content": f"Edited in round {i}"})
        rf, re_ = a.response(mf), b.response(me)
        assert rf["result"]["details"]["forgotten"] == [sid], rf
        if "error" in re_:
            msg = re_["error"]["message"]
            assert re_["error"]["code"] == 1 and ("not found" in msg or "no memory with id" in msg), re_
            outcomes["edit refused"] += 1
        else:
            outcomes["edit first"] += 1
        err = a.error("show", {"cwd": str(repo), "id": sid})
        assert err["code"] == 1, f"round {i}: the forgotten memory came back"
    assert sum(outcomes.values()) == ROUNDS
    assert_consistent(home, repo)


# --- item 2: projections heal whichever process writes next ------------------------------------------

def test_killed_after_commit_then_an_open_process_writes_next(children: Any, home: Path, repo: Path) -> None:
    doomed = seed(home, repo, "Forget me", "This memory is forgotten by a writer killed after its commit")
    other = seed(home, repo, "Another memory", "Edited by the already-open process")
    r = children()
    r.call("session_start", {"cwd": str(repo), "session": "open"})
    added = cli(home, repo, "add", "--caption", "Added before a crash", "--content", "Committed, then killed",
                REALMEM_TEST_FAULT="after-commit")
    assert added.returncode == -signal.SIGKILL, added.stderr
    forgot = cli(home, repo, "forget", doomed, REALMEM_TEST_FAULT="after-commit")
    assert forgot.returncode == -signal.SIGKILL, forgot.stderr
    with open_attached(home, repo, scan=False) as app:
        since = evlog.last_seq(app.conn)
    # The process that was open all along writes next, then scans.
    r.call("edit", {"cwd": str(repo), "session": "open", "id": other, "content": "Edited after the crashes"})
    r.call("session_start", {"cwd": str(repo), "session": "open"})
    forget_cache()
    with open_attached(home, repo) as app:
        captions = {m.caption for m in app.memories()}
        assert "Added before a crash" in captions, "a committed add was lost"
        assert "Forget me" not in captions, "a committed forget was undone"
    assert_consistent(home, repo, since)


@pytest.mark.parametrize("step", ["after-commit", "lease-taken"])
def test_a_paused_holder_whose_lease_expired_writes_no_projection(children: Any, home: Path, repo: Path,
                                                                  step: str) -> None:
    sid = seed(home, repo, "Shared caption", "Shared content")
    short_lease = {"REALMEM_GATE_LEASESECONDS": "1.5"}
    paused = children(REALMEM_TEST_FAULT=f"{step}:stop", **short_lease)
    other = children(**short_lease)
    for c in (paused, other):
        c.call("show", {"cwd": str(repo), "id": sid})
    mp = paused.send("edit", {"cwd": str(repo), "session": "p", "id": sid, "content": "Content from the paused one"})
    wait_stopped(paused.proc)  # holds the lease; committed (after-commit) or not yet (lease-taken)
    committed = step == "after-commit"
    # The other process takes the expired lease over, heals the file, and edits on top.
    done = other.call("edit", {"cwd": str(repo), "session": "o", "id": sid, "caption": "Caption from the other"})
    content = "Content from the paused one" if committed else "Shared content"
    assert done["details"]["content"] == content
    with open_attached(home, repo, scan=False) as app:
        m = app.memory(app.resolve(sid))
        assert m is not None
        path = app.store_dir(m.store) / m.file
        newest = m.text
    assert path.read_text(encoding="utf-8") == newest
    paused.proc.send_signal(signal.SIGCONT)
    rp = paused.response(mp)
    if committed:
        assert "result" in rp, rp  # its change committed before it paused: acknowledged, and kept
    else:  # decided before the takeover: refused, nothing appended
        assert rp["error"]["code"] == 1 and "lost the write lease" in rp["error"]["message"], rp
    assert path.read_text(encoding="utf-8") == newest, "the resumed holder wrote its stale text"
    shown = paused.call("show", {"cwd": str(repo), "id": sid})["details"]
    assert (shown["caption"], shown["content"]) == ("Caption from the other", content)
    paused.close()
    if committed:
        assert "write.fenced" in (home.parent / "rpc-stderr.log").read_text(errors="replace")
    assert_consistent(home, repo)


# --- fault injection: every step of a write heals -----------------------------------------------------

STEPS = ["lease-taken", "before-commit", "after-commit", "after-file", "before-position"]
COMMITTED = {"after-commit", "after-file", "before-position"}


@pytest.mark.parametrize("op", ["add", "edit", "forget", "move"])
@pytest.mark.parametrize("step", STEPS)
def test_a_write_killed_at_any_step_heals(children: Any, home: Path, repo: Path, op: str, step: str) -> None:
    target = seed(home, repo, "Target fact", "The memory the killed write changes")
    bystander = seed(home, repo, "Bystander fact", "Edited by the process that writes next")
    r = children()
    r.call("status", {"cwd": str(repo)})
    fault = {"REALMEM_TEST_FAULT": step}
    if op in ("add", "forget"):
        args = (["add", "--caption", "Added by a killed writer", "--content", "It may or may not have committed"]
                if op == "add" else ["forget", target])
        rc = cli(home, repo, *args, **fault).returncode
    else:
        k = children(**fault)
        params = {"cwd": str(repo), "session": "k", "id": target}
        if op == "edit":
            k.send("edit", {**params, "content": "Content of a killed edit"})
        else:
            k.send("move", {**params, "scope": "personal"})
        rc = k.proc.wait(timeout=WAIT)
    assert rc == -signal.SIGKILL
    r.call("edit", {"cwd": str(repo), "session": "r", "id": bystander, "content": f"Written after a kill at {step}"})
    forget_cache()
    committed = step in COMMITTED
    with open_attached(home, repo) as app:
        mems = {m.caption: m for m in app.memories()}
        assert mems["Bystander fact"].content == f"Written after a kill at {step}"
        if op == "add":
            assert ("Added by a killed writer" in mems) == committed
        elif op == "forget":
            assert ("Target fact" not in mems) == committed
        elif op == "edit":
            assert (mems["Target fact"].content == "Content of a killed edit") == committed
        else:
            personal = app.project.personal_store  # type: ignore[union-attr]
            assert (mems["Target fact"].store == personal) == committed
    assert_consistent(home, repo)


# --- item 3: the exactly-once queue ----------------------------------------------------------------

def queue_candidates(home: Path, cwd: Path, n: int) -> list[str]:
    """Queue ``n`` candidates (no judge configured yet); returns their candidate ids."""
    with open_attached(home, cwd) as app:
        outs = [remember(app, f"Queued fact number {i}", f"Candidate {i} waits for the judge to come back.")
                for i in range(n)]
    assert all(o.queued for o in outs)
    return [o.trace.candidate.id for o in outs]


def decisions(home: Path) -> Counter[str]:
    """How many times each candidate was processed (a decision other than queueing)."""
    with open_attached(home, home, scan=False) as app:
        return Counter(env.event.candidate_id for env in evlog.read(app.conn)
                       if isinstance(env.event, ev.Decided) and env.event.action != "queue")


@pytest.mark.parametrize("pair", ["retry+retry", "worker+retry"])
def test_concurrent_retries_process_each_candidate_once(home: Path, repo: Path, pair: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REALMEM_QUEUE_BASEBACKOFFSECONDS", "0")  # due at once, for the worker too
    cids = queue_candidates(home, repo, 14)
    # The judge holds its first answer until both processes are judging, so they overlap for sure.
    gate = Gate("action")
    with FakeSystemOne() as s1:
        s1.script({"action": gate})
        env = {"REALMEM_SEMIF_URL": s1.url}
        procs = []
        for who in pair.split("+"):
            args = ["retry"] if who == "retry" else ["worker", "--idle", "0"]
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "realmem.interface.cli", "--home", str(home), "--cwd", str(repo), *args],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                env={**os.environ, "REALMEM_HOME": str(home), "REALMEM_WORKER_AUTOSTART": "false", **env}))
        try:
            gate.wait_entered(2)
            gate.release()
            for p in procs:
                _, err = p.communicate(timeout=WAIT)
                assert p.returncode == 0, err
        finally:
            gate.release()
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        # A candidate skipped because the other process held its claim is still queued: finish.
        assert cli(home, repo, "retry", **env).returncode == 0
    counts = decisions(home)
    assert {c: counts[c] for c in cids} == {c: 1 for c in cids}, "a candidate was processed twice"
    with open_attached(home, repo, scan=False) as app:
        assert app.conn.execute("SELECT count(*) FROM pending").fetchone()[0] == 0


def test_pending_rows_follow_the_project_to_its_first_commit(home: Path, tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    root.mkdir()
    run_git(root, "init", "-q")
    cids = queue_candidates(home, root, 2)
    run_git(root, "commit", "-q", "--allow-empty", "-m", "first")
    forget_cache()
    with open_attached(home, root) as app:
        assert app.project is not None and app.project.key.startswith("git-")
        keys = {r[0] for r in app.conn.execute("SELECT project_key FROM pending")}
        assert keys == {app.project.key}
    with FakeSystemOne() as s1:
        assert cli(home, root, "retry", REALMEM_SEMIF_URL=s1.url).returncode == 0
    assert {c: decisions(home)[c] for c in cids} == {c: 1 for c in cids}


def test_a_candidate_whose_project_is_gone_backs_off_then_is_dropped(home: Path, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "gone"
    root.mkdir()
    [cid] = queue_candidates(home, root, 1)
    root.rmdir()
    monkeypatch.setenv("REALMEM_SEMIF_URL", "http://127.0.0.1:9")  # configured; never reached
    assert worker.retry_due(home, force=True) == 0  # force: its first backoff has not passed yet
    with open_attached(home, home, scan=False) as app:
        attempts, next_try = app.conn.execute("SELECT attempts, next_try FROM pending").fetchone()
        assert attempts == 1 and next_try > evlog.now_iso()
        assert not worker._due(app.conn), "a gone project's candidate stays due: the worker would spin"
    for _ in range(GONE_ATTEMPTS - 1):
        worker.retry_due(home, force=True)
    with open_attached(home, home, scan=False) as app:
        assert app.conn.execute("SELECT count(*) FROM pending").fetchone()[0] == 0
        done = [e.event for e in evlog.read(app.conn) if isinstance(e.event, ev.CandidateDone)]
        assert [d.candidate_id for d in done] == [cid]
        assert done[0].outcome.startswith("dropped:") and str(root) in done[0].outcome


# --- item 4: the lease only where needed -------------------------------------------------------------

@contextlib.contextmanager
def holding(home: Path, repo: Path) -> Iterator[None]:
    """Another live process holds the write lease inside the block."""
    proc = subprocess.Popen([sys.executable, str(COREWORKER), "hold", str(home), str(repo)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        assert json.loads(proc.stdout.readline())["held"] is True
        yield
    finally:
        proc.kill()
        proc.wait()


def test_read_only_commands_never_wait_for_the_write_lease(home: Path, repo: Path) -> None:
    sid = seed(home, repo, "Readable caption", "Readable while another process writes")
    with open_attached(home, repo, scan=False) as app:
        m = app.memory(app.resolve(sid))
        assert m is not None
        path = app.store_dir(m.store) / m.file
    hand = path.read_text(encoding="utf-8").replace("Readable caption", "Hand-edited caption")
    with holding(home, repo):
        path.write_text(hand, encoding="utf-8")  # an outside edit while the lease is busy
        wait = {"REALMEM_GATE_LOCKWAITSECONDS": "3600"}  # a wait for the lease would hang the test
        for args in (["status"], ["list", "--json"], ["recall", "readable"], ["show", sid], ["manage"],
                     ["audit", sid], ["events"]):
            p = cli(home, repo, *args, **wait)
            assert p.returncode == 0, (args, p.stderr)
        listed = json.loads(cli(home, repo, "list", "--json", **wait).stdout)
        assert [i["caption"] for i in listed["items"]] == ["Readable caption"]  # the last projected state
    listed = json.loads(cli(home, repo, "list", "--json").stdout)
    assert [i["caption"] for i in listed["items"]] == ["Hand-edited caption"]  # recorded later


def test_writes_queue_or_refuse_clearly_when_the_lease_stays_busy(children: Any, home: Path, repo: Path) -> None:
    sid = seed(home, repo, "Kept while busy", "Neither forgotten nor edited while another process writes")
    busy = {"REALMEM_GATE_LOCKWAITSECONDS": "0.5"}
    with holding(home, repo):
        p = cli(home, repo, "add", "--caption", "Added while busy", "--content", "Queued, not lost", **busy)
        assert p.returncode == 0 and "Queued" in p.stdout, p.stdout + p.stderr
        p = cli(home, repo, "forget", sid, **busy)
        assert p.returncode == 1 and "busy" in p.stderr and "Traceback" not in p.stderr, p.stderr
        c = children(**busy)
        started = c.call("session_start", {"cwd": str(repo), "session": "s"})
        assert started["project"] is not None
        for method, params in (("forget", {"ids": [sid]}), ("edit", {"id": sid, "content": "x"})):
            err = c.error(method, {"cwd": str(repo), "session": "s", **params})
            assert err["code"] == 1 and "busy" in err["message"], err
        remembered = c.call("remember", {"cwd": str(repo), "session": "s", "caption": "Remembered while busy",
                                         "content": "Queued by the rpc child", "user_requested": True})
        assert remembered["details"]["queued"] is True
    with open_attached(home, repo, scan=False) as app:
        assert app.conn.execute("SELECT count(*) FROM pending").fetchone()[0] == 2
        assert [m.caption for m in app.memories()] == ["Kept while busy"]


def test_reads_of_an_unchanged_store_never_take_the_write_lease(home: Path, repo: Path) -> None:
    sid = seed(home, repo, "Quiet caption", "Nothing changes between these reads")

    def takes() -> int:  # every take of the lease bumps its fencing generation
        with open_attached(home, repo, scan=False) as app:
            row = app.conn.execute("SELECT generation FROM lease_generations WHERE name='write'").fetchone()
            return row[0] if row else 0

    before = takes()
    for args in (["status"], ["list"], ["recall", "quiet"], ["show", sid], ["manage"], ["audit", sid], ["events"]):
        assert cli(home, repo, *args).returncode == 0, args
    assert takes() == before
