"""Edits that undo what git brought (issue 32, item 2).

Everything here runs on real git repositories in tmp dirs: a teammate's clone pushing through a
bare remote, a branch switched away and back, two REALMEM_HOMEs on one checkout, and a real rpc
child (a long-lived Pi session) that scanned its store only at session start.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from realmem.events import types as ev
from realmem.projections.urgency import urgency_key
from realmem.interface import commands, tools
from realmem.projections import files, replay
from realmem.stores import ids
from realmem.write import memories
from realmem.write.attached import open_attached
from realmem.write.observe import scan_stores

from conftest import run_git
from helpers.rpc_child import child_env, spawn  # noqa: F401 (fixtures)


def add(app, caption: str, content: str, paths: list[str] | None = None):  # type: ignore[no-untyped-def]
    store, stored = memories.place(app, "shared", paths)
    return memories.add(app, caption, content, store=store, stored_paths=stored, source="add")


def commit_all(repo: Path, message: str) -> None:
    run_git(repo, "add", "-A")
    run_git(repo, "commit", "-q", "-m", message)


# --- branch round trips ------------------------------------------------------------------

def test_a_fact_of_a_branch_keeps_its_counters_and_urgency_across_a_checkout_round_trip(home: Path,
                                                                                        repo: Path) -> None:
    (repo / "src").mkdir()
    (repo / "src" / "db.py").write_text("x = 1\n", encoding="utf-8")
    commit_all(repo, "src")
    run_git(repo, "checkout", "-q", "-b", "feature")
    with open_attached(home, repo) as app:
        m = add(app, "The feature flag lives in src/db.py", "FEATURE_X toggles the new schema", ["src/db.py"])
        for _ in range(3):
            memories.reinforce(app, (m.store, m.id))
        app.emit([ev.UrgencyJudged(m.store, m.id, urgency_key(m), 0.8, {"2": 0.8, "0": 0.2}, 0.9, "debug")])
        assert app.counters((m.store, m.id)) == (3, 0)
    commit_all(repo, "a fact on the feature branch")
    text = (repo / ".pi" / "realmem" / m.file).read_text(encoding="utf-8")

    run_git(repo, "checkout", "-q", "main")
    with open_attached(home, repo) as app:
        assert app.memory((m.store, m.id)) is None  # absent: not served while its file is gone
        assert all(x.id != m.id for x in app.memories())
        memories.reinforce(app, (m.store, m.id))  # nothing counts for an absent memory
    run_git(repo, "checkout", "-q", "-")
    assert (repo / ".pi" / "realmem" / m.file).read_text(encoding="utf-8") == text
    with open_attached(home, repo) as app:
        back = app.memory((m.store, m.id))
        assert back is not None and back.text == text
        assert app.counters((m.store, m.id)) == (3, 0)
        row = app.conn.execute("SELECT valid_for, score, source FROM urgency WHERE store=? AND id=?",
                               (m.store, m.id)).fetchone()
        assert row == (urgency_key(back), 0.8, "debug")
        memories.reinforce(app, (m.store, m.id))
        assert app.counters((m.store, m.id)) == (4, 0)
        assert replay.check(app).differences == []
        replay.replay(app)
        assert app.counters((m.store, m.id)) == (4, 0)
        assert replay.check(app).differences == []


def test_a_forgotten_fact_that_comes_back_starts_its_counts_again(home: Path, repo: Path) -> None:
    with open_attached(home, repo) as app:
        m = add(app, "Releases are tagged from main only", "git tag vX.Y.Z on main")
        for _ in range(3):
            memories.reinforce(app, (m.store, m.id))
    commit_all(repo, "a fact")
    with open_attached(home, repo) as app:
        memories.forget(app, [(m.store, m.id)])
        assert not (repo / ".pi" / "realmem" / m.file).exists()
    run_git(repo, "checkout", "-q", "--", ".pi/realmem")  # the committed file is back
    with open_attached(home, repo) as app:
        scan_stores(app)
        back = app.memory((m.store, m.id))
        assert back is not None  # an outside file is a fact like any other
        assert app.counters((m.store, m.id)) == (0, 0)  # but a forget stayed a forget
        assert replay.check(app).differences == []


# --- a long-lived rpc child after a pull ---------------------------------------------------

def teammate(repo: Path, tmp_path: Path) -> Path:
    clone = tmp_path / "teammate"
    run_git(tmp_path, "clone", "-q", str(repo), str(clone))
    return clone


def pull(repo: Path, clone: Path) -> None:
    run_git(repo, "pull", "-q", "--ff-only", str(clone), "main")


def holders(store_dir: Path, mem_id: str) -> list[str]:
    """The fact files in ``store_dir`` that carry ``mem_id``."""
    return sorted(p.name for p in store_dir.glob("*.md") if files.parse(p.read_text(encoding="utf-8")).id == mem_id)


def shared_fact(home: Path, repo: Path):  # type: ignore[no-untyped-def]
    with open_attached(home, repo) as app:
        m = add(app, "Deploys go through make deploy", "make deploy ENV=staging first")
    commit_all(repo, "a shared fact")
    return m


def session_before_pull(spawn: Any, home: Path, repo: Path, tmp_path: Path):  # type: ignore[no-untyped-def]
    """A shared fact, a teammate's clone, and a Pi session (rpc child) started before the pull."""
    m = shared_fact(home, repo)
    clone = teammate(repo, tmp_path)
    c = spawn()
    c.call("session_start", {"cwd": str(repo), "session": "s"})
    return m, clone, c


