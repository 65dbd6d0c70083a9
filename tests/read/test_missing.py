"""Missing paths (spec: "Missing paths", "prune-paths"): flags with suggestions from real git
renames, applying a suggestion, and `realmem prune-paths` as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from realmem.read import missing
from realmem.write import prune
from realmem.stores import ids
from realmem.write import memories
from realmem.app import Realmem, RealmemError
from realmem.events import log as evlog
from realmem.events import types as ev
from realmem.write.attached import open_attached


@pytest.fixture
def tree(repo: Path, git: Any) -> Path:
    for rel in ("src/old/a.py", "src/old/b.py", "src/keep/c.py", "lib/util.py", "docs/guide.md"):
        f = repo / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(f"# {rel}\n", encoding="utf-8")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "tree")
    return repo


@pytest.fixture
def app(home: Path, tree: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Realmem]:
    monkeypatch.setenv("REALMEM_WORKER_AUTOSTART", "0")
    a = open_attached(home, tree, session="s1")
    yield a
    a.close()


def add(app: Realmem, caption: str, paths: list[str], scope: str = "shared"):  # type: ignore[no-untyped-def]
    return memories.add(app, caption, f"About {', '.join(paths)}.", store=app.store_for_scope(scope),
                        stored_paths=paths, source="add")


def flags(app: Realmem, m) -> dict[str, str | None]:  # type: ignore[no-untyped-def]
    return {p: s for p, s in app.conn.execute("SELECT path, suggested FROM missing_paths WHERE store=? AND id=?",
                                              (m.store, m.id))}


def test_renamed_directory_is_flagged_with_the_new_location(app: Realmem, tree: Path, git: Any) -> None:
    m = add(app, "Old module conventions", ["src/old", "lib"])
    assert missing.check(app) == 0
    git(tree, "mv", "src/old", "src/new")
    git(tree, "commit", "-q", "-m", "rename old to new")
    assert missing.check(app) == 1
    assert flags(app, m) == {"src/old": "src/new"}
    res = prune.apply_suggestion(app, (m.store, m.id), "src/old")
    assert res.paths == ["src/new", "lib"]
    assert flags(app, m) == {}  # the ✗ goes at once, not at the next session start
    assert app.memory((m.store, m.id)).paths == ["src/new", "lib"]  # type: ignore[union-attr]
    text = (app.store_dir(m.store) / res.file).read_text(encoding="utf-8")
    front = text.split("\n---\n", 1)[0]
    assert "paths:\n  - src/new\n  - lib\n" in front and "src/old" not in front
    assert missing.check(app) == 0 and flags(app, m) == {}


def test_renamed_file_and_chained_renames(app: Realmem, tree: Path, git: Any) -> None:
    f = add(app, "Util helpers", ["lib/util.py"])
    git(tree, "mv", "lib/util.py", "lib/helpers.py")
    git(tree, "commit", "-q", "-m", "rename util")
    git(tree, "mv", "lib/helpers.py", "lib/tools.py")
    git(tree, "commit", "-q", "-m", "rename helpers")
    missing.check(app)
    assert flags(app, f) == {"lib/util.py": "lib/tools.py"}


def test_applying_one_suggestion_keeps_the_other_flags(app: Realmem, tree: Path, git: Any) -> None:
    m = add(app, "Two places", ["src/old", "docs/guide.md"])
    git(tree, "mv", "src/old", "src/new")
    git(tree, "rm", "-q", "docs/guide.md")
    git(tree, "commit", "-q", "-m", "move and drop")
    missing.check(app)
    assert flags(app, m) == {"src/old": "src/new", "docs/guide.md": None}
    prune.apply_suggestion(app, (m.store, m.id), "src/old")
    assert flags(app, m) == {"docs/guide.md": None}


def test_deleted_path_has_no_suggestion_and_cannot_be_applied(app: Realmem, tree: Path, git: Any) -> None:
    m = add(app, "Guide notes", ["docs/guide.md"])
    git(tree, "rm", "-q", "docs/guide.md")
    git(tree, "commit", "-q", "-m", "drop guide")
    assert missing.check(app) == 1
    assert flags(app, m) == {"docs/guide.md": None}
    with pytest.raises(RealmemError, match="no suggested location"):
        prune.apply_suggestion(app, (m.store, m.id), "docs/guide.md")


def test_check_emits_only_when_flags_change(app: Realmem, tree: Path) -> None:
    add(app, "Gone thing", ["nowhere/x.py"])
    missing.check(app)
    seq = evlog.last_seq(app.conn)
    assert missing.check(app) == 1
    assert evlog.last_seq(app.conn) == seq


def test_memories_sharing_paths_are_each_flagged_and_each_change_is_told_once(app: Realmem, tree: Path,
                                                                              git: Any) -> None:
    """Memories with the same paths are resolved once and compared with their own flags: one
    whose flags already match gets no event; a suggestion that appears, a path that comes back
    and a memory whose flags were edited apart each get theirs."""
    same = [add(app, f"Old module {i}", ["src/old", "src/gone.py"]) for i in range(3)]
    other = add(app, "Kept", ["src/keep/c.py"])
    assert missing.check(app) == 3
    assert all(flags(app, m) == {"src/gone.py": None} for m in same) and flags(app, other) == {}
    app.emit([ev.PathsChecked(same[1].store, same[1].id, {"src/gone.py": None, "src/old": "elsewhere"})])
    git(tree, "mv", "src/old", "src/new")
    git(tree, "commit", "-q", "-m", "move")
    seq = evlog.last_seq(app.conn)
    assert missing.check(app) == 3
    told = [e.event for e in evlog.read(app.conn, seq)]
    assert sorted(e.memory_id for e in told) == sorted(m.id for m in same)  # "other" never told
    assert all(flags(app, m) == {"src/gone.py": None, "src/old": "src/new"} for m in same)
    seq = evlog.last_seq(app.conn)
    assert missing.check(app) == 3 and evlog.last_seq(app.conn) == seq
    (tree / "src/gone.py").write_text("back\n", encoding="utf-8")
    git(tree, "mv", "src/new", "src/old")
    assert missing.check(app) == 0
    assert all(flags(app, m) == {} for m in same)


def test_a_check_compares_the_flags_again_only_when_something_they_depend_on_moved(app: Realmem, tree: Path,
                                                                                   git: Any) -> None:
    """After a clean check, or one that wrote the flags it expected, the next one skips comparing
    every memory's flags, and compares them again after each thing that could make one differ:
    a path gone on disk, a memory added or edited, flags rewritten by another process, the
    projections rebuilt, another write landing between a check's flags and its record."""
    from realmem.projections import replay

    compared: list[str] = []

    def trace(cursor: object, sql: str, bindings: object) -> bool:
        if "json_each" in sql and "missing_paths p" in sql:
            compared.append(sql)
        return True

    def check() -> tuple[int, bool]:
        compared.clear()
        app.conn.exec_trace = trace
        try:
            return missing.check(app), bool(compared)
        finally:
            app.conn.exec_trace = None

    m = add(app, "Old module", ["src/old", "src/keep"])
    assert check() == (0, True)
    assert check() == (0, False)  # nothing moved: the flags are as the last check left them
    git(tree, "rm", "-q", "-r", "src/keep")
    assert check() == (1, True) and flags(app, m) == {"src/keep": None}
    assert check() == (1, False)  # the check before wrote the flags it expected: nothing to compare
    app.emit([ev.PathsChecked(m.store, m.id, {})])  # another process (or a hand) drops the flag
    assert check() == (1, True) and flags(app, m) == {"src/keep": None}
    assert check() == (1, False)
    other = add(app, "Same paths", ["src/old", "src/keep"])
    assert check() == (2, True) and flags(app, other) == {"src/keep": None}
    assert check() == (2, False)
    memories.edit(app, (other.store, other.id), content="Edited elsewhere.")
    assert check()[1] is True
    assert check() == (2, False)
    replay.replay(app)
    assert check() == (2, True)
    assert check() == (2, False)

    real_emit, landed = app.emit, []

    def emit_then_another_write(events, **kwargs):  # type: ignore[no-untyped-def]
        out = real_emit(events, **kwargs)
        app.emit = real_emit  # type: ignore[method-assign]
        # Between the flags and their record, with paths a checked memory has.
        landed.append(add(app, "Landed meanwhile", ["src/old", "src/keep"]))
        return out

    git(tree, "rm", "-q", "-r", "src/old")
    app.emit = emit_then_another_write  # type: ignore[method-assign]
    assert check()[1] is True and flags(app, m) == {"src/old": None, "src/keep": None}
    assert flags(app, landed[0]) == {}  # nobody compared its flags yet
    assert check() == (3, True) and flags(app, landed[0]) == {"src/old": None, "src/keep": None}
    assert check() == (3, False)


