"""The file projector (``projections.projector``): one public API for live writes and replay.

Live writes (``emit``) and ``replay`` both project files through ``FileProjector``, so a
replay into emptied store directories reproduces every file live writes made, byte for byte.
Opening the writer only connects and catches up: it appends nothing (replay starts from the
log as it was), and outside changes are recorded by the scan callers run (``observe.attach``).
"""

from __future__ import annotations

import ast
from pathlib import Path

from realmem.app import Realmem
from realmem.events import log
from realmem.projections import replay
from realmem.write import memories, observe
from realmem.write.attached import open_attached

ROOT = Path(__file__).resolve().parents[2] / "realmem"


def add(app: Realmem, caption: str, body: str, scope: str = "shared") -> tuple[str, str]:
    store, stored = memories.place(app, scope, None)
    m = memories.add(app, caption, body, store=store, stored_paths=stored, source="add")
    return m.store, m.id


def fact_files(app: Realmem) -> dict[str, bytes]:
    out = {}
    for store in app.visible_stores():
        d = app.store_dir(store)
        for p in sorted(d.glob("*.md")) if d.is_dir() else []:
            out[str(p)] = p.read_bytes()
    return out


def test_replay_into_emptied_stores_gives_the_files_live_writes_made_byte_for_byte(home: Path, repo: Path) -> None:
    with open_attached(home, repo) as app:
        kept = add(app, "Build with make", "Run make -j4 from the root.")
        renamed = add(app, "Tests use pytest", "Run pytest -q.", "personal")
        gone = add(app, "Old deploy notes", "Deploy by hand.", "global")
        memories.edit(app, renamed, caption="Tests run under pytest with xdist", content="Run pytest -q -n 2.")
        memories.forget(app, [gone])
        memories.move(app, kept, app.store_for_scope("global"))
        live = fact_files(app)
        stats = app.conn.execute("SELECT store, file, size FROM file_stats WHERE file != '' ORDER BY 1, 2").fetchall()
        assert len(live) == 2 and all(b"id: " in text for text in live.values())

        for path in live:
            Path(path).unlink()
        report = replay.replay(app)

        assert fact_files(app) == live
        assert report.files_written == 2
        rebuilt = app.conn.execute("SELECT store, file, size FROM file_stats WHERE file != '' ORDER BY 1, 2").fetchall()
        assert rebuilt == stats  # the projector recorded what it wrote, as live writes did
        assert app.projection_seq("files") == log.last_seq(app.conn)


def test_replay_leaves_file_stats_as_a_reset_would_and_rewrites_only_the_rows_that_differ(
        home: Path, repo: Path) -> None:
    """After a replay file_stats holds exactly the stamps of the memories' files; rows already
    right are not written again (100k of them cost 0.7 s), wrong and foreign ones are fixed."""
    with open_attached(home, repo) as app:
        keys = [add(app, f"Fact {i}", f"Body {i}.") for i in range(3)]
        files_ = [app.memory(k).file for k in keys]
        store = keys[0][0]
        app.conn.execute("UPDATE file_stats SET size=size+1 WHERE store=? AND file=?", (store, files_[1]))
        app.conn.execute("INSERT INTO file_stats VALUES (?, 'notes.txt', 1, 1)", (store,))
        app.conn.execute("CREATE TEMP TABLE written(file TEXT)")
        for kind in ("INSERT", "UPDATE"):  # a row written either way counts
            app.conn.execute(f"CREATE TEMP TRIGGER stats_{kind.lower()} AFTER {kind} ON main.file_stats "
                             "BEGIN INSERT INTO written VALUES (NEW.file); END")
        replay.replay(app)

        d = app.store_dir(store)
        expected = sorted((store, f, (d / f).stat().st_mtime_ns, (d / f).stat().st_size) for f in files_)
        assert app.conn.execute("SELECT store, file, mtime_ns, size FROM file_stats ORDER BY 1, 2").fetchall() == expected
        assert [r[0] for r in app.conn.execute("SELECT file FROM written")] == [files_[1]]


def test_opening_appends_nothing_so_a_replay_starts_from_the_log_as_it_was(home: Path, repo: Path, tmp_path: Path) -> None:
    with open_attached(home, repo) as app:
        key = add(app, "Build with make", "Run make -j4 from the root.")
        path = app.store_dir(key[0]) / app.memory(key).file
    path.write_text(path.read_text(encoding="utf-8").replace("make -j4", "make -j8"), encoding="utf-8")
    elsewhere = tmp_path / "unregistered"
    elsewhere.mkdir()
    conn_app = Realmem(home, home)
    before = log.last_seq(conn_app.conn)
    conn_app.close()

    for cwd in (repo, elsewhere):  # a pending hand edit; stores never registered
        with Realmem.open(home, cwd) as app:
            assert log.last_seq(app.conn) == before

    with open_attached(home, repo) as app:  # the use case a session start runs records the edit
        assert log.last_seq(app.conn) > before
        assert "make -j8" in app.memory(key).content
        before = log.last_seq(app.conn)

    with Realmem.open(home, elsewhere) as app:
        replay.replay(app)
        assert log.last_seq(app.conn) == before


def test_replay_uses_only_the_writers_public_api() -> None:
    tree = ast.parse((ROOT / "projections" / "replay.py").read_text(encoding="utf-8"))
    private = sorted({f"app.{n.attr}" for n in ast.walk(tree) if isinstance(n, ast.Attribute)
                      and isinstance(n.value, ast.Name) and n.value.id == "app" and n.attr.startswith("_")})
    assert private == []


def test_only_the_projector_writes_file_stats() -> None:
    writers = sorted(str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py")
                     if any(w in p.read_text(encoding="utf-8")
                            for w in ("INTO file_stats", "DELETE FROM file_stats", "UPDATE file_stats")))
    assert writers == ["projections/projector.py"]