def rename_caption(clone: Path, old_file: str, caption: str) -> str:
    """The teammate renames the fact (new caption, file named after it) by hand and commits."""
    d = clone / ".pi" / "realmem"
    text = (d / old_file).read_text(encoding="utf-8")
    parsed = files.parse(text)
    new_file = files.slug(caption) + ".md"
    run_git(clone, "mv", f".pi/realmem/{old_file}", f".pi/realmem/{new_file}")
    (d / new_file).write_text(text.replace(f"caption: {parsed.caption}\n", f"caption: {caption}\n"), encoding="utf-8")
    commit_all(clone, "rename the deploy fact")
    return new_file


def test_an_rpc_edit_after_a_pulled_rename_keeps_the_rename(spawn: Any, home: Path, repo: Path,
                                                           tmp_path: Path) -> None:
    m, clone, c = session_before_pull(spawn, home, repo, tmp_path)  # the child's only scan
    new_file = rename_caption(clone, m.file, "Deploys go through the release pipeline")
    pull(repo, clone)

    c.call("edit", {"cwd": str(repo), "id": ids.short(m.id), "content": "make release, then make deploy"})
    d = repo / ".pi" / "realmem"
    assert not (d / m.file).exists()  # the teammate's rename is not undone
    assert holders(d, m.id) == [new_file]
    on_disk = files.parse((d / new_file).read_text(encoding="utf-8"))
    assert (on_disk.caption, on_disk.content) == ("Deploys go through the release pipeline",
                                                  "make release, then make deploy")
    assert run_git(repo, "status", "--porcelain") == f"M .pi/realmem/{new_file}"  # nothing untracked
    assert c.close() == 0
    with open_attached(home, repo) as app:
        assert app.memory((m.store, m.id)).file == new_file
        assert app.conn.execute("SELECT count(*) FROM problems").fetchone()[0] == 0
        assert replay.check(app).differences == []


def test_an_rpc_edit_after_a_pulled_delete_is_refused_and_writes_nothing(spawn: Any, home: Path, repo: Path,
                                                                        tmp_path: Path) -> None:
    m, clone, c = session_before_pull(spawn, home, repo, tmp_path)
    run_git(clone, "rm", "-q", f".pi/realmem/{m.file}")
    commit_all(clone, "the deploy fact is obsolete")
    pull(repo, clone)

    err = c.error("edit", {"cwd": str(repo), "id": ids.short(m.id), "content": "make deploy ENV=prod"})
    assert "deleted outside realmem" in err["message"] and "nothing was written" in err["message"]
    assert "\n" not in err["message"]
    assert not (repo / ".pi" / "realmem" / m.file).exists()  # the deleted file does not come back
    assert run_git(repo, "status", "--porcelain") == ""
    assert c.close() == 0
    with open_attached(home, repo) as app:
        assert app.memory((m.store, m.id)) is None
        assert replay.check(app).differences == []


def test_an_rpc_forget_after_a_pulled_rename_forgets_the_renamed_file(spawn: Any, home: Path, repo: Path,
                                                                     tmp_path: Path) -> None:
    m, clone, c = session_before_pull(spawn, home, repo, tmp_path)
    new_file = rename_caption(clone, m.file, "Deploys go through the release pipeline")
    pull(repo, clone)

    c.call("forget", {"cwd": str(repo), "ids": [ids.short(m.id)]})
    assert holders(repo / ".pi" / "realmem", m.id) == []  # not left to come back at the next scan
    assert run_git(repo, "status", "--porcelain") == f"D .pi/realmem/{new_file}"
    assert c.close() == 0
    with open_attached(home, repo) as app:
        assert app.memory((m.store, m.id)) is None
        assert replay.check(app).differences == []


# --- two homes on one checkout --------------------------------------------------------------

def test_two_homes_on_one_checkout_agree_after_one_renames_and_the_other_edits(home: Path, repo: Path,
                                                                             tmp_path: Path) -> None:
    other_home = tmp_path / "claude-home"  # Claude Code installed with --home
    m = shared_fact(home, repo)
    d = repo / ".pi" / "realmem"
    with open_attached(other_home, repo) as b:  # long-lived: scanned once, when it opened
        assert b.memory((m.store, m.id)) is not None
        with open_attached(home, repo) as a:
            renamed = commands.edit(a, ids.short(m.id), caption="Deploys go through the release pipeline")
        assert renamed["text"].startswith("Edited")
        [new_file] = holders(d, m.id)
        assert new_file != m.file
        commands.edit(b, ids.short(m.id), content="make release, then make deploy")
        assert holders(d, m.id) == [new_file]  # one id, one file
        got_b = b.memory((m.store, m.id))
        assert (got_b.caption, got_b.content, got_b.file) == ("Deploys go through the release pipeline",
                                                              "make release, then make deploy", new_file)
        assert replay.check(b).differences == []
    with open_attached(home, repo) as a:
        got_a = a.memory((m.store, m.id))
        assert (got_a.caption, got_a.content, got_a.file) == (got_b.caption, got_b.content, got_b.file)
        assert a.conn.execute("SELECT count(*) FROM problems").fetchone()[0] == 0
        assert replay.check(a).differences == []