def test_globs_and_personal_memories_are_checked(app: Realmem) -> None:
    glob_ok = add(app, "Python files", ["src/**/*.py"])
    glob_gone = add(app, "Protobufs", ["proto/*.proto"], scope="personal")
    assert missing.check(app) == 1
    assert flags(app, glob_ok) == {} and flags(app, glob_gone) == {"proto/*.proto": None}


def test_apply_suggested_path_over_rpc(home: Path, app: Realmem, tree: Path, git: Any) -> None:
    import io

    from realmem.interface.rpc import Server
    m = add(app, "Old module conventions", ["src/old"])
    git(tree, "mv", "src/old", "src/new")
    git(tree, "commit", "-q", "-m", "rename")
    missing.check(app)
    out = io.StringIO()
    server = Server(str(home), out)
    server.handle({"jsonrpc": "2.0", "id": 1, "method": "apply_suggested_path",
                   "params": {"cwd": str(tree), "session": "s1", "id": ids.short(m.id), "path": "src/old"}})
    res = json.loads(out.getvalue())
    assert res["result"]["text"] == f"Paths of [{ids.short(m.id)}] now src/new"
    for apps in server.all_apps:
        for a in apps.values():
            a.close()


# --- prune-paths through the real CLI ----------------------------------------------------------------

