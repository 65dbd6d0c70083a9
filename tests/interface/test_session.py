"""session_start (spec: "Sharing project memories through git", "Missing paths", the queue):
one notification with everything the user should know.  Real git repositories; session start
really spawns the background worker, so every test here runs it with a 1 s idle timeout and
kills any worker of its home in teardown."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from realmem.interface import session
from realmem.write import memories
from realmem.write.attached import open_attached
from realmem.write.observe import scan_stores
from realmem.gate.remember import remember

from conftest import kill_workers, make_repo, worker_pids


@pytest.fixture(autouse=True)
def workers(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("REALMEM_WORKER_IDLESECONDS", "1")
    yield
    kill_workers(home)


def start(home: Path, cwd: Path, **kw: Any) -> dict[str, Any]:
    with open_attached(home, cwd, session="s1", scan=False) as a:
        scan_stores(a)  # what the rpc method does first
        return session.start(a)


def test_nothing_to_say(home: Path, repo: Path) -> None:
    res = start(home, repo)
    assert res["notification"] is None and res["level"] == "info"
    assert res["project"]["root"] == str(repo) and res["project"]["key"].startswith("git-")
    assert (res["queued"], res["missing"], res["gitignore"]) == (0, 0, None)


def test_session_start_makes_sure_a_worker_runs(home: Path, repo: Path) -> None:
    start(home, repo)
    assert worker_pids(home), "session start spawned no worker"


def test_session_start_leaves_the_worker_alone_when_autostart_is_off(home: Path, repo: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """worker.autostart off (the setting, or REALMEM_WORKER_AUTOSTART=0): no worker appears
    behind the user's back, as the queue's own wake-ups already honoured."""
    monkeypatch.setenv("REALMEM_WORKER_AUTOSTART", "0")
    start(home, repo)
    assert not worker_pids(home) and not (home / "worker.spawn").exists()


@pytest.mark.parametrize("rule", [".pi/", ".pi", ".pi/*"])
def test_gitignore_warning_names_the_rule_and_the_fix(home: Path, repo: Path, git: Any, rule: str) -> None:
    (repo / ".gitignore").write_text(f"node_modules/\n{rule}\n", encoding="utf-8")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-q", "-m", "ignore .pi")
    res = start(home, repo)
    assert res["level"] == "warning"
    warning = res["gitignore"]
    assert warning and ".pi/realmem" in warning and "will not be committed" in warning
    assert ".gitignore:2" in warning and rule in warning
    assert "Fix: realmem fix-gitignore" in warning and "!/.pi/realmem/" in warning
    assert res["notification"].startswith("realmem: ") and warning in res["notification"]


def test_missing_paths_are_counted(home: Path, repo: Path, git: Any) -> None:
    (repo / "src" / "old").mkdir(parents=True)
    (repo / "src" / "old" / "a.py").write_text("x = 1\n", encoding="utf-8")
    with open_attached(home, repo) as a:
        store = a.project.shared_store  # type: ignore[union-attr]
        memories.add(a, "Old module note", "About src/old.", store=store, stored_paths=["src/old"], source="add")
        memories.add(a, "Gone file note", "About lib/gone.py.", store=store, stored_paths=["lib/gone.py"], source="add")
        memories.add(a, "Project-wide note", "Everywhere.", store=store, stored_paths=["."], source="add")
    res = start(home, repo)
    assert res["missing"] == 1
    assert "1 memory points at paths that no longer exist" in res["notification"]
    assert "prune-paths" in res["notification"]
    (repo / "src" / "old" / "a.py").unlink()
    (repo / "src" / "old").rmdir()
    res = start(home, repo)
    assert res["missing"] == 2 and "2 memories point at paths" in res["notification"]
    assert res["level"] == "info"  # missing paths alone are no warning


def test_queued_candidates_of_this_project_are_counted(home: Path, repo: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REALMEM_WORKER_AUTOSTART", "0")  # no SemIf endpoint: remember queues
    with open_attached(home, repo, session="s1") as a:
        for i in range(2):
            out = remember(a, f"Queued fact {i}", f"Content of queued fact {i}.")
            assert out.queued
    other = make_repo(tmp_path / "other")
    with open_attached(home, other, session="s1") as a:
        assert remember(a, "Other project fact", "Queued in the other project.").queued
    res = start(home, repo)
    assert res["queued"] == 2
    assert "2 candidate memories are queued for this project" in res["notification"]
    # No judge is reachable (the CLI on the first day): the note says what they wait for and how to get one.
    assert ("queued for this project: no judge is reachable: set semif.url (a System One endpoint) or rewriter.url "
            "(a chat model) with realmem settings set KEY VALUE") in res["notification"]
    assert start(home, other)["queued"] == 1
    monkeypatch.setenv("REALMEM_SEMIF_URL", "http://127.0.0.1:9")  # set, but unreachable: retried
    res = start(home, repo)
    assert "queued for this project (retried automatically; realmem retry)" in res["notification"]


def test_unreadable_fact_files_are_a_warning(home: Path, repo: Path) -> None:
    with open_attached(home, repo) as a:
        d = a.store_dir(a.project.shared_store)  # type: ignore[union-attr]
    d.mkdir(parents=True, exist_ok=True)
    (d / "broken.md").write_text("---\nid: [not closed\n", encoding="utf-8")
    res = start(home, repo)
    assert res["level"] == "warning"
    assert "1 fact file could not be read" in res["notification"]


def test_everything_at_once_in_one_notification(home: Path, repo: Path, git: Any,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REALMEM_WORKER_AUTOSTART", "0")
    (repo / ".gitignore").write_text(".pi/\n", encoding="utf-8")
    with open_attached(home, repo, session="s1") as a:
        memories.add(a, "Gone file note", "About lib/gone.py.", store=a.project.shared_store,  # type: ignore[union-attr]
                     stored_paths=["lib/gone.py"], source="add")
        assert remember(a, "Queued fact", "Content of a queued fact.").queued
    res = start(home, repo)
    note = res["notification"]
    assert note.count("realmem:") == 1
    assert "ignored by git" in note and "no longer exist" in note and "1 candidate memory is queued" in note
    assert res["level"] == "warning"


def test_the_notification_names_the_context_files_realmem_strips(home: Path, repo: Path) -> None:
    from realmem.gate import importer
    (repo / "AGENTS.md").write_text("# Agents\n\nRun make test.\n", encoding="utf-8")
    with open_attached(home, repo, session="s1", scan=False) as a:
        importer.begin(a, [])
        memories.add(a, "Run make test", "Run `make test`.", store=a.store_for_scope("shared"), stored_paths=["."],
                     source="remember")
        assert importer.finish(a)["imported"] == [str(repo / "AGENTS.md")]
    res = start(home, repo)
    assert res["stripped"] == [str(repo / "AGENTS.md")]
    assert res["notification"] == "realmem: Imported, so not in the prompt: AGENTS.md (realmem replaces it)."
