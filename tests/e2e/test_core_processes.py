"""Several real OS processes writing one REALMEM_HOME (tests/helpers/coreworker.py), a killed lock
holder, and a writer killed mid-edit.  Timeouts only bound liveness; nothing is timed."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

import pytest

from realmem.write import memories
from realmem.app import Realmem
from realmem.events import log
from realmem.events import types as ev
from realmem.storage.lock import LockTimeout
from realmem.stores.project import forget_cache
from realmem.projections import files, replay
from realmem.write.attached import open_attached

WORKER = Path(__file__).parents[1] / "helpers" / "coreworker.py"
LIVENESS = 120.0
WORKERS = 8
PER_WORKER = 12


class Worker:
    def __init__(self, tmp_path: Path, name: str, *args: object) -> None:
        self.log_path = tmp_path / f"{name}.log"
        self._log: IO[bytes] = self.log_path.open("wb")
        self.proc = subprocess.Popen([sys.executable, str(WORKER), *map(str, args)], stdout=subprocess.PIPE,
                                     stderr=self._log, text=True, env=dict(os.environ))
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def read(self, timeout: float = LIVENESS) -> dict[str, Any]:
        line = self.lines.get(timeout=timeout)
        assert line is not None, f"worker exited ({self.proc.wait()}); log:\n{self.log_text()}"
        return json.loads(line)

    def log_text(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=LIVENESS)

    def close(self) -> None:
        self.kill()
        self._log.close()


@pytest.fixture
def workers(tmp_path: Path):
    made: list[Worker] = []

    def start(name: str, *args: object) -> Worker:
        w = Worker(tmp_path, name, *args)
        made.append(w)
        return w

    yield start
    for w in made:
        w.close()


def md_files(app: Realmem) -> list[Path]:
    out = []
    for store in app.visible_stores():
        d = app.store_dir(store)
        if d.is_dir():
            out += sorted(d.glob("*.md"))
    return out


def test_concurrent_writers_land_every_write_exactly_once(home: Path, repo: Path, tmp_path: Path, workers) -> None:
    go = tmp_path / "go"
    ws = [workers(f"adder-{i}", "add", home, repo, PER_WORKER, go, f"w{i}") for i in range(WORKERS)]
    go.touch()
    reported: list[tuple[str, str]] = []
    for w in ws:
        reported += [tuple(k) for k in w.read()["ids"]]
        assert w.proc.wait(timeout=LIVENESS) == 0, w.log_text()
    total = WORKERS * PER_WORKER
    assert len(reported) == total and len(set(reported)) == total
    forget_cache()
    with open_attached(home, repo) as app:
        mems = app.memories()
        assert len(mems) == total
        assert sorted((m.store, m.id) for m in mems) == sorted(reported)
        assert len({m.id for m in mems}) == total
        # every fact file exists once, holds its memory, and file names never collided
        found = md_files(app)
        assert len(found) == total
        by_path = {app.store_dir(m.store) / m.file: m for m in mems}
        assert set(found) == set(by_path)
        for path, m in by_path.items():
            assert path.read_text(encoding="utf-8") == m.text
            assert files.parse(m.text).id == m.id
        contents = sorted(m.content.split(" (pid")[0] for m in mems)
        assert contents == sorted(f"written by w{w} as number {i}" for w in range(WORKERS) for i in range(PER_WORKER))
        # nothing was mistaken for a hand edit, nothing reported as a problem
        kinds = {e.event.TYPE for e in log.read(app.conn)}
        assert "file_observed" not in kinds and "file_problem" not in kinds
        assert replay.check(app).differences == []


def test_a_killed_lock_holder_is_detected_and_the_lock_taken_over(home: Path, repo: Path, workers) -> None:
    with open_attached(home, repo):
        pass  # stores registered before the holder starts
    holder = workers("holder", "hold", home, repo)
    msg = holder.read()
    assert msg["held"] is True
    with open_attached(home, repo, scan=False) as app:
        row = app.lock.holder()
        assert row is not None and row["pid"] == msg["pid"] == holder.proc.pid
        store, stored = memories.place(app, "shared", None)
        fields = app.new_fields(store, "01926b3e-5c1a-7d2f-9a4b-1c2d3e4f5a6b", "blocked", "blocked", stored)
        with pytest.raises(LockTimeout):  # held by a live process: nobody else writes
            app.emit([ev.MemoryAdded(store, "01926b3e-5c1a-7d2f-9a4b-1c2d3e4f5a6b", fields, "add")],
                     lock_timeout=0.5)
    holder.kill()  # SIGKILL while holding the write lock
    writer = workers("writer", "write-after-hold", home, repo)
    out = writer.read()
    assert writer.proc.wait(timeout=LIVENESS) == 0
    log_text = writer.log_text()
    assert "lock.taken_over" in log_text and "dead" in log_text
    with open_attached(home, repo) as app:
        m = app.memory((out["store"], out["id"]))
        assert m is not None and m.caption == "Written after the takeover"
        assert (app.store_dir(m.store) / m.file).read_text(encoding="utf-8") == m.text
        assert app.lock.holder() is None
        assert replay.check(app).differences == []


@pytest.mark.parametrize("kill_after", [5, 23, 61])
def test_a_writer_killed_mid_edit_leaves_a_whole_file_and_heals(home: Path, repo: Path, workers,
                                                                kill_after: int) -> None:
    with open_attached(home, repo) as app:
        store, stored = memories.place(app, "shared", None)
        m = memories.add(app, "Edited in a loop", "original", store=store, stored_paths=stored, source="add")
        path = app.store_dir(m.store) / m.file
    w = workers(f"editor-{kill_after}", "edit-loop", home, repo, m.store, m.id)
    reads = 0
    edits = 0
    while edits < kill_after:
        # read the file as often as possible while the worker rewrites it
        parsed = files.parse(path.read_text(encoding="utf-8"))
        assert parsed.id == m.id and (parsed.content == "original" or parsed.content.startswith("edit "))
        reads += 1
        try:
            line = w.lines.get_nowait()
        except queue.Empty:
            continue
        assert line is not None, w.log_text()
        edits = json.loads(line)["edits"]
    w.kill()
    assert reads > 0
    text = path.read_text(encoding="utf-8")
    parsed = files.parse(text)  # never torn
    assert parsed.id == m.id
    with open_attached(home, repo) as app:
        mem = app.memory((m.store, m.id))
        assert mem is not None
        assert path.read_text(encoding="utf-8") == mem.text  # the file caught up with the log
        assert mem.content.startswith("edit ")
        kinds = {e.event.TYPE for e in log.read(app.conn)}
        assert "file_observed" not in kinds and "file_problem" not in kinds
        assert [x.id for x in app.memories()] == [m.id]  # leftover temp files are not facts
        assert replay.check(app).differences == []
        # and the store is writable again (the dead editor's lock is taken over)
        memories.edit(app, (m.store, m.id), content="after the crash")
        assert files.parse(path.read_text(encoding="utf-8")).content == "after the crash"


def test_a_file_name_taken_while_waiting_for_the_lock_is_not_overwritten(home: Path, repo: Path) -> None:
    """Two writers (two connections, as two processes have) pick the same file name before
    either holds the lock; the second to write must not overwrite the first one's file."""
    from realmem.stores import ids
    with open_attached(home, repo) as one, open_attached(home, repo) as two:
        store = one.project.shared_store
        late_id = ids.new_id()
        late = one.new_fields(store, late_id, "Same caption", "from the slower writer", ["."])
        early = memories.add(two, "Same caption", "from the faster writer", store=store, stored_paths=["."],
                             source="add")
        assert late.file == early.file  # both picked the same name
        one.emit([ev.MemoryAdded(store, late_id, late, "add")])
        got = one.memory((store, late_id))
        assert got.file != early.file
        d = one.store_dir(store)
        assert files.parse((d / early.file).read_text(encoding="utf-8")).content == "from the faster writer"
        assert files.parse((d / got.file).read_text(encoding="utf-8")).content == "from the slower writer"
        assert replay.check(one).differences == []
    with open_attached(home, repo) as app:
        assert sorted(m.content for m in app.memories()) == ["from the faster writer", "from the slower writer"]
        assert not [e for e in log.read(app.conn) if isinstance(e.event, (ev.FileObserved, ev.FileProblem))]
