"""realmem.write.gitignore against real temporary git repositories.

Every test runs git with HOME, GIT_CONFIG_GLOBAL and XDG_CONFIG_HOME pointed into tmp_path,
so the user's own configuration and excludes file are never read or written.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import attrs
import pytest

from realmem.write.gitignore import (
    COMMENT,
    Fix,
    GitIgnoreError,
    IgnoreRule,
    IgnoreStatus,
    apply_fix,
    cached_check,
    check,
)

FILES_FIX = ("!/.pi/realmem/", "!/.pi/realmem/**")
DIR_FIX = ("!/.pi/", "/.pi/*", "!/.pi/realmem/", "!/.pi/realmem/**")

# Paths whose ignored-ness a fix must leave alone (created on disk in every repo).
OTHER_PATHS = (
    ".pi/settings.json",
    ".pi/sessions/a.jsonl",
    ".pi/other/file.txt",
    ".pi/notes.md",
    "docs/x.md",
    "src/main.py",
)


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An isolated git environment; returns the temp HOME."""
    home = tmp_path / "home"
    home.mkdir()
    global_config = tmp_path / "gitconfig"
    global_config.write_text("")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(global_config))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_CONFIG_PARAMETERS"):
        monkeypatch.delenv(var, raising=False)
    return home


def git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)


def ignored(root: Path, path: str) -> bool:
    rc = git(root, "check-ignore", "-q", "--no-index", path).returncode
    assert rc in (0, 1)
    return rc == 0


