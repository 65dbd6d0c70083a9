"""The project key stays what a project's stores already use: across a shallow clone, a merge
of an unrelated history, an amended root commit and worktrees.  Real git repositories."""

from __future__ import annotations

from pathlib import Path

from realmem.stores import project as project_mod
from realmem.stores.project import detect, forget_cache
from realmem.write import memories
from realmem.write.observe import open_attached

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
