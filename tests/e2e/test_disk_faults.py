"""Disks and files that fail (issue 32, item 3): a read-only or full store, a read-only or full
REALMEM_HOME, a damaged realmem.sqlite, a corrupt queue.sqlite.

Each failure is a real one (tests/helpers/disks.py: a read-only bind mount or chmod, a tmpfs
filled to its last byte), and the CLI runs as a real process, so what is checked is what the
user sees: one line on stderr naming the path and the cause, no traceback, and afterwards a
consistent state.

The choice for a store that cannot be written: the change is recorded (the log and the
tables are the truth, fact files their projection), the command says so and exits 1, reads
keep working from the tables, and the file is written by the first command that runs once the
store is writable again.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from realmem.projections import files
from helpers import disks
from helpers.rpc_child import child_env, spawn  # noqa: F401 (fixtures)

HANG_GUARD = 120.0


def cli(home: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "REALMEM_WORKER_AUTOSTART": "0"}
    return subprocess.run([sys.executable, "-m", "realmem.interface.cli", "--home", str(home), "--cwd", str(cwd), *args],
                          capture_output=True, text=True, env=env, timeout=HANG_GUARD)


def one_line(p: subprocess.CompletedProcess[str]) -> str:
    """The single line a failing command printed on stderr."""
    assert "Traceback" not in p.stderr, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    return lines[0]


def captions(home: Path, repo: Path) -> list[str]:
    import json
    p = cli(home, repo, "list", "--json")
    assert p.returncode == 0, p.stderr
    return sorted(m["caption"] for m in json.loads(p.stdout)["items"])


def fact_files(d: Path) -> dict[str, str]:
    """caption -> id of every fact file in ``d``."""
    out = {}
    for f in d.glob("*.md"):
        parsed = files.parse(f.read_text(encoding="utf-8"))
        out[parsed.caption] = parsed.id
    return out


def _store(repo: Path) -> Path:
    d = repo / ".pi" / "realmem"
    d.mkdir(parents=True, exist_ok=True)
    return d


def test_a_read_only_store_records_the_add_says_so_and_reads_keep_working(home: Path, repo: Path) -> None:
    store = _store(repo)
    assert cli(home, repo, "add", "--caption", "Deploys go through staging", "--content", "kubectl").returncode == 0
    with disks.read_only(store):
        p = cli(home, repo, "add", "--caption", "Redis listens on 6380", "--content", "not 6379")
        assert p.returncode == 1
        assert "Stored" in p.stdout  # recorded, and not reported as failed
        assert "could not be written" in p.stdout  # the text the model sees says so too
        line = one_line(p)
        assert str(store / "redis-listens-on-6380.md") in line
        assert ("Read-only file system" if disks.ROOT else "Permission denied") in line
        assert "recorded" in line
        for args in (["list"], ["recall", "redis"], ["status"]):
            r = cli(home, repo, *args)
            assert r.returncode == 0, (args, r.stderr)
            assert "Traceback" not in r.stderr
        assert captions(home, repo) == ["Deploys go through staging", "Redis listens on 6380"]
        assert set(fact_files(store)) == {"Deploys go through staging"}
    # Writable again: the next command writes the file, and the memory is there once.
    assert captions(home, repo) == ["Deploys go through staging", "Redis listens on 6380"]
    assert set(fact_files(store)) == {"Deploys go through staging", "Redis listens on 6380"}
    check = cli(home, repo, "replay", "--check")
    assert check.returncode == 0, check.stdout + check.stderr
    assert cli(home, repo, "list").stderr == ""


def test_a_full_store_records_the_add_and_writes_its_file_once_there_is_room(home: Path, repo: Path) -> None:
    store = _store(repo)
    with disks.full(store):
        assert cli(home, repo, "add", "--caption", "Deploys go through staging", "--content", "kubectl").returncode == 0
        filler = disks.fill(store)
        p = cli(home, repo, "add", "--caption", "Redis listens on 6380", "--content", "not 6379 " * 200)
        assert p.returncode == 1
        line = one_line(p)
        assert str(store / "redis-listens-on-6380.md") in line and "No space left on device" in line
        r = cli(home, repo, "list")
        assert r.returncode == 0 and "Redis listens on 6380" in r.stdout, r.stderr
        assert not list(store.glob(".*.tmp"))  # no temp file left behind to fill it further
        # A scan of the full store while the file waits must not take it for a deletion.
        assert cli(home, repo, "scan").returncode == 0
        filler.unlink()
        assert captions(home, repo) == ["Deploys go through staging", "Redis listens on 6380"]
        assert fact_files(store).keys() == {"Deploys go through staging", "Redis listens on 6380"}
        check = cli(home, repo, "replay", "--check")
        assert check.returncode == 0, check.stdout + check.stderr


def test_a_read_only_realmem_home_is_one_line_naming_it(home: Path, repo: Path) -> None:
    assert cli(home, repo, "add", "--caption", "Deploys go through staging", "--content", "kubectl").returncode == 0
    with disks.read_only(home):
        for args in (["list"], ["add", "--caption", "Redis listens on 6380", "--content", "not 6379"]):
            p = cli(home, repo, *args)
            assert p.returncode == 1, (args, p.stdout)
            line = one_line(p)
            assert str(home / "realmem.sqlite") in line, line
            assert ("Read-only file system" if disks.ROOT else "Permission denied") in line, line
    # Not recorded at all: no memory, no file.
    assert captions(home, repo) == ["Deploys go through staging"]
    assert set(fact_files(repo / ".pi" / "realmem")) == {"Deploys go through staging"}


def test_a_full_realmem_home_is_one_line_naming_it(tmp_path: Path, repo: Path) -> None:
    home = tmp_path / "small-home"
    home.mkdir()
    with disks.full(home, size_kb=2048):
        assert cli(home, repo, "add", "--caption", "Deploys go through staging", "--content", "kubectl").returncode == 0
        filler = disks.fill(home)
        for args in (["add", "--caption", "Redis listens on 6380", "--content", "not 6379"], ["list"]):
            p = cli(home, repo, *args)
            assert p.returncode == 1, (args, p.stdout)
            line = one_line(p)
            assert str(home / "realmem.sqlite") in line and "No space left on device" in line, line
        filler.unlink()
        assert captions(home, repo) == ["Deploys go through staging"]
        assert set(fact_files(repo / ".pi" / "realmem")) == {"Deploys go through staging"}
        check = cli(home, repo, "replay", "--check")
        assert check.returncode == 0, check.stdout + check.stderr


def test_over_rpc_a_read_only_realmem_home_is_a_refusal_naming_it(home: Path, repo: Path, spawn) -> None:
    assert cli(home, repo, "add", "--caption", "Deploys go through staging", "--content", "kubectl").returncode == 0
    with disks.read_only(home):
        c = spawn()
        err = c.error("list", {"cwd": str(repo)})
        assert err["code"] == 1, err  # a refusal, not an internal error
        assert str(home / "realmem.sqlite") in err["message"] and "cannot be written" in err["message"], err
        assert "\n" not in err["message"]
        c.call("hello", {})  # and the child keeps serving
        c.close()


def test_over_rpc_a_remember_into_a_read_only_store_says_it_is_recorded(home: Path, repo: Path, spawn) -> None:
    store = _store(repo)
    assert cli(home, repo, "add", "--caption", "Deploys go through staging", "--content", "kubectl").returncode == 0
    with disks.read_only(store):
        c = spawn()
        got = c.call("remember", {"cwd": str(repo), "caption": "Redis listens on 6380", "content": "not 6379",
                                  "user_requested": True})
        text = got["text"]
        assert "Stored" in text and "could not be written" in text, got
        assert str(store / "redis-listens-on-6380.md") in text, got
        assert c.call("list", {"cwd": str(repo)})  # reads keep working in the same child
        c.close()
    assert captions(home, repo) == ["Deploys go through staging", "Redis listens on 6380"]
    assert set(fact_files(store)) == {"Deploys go through staging", "Redis listens on 6380"}


def test_a_write_that_finds_the_home_full_is_rolled_back_naming_the_file(tmp_path: Path, repo: Path) -> None:
    """The open succeeded (its -wal and -shm exist); the disk fills under a running process,
    so the write itself fails: a StorageError naming the database, and nothing recorded."""
    import random
    import string

    from realmem.errors import StorageError
    from realmem.write import memories
    from realmem.write.attached import open_attached

    home = tmp_path / "small-home"
    home.mkdir()
    with disks.full(home, size_kb=2048), open_attached(home, repo) as app:
        store, stored = memories.place(app, "shared", None)
        memories.add(app, "Deploys go through staging", "kubectl", store=store, stored_paths=stored, source="add")
        filler = disks.fill(home)
        added = 1
        for i in range(400):  # until the WAL must grow: the first writes may reuse its frames
            text = "".join(random.choice(string.ascii_letters + " ") for _ in range(memories.MAX_CONTENT))
            try:
                memories.add(app, f"Fact number {i}", text, store=store, stored_paths=stored, source="add")
            except StorageError as exc:
                message = str(exc)
                break
            added += 1
        else:
            raise AssertionError("the full home never refused a write")
        assert str(home / "realmem.sqlite") in message and "No space left on device" in message, message
        assert "\n" not in message
        filler.unlink()
        assert len(app.memories()) == added  # the refused one was not recorded
        assert len(list((repo / ".pi" / "realmem").glob("*.md"))) == added


def ids_by_caption(home: Path, repo: Path) -> dict[str, str]:
    import json
    p = cli(home, repo, "list", "--json")
    assert p.returncode == 0, p.stderr
    return {m["caption"]: m["uuid"] for m in json.loads(p.stdout)["items"]}


def test_a_damaged_database_names_itself_and_repair_rebuilds_it_from_the_fact_files(home: Path, repo: Path) -> None:
    assert cli(home, repo, "add", "--caption", "Deploys go through staging", "--content", "kubectl").returncode == 0
    assert cli(home, repo, "add", "--scope", "personal", "--caption", "I prefer short commit subjects",
               "--content", "under 72").returncode == 0
    assert cli(home, repo, "recall", "staging").returncode == 0  # a use counter, lost with the log
    before = ids_by_caption(home, repo)
    shared_files = {f.name: f.read_bytes() for f in (repo / ".pi" / "realmem").glob("*.md")}
    db_path = home / "realmem.sqlite"
    assert cli(home, repo, "replay", "--check").returncode == 0  # checkpointed: the pages are in the file
    data = bytearray(db_path.read_bytes())
    for page in range(1, len(data) // 4096, 2):  # every other page after the header's
        data[page * 4096:(page + 1) * 4096] = os.urandom(4096)
    db_path.write_bytes(bytes(data))

    for args in (["list"], ["status"], ["add", "--caption", "Redis listens on 6380", "--content", "x"]):
        p = cli(home, repo, *args)
        assert p.returncode == 1, (args, p.stdout)
        line = one_line(p)
        assert str(db_path) in line and "damaged" in line and "realmem repair" in line, line

    p = cli(home, repo, "repair")
    assert p.returncode == 0, p.stderr
    [aside] = home.glob("realmem.sqlite.damaged-*[0-9]Z")
    assert aside.read_bytes() == bytes(data)  # kept as it was
    assert str(aside) in p.stdout and "2 memories" in p.stdout and "Lost with the old database" in p.stdout
    assert "counters" in p.stdout and "personal history" in p.stdout
    assert ids_by_caption(home, repo) == before  # every memory back, under its own id
    assert {f.name: f.read_bytes() for f in (repo / ".pi" / "realmem").glob("*.md")} == shared_files
    check = cli(home, repo, "replay", "--check")
    assert check.returncode == 0, check.stdout + check.stderr
    # A whole database is never rebuilt: that would throw its log away.
    again = cli(home, repo, "repair")
    assert again.returncode == 1 and "nothing to repair" in one_line(again)