def make_repo(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    assert git(root, "init", "-q").returncode == 0
    for rel in (".pi/realmem/x.md", *OTHER_PATHS):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("content\n")
    return root


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@attrs.frozen
class Case:
    """One way the store gets ignored, and the fix expected for it."""

    setup: Callable[[Path, Path], None]  # (root, home)
    source: Callable[[Path, Path], str]  # rule source as git prints it
    line: int
    pattern: str
    kind: str
    fix_file: str  # relative to root
    lines: tuple[str, ...]


def root_rules(text: str) -> Callable[[Path, Path], None]:
    return lambda root, home: write(root / ".gitignore", text)


def at(name: str) -> Callable[[Path, Path], str]:
    return lambda root, home: name


def configured_excludes(root: Path, home: Path) -> None:
    """A global excludes file named by core.excludesFile in the temp GIT_CONFIG_GLOBAL."""
    write(home / "my-ignore", "*.log\n.pi/*\n")
    assert git(root, "config", "--global", "core.excludesFile", "~/my-ignore").returncode == 0


CASES = {
    "pi-star": Case(root_rules("node_modules/\n.pi/*\n"), at(".gitignore"), 2, ".pi/*",
                    "project", ".gitignore", FILES_FIX),
    "star-md": Case(root_rules("*.md\n"), at(".gitignore"), 1, "*.md",
                    "project", ".gitignore", FILES_FIX),
    "pi-doublestar": Case(root_rules(".pi/**\n"), at(".gitignore"), 1, ".pi/**",
                          "project", ".gitignore", FILES_FIX),
    "pi-doublestar-md": Case(root_rules("# notes\n.pi/**/*.md\n"), at(".gitignore"), 2,
                             ".pi/**/*.md", "project", ".gitignore", FILES_FIX),
    "store-dir": Case(root_rules(".pi/realmem/\n"), at(".gitignore"), 1, ".pi/realmem/",
                      "project", ".gitignore", FILES_FIX),
    "pi-dir-slash": Case(root_rules("build\n.pi/\n"), at(".gitignore"), 2, ".pi/",
                         "project", ".gitignore", DIR_FIX),
    "pi-bare": Case(root_rules(".pi"), at(".gitignore"), 1, ".pi",
                    "project", ".gitignore", DIR_FIX),
    "pi-anchored": Case(root_rules("/.pi/\n"), at(".gitignore"), 1, "/.pi/",
                        "project", ".gitignore", DIR_FIX),
    "pi-anywhere": Case(root_rules("**/.pi\n"), at(".gitignore"), 1, "**/.pi",
                        "project", ".gitignore", DIR_FIX),
    "nested-pi": Case(lambda root, home: write(root / ".pi/.gitignore", "*\n"),
                      at(".pi/.gitignore"), 1, "*", "nested", ".pi/.gitignore",
                      ("!/realmem/", "!/realmem/**")),
    "nested-store": Case(lambda root, home: write(root / ".pi/realmem/.gitignore", "*.md\n"),
                         at(".pi/realmem/.gitignore"), 1, "*.md", "nested",
                         ".pi/realmem/.gitignore", ("!*",)),
    "info-exclude": Case(
        lambda root, home: write(root / ".git/info/exclude", "# local\n.pi/\n"),
        at(".git/info/exclude"), 2, ".pi/", "info-exclude", ".gitignore", DIR_FIX),
    "core-excludesfile": Case(
        configured_excludes,
        lambda root, home: str(home / "my-ignore"), 2, ".pi/*", "global-excludes",
        ".gitignore", FILES_FIX),
    "xdg-default-excludes": Case(
        lambda root, home: write(home / ".config/git/ignore", ".pi\n"),
        lambda root, home: str(home / ".config/git/ignore"), 1, ".pi", "global-excludes",
        ".gitignore", DIR_FIX),
}


@pytest.mark.parametrize("name", list(CASES))
def test_fix_table_row(name: str, env: Path, tmp_path: Path) -> None:
    case = CASES[name]
    root = make_repo(tmp_path / "repo")
    case.setup(root, env)
    before = {p: ignored(root, p) for p in OTHER_PATHS}

    status = check(root)

    assert status.ignored
    assert status.rule == IgnoreRule(case.source(root, env), case.line, case.pattern, case.kind)
    assert status.fix is not None
    assert Path(status.fix.file) == (root / case.fix_file).resolve()
    assert status.fix.lines == case.lines
    assert case.pattern in status.fix.description
    warning = status.warning()
    assert warning is not None
    assert status.rule.ref() in warning
    assert ", ".join(case.lines) in warning
    assert "Fix: realmem fix-gitignore" in warning

    after = apply_fix(root, status.fix)

    assert after == IgnoreStatus(False, None, None)
    assert after.warning() is None
    assert not ignored(root, ".pi/realmem/x.md")
    assert git(root, "add", ".pi/realmem/x.md").returncode == 0
    assert git(root, "ls-files", "--error-unmatch", ".pi/realmem/x.md").returncode == 0
    assert {p: ignored(root, p) for p in OTHER_PATHS} == before
    for path, was_ignored in before.items():
        if was_ignored:
            assert git(root, "add", path).returncode != 0, path
    text = (root / case.fix_file).read_text()
    assert text.endswith("\n".join((COMMENT, *case.lines)) + "\n")


def test_star_md_keeps_other_markdown_ignored(env: Path, tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo")
    write(root / ".gitignore", "*.md\n")
    status = check(root)
    assert status.fix is not None
    apply_fix(root, status.fix)
    assert not ignored(root, ".pi/realmem/x.md")
    assert not ignored(root, ".pi/realmem/deep/y.md")
    for path in ("docs/x.md", "README.md", ".pi/notes.md", ".pi/realmemx/y.md"):
        assert ignored(root, path), path


def test_whole_dir_fix_keeps_rest_of_pi_ignored(env: Path, tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo")
    write(root / ".gitignore", ".pi/\n")
    status = check(root)
    assert status.fix is not None and status.fix.lines == DIR_FIX
    apply_fix(root, status.fix)
    for path in (".pi/settings.json", ".pi/.gitignore", ".pi/realmemx/y.md", ".pi/realmem.md"):
        assert ignored(root, path), path
    assert git(root, "add", ".pi/realmem").returncode == 0
    tracked = git(root, "ls-files").stdout.split()
    assert tracked == [".pi/realmem/x.md"]


def test_not_ignored_has_no_warning(env: Path, tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo")
    write(root / ".gitignore", "node_modules/\n.pi/sessions/\n")
    status = check(root)
    assert status == IgnoreStatus(False, None, None)
    assert status.warning() is None


def test_negation_rule_means_not_ignored_although_verbose_prints_it(
    env: Path, tmp_path: Path
) -> None:
    root = make_repo(tmp_path / "repo")
    write(root / ".gitignore", "*.md\n!/.pi/realmem/**\n")
    verbose = git(root, "check-ignore", "-v", "--no-index", ".pi/realmem/x.md")
    assert verbose.stdout.startswith(".gitignore:2:!/.pi/realmem/**")
    assert check(root) == IgnoreStatus(False, None, None)


def test_non_git_directory_is_not_ignored(env: Path, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    (plain / ".pi/realmem").mkdir(parents=True)
    write(plain / ".gitignore", ".pi/\n")
    assert check(plain) == IgnoreStatus(False, None, None)


def test_applying_twice_is_idempotent(env: Path, tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo")
    write(root / ".gitignore", ".pi/\n")
    status = check(root)
    assert status.fix is not None
    apply_fix(root, status.fix)
    once = (root / ".gitignore").read_text()

    again = apply_fix(root, status.fix)

    assert again == IgnoreStatus(False, None, None)
    assert check(root) == IgnoreStatus(False, None, None)
    assert (root / ".gitignore").read_text() == once
    assert once.count(COMMENT) == 1
    assert once.count("!/.pi/realmem/**") == 1


def test_missing_trailing_newline_is_added_first(env: Path, tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo")
    write(root / ".gitignore", "dist\n.pi/*")
    status = check(root)
    assert status.fix is not None
    apply_fix(root, status.fix)
    assert (root / ".gitignore").read_text().splitlines() == [
        "dist", ".pi/*", COMMENT, *FILES_FIX,
    ]


def test_info_exclude_fix_creates_root_gitignore(env: Path, tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo")
    write(root / ".git/info/exclude", ".pi/*\n")
    assert not (root / ".gitignore").exists()
    status = check(root)
    assert status.fix is not None
    apply_fix(root, status.fix)
    assert (root / ".gitignore").read_text() == "\n".join((COMMENT, *FILES_FIX)) + "\n"
    assert (root / ".git/info/exclude").read_text() == ".pi/*\n"


def test_project_root_below_top_level(env: Path, tmp_path: Path) -> None:
    top = make_repo(tmp_path / "repo")
    root = top / "app"
    (root / ".pi/realmem").mkdir(parents=True)
    (root / ".pi/realmem/x.md").write_text("memory\n")
    (root / ".pi/settings.json").write_text("{}\n")
    write(top / ".gitignore", "app/.pi/\n")

    status = check(root)

    assert status.rule == IgnoreRule(".gitignore", 1, "app/.pi/", "project")
    assert status.fix is not None
    assert Path(status.fix.file) == (root / ".gitignore").resolve()
    assert status.fix.lines == DIR_FIX
    apply_fix(root, status.fix)
    assert not ignored(root, ".pi/realmem/x.md")
    assert ignored(root, ".pi/settings.json")
    assert ignored(top, "app/.pi/settings.json")
    assert not ignored(top, "app/.pi/realmem/x.md")


def test_no_verified_fix_when_two_layers_ignore(env: Path, tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo")
    write(root / ".gitignore", ".pi/\n")
    write(root / ".pi/.gitignore", "*\n")
    status = check(root)
    assert status.ignored
    assert status.rule == IgnoreRule(".gitignore", 1, ".pi/", "project")
    assert status.fix is None
    warning = status.warning()
    assert warning is not None
    assert ".gitignore:1: .pi/" in warning
    assert "No automatic fix was found" in warning


def test_unverifiable_fix_is_refused_without_writing(env: Path, tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo")
    write(root / ".gitignore", ".pi/\n")
    bogus = Fix(str((root / ".gitignore").resolve()), FILES_FIX, "re-include the store")
    with pytest.raises(GitIgnoreError):
        apply_fix(root, bogus)
    assert (root / ".gitignore").read_text() == ".pi/\n"


def test_fix_outside_the_store_path_is_refused(env: Path, tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo")
    write(root / ".gitignore", ".pi/*\n")
    elsewhere = Fix(str(root / "src" / ".gitignore"), FILES_FIX, "wrong file")
    with pytest.raises(GitIgnoreError):
        apply_fix(root, elsewhere)
    assert not (root / "src" / ".gitignore").exists()


def test_warning_text_for_whole_directory_rule(env: Path, tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo")
    write(root / ".gitignore", "dist\nbuild\n.pi/\n")
    assert check(root).warning() == (
        "Shared memories in .pi/realmem are ignored by git (.gitignore:3: .pi/) and will not "
        "be committed. Fix: realmem fix-gitignore (appends !/.pi/, /.pi/*, !/.pi/realmem/, "
        "!/.pi/realmem/** to .gitignore)."
    )


def test_nested_warning_names_the_nested_file(env: Path, tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo")
    write(root / ".pi/.gitignore", "*\n")
    warning = check(root).warning()
    assert warning is not None
    assert warning.endswith("(appends !/realmem/, !/realmem/** to .pi/.gitignore).")


# --- cached_check: cheap, and never stale -------------------------------------------------------

def _global_excludes_file(root: Path, home: Path) -> None:
    write(home / "my-ignore", ".pi/\n")
    assert git(root, "config", "--global", "core.excludesFile", "~/my-ignore").returncode == 0


SOURCES = {
    "root-gitignore": lambda root, home: write(root / ".gitignore", ".pi/\n"),
    "nested-gitignore": lambda root, home: write(root / ".pi/realmem/.gitignore", "*.md\n"),
    "info-exclude": lambda root, home: write(root / ".git/info/exclude", ".pi/\n"),
    "core-excludesfile": _global_excludes_file,
    "xdg-default-excludes": lambda root, home: write(home / ".config/git/ignore", ".pi\n"),
}


@pytest.mark.parametrize("name", list(SOURCES))
def test_cached_check_sees_a_new_rule_in_every_ignore_source(name: str, env: Path, tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo")
    assert cached_check(root).ignored is False
    SOURCES[name](root, env)
    assert cached_check(root).ignored is True
    assert cached_check(root) == check(root)


def test_cached_check_answers_without_git_until_a_source_changes(env: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_repo(tmp_path / "repo")
    write(root / ".gitignore", ".pi/\n")
    first = cached_check(root)
    assert first.ignored and first.fix is not None
    real_path = os.environ["PATH"]
    no_git = tmp_path / "no-git"
    no_git.mkdir()
    monkeypatch.setenv("PATH", str(no_git))  # any git call now fails: git is not found
    assert cached_check(root) == first  # answered from the cache: no git process at all
    monkeypatch.setenv("PATH", real_path)
    after = apply_fix(root, first.fix)
    assert after.ignored is False
    assert cached_check(root).ignored is False  # the appended fix changed .gitignore
    # and the reverse: ignored again by hand, mid-session
    with (root / ".gitignore").open("a") as f:
        f.write(".pi/realmem/\n")
    assert cached_check(root).ignored is True


def test_cached_check_follows_a_checkout(env: Path, tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo")
    write(root / ".gitignore", "build/\n")
    for args in (("add", ".gitignore"), ("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one"),
                 ("checkout", "-qb", "other")):
        assert git(root, *args).returncode == 0
    write(root / ".gitignore", "build/\n.pi/\n")
    assert git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "ignore .pi").returncode == 0
    assert cached_check(root).ignored is True
    assert git(root, "checkout", "-q", "-").returncode == 0
    assert cached_check(root).ignored is False