def cli(home: Path, cwd: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "REALMEM_HOME": str(home), "REALMEM_WORKER_AUTOSTART": "0"}
    return subprocess.run([sys.executable, "-m", "realmem.interface.cli", "--home", str(home), "--cwd", str(cwd), *args],
                          input=stdin, capture_output=True, text=True, env=env, timeout=300)


def snapshot(home: Path, cwd: Path) -> tuple[dict[str, list[str]], dict[str, str]]:
    with open_attached(home, cwd, scan=False) as a:
        mems = {m.caption: m.paths for m in a.memories()}
        d = a.store_dir(a.project.shared_store)  # type: ignore[union-attr]
        return mems, {p.name: p.read_text(encoding="utf-8") for p in d.glob("*.md")}


def test_prune_paths_lists_then_asks_and_n_changes_nothing(home: Path, app: Realmem, tree: Path, git: Any) -> None:
    partly = add(app, "Old and lib", ["src/old", "lib"])
    gone = add(app, "Only gone paths", ["src/old/a.py", "nowhere"])
    add(app, "All fine", ["src/keep"])
    git(tree, "rm", "-rq", "src/old")
    git(tree, "commit", "-q", "-m", "drop old")
    before = snapshot(home, tree)
    res = cli(home, tree, "prune-paths", stdin="n\n")
    assert res.returncode == 1
    assert f"[{ids.short(partly.id)}] Old and lib: drop src/old\n" in res.stdout
    assert f"[{ids.short(gone.id)}] Only gone paths: drop src/old/a.py, nowhere (delete)" in res.stdout
    assert "All fine" not in res.stdout
    assert "Apply these changes?" in res.stdout
    assert snapshot(home, tree) == before


