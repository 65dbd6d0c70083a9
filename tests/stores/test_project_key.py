"""The project key stays what a project's stores already use: across a shallow clone, a merge
of an unrelated history, an amended root commit and worktrees.  Real git repositories."""

from __future__ import annotations

from pathlib import Path

from realmem.stores import project as project_mod
from realmem.stores.project import detect, forget_cache
from realmem.write import memories
from realmem.write.attached import open_attached

from conftest import make_repo, run_git


def key_of(path: Path) -> str:
    forget_cache()
    return detect(path).key


def root_commit(repo: Path) -> str:
    return run_git(repo, "rev-list", "--max-parents=0", "HEAD").split()[0]


def with_shared_store(repo: Path) -> Path:
    """A shared fact written by realmem, which records the key beside it."""
    forget_cache()
    with open_attached(repo.parent / f"{repo.name}-home", repo) as app:
        store, stored = memories.place(app, "shared", None)
        memories.add(app, "Tests run with make check", "make check", store=store, stored_paths=stored, source="add")
    return repo / ".pi" / "realmem"


def test_the_key_is_kept_in_the_git_dir_and_the_shared_store(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    store = with_shared_store(repo)
    key = key_of(repo)
    assert key == f"git-{root_commit(repo)}"
    assert (repo / ".git" / project_mod.KEY_FILE).read_text().strip() == key
    assert (store / project_mod.SHARED_KEY_FILE).read_text().strip() == key


def test_reading_a_shared_store_adds_no_file_to_it(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    store = repo / ".pi" / "realmem"
    store.mkdir(parents=True)
    (store / "tests-run-with-make.md").write_text("---\ncaption: Tests run with make check\n---\n\nmake check\n",
                                                  encoding="utf-8")
    key_of(repo)
    assert sorted(p.name for p in store.iterdir()) == ["tests-run-with-make.md"]  # git status shows only what you wrote
    assert (repo / ".git" / project_mod.KEY_FILE).exists()


def test_a_shallow_clone_gets_the_full_clones_key(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    with_shared_store(repo)
    key = key_of(repo)
    run_git(repo, "add", ".pi")
    run_git(repo, "commit", "-q", "-m", "facts")
    (repo / "more.txt").write_text("more\n")
    run_git(repo, "add", "more.txt")
    run_git(repo, "commit", "-q", "-m", "more")
    shallow = tmp_path / "shallow"
    run_git(tmp_path, "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow))
    assert root_commit(shallow) != key.removeprefix("git-")  # git alone would give another key
    assert key_of(shallow) == key
    # Unshallowed later, it keeps the key it already used.
    assert (shallow / ".git" / project_mod.KEY_FILE).read_text().strip() == key


def test_a_merged_unrelated_history_with_a_smaller_root_keeps_the_key(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    # A root commit in the upper half of the hash space, so an orphan root sorting before it is
    # found in a few tries (a small root made the search below fail now and then).
    for i in range(64):
        if root_commit(repo)[0] >= "8":
            break
        run_git(repo, "commit", "-q", "--amend", "-m", f"init {i}")
    key = key_of(repo)
    # An orphan history whose root commit sorts first: the smallest root would change the key.
    for i in range(64):
        run_git(repo, "checkout", "-q", "--orphan", f"other{i}")
        run_git(repo, "rm", "-q", "-rf", "--cached", ".")
        (repo / f"other{i}.txt").write_text(f"{i}\n")
        run_git(repo, "add", f"other{i}.txt")
        run_git(repo, "commit", "-q", "-m", f"other root {i}")
        if run_git(repo, "rev-parse", "HEAD").strip() < key.removeprefix("git-"):
            break
        run_git(repo, "checkout", "-q", "-f", "main")
    else:
        raise AssertionError("no smaller root commit in 64 tries")
    other = run_git(repo, "rev-parse", "HEAD").strip()
    run_git(repo, "checkout", "-q", "-f", "main")
    run_git(repo, "merge", "-q", "--allow-unrelated-histories", "-m", "merge", other)
    assert sorted(run_git(repo, "rev-list", "--max-parents=0", "HEAD").split())[0] == other
    assert key_of(repo) == key


def test_an_amended_root_commit_keeps_the_key(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    key = key_of(repo)
    run_git(repo, "commit", "-q", "--amend", "-m", "init, reworded")
    assert root_commit(repo) != key.removeprefix("git-")
    assert key_of(repo) == key


def test_a_worktree_shares_the_key(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    key = key_of(repo)
    run_git(repo, "commit", "-q", "--amend", "-m", "init, reworded")  # git alone would now differ
    run_git(repo, "worktree", "add", "-q", str(tmp_path / "wt"))
    assert key_of(tmp_path / "wt") == key


def test_a_kept_shared_key_is_not_overwritten_by_another_clone(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    store = repo / ".pi" / "realmem"
    store.mkdir(parents=True)
    (store / project_mod.SHARED_KEY_FILE).write_text("git-" + "a" * 40 + "\n")  # a teammate's record, pulled
    assert key_of(repo) == "git-" + "a" * 40
    assert (store / project_mod.SHARED_KEY_FILE).read_text() == "git-" + "a" * 40 + "\n"


def personal_captions(home: Path, repo: Path) -> list[str]:
    forget_cache()
    with open_attached(home, repo) as app:
        return [m.caption for m in app.memories() if m.store == app.project.personal_store]


def test_an_unshallowed_clone_moves_its_personal_memories_and_says_so(tmp_path: Path) -> None:
    from realmem.interface import session

    repo = make_repo(tmp_path / "repo")
    for i in range(2):
        (repo / f"f{i}.txt").write_text(f"{i}\n")
        run_git(repo, "add", f"f{i}.txt")
        run_git(repo, "commit", "-q", "-m", f"commit {i}")
    shallow = tmp_path / "shallow"
    run_git(tmp_path, "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow))  # no shared key record
    home = tmp_path / "home"
    forget_cache()
    with open_attached(home, shallow) as app:
        shallow_key = app.project.key
        store, stored = memories.place(app, "personal", None)
        memories.add(app, "My editor runs ruff on save", "ruff on save", store=store, stored_paths=stored, source="add")
    assert shallow_key != f"git-{root_commit(repo)}"
    run_git(shallow, "fetch", "-q", "--unshallow")
    assert key_of(shallow) == f"git-{root_commit(repo)}"
    assert personal_captions(home, shallow) == ["My editor runs ruff on save"]
    assert not (home / "personal" / shallow_key).exists()
    forget_cache()
    with open_attached(home, shallow) as app:
        note = session.start(app)["notification"]
        assert note is not None and "project key changed" in note and "1 personal memory moved" in note
        assert "project key changed" not in (session.start(app)["notification"] or "")  # told once


def test_another_checkout_sharing_the_history_keeps_its_own_personal_memories(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    home = tmp_path / "home"
    forget_cache()
    with open_attached(home, repo) as app:
        store, stored = memories.place(app, "personal", None)
        memories.add(app, "Deploys go through staging first", "staging first", store=store, stored_paths=stored,
                     source="add")
    # A second project that merged this one's history in: the first key is in its history too,
    # but the memories belong to the checkout that made them.
    other = make_repo(tmp_path / "other")
    assert personal_captions(home, other) == []  # its key is kept from here on
    run_git(other, "fetch", "-q", str(repo), "main")
    run_git(other, "merge", "-q", "-s", "ours", "--allow-unrelated-histories", "-m", "merge", "FETCH_HEAD")
    assert personal_captions(home, other) == []
    assert personal_captions(home, repo) == ["Deploys go through staging first"]
