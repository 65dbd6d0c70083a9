"""Edits that undo what git brought (issue 32, item 2).

Everything here runs on real git repositories in tmp dirs: a teammate's clone pushing through a
bare remote, a branch switched away and back, two REALMEM_HOMEs on one checkout, and a real rpc
child (a long-lived Pi session) that scanned its store only at session start.
"""

from __future__ import annotations

from pathlib import Path

from realmem.events import types as ev
from realmem.gate.judge import urgency_key
from realmem.projections import replay
from realmem.write import memories
from realmem.write.observe import open_attached, scan_stores

from conftest import run_git


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