def test_prune_paths_yes_drops_gone_paths_and_deletes_memories_with_none_left(home: Path, app: Realmem,
                                                                               tree: Path, git: Any) -> None:
    add(app, "Old and lib", ["src/old", "lib"])
    gone = add(app, "Only gone paths", ["src/old/a.py", "nowhere"])
    add(app, "All fine", ["src/keep"])
    add(app, "Project-wide", ["."])
    gone_file = app.store_dir(gone.store) / gone.file
    git(tree, "rm", "-rq", "src/old")
    git(tree, "commit", "-q", "-m", "drop old")
    res = cli(home, tree, "prune-paths", "--yes")
    assert res.returncode == 0, res.stderr
    assert "Pruned 2 memories." in res.stdout
    mems, _ = snapshot(home, tree)
    assert mems == {"Old and lib": ["lib"], "All fine": ["src/keep"], "Project-wide": ["."]}
    assert not gone_file.exists()
    again = cli(home, tree, "prune-paths", "--yes")
    assert again.returncode == 0 and "No memory points at a missing path." in again.stdout


def test_prune_paths_y_on_stdin_applies(home: Path, app: Realmem, tree: Path) -> None:
    add(app, "Gone and lib", ["nowhere", "lib"])
    m = add(app, "Two gone and lib", ["nowhere", "also/nowhere", "lib"])
    missing.check(app)
    res = cli(home, tree, "prune-paths", stdin="y\n")
    assert res.returncode == 0, res.stderr
    assert snapshot(home, tree)[0] == {"Gone and lib": ["lib"], "Two gone and lib": ["lib"]}
    assert flags(app, m) == {}  # pruned paths are no longer flagged as missing


def test_prune_paths_rpc_plan_then_apply(home: Path, app: Realmem, tree: Path) -> None:
    import io

    from realmem.interface.rpc import Server
    keep = add(app, "Gone and lib", ["nowhere", "lib"])
    drop = add(app, "Only gone", ["nowhere/else"])
    out = io.StringIO()
    server = Server(str(home), out)
    for mid, apply in ((1, False), (2, True)):
        server.handle({"jsonrpc": "2.0", "id": mid, "method": "prune_paths",
                       "params": {"cwd": str(tree), "session": "s1", "apply": apply}})
    plan, done = (json.loads(line)["result"] for line in out.getvalue().splitlines())
    changes = {c["id"]: (c["gone"], c["kept"], c["delete"]) for c in plan["details"]["changes"]}
    assert changes == {ids.short(keep.id): (["nowhere"], ["lib"], False),
                       ids.short(drop.id): (["nowhere/else"], [], True)}
    assert plan["text"].startswith("Would prune 2 memories:") and done["text"].startswith("Pruned 2 memories:")
    for apps in server.all_apps:
        for a in apps.values():
            a.close()
    assert snapshot(home, tree)[0] == {"Gone and lib": ["lib"]}


def test_rename_history_is_read_once_per_head(home: Path, app: Realmem, tree: Path, git: Any) -> None:
    """Session starts at the same HEAD reuse the renames git gave (kept in the home's
    git-renames.json); a new commit is read from git again."""
    m = add(app, "Old module conventions", ["src/old"])
    git(tree, "mv", "src/old", "src/new")
    git(tree, "commit", "-q", "-m", "rename old to new")
    assert missing.check(app) == 1 and flags(app, m) == {"src/old": "src/new"}
    cache = home / missing.RENAMES_FILE
    kept = json.loads(cache.read_text(encoding="utf-8"))
    head = git(tree, "rev-parse", "HEAD").strip()
    moved = {"src/old/a.py": "src/new/a.py", "src/old/b.py": "src/new/b.py"}  # git records files
    assert kept[str(tree)]["head"] == head and kept[str(tree)]["renames"] == moved
    # What the cache holds is what the next start uses (git is not asked at this HEAD).
    kept[str(tree)]["renames"] = {"src/old/a.py": "src/cached/a.py"}
    cache.write_text(json.dumps(kept), encoding="utf-8")
    with open_attached(home, tree, session="s2") as again:
        assert missing.check(again) == 1 and flags(again, m) == {"src/old": "src/cached"}
    git(tree, "commit", "-q", "--allow-empty", "-m", "later")  # a new HEAD: git again
    with open_attached(home, tree, session="s3") as later:
        assert missing.check(later) == 1 and flags(later, m) == {"src/old": "src/new"}
    cache.write_text("{not json", encoding="utf-8")  # a broken cache is only a cache
    assert missing.renames(tree, cache=home) == moved
    assert json.loads(cache.read_text(encoding="utf-8"))[str(tree)]["head"] != head