def test_one_id_in_two_files_keeps_the_newer_in_every_home(home: Path, repo: Path, tmp_path: Path) -> None:
    """The state a stale write left before this was fixed: home A renamed the fact, home B wrote
    its edit back under the old name.  Every home keeps the newer file and reports the other."""
    other_home = tmp_path / "claude-home"
    m = shared_fact(home, repo)
    d = repo / ".pi" / "realmem"
    with open_attached(other_home, repo) as b:
        assert b.memory((m.store, m.id)) is not None
    with open_attached(home, repo) as a:
        commands.edit(a, ids.short(m.id), caption="Deploys go through the release pipeline")
        renamed = a.memory((m.store, m.id))
    assert renamed.file != m.file and not (d / m.file).exists()
    then = dt.datetime.fromisoformat(renamed.updated.removesuffix("Z")) + dt.timedelta(seconds=1)
    later = then.strftime("%Y-%m-%dT%H:%M:%S.") + f"{then.microsecond // 1000:03d}Z"
    stale = files.render(id=m.id, caption=m.caption, paths=m.paths, created=m.created, updated=later,
                         content="make deploy ENV=prod")
    (d / m.file).write_text(stale, encoding="utf-8")  # B's edit, written back under the old name

    for realmem_home in (home, other_home, home):  # each home, and again: stable
        with open_attached(realmem_home, repo) as app:
            got = app.memory((m.store, m.id))
            assert (got.file, got.content, got.text) == (m.file, "make deploy ENV=prod", stale)
            rows = app.conn.execute("SELECT file, problem, message FROM problems").fetchall()
            assert rows == [(renamed.file, "duplicate-id", f"{renamed.file} repeats the id of {m.file}; ignored")]
            assert replay.check(app).differences == []
    assert (d / renamed.file).read_text(encoding="utf-8") == renamed.text  # reported, never deleted
    with open_attached(home, repo) as app:
        replay.replay(app)
        assert (d / renamed.file).read_text(encoding="utf-8") == renamed.text
        assert replay.check(app).differences == []


# --- merge conflicts ---------------------------------------------------------------------

def test_a_fact_with_merge_conflict_markers_is_not_served_and_is_named(home: Path, repo: Path,
                                                                       tmp_path: Path) -> None:
    m = shared_fact(home, repo)
    clone = teammate(repo, tmp_path)
    path = f".pi/realmem/{m.file}"
    theirs = (clone / path).read_text(encoding="utf-8").replace("ENV=staging first", "ENV=canary first")
    (clone / path).write_text(theirs, encoding="utf-8")
    commit_all(clone, "canary before prod")
    ours = (repo / path).read_text(encoding="utf-8").replace("ENV=staging first", "ENV=qa first")
    (repo / path).write_text(ours, encoding="utf-8")
    commit_all(repo, "qa before prod")
    open_attached(home, repo).close()  # this checkout's realmem read the qa version
    merged = run_git_status(repo, "pull", "-q", "--no-rebase", str(clone), "main")
    assert "CONFLICT" in merged  # a real conflict
    text = (repo / path).read_text(encoding="utf-8")
    assert "<<<<<<<" in text and ">>>>>>>" in text

    with open_attached(home, repo) as app:
        kept = app.memory((m.store, m.id))  # neither side nor the markers: the version before the merge
        assert kept is not None and kept.content == "make deploy ENV=qa first"
        assert (repo / path).read_text(encoding="utf-8") == text  # the user's merge is left alone
        served = commands.recall(app, queries=["make deploy"])["text"]
        assert "<<<<<<<" not in served and "canary" not in served
        started = session_start_text(app)
        assert m.file in started and "merge conflict" in started
        listed = commands.manage_list(app)
        assert m.file in (listed["details"]["conflicts"] or "")
        status = tools.status(app)["text"]
        assert m.file in status and "merge conflict" in status

    (repo / path).write_text(ours, encoding="utf-8")  # resolved: ours kept
    commit_all(repo, "merge, keeping qa")
    with open_attached(home, repo) as app:
        back = app.memory((m.store, m.id))
        assert back is not None and back.content == "make deploy ENV=qa first"
        assert commands.manage_list(app)["details"]["conflicts"] is None
        assert "merge conflict" not in session_start_text(app)
        assert replay.check(app).differences == []


def run_git_status(repo: Path, *args: str) -> str:
    """git's output, whatever its exit code (a conflicted merge exits 1)."""
    import subprocess
    out = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo,
                         capture_output=True, text=True)
    return out.stdout + out.stderr


def session_start_text(app) -> str:  # type: ignore[no-untyped-def]
    from realmem.interface import session
    out = session.start(app)
    return " ".join(str(n) for n in out.get("notes", [])) + str(out)
